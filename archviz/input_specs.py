"""The grammar of `input name=spec`, read without torch: every spec checked before anything is imported or
built, so that a typo is one line and exit 2 at once (`archviz.shapes.inputs` makes the meta tensors).

`name=B,T,512[:dtype]` (dims: ints, the symbols B and T, or a dim named with its size, `H=224`, or without, `H`), `name=int:5`,
`name=float:0.5`, `name=bool:true`, `name=none`, `name=list:T` or `name=list:512,512` (a list of ints, B and T:
per-sequence lengths, as mistral-inference's `seqlens: List[int]`), `name=[{key: 3,1024,1024, size: list:1024,1024}]`
(a list of dicts) or `name={tokens: B,T, labels: B,T}` (a dict, or the dataclass the forward's annotation names).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ShapeError, option, shown

__all__ = ["DTYPES", "MAX_DIM", "MAX_ELEMENTS", "MAX_NDIM", "check_input_specs", "expand_input_files"]

#: torch's dtype names (`torch.float32`, `torch.long`, ...), as torch 2.4 to 2.9 spell them.
DTYPES = frozenset({
    "bfloat16", "bool", "cdouble", "cfloat", "chalf", "complex128", "complex32", "complex64", "double", "float",
    "float16", "float32", "float64", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2", "half", "int", "int16", "int32", "int64", "int8", "long", "short",
    "uint16", "uint32", "uint64", "uint8", "qint8", "quint8", "qint32",
})

#: The largest size one input dim may have (a meta tensor of any size costs nothing, but no input is this long).
MAX_DIM = 1 << 40
MAX_NDIM = 16  # dims of one input: more than any model's (video: B, C, T, H, W)
MAX_LIST = 1 << 16  # items of one list input (sequences in a packed batch)
MAX_ELEMENTS = 1 << 48  # elements of one input: torch's storage size must not overflow
_BOOLS = {"1": True, "true": True, "0": False, "false": False}
_EXAMPLE = f"e.g. {option('input')} x=B,T,512:float32, {option('input')} n=int:5 or {option('input')} mask=none"


MAX_INPUTS_FILE = 1 << 16  # bytes of an inputs file


def expand_input_files(specs: Any) -> list[str]:
    """The specs with each `@path` (a small TOML or JSON inputs file: `name = "B,3,224,224:float32"`, `n = 5`,
    `[[batched_input]]` tables of `key = "3,1024,1024"` values) replaced by the `name=...` specs it holds, in its
    order. The file is read bounded and never run; a value it cannot hold is a ShapeError naming it."""
    out: list[str] = []
    for spec in specs or ():
        if not spec.startswith("@"):
            out.append(spec)
            continue
        for name, value in _inputs_file(spec[1:]).items():
            out.append(f"{name}={_spec_text(value, spec, name)}")
    return out


def _inputs_file(path: str) -> dict[str, Any]:
    from .files.safeio import read_regular
    from .files.safejson import loads
    from .files.safetoml import load_file

    where = f"inputs file {shown(path)}"
    if not path.endswith(".json"):
        data = load_file(path, what="inputs", max_bytes=MAX_INPUTS_FILE, where=where, error=ShapeError,
                         hint='write name = "B,3,224,224:float32" lines, or JSON ending in .json')
    else:
        raw = read_regular(path, max_bytes=MAX_INPUTS_FILE, what="inputs", error=ShapeError)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ShapeError(f"{where}: not UTF-8 (byte {e.start})", hint="write it as UTF-8") from None
        data = loads(text, where=where, error=ShapeError)
    if type(data) is not dict:
        raise ShapeError(f"inputs file {shown(path)}: not a table of inputs by name", hint=_FILE_FORM)
    return data


_FILE_FORM = 'e.g. x = "B,3,224,224:float32", n = 5, and [[batched_input]] tables of image = "3,1024,1024"'


def _spec_text(value: Any, where: str, name: str) -> str:
    """An inputs file's value as the text `input name=` takes."""
    if isinstance(value, bool):
        return f"bool:{str(value).lower()}"
    if isinstance(value, int):
        return f"int:{value}"
    if isinstance(value, float):
        return f"float:{value}"
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "list:" + ",".join(map(str, value))
    if isinstance(value, dict) or isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        records = [value] if isinstance(value, dict) else value
        text = ", ".join("{" + ", ".join(f"{k}: {_spec_text(v, where, f'{name}.{k}')}" for k, v in r.items()) + "}"
                         for r in records)
        return "{" + text[1:-1] + "}" if isinstance(value, dict) else f"[{text}]"
    raise ShapeError(f"inputs file {shown(where[1:])}: {name} is neither dims, a number, a list of ints nor "
                     "tables of them", hint=_FILE_FORM)


