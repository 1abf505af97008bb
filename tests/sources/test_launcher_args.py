"""A builder that takes its launcher's argparse namespace (`build_model(args)`) and returns the model with its
criterion and post-processor, in the style of the set-prediction detection codebases
(tests/fixtures/firstcmds/detrstyle): `args` is made from the defaults its launcher's parser declares (read from
main.py, never run), the overrides set its attributes, the model is the tuple's module with the most parameters,
and a file whose only class that builds alone is a weightless post-processor is built through its builder. Counts
compared with a real CPU build through the launcher's own parser."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from helpers import FIXTURES

import archviz

DETR = FIXTURES / "firstcmds" / "detrstyle"


@pytest.fixture()
def launcher(monkeypatch: pytest.MonkeyPatch):
    """The fixture's folder as the one the user runs from, and its launcher's parser (imported for the real build)."""
    monkeypatch.syspath_prepend(str(DETR))
    monkeypatch.chdir(DETR)
    spec = importlib.util.spec_from_file_location("detrstyle_main", DETR / "main.py")
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    yield main
    for name in [n for n in sys.modules if n.split(".")[0] == "setdet"]:
        del sys.modules[name]


def _real(main, *argv: str) -> int:
    model, _, _ = main.build_model(main.get_args_parser().parse_args([*argv, "--device", "cpu"]))
    return sum(p.numel() for p in model.parameters())


def test_the_namespace_takes_the_launchers_defaults(launcher):
    record = archviz.load("setdet:build_model")
    assert record.summary.parameters == _real(launcher)
    notes = record.source.notes
    assert any(n.startswith("args: the defaults of the argument parser in main.py (10 options)") for n in notes)
    assert any("build_model()[0]" in n for n in notes)


def test_the_file_form_and_overrides(launcher):
    record = archviz.load(str(DETR / "setdet" / "detector.py"), overrides={"hidden_dim": 64, "enc_layers": 3})
    assert record.summary.parameters == _real(launcher, "--hidden_dim", "64", "--enc_layers", "3")
    assert record.source.model_class.endswith(".Detector")


def test_an_attribute_no_parser_declares_is_asked_for_by_name(tmp_path, monkeypatch):
    import shutil

    from archviz.errors import SourceError

    shutil.copytree(DETR, tmp_path / "proj")
    detector = tmp_path / "proj" / "setdet" / "detector.py"
    detector.write_text(detector.read_text().replace("else 91\n", "else 91 + args.extra_classes\n"))
    monkeypatch.syspath_prepend(str(tmp_path / "proj"))
    monkeypatch.chdir(tmp_path / "proj")
    try:
        with pytest.raises(SourceError) as e:
            archviz.build("setdet:build_model")
        assert "reads extra_classes at detector.py:" in str(e.value) and "main.py" in str(e.value)
        assert "extra_classes=VALUE" in e.value.hint
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "setdet"]:
            del sys.modules[name]
