"""`archviz diff A B`: what changed between two models, or two versions of one (registers itself on the CLI).

Exit 0: identical in what was compared; 1: they differ; 2: unusable input."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Annotated, Any, Optional

import typer

from ..errors import EXIT_MISMATCH, EXIT_OK, ArchvizError
from ..gcpause import collector_paused
from .app import app
from .flags import FLAGS
from .validate import check_options
from .common import (
    emit_json,
    err,
    handled,
    load_record,
    out,
    overrides,
    spinner,
)
from .options import (
    Batch,
    Config,
    ConfigClass,
    Debug,
    EveryBlock,
    Format,
    Input,
    Json,
    KernelRules,
    Limit,
    ModelClass,
    NoCache,
    Quantized,
    Seq,
    Set,
    Shapes,
    Tokenizer,
    TrustRemoteCode,
)
from ..pipeline import PassOptions, is_records_file
from ..sources.options import BuildOptions


@app.command()
def diff(
    a: Annotated[str, typer.Argument(help="model A: a records file (`archviz walk -o`) or any SOURCE")],
    b: Annotated[str, typer.Argument(help="model B: a records file or any SOURCE")],
    config: Config = None,
    config_a: Annotated[Optional[str], typer.Option("--config-a", help="config.json of A's reference model.py "
                                                                       "(--config gives both)")] = None,
    config_b: Annotated[Optional[str], typer.Option("--config-b", help="config.json of B's reference model.py")]
    = None,
    set_: Set = None,
    set_a: Annotated[Optional[list[str]], typer.Option("--set-a", help="override a config field of A only: "
                                                                       "key=value (repeatable)")] = None,
    set_b: Annotated[Optional[list[str]], typer.Option("--set-b", help="override a config field of B only")] = None,
    model_class: ModelClass = None,
    config_class: ConfigClass = None,
    tokenizer: Tokenizer = None,
    trust_remote_code: TrustRemoteCode = False,
    quantized: Quantized = False,
    shapes: Shapes = True,
    batch: Batch = None,
    seq: Seq = None,
    kernel_rules: KernelRules = None,
    input_: Input = None,
    every_block: EveryBlock = False,
    rules: Annotated[Optional[str], typer.Option("--rules", help="a rules file (as `archviz check --rules`) whose "
                                                                 "renames match modules renamed between A and B; "
                                                                 "the built-in rules apply too")] = None,
    ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="aspects not to compare, comma-separated "
                                                        "(repeatable): structure, renames, class, tensors, "
                                                        "attributes, shapes, call-sites, lines, multiplicity, "
                                                        "kernels, dims, doc, notes, totals")] = None,
    format_: Format = "table",
    site: Annotated[Optional[str], typer.Option("--site", help="also write an explorer site to this folder: both "
                                                               "models' pages and diff.html, the two trees side by "
                                                               "side with the changes coloured")] = None,
    limit: Limit = 40,
    no_cache: NoCache = False,
    json_: Json = False,
    debug: Debug = False,
) -> None:
    """What changed between A and B: modules matched by path, rename rules and structure; per module class,
    tensors, shapes, call sites, lines, multiplicity; added and removed subtrees; totals. Grouped as the explorer
    groups. Exit 0 when identical in what was compared, 1 when they differ, 2 on bad input.

    `archviz diff old.json new.json --ignore lines` passes a refactor that only moved code."""
    from ..diff import diff as diff_records, parse_ignore
    from ..diff.renames import live_renames

    fmt = "json" if json_ else format_.lower()
    with handled(debug, fmt == "json"):
        if fmt not in ("table", "github", "json"):
            raise ArchvizError(f"--format {format_!r}: unknown format", hint="use table, github or json")
        ignored = parse_ignore(ignore)
        check_options(sets={"--set": set_, "--set-a": set_a, "--set-b": set_b}, inputs=input_,
                      positive={"--batch": batch, "--seq": seq})
        _check_flags(limit, site, config, config_a, config_b)
        from ..checkpoint.rules import load_rules

        rule_set = load_rules(rules)  # a bad rules file fails before the (slow) model builds
        sides = ((a, config_a or config, (set_ or []) + (set_a or [])),
                 (b, config_b or config, (set_ or []) + (set_b or [])))
        build = BuildOptions(model_class=model_class, config_class=config_class, tokenizer=tokenizer,
                             trust_remote_code=trust_remote_code, quantized=quantized)
        passes = PassOptions(shapes=shapes, batch=batch, seq=seq, inputs=tuple(input_ or ()),
                             kernel_rules=kernel_rules, every_block=every_block)
        records = _load_sides(sides, build, passes, not no_cache)
        if site:
            from ..group import group

            records = [group(r) for r in records]  # (a grouping a records file holds is made again, never trusted)
        with spinner("comparing"):
            result = diff_records(records[0], records[1], rules=rule_set, renames=live_renames(*records),
                                  ignore=ignored, spec_a=a, spec_b=b)
        if site:
            _write_site(result, records, site)
        _show(result, fmt, b if os.path.isfile(b) and not is_records_file(b) else (config_b or config or None), limit)
        raise typer.Exit(EXIT_OK if result.identical else EXIT_MISMATCH)


def _check_flags(limit: int, site: str | None, config: str | None, config_a: str | None,
                 config_b: str | None) -> None:
    """--limit, --site and the --config flags checked, before anything is read."""
    if limit < 1:
        raise ArchvizError(f"--limit {limit}: must be at least 1", hint="give a positive number of rows")
    if site:
        from ..render.site.write import check_target

        check_target(site, "--site")  # `-` or a folder archviz may not replace: refused before any build
    for side, both, one in (("--config-a", config, config_a), ("--config-b", config, config_b)):
        if both and one:
            raise ArchvizError(f"--config and {side} both given", hint=f"give --config for both, or {side}")


def _load_sides(sides: tuple[tuple[str, str | None, list[str]], ...], build: BuildOptions, passes: PassOptions,
                cache: bool) -> list[Any]:
    """The records of each side (spec, config, --set texts): a records file read, a model source built with
    `build` and `passes`; B's pass at the sizes A's ran at unless given, so widths computed from T compare equal."""
    records: list[Any] = []
    for spec, cfg, sets in sides:
        if is_records_file(spec):
            if cfg or sets:
                given = [f for f, v in (("--config", cfg), ("--set", sets)) if v]
                raise ArchvizError(f"{spec}: a records file is already built, so {', '.join(given)} cannot apply",
                                   hint="give its side's options with --config-a/--config-b, --set-a/--set-b, "
                                        "or drop them")
            side_build, side_passes = BuildOptions(), PassOptions()
        else:
            ran = (records[0].extra("shapes") or {}) if records and passes.shapes else {}
            side_build = replace(build, config=cfg, overrides=overrides(sets))
            side_passes = replace(passes, batch=passes.batch or ran.get("B"), seq=passes.seq or ran.get("T"))
        with collector_paused():  # a 60,000-module records file reads in half the time
            records.append(load_record(spec, side_build, side_passes, group=False, cache=cache))
    return records


def _write_site(result: Any, records: list[Any], site: str) -> None:
    """The explorer of both models and diff.html, the two trees side by side."""
    from ..render.site import write_site
    from ..render.site.diff import render_diff_site

    with spinner(f"writing {site}"):
        write_site(render_diff_site(result, records[0], records[1]), site, "--site", FLAGS)
    err.print(f"wrote the diff page to {os.path.join(site, 'diff.html')}")


def _show(result: Any, fmt: str, file: str | None, limit: int) -> None:
    """The diff as JSON, workflow annotations on `file`, or the changes table of `limit` rows."""
    from ..diff.export import to_json
    from ..render.diff import diff_view, github_lines

    if fmt == "json":
        emit_json(to_json(result))
    elif fmt == "github":
        for line in github_lines(result, file=file, limit=limit):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        out.print(diff_view(result, limit))


__all__ = ["diff"]
