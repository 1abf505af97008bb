"""`archviz gallery [SOURCE...] --transformers causal -o DIR`: every model in one static site, a table to compare
them, pair pages and a coverage page (registers itself on the CLI). Each model is counted in a worker process
(archviz/cli/gallery_work.py) through the records cache; the pages come from archviz/render/site/gallery.py."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping, Optional

import typer

from ..errors import PYTHON_WORDS, ArchvizError
from ..processes.owner import MAX_CHILDREN, check_count
from ..records.recordcheck import refused_as, want_table
from .app import app
from .flags import FLAGS
from .common import DebugOpt, JsonOpt, NoCacheOpt, emit_json, err, flag, handled, progress_bar
from .validate import check_options


def _sets_file(path: str | None) -> dict[str, list[str]]:
    """--sets FILE: JSON mapping a model (its type or source as given) to the config fields it is built with."""
    if not path:
        return {}
    from ..files.safejson import load_file

    hint = 'write e.g. {"llama": {"num_key_value_heads": 8}}'
    # a regular file of at most 16 MiB, bounded JSON (nesting, integer digits): never a FIFO's hang, /dev/zero's
    # MemoryError or a RecursionError
    data = load_file(path, what="--sets JSON", max_bytes=16 << 20)
    with refused_as(lambda m: ArchvizError(f"--sets {path}: {m}", hint=hint)):
        for k, v in want_table("", data, what="an object mapping each model to its config fields").items():
            want_table(k, v, what="an object of config fields")
    out = set_texts(data)
    check_options(sets={f"--sets {path} ({k})": v for k, v in out.items()})
    return out


def set_texts(data: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each model's config fields and values as the `key=value` texts it is built with (a value as JSON)."""
    return {str(k): [f"{f}={json.dumps(v)}" for f, v in fields.items()] for k, fields in data.items()}


def _pairs(texts: list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for t in texts or ():
        a, sep, b = t.partition(":")
        if not sep or not a or not b:
            raise ArchvizError(f"--pairs {t!r}: not A:B", hint="write e.g. --pairs deepseek_v3:deepseek_v32")
        out.append((a, b))
    return tuple(out)


def _in_gallery(pairs: tuple[tuple[str, str], ...], keys: list[str]) -> list[tuple[str, str]]:
    """The pairs to compare, each of two models of the gallery."""
    for a, b in pairs:
        unknown = [x for x in (a, b) if x not in keys]
        if unknown:
            raise ArchvizError(f"the pair {a} and {b}: {', '.join(unknown)} is not in the gallery",
                               hint="name two of its models: a transformers type or a SOURCE as given")
    return list(pairs)


def _served(todo: list[tuple[int, str, list[str], int]], n: int, use_cache: bool, timeout: float,
            results: dict[int, dict[str, Any]], cb: Any) -> None:
    """gallery_work.serve in a process of its own, which forks one process per model from itself (torch imported
    once): a model whose code crashes, hangs or ends its process costs its row."""
    import subprocess
    import tempfile

    from ..processes.environment import child_command
    from ..processes.owner import owned

    with tempfile.TemporaryDirectory(prefix="archviz-gallery-") as tmp:
        with open(os.path.join(tmp, "jobs.json"), "w", encoding="utf-8") as f:
            json.dump([list(j) for j in todo], f)
        # archviz's import path, never the current folder's (processes.environment); the server and every process it
        # forks in one group that ends with this block, whatever ends it (processes.owner)
        cmd = child_command("archviz.cli.gallery_work", tmp, str(n), str(timeout),
                            *([] if use_cache else ["--no-cache"]))
        with open(os.path.join(tmp, "server.err"), "w+b") as errors, owned() as children:
            p = children.start(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True)
            assert p.stdout is not None
            with p.stdout:
                for done, _ in enumerate(p.stdout, 1):
                    cb(done, len(todo))
            p.wait()
            errors.seek(0)
            tail = errors.read()[-8192:].decode("utf-8", "replace").strip().splitlines()
        for i, source, _, _ in todo:
            try:
                with open(os.path.join(tmp, f"{i}.json"), encoding="utf-8") as f:
                    results[i] = json.load(f)
            except (OSError, ValueError):
                results[i] = {"source": source, "records": None, "failures": [{"stage": "build", "reason": (
                    f"the gallery's worker process ended with status {p.returncode}"
                    + (f": {tail[-1][:300]}" if tail else ""))}]}


def _run(jobs: list[tuple[str, str, list[str]]], n: int, use_cache: bool, timeout: float,
         shown: bool) -> list[dict[str, Any]]:
    """Each (key, source, sets): its dtype and prefill length chosen (gallery_work.build_choice), read from the records cache here, else
    counted by gallery_work.run_one: in this process with n = 1, else each in a process of its own, n at a time.
    Each result has "dtype" and "sets" (as built), "failures", and "record" or "records" (JSON) unless it failed."""
    from ..records.cache import MAX_ENTRIES, versions
    from .gallery_work import SEQ, build_choice, failure, float32_instead, from_cache, shorter_prefill

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
        _count(todo, n, use_cache, timeout, results, shown)
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
        _count(todo, n, use_cache, timeout, results, shown)
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
           results: dict[int, dict[str, Any]], shown: bool) -> None:
    if not todo:
        return  # every model read from the records cache: no worker started (torch is not imported)
    with progress_bar("counting models", shown) as cb:
        if n <= 1:
            from .gallery_work import run_one

            for done, (i, source, sets, seq) in enumerate(todo, 1):
                results[i] = run_one(source, sets, seq, use_cache)
                cb(done, len(todo))
        else:
            _served(todo, n, use_cache, timeout, results, cb)