def check_input_specs(specs: list[str] | None) -> list[tuple[str, str, Any]]:
    """Every input spec read, or a ShapeError naming the one that is wrong and how to write it: [(name, kind,
    payload)], kind "none", "int", "float", "bool" (payload the value), "list" (payload a tuple of ints, "B" and
    "T"), "tensor" (payload (dims, dtype name)) or "records" (payload a dict {key: (kind, payload)}, or a tuple of
    them for a list of dicts),
    dims being ints, "B", "T" or (name, size), size None for a dim named without one (`x=B,3,H,W`). A name given twice with different specs is refused."""
    out: list[tuple[str, str, Any]] = []
    seen: dict[str, str] = {}
    for spec in expand_input_files(specs):
        item = _read_spec(spec)
        name = item[0]
        if name in seen and seen[name] != spec:
            raise ShapeError(f"{option('input')} {shown(seen[name])} and {option('input')} {shown(spec)} both give "
                             f"{name}",
                             hint=f"give {option('input')} {name}=... once")
        if name not in seen:
            seen[name] = spec
            out.append(item)
    return out


def _read_spec(spec: str) -> tuple[str, str, Any]:
    where = f"{option('input')} {shown(spec)}"
    if "=" not in spec:
        raise ShapeError(f"{where} is not name=dims[:dtype]", hint=_EXAMPLE)
    name, rest = spec.split("=", 1)
    name = name.strip()
    if not name:
        raise ShapeError(f"{where}: the input's name is empty", hint=f"write {option('input')} NAME=dims[:dtype], "
                                                                     f"{_EXAMPLE}")
    if not name.isidentifier() or not name.isascii():
        raise ShapeError(f"{where}: {shown(name, 40)} is not an argument name of a forward",
                         hint=f"write {option('input')} NAME=dims[:dtype], {_EXAMPLE}")
    if rest.strip().lower() == "none":
        return name, "none", None
    if rest.strip()[:1] in ("[", "{"):
        return name, "records", _records(rest.strip(), where, name)
    dims_text, _, dtype_text = rest.partition(":")
    dims_text, dtype_text = dims_text.strip(), dtype_text.strip()
    if dims_text in ("int", "float", "bool"):
        return name, dims_text, _scalar(dims_text, dtype_text, where, name)
    if dims_text == "list":
        return name, "list", _list(dtype_text, where, name)
    if not dims_text and not dtype_text:
        raise ShapeError(f"{where}: no dims, dtype or value", hint=_EXAMPLE)
    dims: list[Any] = []
    texts = dims_text.split(",") if dims_text else []
    if len(texts) > MAX_NDIM:
        raise ShapeError(f"{where}: {len(texts)} dims, more than any model input has (at most {MAX_NDIM})",
                         hint="e.g. B,T,512 or B,3,H=224,W=224")
    for d in texts:
        d = d.strip()
        if d in ("B", "T"):
            dims.append(d)
            continue
        if _SYMBOL.fullmatch(d):  # named without a size (x=B,3,H,W): sized from the default input it stands in for
            dims.append((d, None))
            continue
        symbol, eq, size = d.rpartition("=")
        if eq and not _SYMBOL.fullmatch(symbol):
            raise ShapeError(f"{where}: {shown(symbol, 40)} cannot name a dim",
                             hint="name a dim with a letter and its size: B,3,H=224,W=224 (B and T need no size)")
        if not re.fullmatch(r"-?[0-9]{1,20}", size):
            what = "is empty (two commas in a row?)" if not d else "is not an int, B or T"
            raise ShapeError(f"{where}: dim {shown(d, 40)} {what}",
                             hint="e.g. B,T,512; name a dim with its size: B,3,H=224,W=224")
        n = int(size)
        if not 1 <= n <= MAX_DIM:
            raise ShapeError(f"{where}: dim {shown(d, 40)} " + ("must be at least 1" if n < 1 else
                             f"is larger than any input (at most {MAX_DIM:,})"),
                             hint="give every dim a positive size, e.g. B,T,512")
        dims.append((symbol, n) if eq else n)
    # token ids [B, T] or [T], or [B, T_tgt=N]: a sequence's own length (a decoder's tokens beside the source's)
    seq = [d if not isinstance(d, tuple) or not d[0].startswith("T_") else "T" for d in dims]
    default = "int64" if seq in (["B", "T"], ["T"]) else "float32"
    dtype = dtype_text or default
    if dtype not in DTYPES:
        raise ShapeError(f"{where}: {shown(dtype, 40)} is not a torch dtype", hint="e.g. float32, bfloat16, int64")
    return name, "tensor", (tuple(dims), dtype)


