"""``open_checkpoint``: one entry point for every kind of checkpoint source.

Accepted specs:

1. a ``.safetensors`` file;
2. a ``*.safetensors.index.json`` (its ``weight_map`` names the shards, read from the index's folder);
3. a folder: its ``model.safetensors.index.json`` (or the single ``*.safetensors.index.json``) if present, else
   every ``*.safetensors`` in it, in natural order;
4. a header-only manifest (``.json`` or ``.json.gz``; archviz-manifest/1 or header-audit, see ``FORMATS.md``);
5. ``hf://owner/name[@revision]``: a Hugging Face repository, read with HTTP range requests;
6. a GGUF file (``.gguf``, or any file that begins with ``GGUF``), or one file of a split GGUF (``gguf_header.py``);
7. a ``torch.save`` zip (``.bin``, ``.pt``, ``.pth``, ``.ckpt``; or a ``pytorch_model.bin.index.json`` naming several):
   its tensor table, read by a restricted unpickler that runs nothing (``torch_zip.py``); a plain pickle
   (``.pkl``, ``.pickle``): refused, never opened.

Only the 8-byte length prefix and the JSON header of each shard are read; tensor data never is.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from archviz.gcpause import collector_paused
from archviz.errors import CheckpointError

from archviz.files.safeio import read_regular

from .assemble import INDEX_SUFFIX, MAX_INDEX_BYTES, Progress, assemble, index_shards, natural_key, parse_index
from .gguf_header import GGUF_MAGIC, open_gguf
from .header import ParsedShard, read_local_shard
from .torch_zip import read_torch_zip
from .manifest import IndexNotManifest, manifest_from_bytes, read_json_bytes
from .records import CheckpointInventory

__all__ = ["PICKLE_SUFFIXES", "open_checkpoint", "open_folder", "open_index", "open_safetensors"]

#: Suffixes of PyTorch pickle/zip checkpoints: a plain pickle is refused unopened; torch.save's zip (the suffixes
#: below) is read by torch_zip.py's restricted reader, which runs nothing.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
TORCH_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
_PICKLE_HINT = (
    "archviz never unpickles checkpoints (unpickling can run arbitrary code); "
    "convert it to .safetensors, or pass the repository's .safetensors files, index or a manifest"
)
HF_SCHEME = "hf://"


def _read_local(path: Path, name: str) -> ParsedShard:
    """One local shard by its kind: a torch.save zip by its suffix, else a safetensors file."""
    if name.lower().endswith(TORCH_SUFFIXES):
        return read_torch_zip(path, shard=name)
    return read_local_shard(path, shard=name)


def _refuse_pickle(where: str) -> CheckpointError:
    return CheckpointError(f"{where}: pickle checkpoints are not read", hint=_PICKLE_HINT)


def _report(progress: Progress | None, done: int, total: int, label: str) -> None:
    if progress is not None:
        progress(done, total, label)


def open_safetensors(path: str | os.PathLike[str], *, progress: Progress | None = None) -> CheckpointInventory:
    """Inventory of a single ``.safetensors`` file."""
    where = os.fspath(path)
    parsed = read_local_shard(where)
    _report(progress, 1, 1, parsed.shard.name)
    return assemble([parsed], source=where)


def _read_shards(folder: Path, names: list[str], progress: Progress | None, where: str) -> list[ParsedShard]:
    out: list[ParsedShard] = []
    total = len(names)
    for i, name in enumerate(names, 1):
        path = folder / name
        if not os.path.lexists(path):
            raise CheckpointError(
                f"{where}: shard {name!r} is missing (expected at {path})",
                hint="download the missing shard, or fix the index",
            )
        _check_inside(folder, path, name, where)
        out.append(_read_local(path, name))
        _report(progress, i, total, name)
    return out


def _check_inside(folder: Path, path: Path, name: str, where: str) -> None:
    """A shard (a symlink, or in a symlinked subfolder) must resolve inside the checkpoint's folder, as a name with
    ``..`` must not leave it. One exception, the Hugging Face cache: a snapshot folder ``<repo>/snapshots/<rev>``
    holds symlinks into ``<repo>/blobs``, and those are followed."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(folder))
    if real.is_relative_to(base):
        return
    if base.parent.name == "snapshots" and real.parent == base.parent.parent / "blobs":
        return
    raise CheckpointError(f"{where}: shard {name!r} is a symlink to {real}, outside the checkpoint's folder",
                          hint="copy the shard into the folder, or pass the folder it lives in")


