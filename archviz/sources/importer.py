"""The one import of the model's code, whichever form the user typed: a model file, its folder, or
`package.module:callable`.

The file is found without importing anything (`module_file`: the current folder, then `sys.path`, as `python -m`
looks), laid out as its project lays it out (archviz.sources.package), and imported with what cannot be imported
stubbed (archviz.sources.stubs), round after round: a package that is not installed is stubbed as that package
(never as the model's own module that imports it; a sibling file that needs a GPU kernel package is the exception:
it is a kernel file, stubbed wholesale so that its functions are answered by name). Every stub is recorded, so the
build notes the same stubs whichever form the user typed. What the code raises while importing is said in one line
that names the cause: a launcher's environment variable (`os.environ["RANK"]`) names the variable, where the code
reads it, and how to set it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import linecache
import os
import re
import sys
import traceback
import types
from typing import Any

from ..errors import SourceError, option
from .guard import importing
from .meta import warnings_noted
from .package import Layout, locate
from .stubs import KERNEL_PACKAGES, StubRegistry

MAX_STUB_ROUNDS = 32


def folder_modules(folder: str) -> set[str]:
    return {f[:-3] for f in os.listdir(folder) if f.endswith(".py")}


# Top-level module names that builds have put in sys.modules (model files, siblings, stubs).
_LOADED: set[str] = set()


def _purge(names: set[str]) -> None:
    """Forget modules of these names, and everything earlier builds loaded or stubbed: two references (V3 and V4)
    both have a `model` and a `kernel`, and one must never see the other's."""
    names = names | _LOADED
    _LOADED.update(names)
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            del sys.modules[name]


def module_file(name: str) -> str | None:
    """The file of the dotted module `name`, found as `import` would find it (the current folder first, then
    sys.path), without importing anything; None when no folder holds it as source (a built-in or compiled module)."""
    parts = name.split(".")
    for base in [os.getcwd(), *sys.path]:
        if not base or not os.path.isdir(base):
            continue
        stem = os.path.join(base, *parts)
        for path in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(path):
                return os.path.abspath(path)
    return None


def _failing_file(exc: BaseException, folder: str) -> str | None:
    """The file of the model folder whose import statement raised (innermost frame in the folder)."""
    hit = None
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        fn = os.path.abspath(frame.f_code.co_filename)
        if os.path.dirname(fn) == folder:
            hit = fn
    return hit


def _missing_named(e: ImportError) -> str | None:
    """The package an ImportError of the model's own making asks for (`raise ImportError("Please install
    mlstm_kernels package")`): the ModuleNotFoundError it was raised from, else the name after "install"."""
    for inner in (e.__cause__, e.__context__):
        if isinstance(inner, ModuleNotFoundError) and inner.name:
            return inner.name.split(".")[0]
    m = re.search(r"\binstall\s+(?:the\s+)?[`'\"]?([A-Za-z_][\w.-]*)", str(e))
    if m:
        name = m.group(1).rstrip(".").replace("-", "_").split(".")[0]
        return name if name.isidentifier() and name not in ("it", "them", "this", "the") else None
    return None


def _failing_library(e: ImportError, code_root: str) -> str | None:
    """The installed module whose own import raised `e` (torch.utils.tensorboard refusing a stubbed or too old
    tensorboard): the innermost module body on the traceback, where it lies outside the model's code and the
    standard library. None where the model's own code raised."""
    hit = None
    for frame, _ in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_name == "<module>":
            hit = frame
    if hit is None:
        return None
    name, path = hit.f_globals.get("__name__"), os.path.abspath(hit.f_code.co_filename)
    inside = path.startswith(os.path.abspath(code_root) + os.sep)
    if not isinstance(name, str) or inside or _shadows(name.split(".")[0]) or name.split(".")[0] == "archviz" \
            or any(part.startswith("_") for part in name.split(".")):  # a library's internals: never stood in for
        return None
    return name


def _namespace_layout(path: str, layout: Layout) -> Layout:
    """A file named like the folder it sits in, in no package (`pkg/pkg.py` beside `pkg/models/`): the folder is
    the namespace package its code imports (`from pkg.models import ...`), and the file is `pkg.pkg`, never a module
    `pkg` that hides the package."""
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    if layout.package is not None or stem != os.path.basename(folder) or not stem.isidentifier():
        return layout
    return Layout(module_name=f"{stem}.{stem}", code_root=folder,
                  paths=(os.path.dirname(folder), *layout.paths))


