"""archviz.gcpause: the collector paused inside the block, restored after, with what the block kept already old."""

from __future__ import annotations

import gc
import weakref

from archviz.gcpause import collector_paused


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


def test_paused_inside_restored_after_and_kept_objects_are_oldest():
    gc.collect()
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        kept = [_Node() for _ in range(3)]
    assert gc.isenabled()
    # made in the block and kept: in the oldest generation, not the youngest a collection would walk next
    assert _in_generation(kept[0], 2) and not _in_generation(kept[0], 0)


def test_nested_pause_stays_paused_until_the_outer_block_ends():
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with collector_paused():
            young = _Node()
        assert not gc.isenabled()
        assert not _in_generation(young, 2)  # nothing moved when the caller had it off
    finally:
        gc.enable()


def test_cycles_made_in_the_block_are_still_freed():
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
    assert ref() is not None  # a cycle: reference counting alone keeps it
    gc.collect()
    assert ref() is None


def test_the_callers_frozen_objects_stay_frozen():
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with collector_paused():
            young = _Node()
        assert gc.get_freeze_count() == frozen
        assert not _in_generation(young, 2)
    finally:
        gc.unfreeze()
