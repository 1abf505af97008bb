"""The options several commands share are declared once (archviz.cli.options): every command that takes one of
those flags takes that declaration (its help, its short name), so a command cannot drift from the others; a flag of
the same name that means something else in one command is named here with why."""

from __future__ import annotations

import typing

from typer.main import get_command

from archviz.cli import app, options

# (command, flag) -> why that command declares its own flag of a shared name
OWN = {
    ("cost", "--batch"): "sequences B of prefill, decode and KV cache, -B",
    ("cost", "--seq"): "prefill tokens T as 4K or 4096, -T",
    ("probe", "--batch"): "B of both passes, the reduced copy's too",
    ("probe", "--seq"): "T of both passes",
    ("manifest", "--world-size"): "a folder of one shard per rank, not a rank of the model",
    ("probe", "--timeout"): "seconds the ranks may run",
    ("gallery", "--timeout"): "seconds one model may take",
    ("check", "--output"): "a records file", ("cost", "--output"): "a records file",
    ("probe", "--output"): "a records file", ("walk", "--output"): "the records file", ("manifest", "--output"): "a manifest",
}


def _declared() -> dict[str, tuple[str, ...]]:
    """flag -> (help, all its names) of each option archviz.cli.options declares."""
    out = {}
    for value in vars(options).values():
        if typing.get_origin(value) is typing.Annotated:
            info = value.__metadata__[0]  # typer.Option("--config", "-c", ...): the first name is its `default`
            names = tuple(n for d in (info.default, *(info.param_decls or ())) if isinstance(d, str)
                          and d.startswith("-") for n in d.split("/"))
            out.update((n, (info.help, *sorted(names))) for n in names)
    return out


def test_every_command_takes_the_one_declaration_of_a_shared_option() -> None:
    declared = _declared()
    assert {"--config", "--set", "--model-class", "--input", "--kernel-rules", "--names", "--json"} <= set(declared)
    seen: dict[str, set[str]] = {}
    drifted = []
    for name, command in get_command(app).commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            flags = (*param.opts, *param.secondary_opts)
            flag = next((f for f in flags if f.startswith("--")), None)  # its long name: --config of -c
            if flag not in declared or (name, flag) in OWN:
                continue
            seen.setdefault(flag, set()).add(name)
            if (param.help, *sorted(flags)) != declared[flag]:
                drifted.append((name, flag))
    assert drifted == []
    # each is shared indeed: two commands or more take it (else it belongs beside its one command)
    assert {flag for flag, names in seen.items() if len(names) < 2} == set()
    assert seen["--config"] >= {"summary", "inspect", "walk", "build", "check", "probe", "diff", "cost", "init"}
