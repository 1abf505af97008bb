"""A build reads no weights and opens no network: pretrained downloads and checkpoint loads are skipped, noted.

Factories download pretrained weights by default (`resnet(pretrained=True)` through
`torch.hub.load_state_dict_from_url`, a `urllib.request.urlretrieve` of a checkpoint, then `torch.load` and
`model.load_state_dict`). On meta the weights are never needed, and a checkpoint is a pickle archviz must not run.
Inside `nothing_fetched(answer)`:
- `torch.hub.load_state_dict_from_url` (and `torch.utils.model_zoo.load_url`) and `torch.load` return a
  `SkippedCheckpoint`: an empty mapping that answers any key with itself, so `ckpt["model"]["state_dict"]` still reads;
- `torch.hub.download_url_to_file` and `urllib.request.urlretrieve` write nothing; `urllib.request.urlopen` answers
  an empty body;
- `nn.Module.load_state_dict` loads nothing (the model keeps the weights it was built with: meta tensors).
- a package install the code runs (`os.system("pip install -U ultralytics")` in an `except ImportError`,
  `subprocess.check_output("pip install ...", shell=True)`: pip, `python -m pip`, uv pip, conda, mamba, apt) is not
  run: it answers as a command that succeeded with no output. Any other command runs as the code says.
`answer(what, how)` is told once per call site, for the build's notes. Around the import of the model's code
(`native`), the downloads alone are skipped: a name bound there (`from torch.hub import load_state_dict_from_url`)
skips them when the build calls it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from typing import Any, Callable, Iterator

import torch

_SKIPPED = "skipped: archviz reads no weights and opens no network while building"
_NOT_INSTALLED = "not run: archviz installs nothing while it reads a model's code (install what it needs yourself)"
# A command that installs or removes packages: pip (pip3, python -m pip, uv pip), conda, mamba, apt.
_INSTALLS = re.compile(r"(?:^|[\s/;&|(\"'])(?:pip[\d.]*|-m\s+pip|uv\s+pip|conda|mamba|micromamba|apt(?:-get)?)"
                       r"\s+(?:-\S+\s+)*(?:install|uninstall|remove)\b")


class SkippedCheckpoint(dict):
    """A checkpoint that was not read: empty, and any key looked up in it is another skipped checkpoint."""

    def __getitem__(self, key: Any) -> "SkippedCheckpoint":
        return SkippedCheckpoint()

    def get(self, key: Any, default: Any = None) -> "SkippedCheckpoint":  # type: ignore[override]
        return SkippedCheckpoint()

    def pop(self, key: Any, default: Any = None) -> "SkippedCheckpoint":  # type: ignore[override]
        return SkippedCheckpoint()


class _EmptyResponse(io.BytesIO):
    """What `urlopen` answers: an empty body with a status and headers."""

    status = 200
    headers: dict[str, str] = {}

    def getcode(self) -> int:
        return 200

    def info(self) -> dict[str, str]:
        return {}

    def geturl(self) -> str:
        return ""


@contextlib.contextmanager
def nothing_fetched(answer: Callable[[str, str], None], loads: bool = True) -> Iterator[None]:
    """Downloads, checkpoint loads and state-dict loads skipped inside (see the module doc); `loads=False` (around
    the import of the model's code): the downloads only, so that `from torch.hub import load_state_dict_from_url`
    binds the skipping one while module-level `torch.load` of an asset still reads it."""
    import urllib.request

    import torch.hub
    import torch.utils.model_zoo

    def skipped(what: str, result: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            answer(what, _SKIPPED)
            return result(*args, **kwargs)

        return call

    def urlretrieve(url: Any, filename: Any = None, *args: Any, **kwargs: Any) -> tuple[Any, dict]:
        return filename, {}

    def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
        from torch.nn.modules.module import _IncompatibleKeys

        return _IncompatibleKeys([], [])

    patches = [
        (torch.hub, "load_state_dict_from_url", skipped("torch.hub.load_state_dict_from_url()", _checkpoint)),
        (torch.utils.model_zoo, "load_url", skipped("torch.utils.model_zoo.load_url()", _checkpoint)),
        (torch.hub, "download_url_to_file", skipped("torch.hub.download_url_to_file()", _nothing)),
        (torch, "load", skipped("torch.load()", _checkpoint)),
        (urllib.request, "urlretrieve", skipped("urllib.request.urlretrieve()", urlretrieve)),
        (urllib.request, "urlopen", skipped("urllib.request.urlopen()", lambda *a, **k: _EmptyResponse())),
        (torch.nn.Module, "load_state_dict", skipped("load_state_dict()", load_state_dict)),
    ]
    if not loads:
        patches = [p for p in patches if p[1] not in ("load", "load_state_dict")]
    patches += _installs_not_run(answer)
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, fn in patches:
            setattr(owner, name, fn)
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def _command(args: tuple, kwargs: dict) -> str:
    """A command as the shell or exec would take it, as text (`["pip", "install", "x"]` -> `pip install x`)."""
    cmd = args[0] if args else kwargs.get("args", kwargs.get("cmd", kwargs.get("command")))
    if isinstance(cmd, bytes):
        return cmd.decode("utf-8", "replace")
    if isinstance(cmd, (list, tuple)):
        return " ".join(os.fsdecode(c) if isinstance(c, (bytes, os.PathLike)) else str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else ""


def _installs_not_run(answer: Callable[[str, str], None]) -> list[tuple[Any, str, Callable[..., Any]]]:
    """os.system, os.popen and subprocess's run, call, check_call, check_output, getoutput and getstatusoutput,
    each running any command but a package install (see the module doc), which answers as done with no output."""

    def empty(kwargs: dict) -> Any:  # the output check_output or run would have captured: text or bytes
        return "" if kwargs.get("text") or kwargs.get("encoding") or kwargs.get("universal_newlines") else b""

    answers: dict[str, Callable[[Any, dict], Any]] = {
        "system": lambda cmd, kw: 0,
        "popen": lambda cmd, kw: io.StringIO(""),
        "run": lambda cmd, kw: subprocess.CompletedProcess(cmd, 0, empty(kw) if kw.get("capture_output") or
                                                           kw.get("stdout") is not None else None, None),
        "call": lambda cmd, kw: 0,
        "check_call": lambda cmd, kw: 0,
        "check_output": lambda cmd, kw: empty(kw),
        "getoutput": lambda cmd, kw: "",
        "getstatusoutput": lambda cmd, kw: (0, ""),
    }

    def guarded(owner: Any, name: str) -> Callable[..., Any]:
        real = vars(owner)[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            text = _command(args, kwargs)
            if not _INSTALLS.search(text):
                return real(*args, **kwargs)
            answer(f"{owner.__name__}.{name}({' '.join(text.split())[:80]!r})", _NOT_INSTALLED)
            return answers[name](args[0] if args else None, kwargs)

        return call

    return [(owner, name, guarded(owner, name)) for owner, names in ((os, ("system", "popen")), (subprocess, (
        "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"))) for name in names]


def _checkpoint(*args: Any, **kwargs: Any) -> SkippedCheckpoint:
    return SkippedCheckpoint()


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None
