"""`archviz build`'s site: each model's records made for it (grouped; without shapes where the meta pass fails, said
as a warning and on the overview; every rank's shapes under a world size; the cost, the hardware, a checkpoint's
verdicts) and the explorer written (archviz.render.site). The cost half is `site_cost.py`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ..errors import PYTHON_WORDS, ArchvizError, ShapeError, option
from ..records import ModelRecord
from ..sources.options import BuildOptions
from .options import QUIET, Feedback, PassOptions
from .records import is_records_file, records_for


@dataclass(frozen=True)
class SiteOptions:
    """What `archviz build` adds to the records of its sources, and how the site is made: the command's options
    beside the build's and the pass's."""

    names: str | None = None  # a grouping names file
    annotations: str | None = None  # a TOML file of node titles, descriptions and claims checked against the code
    source_url: str | None = None  # link template for the model's own code: {path}, {start}, {end}
    checkpoint: str | None = None  # a checkpoint or manifest to compare the one model with
    cost: bool = False  # count FLOPs and the KV cache against context length (archviz.cost)
    hardware: str | None = None  # with cost: tokens/s on these devices (presets or a TOML file)
    gpus: int | None = None  # GPUs of each hardware device (default 1)
    cache: bool = True  # the records cache
    feedback: Feedback = QUIET  # how the run shows its steps and warnings: silent by default
    words: Mapping[str, str] = field(default_factory=lambda: PYTHON_WORDS)  # the options pages name, spelled so


@dataclass(frozen=True)
class _Extras:
    """The site options checked: what each model's records get beyond the pipeline's."""

    cost: bool
    devices: tuple[Any, ...]
    gpus: int
    checkpoint: str | None


def make_site(sources: Sequence[str | ModelRecord], output: str, build: BuildOptions = BuildOptions(),
               passes: PassOptions = PassOptions(shapes=True), options: SiteOptions = SiteOptions()) -> Any:
    """The explorer of `sources` (model sources, records files, or records: grouped where they are not) written into
    the folder `output` (replaced atomically): what `archviz build` writes. Every option is checked before any
    build. Returns the site's result (`.pages`, `.bytes`)."""
    from ..render.site import build_site
    from ..render.site.write import check_target

    check_target(output)  # `-` or a folder archviz may not replace: refused before any build
    extras = _extras(sources, options)
    anns = None
    if options.annotations:
        from ..render.site.annotations import load_annotations

        anns = load_annotations(options.annotations)
    records = [_site_record(s, build, passes, options, extras) for s in sources]
    with options.feedback.progress("rendering pages") as cb:
        return build_site(records, output, annotations=anns, source_url=options.source_url, progress=cb,
                          words=options.words)


def _extras(sources: Sequence[Any], options: SiteOptions) -> _Extras:
    """cost, hardware, gpus and checkpoint (and the source URL) checked, before any build."""
    devices: list[Any] = []
    if options.hardware is not None:
        from ..cost.hardware import resolve

        devices = resolve(options.hardware)
    elif options.gpus is not None:
        raise ArchvizError(f"{option('gpus')} applies to {option('hardware')}, which was not given",
                           hint=f"add e.g. {option('cost')} {option('hardware')} h200, or drop {option('gpus')}")
    if options.source_url is not None and "{path}" not in options.source_url:
        raise ArchvizError(f"{option('source-url')} {options.source_url!r}: the template has no {{path}}",
                           hint="write e.g. https://github.com/OWNER/REPO/blob/REV/{path}#L{start}-L{end}")
    if options.checkpoint and len(sources) != 1:
        raise ArchvizError(f"{option('checkpoint')} compares one model",
                           hint=f"build one SOURCE at a time with {option('checkpoint')}")
    return _Extras(options.cost, tuple(devices), options.gpus or 1, options.checkpoint)