def _derived(keys: list[str]) -> list[tuple[str, str]]:
    """(parent, child) for every type of the gallery whose modular file derives it from another type in it."""
    from ..sources.hf_types import parent_type

    present = set(keys)
    return [(p, k) for k in keys if (p := parent_type(k)) is not None and p in present]


@app.command()
def gallery(
    sources: Annotated[Optional[list[str]], typer.Argument(help="model sources (as for the other commands), beside "
                                                                "--transformers' types")] = None,
    transformers: Annotated[Optional[str], typer.Option("--transformers", help="transformers' model types, built "
                            "from their default configs: all, causal (every causal LM) or a comma list")] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="the site folder (replaced atomically)")] = "gallery",
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="worker processes (default: the cores)")] = None,
    pairs: Annotated[Optional[list[str]], typer.Option("--pairs", help="A:B (two models of the gallery, e.g. "
                                                    "deepseek_v3:deepseek_v32): their compare page with the full "
                                                    "diff (repeatable)")] = None,
    derived: Annotated[bool, flag("--derived/--no-derived", help="also compare each transformers type with the "
                                  "type its code derives from (deepseek_v3 → deepseek_v32)")] = True,
    sets_file: Annotated[Optional[str], typer.Option("--sets", help="JSON mapping a model to config fields to build "
                                                     "it with: {\"llama\": {\"num_key_value_heads\": 8}}")] = None,
    checkpoint: Annotated[Optional[list[str]], typer.Option("--checkpoint", help="MODEL=MANIFEST: compare that "
                                                            "model with a checkpoint or manifest (repeatable)")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds one model may take (with --jobs above 1, "
                                           "where each runs in a process of its own)")] = 900.0,
    no_cache: NoCacheOpt = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """A static site of many models: a sortable table of their sizes and costs (from the same code as `summary`
    and `cost --context 32K`), each model's explorer, compare pages, and a coverage page naming every failure."""
    with handled(debug, json_):
        if not sources and not transformers:
            raise ArchvizError("no models: give SOURCEs or --transformers",
                               hint="e.g. archviz gallery --transformers causal -o gallery")
        check_options(positive={"--jobs": jobs}, timeout=timeout)
        options = GalleryOptions(transformers=transformers, pairs=_pairs(pairs), derived=derived,
                                 sets=_sets_file(sets_file), checkpoints=_checkpoints(checkpoint), jobs=jobs,
                                 timeout=timeout, cache=not no_cache, progress=True, words=FLAGS)
        made = write_gallery(sources or [], output, options)
        counts, pages = made.counts, made.pages
        if json_:
            emit_json(made.to_json())
        else:
            err.print(f"wrote the gallery of {counts['indexed']} of {counts['tried']} models ({counts['failed']} "
                      f"failed, {counts['partial']} with figures missing, {counts['blank']} blank cells) to {output}/ — open "
                      f"{os.path.join(output, 'index.html')}; coverage.html says why"
                      + (f"; {made.kept} failures were read from the records cache, nothing having changed (--no-cache "
                         "tries them again)" if made.kept else "")
                      + (f"; the pages of {pages['reused']} models and {pages['diffs_reused']} diffs were unchanged "
                         "since the last run, and kept" if pages["reused"] or pages["diffs_reused"] else ""),
                      highlight=False, markup=False)
        if not counts["indexed"]:
            raise typer.Exit(1)


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
    progress: bool = False  # progress bars on stderr (on a terminal only): the command's
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
        """What `archviz gallery --json` prints."""
        return {"output": self.output, **self.counts, "pairs": self.pairs, **self.pages, "failures": self.failures}


