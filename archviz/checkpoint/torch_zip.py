"""PyTorch's own checkpoints (``torch.save``: ``pytorch_model.bin``, ``*.pt``, ``*.pth``), read without running them.

Since torch 1.6 such a file is a zip: ``<archive>/data.pkl`` (a pickle of the state dict, whose tensors name their
storages by key), ``<archive>/data/<key>`` (each storage's bytes), ``version``, ``byteorder``. The tensor table comes
from ``data.pkl`` alone, read by a restricted unpickler, and the zip's central directory (each storage's size); no
storage is read.

The pickle never runs: before it is read, every opcode is scanned (``pickletools.genops``: no code runs) and
refused unless it is one a state dict uses, every global it names is refused unless it is one of :data:`_GLOBALS`
(torch's ``weights_only`` unpickler is the reference: ``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2``,
``torch._utils._rebuild_parameter``, the ``torch.*Storage`` types, dtypes, ``torch.Size``), and marks nest at most
:data:`MAX_NESTING` deep. Then the unpickler reads it with those globals replaced by archviz's own stand-ins (a
rebuilt tensor is a :class:`_Tensor` record of its storage, offset, size and stride) and ``persistent_load``
answering a storage's descriptor without reading it.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import pickletools
import struct
import zipfile
from dataclasses import dataclass
from typing import Any

from archviz.errors import CheckpointError
from archviz.files.safeio import MiB, open_regular

from .header import ParsedShard
from .records import ShardInfo, TensorInfo

__all__ = ["MAX_NESTING", "MAX_OPCODES", "MAX_PICKLE_BYTES", "MAX_ZIP_ENTRIES", "parse_torch_zip", "read_torch_zip"]

#: Largest ``data.pkl`` read (a state dict's pickle is ~100 bytes a tensor: 100,000 tensors are 10 MB).
MAX_PICKLE_BYTES = 64 * MiB
#: Most opcodes scanned (a state dict's pickle takes ~25 a tensor) and most zip entries (one a storage): past them a
#: file would cost seconds or hundreds of MB before it said anything.
MAX_OPCODES = 5_000_000
MAX_ZIP_ENTRIES = 500_000
#: Deepest nesting of marks (tuples, lists, dicts being built) accepted; a state dict nests 3 or 4 deep.
MAX_NESTING = 32
_HINT_UNSAFE = "archviz reads only the tensors of a state dict and runs nothing; this pickle asks for more, so it " \
               "may be malicious: do not torch.load it either; ask its publisher for .safetensors"
_HINT_PLAIN = "archviz never unpickles checkpoints (unpickling can run arbitrary code); convert it to .safetensors"
_HINT_BAD = "the file is damaged or not a torch.save checkpoint; download it again"

# storage type name -> safetensors dtype code
_STORAGES = {"FloatStorage": "F32", "DoubleStorage": "F64", "HalfStorage": "F16", "BFloat16Storage": "BF16",
             "LongStorage": "I64", "IntStorage": "I32", "ShortStorage": "I16", "CharStorage": "I8",
             "ByteStorage": "U8", "BoolStorage": "BOOL", "ComplexFloatStorage": "C64",
             "Float8_e4m3fnStorage": "F8_E4M3", "Float8_e5m2Storage": "F8_E5M2"}
_DTYPES = {"float32": "F32", "float": "F32", "float64": "F64", "double": "F64", "float16": "F16", "half": "F16",
           "bfloat16": "BF16", "int64": "I64", "long": "I64", "int32": "I32", "int": "I32", "int16": "I16",
           "int8": "I8", "uint8": "U8", "bool": "BOOL", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
_BYTES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
          "C64": 8, "F8_E4M3": 1, "F8_E5M2": 1}

# Opcodes a state dict's pickle uses (protocols 2 to 5); anything else (EXT*, INST, OBJ, NEWOBJ*, ...) is refused.
_OPCODES = frozenset(
    "PROTO FRAME STOP MARK GLOBAL STACK_GLOBAL REDUCE BUILD BINPERSID PERSID EMPTY_DICT EMPTY_LIST EMPTY_TUPLE "
    "TUPLE TUPLE1 TUPLE2 TUPLE3 LIST DICT APPEND APPENDS SETITEM SETITEMS BINPUT LONG_BINPUT MEMOIZE PUT BINGET "
    "LONG_BINGET GET BININT BININT1 BININT2 INT LONG LONG1 BINFLOAT FLOAT NONE NEWTRUE NEWFALSE BINUNICODE "
    "SHORT_BINUNICODE BINUNICODE8 UNICODE SHORT_BINSTRING BINSTRING STRING SHORT_BINBYTES BINBYTES BINBYTES8 "
    "EMPTY_SET ADDITEMS FROZENSET POP POP_MARK DUP".split())


@dataclass(frozen=True)
class _StorageType:
    dtype: str


@dataclass(frozen=True)
class _Storage:
    dtype: str
    key: str
    numel: int


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, tuple) or not all(type(d) is int for d in v) or len(v) > 64:
        raise ValueError(f"{what} {v!r} is not a tuple of ints")
    return v


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_rest: Any) -> _Tensor:
    if not isinstance(storage, _Storage) or type(offset) is not int or offset < 0:
        raise ValueError("a tensor rebuilt from something other than a storage")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride) or any(d < 0 for d in size) or any(s < 0 for s in stride):
        raise ValueError(f"size {size} and stride {stride} do not describe a tensor")
    if 0 not in size and offset + sum((d - 1) * s for d, s in zip(size, stride)) >= max(storage.numel, 1):
        raise ValueError(f"size {size}, stride {stride} at offset {offset} run past a storage of {storage.numel}")
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data: Any, *_rest: Any) -> Any:
    return data


def _globals() -> dict[tuple[str, str], Any]:
    table: dict[tuple[str, str], Any] = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
        ("torch", "Size"): tuple,
    }
    table.update((("torch", name), _StorageType(code)) for name, code in _STORAGES.items())
    table.update((("torch", name), _StorageType(code)) for name, code in _DTYPES.items())
    return table


_GLOBALS = _globals()


def _scan(data: bytes, where: str) -> None:
    """Every opcode, global and mark depth checked before anything is unpickled (``genops`` only decodes)."""
    depth = 0
    recent: list[tuple[str, Any]] = []  # the last two pushes (memo stores skipped): STACK_GLOBAL's module and name
    try:
        for count, (op, arg, pos) in enumerate(pickletools.genops(data)):
            name = op.name
            if count >= MAX_OPCODES:
                raise CheckpointError(f"{where}: data.pkl holds over {MAX_OPCODES:,} opcodes (archviz's limit)",
                                      hint=_HINT_BAD)
            if name not in _OPCODES:
                raise CheckpointError(f"{where}: data.pkl uses the pickle opcode {name} at byte {pos}, which a "
                                      "state dict does not", hint=_HINT_UNSAFE)
            if name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                _check_global(module, attr, where)
            elif name == "STACK_GLOBAL":
                if len(recent) < 2 or not all(type(a) is str and "UNICODE" in n for n, a in recent):
                    raise CheckpointError(f"{where}: data.pkl builds a global's name at byte {pos}",
                                          hint=_HINT_UNSAFE)
                _check_global(recent[0][1], recent[1][1], where)
            if name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT", "FRAME"):
                recent = [*recent[-1:], (name, arg)]
            if name == "MARK":
                depth += 1
                if depth > MAX_NESTING:
                    raise CheckpointError(f"{where}: data.pkl nests more than {MAX_NESTING} deep (byte {pos})",
                                          hint=_HINT_UNSAFE)
            elif pickletools.markobject in op.stack_before:
                depth -= 1
    except ValueError as e:
        raise CheckpointError(f"{where}: data.pkl is not a readable pickle ({e})", hint=_HINT_BAD) from None


def _check_global(module: str, attr: str, where: str) -> None:
    if (module, attr) not in _GLOBALS:
        raise CheckpointError(f"{where}: data.pkl imports {module[:80]}.{attr[:80]}, which a state dict does not",
                              hint=_HINT_UNSAFE)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _GLOBALS.get((module, name))
        if found is None:  # the scan refused it already; kept as the second lock
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed")
        return found

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and type(pid[4]) is int
                and pid[4] >= 0):
            raise pickle.UnpicklingError(f"persistent id {str(pid)[:80]} is not a storage")
        return _Storage(pid[1].dtype, pid[2], pid[4])


def _state_dict(obj: Any, where: str) -> dict[str, _Tensor]:
    """The tensors of a state dict (or of one under ``state_dict``/``model``/``module``, as trainers save them)."""
    for _ in range(3):
        if not isinstance(obj, dict):
            break
        tensors = {k: v for k, v in obj.items() if isinstance(k, str) and isinstance(v, _Tensor)}
        if tensors:
            return tensors
        inner = [obj[k] for k in ("state_dict", "model", "module") if isinstance(obj.get(k), dict)]
        if len(inner) != 1:
            break
        obj = inner[0]
    raise CheckpointError(f"{where}: data.pkl holds no state dict (no name → tensor mapping)", hint=_HINT_BAD)


def _data_pkl(z: zipfile.ZipFile, where: str) -> tuple[str, bytes]:
    names = [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(names) != 1:
        raise CheckpointError(f"{where}: the zip holds {len(names)} <archive>/data.pkl entries, not one",
                              hint=_HINT_BAD)
    info = z.getinfo(names[0])
    if info.file_size > MAX_PICKLE_BYTES:
        raise CheckpointError(f"{where}: data.pkl is {info.file_size:,} bytes, over the {MAX_PICKLE_BYTES:,}-byte "
                              "limit", hint=_HINT_BAD)
    with z.open(info) as f:
        data = f.read(MAX_PICKLE_BYTES + 1)
    return names[0].split("/")[0], data[:MAX_PICKLE_BYTES + 1]


def _check_entries(f: Any, where: str) -> None:
    """The zip's entry count and central directory size, from its end record, before ``ZipFile`` reads every entry."""
    try:
        end = zipfile._EndRecData(f)  # type: ignore[attr-defined]  # the end record ZipFile itself reads first
    except (OSError, struct.error):
        end = None
    if not end:
        raise CheckpointError(f"{where}: damaged zip (no end of central directory)", hint=_HINT_BAD)
    entries, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]
    if entries > MAX_ZIP_ENTRIES or size > 64 * MAX_ZIP_ENTRIES * 2:
        raise CheckpointError(f"{where}: the zip lists {entries:,} entries in {size:,} bytes (archviz reads at most "
                              f"{MAX_ZIP_ENTRIES:,})", hint=_HINT_BAD)


