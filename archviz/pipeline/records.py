"""`records_for`: a source's records, built on meta, walked, traced and grouped (or read from a records file), with
the records cache in front of the build. The one sequence `archviz.load` and the commands run."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from ..errors import ArchvizError, option
from ..records import ModelRecord
from ..sources.options import BuildOptions
from .cached import build_key, cached
from .options import QUIET, Feedback, PassOptions, given, refuse_pass_options

NO_BUILD = BuildOptions()
NO_PASS = PassOptions()


def records_for(source: str, build: BuildOptions = NO_BUILD, passes: PassOptions = NO_PASS, *, group: bool = False,
                names: str | None = None, cache: bool = False, feedback: Feedback = QUIET) -> ModelRecord:
    """The records of SOURCE: built on meta as `build` says, walked, with the meta forward pass when
    `passes.shapes`, grouped when `group` (titles from the `names` file). A records file (`archviz walk -o`) is read
    instead, and no build or pass option may be given with it. `cache`: the records cache serves an unchanged
    source, and keeps what was built; it holds the records before grouping (a pure function of them, a fraction of a
    second), so one entry serves every use. The model's code runs under `archviz.sources.guard.model_code`: it may
    not end the process, and what it prints goes to stderr."""
    if is_records_file(source):  # already built (by `archviz walk -o`, maybe elsewhere)
        refuse_build_options(source, build, passes)
        record = read_records(source)
    else:
        if not passes.shapes:
            refuse_pass_options(passes)
        from ..sources.hub import checkpoint_spec

        key = {**build_key(build), **asdict(passes)}
        hub = checkpoint_spec(source)  # a Hub repository: what it holds may change under the same name
        record = cached("records", source, key, (build.config, build.tokenizer, passes.kernel_rules),
                        lambda: _built(source, build, passes, feedback), use=cache and hub is None,
                        feedback=feedback)
        if hub is not None:
            record = hub_checked(record, hub, feedback)
    if group:  # always from the modules: a grouping stored in a records file is derived data, never trusted
        from ..gcpause import collector_paused
        from ..group import group as grouped
        from ..group import load_names

        with collector_paused():  # tens of thousands of signatures and nodes, none cyclic
            record = grouped(record, names=load_names(names) if names else None)
    return record


def hub_checked(record: ModelRecord, checkpoint: str, feedback: Feedback) -> ModelRecord:
    """A Hub repository's build checked against the same repository's safetensors headers, read as `check` reads
    a checkpoint `hf://...` (bounded, archviz.checkpoint.remote): the record with `extra("checkpoint")`.
    A repository without safetensors, or one that cannot be read, is said in a note; the build stands."""
    from ..checkpoint import open_checkpoint
    from ..checkpoint.compare import compare
    from ..checkpoint.rules import load_rules
    from ..errors import CheckpointError

    try:
        with feedback.step(f"reading the headers of {checkpoint}"):
            inventory = open_checkpoint(checkpoint)
    except CheckpointError as e:
        feedback.note(f"{checkpoint}: its safetensors headers were not checked: {e.line()}")
        return record
    return compare(record, inventory, load_rules(None))


def _built(source: str, build: BuildOptions, passes: PassOptions, feedback: Feedback) -> ModelRecord:
    from ..shapes import kernel_packages, mlstm_kernels  # noqa: F401 - their stand-ins build stubbed classes
    from ..sources.dispatch import build as build_source
    from ..sources.guard import model_code
    from ..sources.live import on_meta, with_wrapper
    from ..walk import walk

    with model_code():  # the model's code may not end the process or print to stdout (JSON output stays JSON)
        with feedback.step(f"building {_label(source)} on meta"):
            built = build_source(source, build)
        with feedback.progress("walking modules") as cb:
            record = with_wrapper(built, walk(built, progress=cb))  # a live model: where it is
        if not passes.shapes:
            return record
        built = on_meta(built)  # a live model's pass: on a stand-in on meta, its weights never read
        from ..shapes import PassRun, trace_shapes

        if passes.kernel_rules:
            from ..shapes.kernels import load_rules_file

            load_rules_file(passes.kernel_rules)
        with feedback.progress("meta forward pass") as cb:
            return trace_shapes(built, record, batch=passes.batch, seq=passes.seq,
                                input_specs=list(passes.inputs) or None,
                                run=PassRun(memo=not passes.every_block, train=passes.train, progress=cb))


def with_pass_counts(record: ModelRecord, source: Any, build: BuildOptions = NO_BUILD, *, cache: bool = False,
                     feedback: Feedback = QUIET) -> ModelRecord:
    """The record again with the meta pass where only the pass can count its active parameters (stacked experts
    indexed by routing, lookup tables a token reads a few rows of: archviz.walk.moe.counted_by_the_pass); as it is
    where the pass fails, said as a note. What `archviz summary` and `archviz.summary` show."""
    from ..walk.moe import counted_by_the_pass

    if is_records_file(source) or record.extra("shapes") is not None:
        return record
    why = counted_by_the_pass(record)
    if why is None:
        return record
    try:
        return records_for(source, build, PassOptions(shapes=True), cache=cache, feedback=feedback)
    except ArchvizError as e:
        feedback.note(f"active parameters without the meta pass ({why}), which failed: {e.message}")
        return record


def _label(source: Any) -> str:
    """SOURCE as a step's label: the string, or a Python object's class."""
    return source if isinstance(source, str) else f"a {type(source).__name__}"


def refuse_build_options(source: str, build: BuildOptions, passes: PassOptions) -> None:
    """A records file is built already: an option of the build or the pass given with it would be ignored."""
    flags = {option("config"): build.config, option("set"): build.overrides,
             option("model-class"): build.model_class, option("config-class"): build.config_class,
             option("tokenizer"): build.tokenizer, option("world-size"): build.world_size, option("rank"): build.rank,
             **passes.flags(), option("trust-remote-code"): build.trust_remote_code,
             option("quantized"): build.quantized}
    flags[option("train")] = flags.pop(option("train"))  # the order the flags were always named in
    named = given(flags)
    if named:
        raise ArchvizError(f"{source}: a records file is already built, so {', '.join(named)} cannot apply",
                           hint="give the model source to build it again with them, or drop them")


def is_records_file(path: str) -> bool:
    """A records JSON written by `archviz walk` (its first key is the schema)."""
    if not isinstance(path, str) or not path.endswith(".json") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and b'"schema"' in head and b"archviz.records/" in head


def read_records(path: str) -> ModelRecord:
    """A records file read, its cost extra (what the cost renderers read) checked now rather than failing there."""
    from ..gcpause import collector_paused
    from ..records import loads

    try:
        with open(path, encoding="utf-8") as f, collector_paused():  # JSON of a million acyclic objects
            record = loads(f.read())
        if record.extra("cost") is not None:
            from ..cost.extra import check as check_cost

            check_cost(record.extra("cost"))
        return record
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ArchvizError(f"{path}: not a readable records file ({e})",
                           hint="write one with `archviz walk SOURCE -o records.json`") from None
