"""A builder that takes the launcher's argparse namespace (`build_model(args)`, research detection and vision
codebases): its `args` made from the defaults of the project's own argument parser, read from the launcher's code
(`parser.add_argument('--hidden_dim', default=256, type=int)` in `main.py`), never run. The config JSON's keys and
the overrides values replace those defaults; a key the code reads that no parser declares is an AttributeError
naming it, as for any config bag.

The launcher is looked for beside the builder's package (the folder above its top-level package, where `main.py`,
`train.py` live) and in the builder's own folder: of the .py files there, the one whose code declares the most
options. Values are literals only (`default=256`, `action='store_true'` is False); a default the code computes is
None.
"""

from __future__ import annotations

import ast
import os
import sys
from typing import Any

from .configs import _CONFIG_PARAMS

MAX_FILES = 64  # .py files looked through in each folder
MAX_BYTES = 1 << 20  # a launcher larger than this is not read


def _long_name(call: ast.Call) -> str | None:
    """The option's dest: `dest=`, else its first `--long` string (dashes as underscores), else a short one's
    letter, else a positional's name."""
    for k in call.keywords:
        if k.arg == "dest" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
            return k.value.value
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = next((n for n in names if n.startswith("--")), None)
    name = long or (names[0] if names else None)
    return name.lstrip("-").replace("-", "_") if name else None


def _default(call: ast.Call) -> Any:
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = kw.get("action")
    if isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
        default = kw.get("default")
        if default is None:
            return action.value == "store_false"
    default = kw.get("default")
    if default is None:
        return None
    try:
        return ast.literal_eval(default)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def parser_options(path: str) -> dict[str, Any]:
    """The options `path`'s code declares with `add_argument` and their literal defaults, in order."""
    try:
        if os.path.getsize(path) > MAX_BYTES:
            return {}
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return {}
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            name = _long_name(node)
            if name and name.isidentifier() and name not in out:
                out[name] = _default(node)
    return out


def _folders(fn: Any) -> list[str]:
    """The folder above the builder's top-level package, then the builder's own folder."""
    mod = sys.modules.get(getattr(fn, "__module__", "") or "")
    own = os.path.dirname(getattr(mod, "__file__", "") or "")
    top = sys.modules.get((getattr(fn, "__module__", "") or "").split(".")[0])
    top_file = getattr(top, "__file__", "") or ""
    above = os.path.dirname(os.path.dirname(top_file)) if top_file.endswith("__init__.py") else \
        os.path.dirname(top_file)
    return [d for d in dict.fromkeys((above, own)) if d and os.path.isdir(d)]


def launcher_defaults(fn: Any) -> tuple[dict[str, Any], str] | None:
    """(the options and defaults of the project's argument parser, the file that declares them) for `fn`'s
    project (see the module's docstring), or None where no file there declares any."""
    best: tuple[dict[str, Any], str] | None = None
    for folder in _folders(fn):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))[:MAX_FILES]
        except OSError:
            continue
        for name in names:
            found = parser_options(os.path.join(folder, name))
            if found and (best is None or len(found) > len(best[0])):
                best = (found, os.path.join(folder, name))
    return best


def namespace_parameter(fn: Any, missing: list[str]) -> str | None:
    """The one required parameter of `fn` that is a launcher's namespace: named like a config (`args`, `cfg`,
    `opt`, ...) and not annotated with a plain value's type."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    found = [n for n in missing if n in _CONFIG_PARAMS and params[n].annotation in (
        inspect.Parameter.empty, "Namespace", "argparse.Namespace") or
        getattr(params[n].annotation, "__name__", "") == "Namespace"]
    return found[0] if len(found) == 1 else None


__all__ = ["launcher_defaults", "namespace_parameter", "parser_options"]