def _launcher_variable(e: KeyError, roots: tuple[str, ...]) -> tuple[str, str] | None:
    """(the variable, file:line) when the KeyError comes from the model's code reading `os.environ[...]`."""
    key = e.args[0] if e.args else None
    if not isinstance(key, str):
        return None
    for frame, lineno in reversed(list(traceback.walk_tb(e.__traceback__))):
        fn = os.path.abspath(frame.f_code.co_filename)
        if not any(fn.startswith(os.path.abspath(r)) for r in roots):
            continue
        line = linecache.getline(fn, lineno)
        if "environ" in line:
            return key, f"{os.path.basename(fn)}:{lineno}"
        return None
    return None


def _raised(path: str, e: Exception, layout: Layout) -> SourceError:
    """The one line for an import of the model's code that raised: the cause named, never advice to edit the code."""
    from .meta import user_frame

    roots = (layout.code_root,)
    where = user_frame(e, roots) or os.path.basename(path)
    if isinstance(e, KeyError):
        env = _launcher_variable(e, roots)
        if env:
            return SourceError(f"{path}: the code reads the environment variable {env[0]} at {env[1]} "
                               "(os.environ, set by its launcher), and it is not set",
                               hint=f"set it for the run, e.g. {env[0]}=0 in the environment "
                                    f"(export {env[0]}=...) and run again")
        key = e.args[0] if e.args else None
        if isinstance(key, str) and key in _names_of(path, layout):
            return SourceError(f"{path}: the code looks up its own package {key!r} at {where} and does not find "
                               f"it: it was imported as {layout.module_name!r}",
                               hint=f"give it from the folder above {key}/ as {key}.<module>:<Class or function>, "
                                    "as its project imports it")
    from .native import import_failure_hint

    return SourceError(f"{path}: raised {type(e).__name__} on import at {where}: {e}", hint=import_failure_hint(e))


def _names_of(path: str, layout: Layout) -> set[str]:
    """The names the model's code could know its own package by: its folders up to the code root's parent."""
    names = set(layout.module_name.split("."))
    here = os.path.dirname(path)
    for _ in range(4):
        names.add(os.path.basename(here))
        here = os.path.dirname(here)
    return names


def _install_namespace(layout: Layout) -> None:
    """The top package of `layout` as a namespace package of its folder, where that folder has no `__init__.py`: no
    module of the same name elsewhere on the path (`pkg/pkg.py`) can take its place."""
    top = layout.module_name.split(".")[0]
    where = os.path.join(layout.paths[0], top) if layout.paths else ""
    if top in sys.modules or not os.path.isdir(where) or os.path.isfile(os.path.join(where, "__init__.py")):
        return
    ns = types.ModuleType(top)
    ns.__path__ = [where]  # type: ignore[attr-defined]
    ns.__spec__ = importlib.util.spec_from_loader(top, None, is_package=True)
    if ns.__spec__ is not None:
        ns.__spec__.submodule_search_locations = [where]
    sys.modules[top] = ns


MAX_PACKAGE_UP = 6  # folders looked at above a file for the package its code names itself by


def _as_own_package(e: BaseException, path: str, layout: Layout) -> Layout | None:
    """When the code names, as a package, a folder the file sits in (`from pkg.layers import ...`, a registry
    keyed `"pkg"`: ModuleNotFoundError or KeyError of that name) and was not imported inside it: the layout that
    imports the file as a module of that package (`pkg.model`, the folder above `pkg/` first on the path)."""
    name = e.name if isinstance(e, ModuleNotFoundError) else e.args[0] if isinstance(e, KeyError) and e.args else None
    if not isinstance(name, str) or not name.split(".")[0].isidentifier():
        return None
    name = name.split(".")[0]
    if name in layout.module_name.split("."):
        return None
    parts = [os.path.splitext(os.path.basename(path))[0]]
    here = os.path.dirname(os.path.abspath(path))
    for _ in range(MAX_PACKAGE_UP):
        if not os.path.basename(here).isidentifier():
            return None
        parts.insert(0, os.path.basename(here))
        if parts[0] == name:
            return Layout(module_name=".".join(parts), code_root=here,
                          paths=(os.path.dirname(here), *layout.paths))
        here = os.path.dirname(here)
    return None