def read_torch_zip(path: str | os.PathLike[str], *, shard: str | None = None) -> ParsedShard:
    """The tensor table of one local ``torch.save`` zip (:func:`parse_torch_zip`)."""
    where = os.fspath(path)
    with open_regular(where, what="PyTorch checkpoint", error=CheckpointError) as f:
        return parse_torch_zip(f, os.fstat(f.fileno()).st_size, shard=shard or os.path.basename(where), where=where)


def parse_torch_zip(f: Any, size: int, *, shard: str, where: str) -> ParsedShard:
    """The tensor table of a ``torch.save`` zip read through the seekable binary file ``f`` of ``size`` bytes: names,
    dtypes, shapes, from ``data.pkl`` and the central directory (each storage must be there and hold the elements its
    tensors reach); no storage is read."""
    try:
        if not zipfile.is_zipfile(f):
            raise CheckpointError(f"{where}: not a torch.save zip (a plain pickle, or saved before torch 1.6): "
                                  "pickle checkpoints are not read", hint=_HINT_PLAIN)
        _check_entries(f, where)
        with zipfile.ZipFile(f) as z:
            archive, data = _data_pkl(z, where)
            sizes = {i.filename: i.file_size for i in z.infolist()}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"{where}: damaged zip ({e})", hint=_HINT_BAD) from None
    _scan(data, where)
    try:
        obj = _Unpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, ValueError, TypeError, EOFError, IndexError, KeyError, AttributeError,
            RecursionError, MemoryError) as e:
        raise CheckpointError(f"{where}: data.pkl is not a state dict archviz can read ({str(e)[:200]})",
                              hint=_HINT_BAD) from None
    tensors: dict[str, TensorInfo] = {}
    for key, t in _state_dict(obj, where).items():
        stored = sizes.get(f"{archive}/data/{t.storage.key}")
        if stored is None or stored < t.storage.numel * _BYTES[t.storage.dtype]:
            raise CheckpointError(f"{where}: tensor {key!r}: its storage {t.storage.key!r} is "
                                  f"{'missing' if stored is None else f'{stored:,} bytes'}, not the "
                                  f"{t.storage.numel * _BYTES[t.storage.dtype]:,} bytes its pickle says",
                                  hint=_HINT_BAD)
        tensors[key] = TensorInfo(key, t.storage.dtype, t.size, shard, None)
    return ParsedShard(ShardInfo(shard, size, 0), tensors)