def _scalar(kind: str, text: str, where: str, name: str) -> Any:
    try:
        if kind == "bool":
            return _BOOLS[text.lower()]
        if not re.fullmatch(r"[+-]?[0-9._eE+-]{1,40}|[+-]?(?:inf|nan)", text, re.I):
            raise ValueError(text)
        return int(text) if kind == "int" else float(text)
    except (KeyError, ValueError):
        example = {"int": "5", "float": "0.5", "bool": "true"}[kind]
        raise ShapeError(f"{where}: {shown(text, 40)} is not {'an' if kind == 'int' else 'a'} {kind}",
                         hint=f"write e.g. {option('input')} {name}={kind}:{example}") from None


def _list(text: str, where: str, name: str) -> tuple:
    """`list:T`, `list:512,512`, `list:T,T`: the items, ints or the symbols B and T."""
    items = [x.strip() for x in text.split(",")] if text.strip() else []
    if not items or len(items) > MAX_LIST or not all(x in ("B", "T") or re.fullmatch(r"[0-9]{1,20}", x) and
                                                      0 < int(x) <= MAX_DIM for x in items):
        raise ShapeError(f"{where}: {shown(text, 40) or 'nothing'} is not a list of positive ints, B or T",
                         hint=f"write e.g. {option('input')} {name}=list:T or {option('input')} {name}=list:512,512")
    return tuple(x if x in ("B", "T") else int(x) for x in items)


_SYMBOL = re.compile(r"(?!(?:B|T)$)[A-Za-z_]\w*")

# A record's next entry: `, key:` where what follows the colon starts a value (dims, a list, none, int:/float:/bool:/
# list:), so that a dtype after dims (`3,H,W:float32`) is never read as a key.
_NEXT_KEY = re.compile(r",\s*(?=[A-Za-z_]\w*\s*:\s*(?:[0-9BT\[{]|none\b|(?:int|float|bool|list):))")
_RECORD_FORM = f"e.g. {option('input')} 'batched_input=[{{image: 3,1024,1024, original_size: list:1024,1024}}]'"
MAX_RECORDS = 64  # dicts in one list input


def _records(text: str, where: str, name: str) -> Any:
    """`[{key: value, ...}, ...]` (a list of dicts, as a forward taking `batched_input: list[dict]` reads them) or
    `{key: value, ...}` (one dict: a dataclass or mapping of inputs); each value as an input spec reads one."""
    many = text.startswith("[")
    if many and not text.endswith("]") or not many and not text.endswith("}"):
        raise ShapeError(f"{where}: a list of dicts ends with ], a dict with }}", hint=_RECORD_FORM)
    body = text[1:-1].strip() if many else text
    groups = re.findall(r"\{([^{}]*)\}", body)
    if re.sub(r"\{[^{}]*\}", "", body).strip(" ,") or (not many and len(groups) != 1):
        raise ShapeError(f"{where}: not a list of {{key: value}} dicts", hint=_RECORD_FORM)
    if len(groups) > MAX_RECORDS:
        raise ShapeError(f"{where}: {len(groups)} dicts, more than {MAX_RECORDS}", hint=_RECORD_FORM)
    out = []
    for group in groups:
        record: dict[str, tuple[str, Any]] = {}
        for entry in filter(None, (e.strip() for e in _NEXT_KEY.split(group))):
            key, colon, value = entry.partition(":")
            if not colon or not key.strip().isidentifier():
                raise ShapeError(f"{where}: {shown(entry, 40)} is not key: value", hint=_RECORD_FORM)
            if value.strip()[:1] in ("[", "{"):
                raise ShapeError(f"{where}: a dict's value is dims or a number, not another list or dict",
                                 hint=_RECORD_FORM)
            _, kind, payload = _read_spec(f"{key.strip()}={value.strip()}")
            record[key.strip()] = (kind, payload)
        out.append(record)
    return tuple(out) if many else out[0]