def _check_shard_name(name: str, where: str) -> None:
    p = Path(name)
    if p.is_absolute() or ".." in p.parts or name.startswith(("/", "\\")):
        raise CheckpointError(f"{where}: shard name {name!r} points outside the index's folder")
    if name.endswith(PICKLE_SUFFIXES) and not name.lower().endswith(TORCH_SUFFIXES):
        raise _refuse_pickle(f"{where}: shard {name!r}")


def open_index(path: str | os.PathLike[str], *, progress: Progress | None = None) -> CheckpointInventory:
    """Inventory of a ``*.safetensors.index.json`` and the shards it names (next to it)."""
    where = os.fspath(path)
    data = read_regular(where, max_bytes=MAX_INDEX_BYTES, what="index", error=CheckpointError)
    weight_map, index_meta = parse_index(data, where)
    names = index_shards(weight_map)
    for name in names:
        _check_shard_name(name, where)
    parsed = _read_shards(Path(where).parent, names, progress, where)
    return assemble(
        parsed,
        source=where,
        weight_map=weight_map,
        index_where=where,
        metadata={"index": index_meta} if index_meta else None,
    )


def open_folder(path: str | os.PathLike[str], *, progress: Progress | None = None) -> CheckpointInventory:
    """Inventory of a folder: through its index when it has one, else of all its ``*.safetensors`` files."""
    folder = Path(path)
    where = os.fspath(path)
    standard = folder / f"model{INDEX_SUFFIX}"
    if standard.is_file():
        return replace(open_index(standard, progress=progress), source=where)
    indexes = sorted(p.name for p in folder.glob(f"*{INDEX_SUFFIX}"))
    if len(indexes) == 1:
        return replace(open_index(folder / indexes[0], progress=progress), source=where)
    names = sorted((p.name for p in folder.glob("*.safetensors") if p.is_file()), key=natural_key)
    if not names:
        if len(indexes) > 1:
            raise CheckpointError(
                f"{where}: holds several indexes ({', '.join(indexes)}) and no loose shards",
                hint="pass the index you mean",
            )
        pickles = sorted(p.name for p in folder.iterdir() if p.name.endswith(PICKLE_SUFFIXES))
        torch_index = folder / "pytorch_model.bin.index.json"
        if torch_index.is_file():
            return replace(open_index(torch_index, progress=progress), source=where)
        saved = [n for n in pickles if n.lower().endswith(TORCH_SUFFIXES)]
        if len(saved) == 1:
            return replace(open_checkpoint(folder / saved[0], progress=progress), source=where)
        if pickles:
            raise _refuse_pickle(f"{where}: only pickle checkpoints here ({pickles[0]}, ...)")
        raise CheckpointError(
            f"{where}: no *.safetensors files and no *{INDEX_SUFFIX}",
            hint="pass the folder that holds the checkpoint's shards",
        )
    parsed = _read_shards(folder, names, progress, where)
    return assemble(parsed, source=where)


def _open_json(where: str, progress: Progress | None) -> CheckpointInventory:
    if where.endswith(INDEX_SUFFIX):
        return open_index(where, progress=progress)
    try:
        inv = manifest_from_bytes(read_json_bytes(where), source=where)
    except IndexNotManifest:
        return open_index(where, progress=progress)
    _report(progress, 1, 1, os.path.basename(where))
    return inv


