"""A diffusers `config.json` (or its folder, or a Hub repository holding one) as a source.

diffusers writes its models' configs with `_class_name` (`UNet2DConditionModel`, `FluxTransformer2DModel`) and no
`model_type`. Such a config builds through diffusers' own `from_config`, as a transformers config builds through
transformers': the class named there, made on meta. diffusers is an optional dependency: without it, one line says
to install it.
"""

from __future__ import annotations

import os

from ..errors import SourceError, option
from .options import BuildOptions, Built, _versions, read_json_config
from .reference import _jsonable


def config_path(spec: str) -> str | None:
    """The config.json `spec` names (the file, or the one in the folder), or None."""
    path = os.path.join(spec, "config.json") if os.path.isdir(spec) else spec
    return path if path.endswith(".json") and os.path.isfile(path) else None


def is_diffusers(spec: str) -> bool:
    """Whether `spec` is a diffusers config: `_class_name` and no `model_type` (a bounded read of the JSON)."""
    path = config_path(spec)
    if path is None:
        return False
    try:
        raw = read_json_config(path)
    except SourceError:
        return False  # the transformers path says what is wrong with it
    return isinstance(raw.get("_class_name"), str) and "model_type" not in raw


def build(spec: str, options: BuildOptions) -> Built:
    from .meta import meta_build, user_frame

    path = config_path(spec)
    assert path is not None
    raw = read_json_config(path)
    name = raw["_class_name"]
    try:
        import diffusers
    except ImportError:
        raise SourceError(f"{path}: a diffusers config ({name}), and diffusers is not installed",
                          hint="pip install diffusers") from None
    cls = getattr(diffusers, name, None)
    if cls is None or not hasattr(cls, "from_config"):
        raise SourceError(f"{path}: diffusers {diffusers.__version__} has no model class {name!r}",
                          hint="upgrade diffusers, or check _class_name")
    config = {**raw, **dict(options.overrides)}
    accepted = set(getattr(cls, "_get_init_keys", lambda c: set())(cls)) - {"self"}
    unknown = [k for k, _ in options.overrides if accepted and k not in accepted]
    if unknown:
        raise SourceError(f"{option('set')} {unknown[0]}: {name} takes no {unknown[0]!r}",
                          hint=f"its arguments: {', '.join(sorted(accepted))[:300]}")
    try:
        with meta_build(options.device) as notes:
            model = cls.from_config(config)
    except Exception as e:  # noqa: BLE001 - diffusers' own code raised on this config
        where = user_frame(e, (os.path.dirname(diffusers.__file__),)) or name
        raise SourceError(f"{path}: {name}.from_config raised {type(e).__name__}: {e} ({where})",
                          hint=f"check the config's fields against the class (run with {option('debug')} for the "
                               "traceback)") from e
    kept = {k: v for k, v in config.items() if not k.startswith("_") and _jsonable(v)}
    root = os.path.dirname(diffusers.__file__)
    return Built(model=model, spec=spec, kind="diffusers", name=name, config=kept, overrides=dict(options.overrides),
                 notes=[f"built with diffusers' {name}.from_config", *notes.items], roots=(root,),
                 display_roots=((os.path.dirname(root), ""),), versions=_versions("diffusers"))


__all__ = ["build", "is_diffusers"]