def _shadows(name: str) -> bool:
    """A file of this name would shadow a module of the standard library (which archviz, torch and the model all
    share: purged, the next import of it would run the file beside the model)."""
    return name in getattr(sys, "stdlib_module_names", ())


class _StandardLibraryFirst:
    """A finder, ahead of the path finder while the model's code is imported: a module of the standard library is
    found in the standard library's folders alone, so that a file beside the model named like one (`statistics.py`)
    never stands in for it, while the model's folder stays first on sys.path for its own modules."""

    def __init__(self) -> None:
        import sysconfig

        paths = sysconfig.get_paths()
        self.folders = [p for p in dict.fromkeys(paths.get(k) for k in ("stdlib", "platstdlib")) if p]
        self.folders += [os.path.join(f, "lib-dynload") for f in self.folders]

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or name not in getattr(sys, "stdlib_module_names", ()):
            return None
        return importlib.machinery.PathFinder.find_spec(name, self.folders)


def _protected(name: str) -> bool:
    """A top-level module some other code imported (torch, an installed package): never purged."""
    return name in sys.modules and name not in _LOADED


def import_reference(path: str, stubs: StubRegistry, layout: Layout | None = None) -> Any:
    """Import the model file: as its stem (`model`) with its folder first on the path, or, inside a package, under
    its dotted name (archviz.sources.package); stubbing what cannot be imported. `layout`: how to import it, when the
    user named the module (`package.module:callable`)."""
    from .native import native_answered

    layout = _namespace_layout(path, layout or locate(path))
    folder = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    package = layout.package
    # the folder's files that may be purged: never a module of the standard library (a `typing.py` beside model.py,
    # never imported by it, purged the real typing and broke the pass)
    siblings = {n for n in folder_modules(folder) if not _shadows(n)} if package is None else set()
    own = package or stem
    stubbed: dict[str, Any] = {}
    sys.path[:0] = layout.paths
    first = _StandardLibraryFirst()
    sys.meta_path.insert(next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
                              len(sys.meta_path)), first)
    was_importing, stubs.importing = stubs.importing, True
    warned: list[str] = []  # what its import warned (a library's FutureWarning, a registry's "Overwriting ..."):
    try:                    # noted once, never lines on stderr ahead of the output
        for _ in range(MAX_STUB_ROUNDS):
            _purge(siblings | set(stubbed) | ({own} if not _protected(own) else set()))
            sys.modules.update(stubbed)
            try:
                # its exits and its own KeyboardInterrupt: one line; its import-time native code answered, noted
                with importing(os.path.basename(path)), native_answered(stubs, stubs.native_notes), \
                        warnings_noted(warned.append):
                    if package:
                        _install_namespace(layout)
                        return importlib.import_module(layout.module_name)
                    spec = importlib.util.spec_from_file_location(stem, path)
                    assert spec and spec.loader
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[stem] = module
                    spec.loader.exec_module(module)
                return module
            except ModuleNotFoundError as e:
                again = _as_own_package(e, path, layout)
                if again is not None:  # `from pkg.layers import ...` in pkg/model.py: its own package, not missing
                    return import_reference(path, stubs, again)
                _stub_missing(e, path, (folder, stem, package, siblings), stubs, stubbed)
            except ImportError as e:
                # `from X import name` where X exists but lacks the name, or a broken sibling: stub X.
                name = (e.name or "").split(".")[0]
                if name and name not in stubbed and name != stem and name != package:
                    stubbed[name] = stubs.module(name, f"import failed: {e}")
                    continue
                asked = _missing_named(e) if not name else None
                if asked and asked not in stubbed and asked != own:  # the model's own "please install X"
                    _LOADED.add(asked)
                    stubbed[asked] = stubs.missing(asked)
                    continue
                library = _failing_library(e, layout.code_root)
                if library and library not in stubbed:  # an installed library refused to import here: stubbed
                    stubbed[library] = stubs.module(library, f"import failed: {e}")
                    continue
                from .meta import user_frame

                where = user_frame(e, (layout.code_root,)) or os.path.basename(path)
                raise SourceError(f"{path}: import failed at {where}: {e}",
                                  hint=f"install what it names, or run with {option('debug')} for the "
                                       "traceback") from None
            except SourceError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's file raised while importing
                again = _as_own_package(e, path, layout)
                if again is not None:  # it looks itself up as the package its folders make: imported as that
                    return import_reference(path, stubs, again)
                raise _raised(path, e, layout) from e
        raise SourceError(f"{path}: too many failing imports", hint="install the model's dependencies")
    finally:
        sys.meta_path.remove(first)
        stubs.importing = was_importing
        if warned:
            stubs.native_notes.append(_warnings_note(warned))
        for p in layout.paths:
            if p in sys.path:
                sys.path.remove(p)


