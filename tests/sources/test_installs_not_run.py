"""A package install the model's code runs while archviz imports it (tests/fixtures/firstcmds/autoinstall.py:
`os.system("pip install -U ...")`, `subprocess.check_output("python -m pip install ...", shell=True)`) is not run,
each noted; any other command runs as the code says (the fixture reads its width from one); a table of a package
that is not installed, walked at import, is empty (an endless loop before)."""

from __future__ import annotations

from helpers import FIXTURES

import archviz

AUTO = FIXTURES / "firstcmds" / "autoinstall.py"


def test_installs_are_not_run_and_other_commands_are(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    monkeypatch.setenv("AUTOINSTALL_MARKER", str(marker))
    built = archviz.build(str(AUTO))
    width, classes = 8, 3  # printed by the fixture's own command; Net's default classes
    assert sum(p.numel() for p in built.model.parameters()) == width * width + width + width * classes + classes
    assert not marker.exists()
    assert "archviz_fixture_absent_imaging" in built.stubbed_imports
    skipped = [n for n in built.notes if "not run: archviz installs nothing" in n]
    assert len(skipped) == 2 and "os.system('pip install -U" in skipped[0] and "-m pip install" in skipped[1]
