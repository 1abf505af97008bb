"""The runtime limits a reference model (or a factory's model that steps by a positions tensor) is built with for `cost` (`max_seq_len`, `max_batch_size`: primes no
config int takes, so a cache buffer's dims say which is which), the cache-setup methods it then calls, and what is said
of them once the decode step shows which cache the KV figures were read from (`CacheSetup`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ArchvizError, UnknownArgument
from ..sources.options import BuildOptions
from .kv import MAX_RATIO, set_up_caches, step_arguments


def _config_ints(config: dict[str, Any]) -> set[int]:
    out: set[int] = set()
    for v in config.values():
        if isinstance(v, bool):
            continue
        if isinstance(v, int):
            out.add(v)
        elif isinstance(v, (list, tuple)):
            out.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    return out


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % i for i in range(2, math.isqrt(n) + 1))


def distinct(lo: int, taken: set[int], ratios: bool = False) -> int:
    """The first prime ≥ lo that no config int equals (with `ratios`: nor any n // r, r ≤ MAX_RATIO)."""
    n = max(lo, 2)
    while True:
        if _is_prime(n) and n not in taken and not (ratios and any(n // r in taken for r in range(1, MAX_RATIO + 1))):
            return n
        n += 1


def file_config(path: str | None) -> dict[str, Any]:
    """The config file's keys (JSON or YAML), {} where it cannot be read: the build says what is wrong with it."""
    from ..sources.options import read_json_config

    try:
        return read_json_config(path) if path else {}
    except ArchvizError:
        return {}


@dataclass(frozen=True)
class CacheSetup:
    """How `_built` sized or made a reference model's caches, said once the decode step shows which cache its KV
    figures were read from: `built` (the limits it was built with) always, `read` (that the KV figures come from
    the caches the model keeps) only where they do, never beside the note of a cache the decode made itself."""

    built: str | None = None
    read: str | None = None

    def notes(self, kv: dict[str, Any]) -> list[str]:
        source = kv.get("source")
        kept = source is not None and source.startswith(KEPT) and bool(kv.get("entries"))  # the model's own tensors
        said = [self.built, self.read] if kept else [self.built]
        return ["; ".join(n for n in said if n)] if any(said) else []


KEPT = "registered buffers"  # the KV source of caches the model keeps: its buffers and tensor attributes


def built_with_limits(source: str, build: BuildOptions, kind: str, lengths: tuple[int, ...], sizes: tuple[int, int]
           ) -> tuple[Any, tuple[int, int] | None, set[int], CacheSetup]:
    """(SOURCE built, its (max_batch_size, max_seq_len) where set, the config's ints, how its caches were sized). A
    reference model is built with the runtime limits that size its caches past the longest of `lengths` and the
    (batch, seq) `sizes`, each a value no config width takes, so a cache buffer's dims say which is which."""
    from ..sources.dispatch import build as build_source

    if kind != "reference":
        from ..sources.live import on_meta

        built = on_meta(build_source(source, build))  # a live model: a stand-in on meta
        taken = _config_ints(dict(build.overrides))
        limits, setup = _factory_caches(built, sizes[0], taken)
        return built, limits, taken, setup
    batch, seq = sizes
    overrides = dict(build.overrides)
    taken = _config_ints({**file_config(build.config), **overrides})
    # at least 2^20 whatever the context, so that max_seq_len // r (r ≤ MAX_RATIO) clears the config's widths
    longest = max(lengths) + 1
    max_seq = distinct(max(longest, seq, 1 << 20, int(overrides.get("max_seq_len", 0) or 0)), taken, ratios=True)
    max_batch = distinct(max(batch, 2, int(overrides.get("max_batch_size", 0) or 0)), taken | {max_seq})
    try:
        limited = {**overrides, "max_seq_len": max_seq, "max_batch_size": max_batch}
        built = build_source(source, replace(build, overrides=tuple(limited.items())))
    except UnknownArgument:  # it takes no runtime limits: built as asked, its cache-setup methods called
        built = build_source(source, build)
        called = set_up_caches(built.model, max_batch, max_seq)
        if not called:
            return built, None, taken, CacheSetup(
                read="its config class has no max_seq_len/max_batch_size: caches read as built")
        return built, (max_batch, max_seq), taken, CacheSetup(
            read=f"caches made by {'; '.join(called)}, as a generate loop would before decoding; KV figures are "
                 "per token and at the context asked, from their layout")
    called = set_up_caches(built.model, max_batch, max_seq)
    return built, (max_batch, max_seq), taken, CacheSetup(
        built=f"built with max_seq_len={max_seq:,} and max_batch_size={max_batch} (the runtime limits that size its "
              f"caches{', then ' + '; '.join(called) if called else ''}) so that a decode step at context "
              f"{lengths[0]:,} fits",
        read="KV figures are per token and at the context asked, from those buffers' layout")


def _factory_caches(built: Any, batch: int, taken: set[int]) -> tuple[tuple[int, int] | None, CacheSetup]:
    """A factory's model whose forward takes its positions as a tensor: its caches made by its cache-setup method at
    limits no width of its config takes, as a reference model's are, so their layout says what they hold; (None,
    nothing said) for any other (its caches as the factory made them)."""
    stepping = step_arguments(built.model, batch)
    if stepping is None or stepping[1] is None:
        return None, CacheSetup()
    max_seq = distinct(1 << 20, taken, ratios=True)
    max_batch = distinct(max(batch, 2), taken | {max_seq})
    called = set_up_caches(built.model, max_batch, max_seq)
    return (max_batch, max_seq), CacheSetup(
        read=f"caches made by {'; '.join(called)}, as a generate loop would before decoding; KV figures are per "
             "token and at the context asked, from their layout")