def _site_record(source: str | ModelRecord, build: BuildOptions, passes: PassOptions, options: SiteOptions,
                 extras: _Extras) -> ModelRecord:
    """One model's records for the site: grouped, every rank's shapes under a world size of N, and `extras`."""
    feedback, cache = options.feedback, options.cache
    if isinstance(source, ModelRecord):  # records built already: grouped where they are not
        grouped = source.extra("grouping") is not None and not options.names
        record = source if grouped else _group(source, options.names)
    else:
        record = _load(source, build, passes, options)
    if build.world_size is not None and build.world_size > 1 and build.rank is None and isinstance(source, str) \
            and not is_records_file(source):
        from ..walk.ranks import with_rank_shapes  # every rank's tensor shapes on the node pages

        record = with_rank_shapes([record] + [records_for(source, replace(build, rank=r), group=False, cache=cache,
                                                          feedback=feedback) for r in range(1, build.world_size)])
    if extras.cost:
        from .site_cost import with_cost

        record = with_cost(record, source, build, passes, feedback)
    if extras.devices:
        from .site_cost import with_hardware

        record = with_hardware(record, source, list(extras.devices), extras.gpus)
    if extras.checkpoint:
        record = with_checkpoint(record, extras.checkpoint, feedback)
    return record


def _load(source: str, build: BuildOptions, passes: PassOptions, options: SiteOptions) -> ModelRecord:
    """A site's records of one source, grouped: without shapes where the meta pass fails (said as a warning and on
    the overview)."""
    feedback, cache = options.feedback, options.cache
    if is_records_file(source):  # records_for says which build options cannot apply to it; B, T and the
        # every-block pass are let pass, for the model sources built beside it
        read = records_for(source, build, replace(passes, shapes=False, batch=None, seq=None, every_block=False),
                           group=True, names=options.names, cache=True, feedback=feedback)
        return _group(read, options.names)
    if passes.shapes and passes.kernel_rules:  # a bad option is an error, not a reason to render without shapes
        from ..shapes.kernels import load_rules_file

        load_rules_file(passes.kernel_rules)
    if passes.shapes and passes.inputs:
        from ..shapes import parse_inputs
        from ..shapes.inputs import spec_symbols

        inputs = list(passes.inputs)
        parse_inputs(inputs, 2, 3, dict.fromkeys(spec_symbols(inputs), 1))  # the form only: x=B,3,H,W sizes later
    try:
        record = records_for(source, build, passes, group=False, cache=cache, feedback=feedback)
    except ShapeError as e:
        e.hint = f"{e.hint}; {option('no-shapes')} skips shapes" if e.hint else f"{option('no-shapes')} skips shapes"  # as the commands say
        feedback.warning(f"{source}: no shapes ({e.line()}); the pages show counts and code only")
        record = records_for(source, build, group=False, cache=cache, feedback=feedback)
        # The overview says why its pages have no shapes.
        record = dataclasses.replace(record, source=dataclasses.replace(
            record.source, notes=(*record.source.notes, f"no shapes: {e.line()}")))
    return _group(record, options.names)


def _group(record: ModelRecord, names: str | None) -> ModelRecord:
    """The records grouped from their modules (a grouping a records file holds is derived data: made again)."""
    from ..group import group, load_names

    return group(record, names=load_names(names)) if names else group(record)


def with_checkpoint(record: ModelRecord, checkpoint: str, feedback: Feedback = QUIET) -> ModelRecord:
    """`record` with `extra("checkpoint")`: compared with the checkpoint or manifest `checkpoint`
    (archviz.checkpoint.compare)."""
    from ..checkpoint.compare import compare

    with feedback.step(f"reading {checkpoint}"):
        result = compare(record, checkpoint)
    if not isinstance(result, ModelRecord):
        raise ArchvizError(f"{option('checkpoint')}: archviz.checkpoint.compare returned {type(result).__name__}",
                           hint="report this: the site expects records or the checkpoint extra")
    return result


__all__ = ["SiteOptions", "make_site", "with_checkpoint"]