def _warnings_note(warned: list[str]) -> str:
    """One note for the warnings an import raised: how many, the first two of them (each once)."""
    said = list(dict.fromkeys(warned))
    more = f"; and {len(said) - 2} more" if len(said) > 2 else ""
    return f"{len(said)} warning{'s' * (len(said) > 1)} while importing the model's code: {'; '.join(said[:2])}{more}"


def _stub_missing(e: ModuleNotFoundError, path: str, where: tuple[str, str, str | None, set[str]],
                  stubs: StubRegistry, stubbed: dict[str, Any]) -> None:
    """Stub what a ModuleNotFoundError names: the missing package itself, as that package. A sibling file that needs
    a GPU kernel package is stubbed wholesale instead (a kernel file: its functions answered by name and shape
    rules)."""
    folder, stem, package, siblings = where
    missing = (e.name or "").split(".")[0]
    if not missing:
        raise SourceError(f"{path}: import failed: {e}", hint="install what it names") from None
    if e.name != missing and e.name not in stubbed and _installed(missing):
        # `from torch._six import ...`: an installed package lacks a module the code's version of it had. That
        # module is stubbed, never the package (which would stand in for torch itself).
        stubbed[e.name] = stubs.module(e.name, f"{missing} is installed but has no {e.name} (the code was written "
                                               f"for another version of {missing})")
        return
    _LOADED.add(missing)
    failing = _failing_file(e, folder) if package is None else None
    failing_stem = os.path.splitext(os.path.basename(failing))[0] if failing else stem
    if (failing_stem != stem and failing_stem in siblings and failing_stem not in stubbed
            and missing in KERNEL_PACKAGES and missing not in siblings):
        stubbed[failing_stem] = stubs.module(failing_stem, f"{failing_stem}.py needs {missing}")
    elif missing not in stubbed and missing != package:
        stubbed[missing] = stubs.missing(missing) if missing not in siblings else \
            stubs.module(missing, f"{missing}.py failed to import")
    else:
        raise SourceError(f"{path}: import of {missing} keeps failing ({e})",
                          hint=f"run with {option('debug')} for the traceback") from e


def _installed(name: str) -> bool:
    """A top-level package that is really there: imported (not a stub of ours), or findable on the path."""
    from .stubs import StubModule

    mod = sys.modules.get(name)
    if mod is not None:
        return not isinstance(mod, StubModule)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def import_named(name: str, stubs: StubRegistry) -> tuple[Any, str | None]:
    """The module `name` (`package.module`) imported as `import_reference` imports a file, with the same stubs;
    a module found nowhere as source (compiled, built in) imported as it is. Returns (module, its file or None)."""
    path = module_file(name)
    if path is None:
        return importlib.import_module(name), None
    layout = locate(path)
    if layout.module_name != name:  # a folder of no package, named by the user: as they named it
        base = os.path.abspath(os.path.join(os.path.dirname(path), *[".."] * (name.count(".")
                                                                              + path.endswith("__init__.py"))))
        layout = Layout(module_name=name, code_root=os.path.join(base, name.split(".")[0]) if "." in name
                        else os.path.dirname(path), paths=(base, *layout.paths))
    return import_reference(path, stubs, layout), path


__all__ = ["MAX_STUB_ROUNDS", "folder_modules", "import_named", "import_reference", "module_file"]
