"""`archviz gallery [SOURCE...] --transformers causal -o DIR`: every model in one static site, a table to compare
them, pair pages and a coverage page (registers itself on the CLI). The options read here; the gallery made by
archviz.pipeline.gallery.write_gallery."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from ..errors import ArchvizError
from ..pipeline.gallery import GalleryOptions, set_texts, write_gallery
from ..records.recordcheck import refused_as, want_table
from .app import app
from .common import FEEDBACK, emit_json, err, handled
from .flags import FLAGS
from .options import Debug, flag, Json, NoCache, SiteFolder
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


def _pairs(texts: list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for t in texts or ():
        a, sep, b = t.partition(":")
        if not sep or not a or not b:
            raise ArchvizError(f"--pairs {t!r}: not A:B", hint="write e.g. --pairs deepseek_v3:deepseek_v32")
        out.append((a, b))
    return tuple(out)


@app.command()
def gallery(
    sources: Annotated[Optional[list[str]], typer.Argument(help="model sources (as for the other commands), beside "
                                                                "--transformers' types")] = None,
    transformers: Annotated[Optional[str], typer.Option("--transformers", help="transformers' model types, built "
                            "from their default configs: all, causal (every causal LM) or a comma list")] = None,
    output: SiteFolder = "gallery",
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
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
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
                                 timeout=timeout, cache=not no_cache, feedback=FEEDBACK, words=FLAGS)
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


__all__ = ["gallery"]
