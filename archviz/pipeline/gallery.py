"""`archviz.gallery` and `archviz gallery`: every model counted (archviz/pipeline/gallery_jobs.py: in this process
or in worker processes, through the records cache), grouped and compared with its checkpoint, the compare pages'
diffs, and the gallery's pages written (archviz/render/site/gallery.py) into one static site."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import PYTHON_WORDS, ArchvizError, option, spelled
from ..processes.owner import MAX_CHILDREN, check_count
from .options import QUIET, Feedback


def set_texts(data: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each model's config fields and values as the `key=value` texts it is built with (a value as JSON)."""
    return {str(k): [f"{f}={json.dumps(v)}" for f, v in fields.items()] for k, fields in data.items()}


@dataclass(frozen=True)
class GalleryOptions:
    """What a gallery holds beside its SOURCEs, and how it is made: the command's options, `archviz.gallery`'s
    keywords."""

    transformers: str | None = None  # transformers' model types, from their default configs: all, causal or a list
    pairs: tuple[tuple[str, str], ...] = ()  # (A, B): two models of the gallery, their compare page with the diff
    derived: bool = True  # also each transformers type beside the type its code derives from
    sets: Mapping[str, list[str]] = field(default_factory=dict)  # a model -> its config fields (`key=value` texts)
    checkpoints: Mapping[str, str] = field(default_factory=dict)  # a model -> a checkpoint or manifest to compare
    jobs: int | None = None  # worker processes (None: the cores); 1 counts every model in this process
    timeout: float = 900.0  # seconds one model may take (jobs above 1: each runs in a process of its own)
    cache: bool = True  # the records cache, and the last run's pages kept where nothing they show changed
    feedback: Feedback = QUIET  # how the run shows its steps (the command's progress bars and notes): silent
    words: Mapping[str, str] = field(default_factory=lambda: PYTHON_WORDS)  # the options pages name, spelled so


@dataclass(frozen=True)
class GalleryResult:
    """What `write_gallery` wrote: the coverage counts, the compare pages, the pages rendered and reused, and each
    failed model's first failure."""

    output: str
    counts: dict[str, int]  # tried, indexed, complete, partial, failed, blank (render.site.gallery.coverage_counts)
    pairs: int
    pages: dict[str, int]  # rendered, reused, diffs_rendered, diffs_reused
    failures: list[dict[str, Any]]
    kept: int  # failures read from the records cache (nothing having changed)

    def to_json(self) -> dict[str, Any]:
        """What the gallery command prints as JSON."""
        return {"output": self.output, **self.counts, "pairs": self.pairs, **self.pages, "failures": self.failures}


def write_gallery(sources: list[str], output: str, options: GalleryOptions = GalleryOptions()) -> GalleryResult:
    """Every model of `sources` and `options.transformers` counted, its pages and the gallery's written into the
    folder `output` (replaced atomically): what `archviz gallery` writes. Prints nothing (`options.feedback`: the
    command's progress bars and notes)."""
    if not sources and not options.transformers:
        raise ArchvizError("no models: a gallery needs sources or transformers' types",
                           hint="name at least one model")
    models = _models(sources, options.transformers, [*options.sets, *options.checkpoints])
    named = _in_gallery(options.pairs, [k for k, _ in models])
    from ..render.site.write import check_target

    check_target(output)  # a folder that is not a site fails before an hour of builds
    check_count(options.jobs or 0, "worker processes")
    n = options.jobs or min(os.cpu_count() or 1, MAX_CHILDREN)
    results = _run([(k, s, list(options.sets.get(k, []))) for k, s in models], n, options.cache, options.timeout,
                   options.feedback)
    entries = _entries(models, results, dict(options.checkpoints), options.feedback)
    made = _compared(entries, named, bool(options.derived and options.transformers))
    what = "transformers' default configs" if options.transformers else "their configs"
    from ..render.site.gallery import render_gallery
    from ..render.site.gallery_reuse import Reuse, basis
    from ..render.site.templates import templates_folder

    reuse = Reuse(output, basis(templates_folder()), options.words) if options.cache else None
    with options.feedback.progress("rendering pages"):
        files = render_gallery(entries, made, defaults=what, reuse=reuse)
    from ..render.site import write_site

    write_site(files, output, words=options.words)
    if reuse is not None:
        reuse.save()  # after the site is in place: the next run reuses only what this one wrote
    from ..render.site.gallery import coverage_counts

    counts = coverage_counts(entries)
    pages = {"rendered": reuse.rendered if reuse else counts["indexed"], "reused": reuse.reused if reuse else 0,
             "diffs_rendered": reuse.pages_rendered if reuse else sum(1 for k in files if k.startswith("diff-")),
             "diffs_reused": reuse.pages_reused if reuse else 0}
    return GalleryResult(output, counts, len(made), pages,
                         [{"model": e.key, **{k: spelled(v, options.words) if isinstance(v, str) else v
                                              for k, v in e.failures[0].items()}}
                          for e in entries if e.failures],  # the options a reason names, as the caller gives them
                         sum(1 for r in results if r.get("cached") and r["failures"]))