def open_checkpoint(
    spec: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    timeout: float = 10.0,
    token: str | bool | None = None,
    deadline: float | None = None,
) -> CheckpointInventory:
    """Read a checkpoint's headers and return its :class:`CheckpointInventory`; never reads tensor data.

    ``spec`` is a ``.safetensors`` file, a ``*.safetensors.index.json``, a folder, a header-only manifest
    (``.json``/``.json.gz``), a ``.gguf`` (or one of a split GGUF's files), a ``torch.save`` zip (``.bin``, ``.pt``,
    ``.pth``, ``.ckpt``, or a ``pytorch_model.bin.index.json``) or ``hf://owner/name[@revision][/file.gguf]``. ``progress(done, total, label)`` is called after
    each shard. ``timeout`` (seconds each request may take, answer included), ``deadline`` (seconds for the whole
    read; default 30 × ``timeout``) and ``token`` apply to ``hf://`` only (``token=None`` uses the
    logged-in Hugging Face token if any; ``HF_ENDPOINT`` selects the server).

    Raises :class:`~archviz.errors.CheckpointError` for anything unusable — missing or damaged files,
    inconsistent indexes, pickle checkpoints, HTTP errors and timeouts.
    """
    with collector_paused():  # ~10 small acyclic objects per tensor
        return _open(spec, progress, timeout, token, deadline)


def _check_endpoint(where: str) -> None:
    """``HF_ENDPOINT``, when set, must be an http(s) URL with a host (a malformed one made huggingface_hub's import
    raise a ValueError: an internal error)."""
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT")
    if not endpoint:
        return
    try:
        parts = urlsplit(endpoint)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        ok = False
    if not ok:
        raise CheckpointError(f"{where}: HF_ENDPOINT {endpoint!r} is not an http(s) URL with a host",
                              hint="set HF_ENDPOINT to e.g. https://huggingface.co, or unset it")


def _open(spec: str | os.PathLike[str], progress: Progress | None, timeout: float, token: str | bool | None,
          deadline: float | None = None) -> CheckpointInventory:
    text = os.fspath(spec)
    if text.startswith(HF_SCHEME):
        _check_endpoint(text)  # before huggingface_hub is imported: it parses HF_ENDPOINT at import
        try:
            from .remote import open_hf  # imports huggingface_hub only when needed
        except ImportError as e:
            raise CheckpointError(
                f"{text}: reading Hugging Face repositories needs huggingface_hub >= 1.0 ({e})",
                hint="pip install 'archviz[hf]', or download the checkpoint and pass its folder",
            ) from None
        return open_hf(text, progress=progress, timeout=timeout, token=token, deadline=deadline)
    path = Path(text)
    lower = text.lower()
    if lower.endswith(PICKLE_SUFFIXES) and not lower.endswith(TORCH_SUFFIXES):
        raise _refuse_pickle(text)
    if path.is_dir():
        return open_folder(path, progress=progress)
    if not path.exists():
        hint = "check the path"
        if text.count("/") == 1 and not text.startswith((".", "/")):
            hint = f"for a Hugging Face repository write hf://{text}"
        raise CheckpointError(f"{text}: no such file or folder", hint=hint)
    if lower.endswith((".json", ".json.gz", ".gz")):
        return _open_json(text, progress)
    if lower.endswith(TORCH_SUFFIXES):
        parsed = read_torch_zip(text)
        _report(progress, 1, 1, parsed.shard.name)
        return assemble([parsed], source=text, metadata={"format": "torch"})
    if lower.endswith(".gguf") or _magic(text) == GGUF_MAGIC:
        return open_gguf(text, progress=progress)
    return open_safetensors(text, progress=progress)


def _magic(path: str) -> bytes:
    """The first 4 bytes of a regular file (b"" for anything else: the reader that follows says what it is)."""
    try:
        if not os.path.isfile(path):
            return b""
        with open(path, "rb") as f:
            return f.read(4)
    except OSError:
        return b""