def write_gallery(sources: list[str], output: str, options: GalleryOptions = GalleryOptions()) -> GalleryResult:
    """Every model of `sources` and `options.transformers` counted, its pages and the gallery's written into the
    folder `output` (replaced atomically): what `archviz gallery` writes. Prints nothing (`options.progress`: the
    command's progress bars)."""
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
                   options.progress)
    entries = _entries(models, results, dict(options.checkpoints))
    made = _compared(entries, named, bool(options.derived and options.transformers))
    what = "transformers' default configs" if options.transformers else "their configs"
    from ..render.site.gallery import render_gallery
    from ..render.site.gallery_reuse import Reuse, basis
    from ..render.site.templates import templates_folder

    reuse = Reuse(output, basis(templates_folder()), options.words) if options.cache else None
    with progress_bar("rendering pages", options.progress):
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
                         [{"model": e.key, **e.failures[0]} for e in entries if e.failures],
                         sum(1 for r in results if r.get("cached") and r["failures"]))


def _checkpoints(texts: list[str] | None) -> dict[str, str]:
    """--checkpoint MODEL=MANIFEST texts as model -> manifest."""
    checkpoints: dict[str, str] = {}
    for c in texts or ():
        name, sep, path = c.partition("=")
        if not sep or not name or not path:
            raise ArchvizError(f"--checkpoint {c!r}: not MODEL=MANIFEST",
                               hint="e.g. --checkpoint deepseek_v3=deepseek-v3.manifest.json.gz")
        checkpoints[name] = path
    return checkpoints


def _models(sources: list[str] | None, transformers: str | None, named: list[str]) -> list[tuple[str, str]]:
    """(key, source) of every model of the gallery: --transformers' types, then the SOURCEs; each once, and every
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


def _entries(models: list[tuple[str, str]], results: list[dict[str, Any]], checkpoints: dict[str, str]
             ) -> list[Any]:
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
            e.record = _finish(e, checkpoints.get(key))
        entries.append(e)
    return entries


def _compared(entries: list[Any], named: list[tuple[str, str]], derived: bool) -> list[Any]:
    """The compare pages: the --pairs, and (`derived`) each transformers type beside the one it derives from; of
    models that were built."""
    from ..render.site.gallery import Pair

    built = {e.key: e.record for e in entries if e.record is not None}
    want = [(a, b, "--pairs") for a, b in named]
    if derived:
        want += [(a, b, f"transformers derives {b} from {a}")
                 for a, b in _derived([e.key for e in entries if e.key in built]) if (a, b) not in named]
    return [Pair(a, b, why, _diff_of(built[a], built[b], a, b)) for a, b, why in want if a in built and b in built]


def _finish(e: Any, checkpoint: str | None) -> Any:
    """The records grouped here (a grouping a records file holds is made again, never trusted), compared with the
    model's checkpoint where one is given."""
    from ..gcpause import collector_paused
    from ..group import group

    with collector_paused():
        record = group(e.record)
    if checkpoint:
        from .site import _compare

        try:
            record = _compare(record, checkpoint)
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


__all__ = ["GalleryOptions", "GalleryResult", "gallery", "set_texts", "write_gallery"]