def _in_gallery(pairs: tuple[tuple[str, str], ...], keys: list[str]) -> list[tuple[str, str]]:
    """The pairs to compare, each of two models of the gallery."""
    for a, b in pairs:
        unknown = [x for x in (a, b) if x not in keys]
        if unknown:
            raise ArchvizError(f"the pair {a} and {b}: {', '.join(unknown)} is not in the gallery",
                               hint="name two of its models: a transformers type or a SOURCE as given")
    return list(pairs)


def _run(jobs: list[tuple[str, str, list[str]]], n: int, use_cache: bool, timeout: float,
         feedback: Feedback) -> list[dict[str, Any]]:
    """Each (key, source, sets): its dtype and prefill length chosen (gallery_jobs.build_choice), read from the
    records cache here, else counted by gallery_jobs.run_one: in this process with n = 1, else each in a process of
    its own, n at a time. Each result has "dtype" and "sets" (as built), "failures", and "record" or "records"
    (JSON) unless it failed."""
    from ..records.cache import MAX_ENTRIES, versions
    from .gallery_jobs import SEQ, build_choice, failure, float32_instead, from_cache, shorter_prefill

    known = versions() if use_cache else None

    results: dict[int, dict[str, Any]] = {}
    todo: list[tuple[int, str, list[str], int]] = []
    chosen: dict[int, tuple[list[str], str, int]] = {}

    def looked_up(i: int, source: str) -> None:  # the records cache's answer for chosen[i], else counted in `todo`
        sets_, _, seq = chosen[i]
        hit = from_cache(source, sets_, seq, known, timeout if n > 1 else None) if use_cache else None
        if hit is not None:
            results[i] = {"record": hit[0], "failures": hit[1], "digest": hit[2], "cached": True}
        else:
            todo.append((i, source, sets_, seq))

    for i, (_, source, sets) in enumerate(jobs):
        try:
            chosen[i] = build_choice(source, list(sets))
        except Exception as e:  # noqa: BLE001 - a type transformers cannot make a config of: its build fails
            results[i] = {"records": None, "failures": [failure("build", e)]}
            chosen[i] = (list(sets), "—", SEQ)
            continue
        looked_up(i, source)
    kept = os.environ.get("ARCHVIZ_CACHE_ENTRIES")
    os.environ["ARCHVIZ_CACHE_ENTRIES"] = str(max(int(kept or 0) if (kept or "").isdigit() else 0,
                                                  MAX_ENTRIES + 2 * len(jobs)))  # every model's entries are kept
    try:
        _count(todo, n, use_cache, timeout, results, feedback)
        # a second round for the models whose code refused what was chosen for them: bfloat16 (counted in
        # float32), or a prefill of the config's max positions (counted at half of it; `first`: their first try)
        todo.clear()
        first: dict[int, tuple[tuple[list[str], str, int], dict[str, Any]]] = {}
        for i, (_, source, _) in enumerate(jobs):
            failed = list(results[i].get("failures") or ())
            instead = float32_instead(chosen[i], failed)
            if instead is None and (instead := shorter_prefill(chosen[i], failed)) is not None:
                first[i] = (chosen[i], results[i])
            if instead is not None:
                chosen[i] = instead
                looked_up(i, source)
        _count(todo, n, use_cache, timeout, results, feedback)
        for i, (choice, result) in first.items():
            if results[i].get("failures"):  # it fails at half the tokens too: the failure at the config's length
                chosen[i], results[i] = choice, result
    finally:
        if kept is None:
            os.environ.pop("ARCHVIZ_CACHE_ENTRIES", None)
        else:
            os.environ["ARCHVIZ_CACHE_ENTRIES"] = kept
    return [{**results[i], "sets": chosen[i][0], "dtype": chosen[i][1]} for i in range(len(jobs))]


def _count(todo: list[tuple[int, str, list[str], int]], n: int, use_cache: bool, timeout: float,
           results: dict[int, dict[str, Any]], feedback: Feedback) -> None:
    if not todo:
        return  # every model read from the records cache: no worker started (torch is not imported)
    with feedback.progress("counting models") as cb:
        if n <= 1:
            from .gallery_jobs import run_one

            notes = Feedback(note=feedback.note)  # inside the live bar: notes only
            for done, (i, source, sets, seq) in enumerate(todo, 1):
                results[i] = run_one(source, sets, seq, use_cache, notes)
                cb(done, len(todo))
        else:
            from .gallery_jobs import served

            served(todo, n, use_cache, timeout, results, cb)


def _derived(keys: list[str]) -> list[tuple[str, str]]:
    """(parent, child) for every type of the gallery whose modular file derives it from another type in it."""
    from ..sources.hf_types import parent_type

    present = set(keys)
    return [(p, k) for k in keys if (p := parent_type(k)) is not None and p in present]


def _models(sources: list[str] | None, transformers: str | None, named: list[str]) -> list[tuple[str, str]]:
    """(key, source) of every model of the gallery: transformers' types, then the SOURCEs; each once, and every
    model `named` (by its config fields or checkpoint) among them."""
    models: list[tuple[str, str]] = []
    if transformers:
        from ..sources.hf_types import model_types

        models += [(t, f"hf:{t}") for t in model_types(transformers)]
    models += [(s, s) for s in sources or ()]
    keys = [k for k, _ in models]
    if len(set(keys)) != len(keys):
        raise ArchvizError("a model is named twice", hint="give each SOURCE and type once")
    for name in named:
        if name not in keys:
            raise ArchvizError(f"{name}: its config fields or checkpoint name a model the gallery does not build",
                               hint=f"name one of: {', '.join(keys[:8])}{' …' if len(keys) > 8 else ''}")
    return models


def _entries(models: list[tuple[str, str]], results: list[dict[str, Any]], checkpoints: dict[str, str],
             feedback: Feedback) -> list[Any]:
    """Each model's gallery entry: its records (read, grouped, compared with its checkpoint) and the sha256 of its
    records as cached, by which its pages are kept (none with a checkpoint: its verdict is not in the records)."""
    import hashlib

    from ..records import loads
    from ..render.site.gallery import Entry

    entries = []
    for (key, _), res in zip(models, results):
        record = res.get("record") or (loads(res["records"]) if res.get("records") else None)
        digest = res.get("digest") or (hashlib.sha256(res["records"].encode()).hexdigest()
                                       if res.get("records") else None)
        e = Entry(key, record, res["dtype"], res["sets"], list(res["failures"]),
                  digest=None if key in checkpoints else digest)
        if record is not None:
            e.record = _finish(e, checkpoints.get(key), feedback)
        entries.append(e)
    return entries


def _compared(entries: list[Any], named: list[tuple[str, str]], derived: bool) -> list[Any]:
    """The compare pages: the pairs asked for, and (`derived`) each transformers type beside the one it derives from; of
    models that were built."""
    from ..render.site.gallery import Pair

    built = {e.key: e.record for e in entries if e.record is not None}
    want = [(a, b, option("pairs")) for a, b in named]
    if derived:
        want += [(a, b, f"transformers derives {b} from {a}")
                 for a, b in _derived([e.key for e in entries if e.key in built]) if (a, b) not in named]
    return [Pair(a, b, why, _diff_of(built[a], built[b], a, b)) for a, b, why in want if a in built and b in built]


def _finish(e: Any, checkpoint: str | None, feedback: Feedback) -> Any:
    """The records grouped here (a grouping a records file holds is made again, never trusted), compared with the
    model's checkpoint where one is given."""
    from ..gcpause import collector_paused
    from ..group import group

    with collector_paused():
        record = group(e.record)
    if checkpoint:
        from .site import with_checkpoint

        try:
            record = with_checkpoint(record, checkpoint, feedback)
        except ArchvizError as x:
            e.failures.append({"stage": "checkpoint", "reason": x.line()[:400]})
    return record


def _diff_of(a: Any, b: Any, spec_a: str, spec_b: str) -> Any:
    """A function making the diff of two records (called only where the gallery does not reuse the diff page)."""

    def made() -> Any:
        from ..diff import diff as diff_records
        from ..diff.renames import live_renames

        return diff_records(a, b, renames=live_renames(a, b), spec_a=spec_a, spec_b=spec_b)
    return made


__all__ = ["GalleryOptions", "GalleryResult", "set_texts", "write_gallery"]
