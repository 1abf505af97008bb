"""Hardware for the cost bounds: the presets shipped in `hardware.toml` (each figure from the vendor's spec sheet,
named in the file) and a user's TOML file of the same fields. Pure: no torch.

The hardware option `h200,b200` names presets; `my.toml` reads every table of the file (or the file itself when
it is one table); the two mix: `h200,my.toml`."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ArchvizError, option
from ..files.safetoml import load_file, loads
from ..records.recordcheck import fail, refused_as, want_number, want_str, want_table

# dtype names the peaks are keyed by, and the torch dtypes of weights that compute at each
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8")
_OF_TORCH = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
             "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8", "float4_e2m1fn_x2": "fp4", "int8": "int8",
             "uint8": "int8", "float64": "fp32"}
# where a device has no peak at a dtype, the next wider one it computes in (fp4 weights upcast to fp8, ...)
_WIDER = {"fp4": "fp8", "fp8": "bf16", "int8": "bf16", "fp16": "bf16", "bf16": "fp32", "tf32": "fp32"}
FIELDS = {"name": str, "source": str, "memory_gb": float, "memory_bandwidth_gb_s": float,
          "interconnect_gb_s": float, "peak_tflops": dict}


# The largest figure a device file may give, far beyond any device (a 400-digit memory_gb, or 1e308 GB/s, would
# overflow the bounds' arithmetic into inf): 1 PB of memory, 1 PB/s of bandwidth, 1e9 TFLOP/s
MAXIMA = {"memory_gb": 1e6, "memory_bandwidth_gb_s": 1e6, "interconnect_gb_s": 1e6, "peak_tflops": 1e9}
MAX_FILE_BYTES = 1 << 20  # a device file is a few lines of TOML


def hw_dtype(dtype: str) -> str:
    """The peak's name for weights of torch dtype `dtype` (bfloat16 -> bf16, float8_e4m3fn -> fp8)."""
    return _OF_TORCH.get(dtype, dtype)


@dataclass(frozen=True, slots=True)
class Hardware:
    key: str  # the preset's name, or the file's table
    name: str
    source: str
    memory: float  # bytes of one device
    bandwidth: float  # memory bandwidth, bytes/s
    interconnect: float  # bytes/s one device sends to its peers, one direction (0: none)
    peaks: tuple[tuple[str, float], ...]  # dense FLOP/s by dtype

    def table(self) -> dict[str, Any]:
        """The device as its TOML table (what `parse` reads back): a site's records carry it."""
        return {"name": self.name, "source": self.source, "memory_gb": self.memory / 1e9,
                "memory_bandwidth_gb_s": self.bandwidth / 1e9, "interconnect_gb_s": self.interconnect / 1e9,
                "peak_tflops": {d: v / 1e12 for d, v in self.peaks}}

    def peak(self, dtype: str) -> tuple[str, float] | None:
        """(the dtype it computes in, its dense FLOP/s) for weights of torch dtype `dtype`: that dtype's peak, else
        the next wider one the device has; None when it has none (Apple publishes no FLOP/s)."""
        peaks = dict(self.peaks)
        d: str | None = hw_dtype(dtype)
        while d is not None:
            if d in peaks:
                return d, peaks[d]
            d = _WIDER.get(d)
        return None


_HINT = "every device needs name, source, memory_gb, memory_bandwidth_gb_s, interconnect_gb_s and peak_tflops (see " \
        "archviz/cost/hardware.toml)"


def parse(key: str, table: Any, where: str) -> Hardware:
    """One device from its TOML table; a missing or mistyped field is an ArchvizError naming the file and the field
    (archviz.records.recordcheck)."""
    with refused_as(lambda m: ArchvizError(f"{where}: {m}", hint=_HINT)):
        return _parse(key, table)


def _parse(key: str, table: Any) -> Hardware:
    at = f"[{key}]"
    want_table(at, table, what="a table of hardware fields")
    for field in FIELDS:
        if field not in table:
            fail(f"{at}.{field}", "missing")
    name, source = (want_str(f"{at}.{f}", table[f], nonempty=True) for f in ("name", "source"))
    peaks = want_table(f"{at}.peak_tflops", table["peak_tflops"], PEAK_DTYPES,
                       what="a table of dtype = TFLOP/s, e.g. { bf16 = 989.5, fp8 = 1979 }")
    memory, bandwidth, interconnect = (want_number(f"{at}.{f}", table[f], minimum=0, maximum=MAXIMA[f])
                                       for f in ("memory_gb", "memory_bandwidth_gb_s", "interconnect_gb_s"))
    if not memory or not bandwidth:
        fail(at, "memory_gb and memory_bandwidth_gb_s must be more than 0")
    return Hardware(key=key, name=name, source=source, memory=memory * 1e9, bandwidth=bandwidth * 1e9,
                    interconnect=interconnect * 1e9,
                    peaks=tuple((d, want_number(f"{at}.peak_tflops.{d}", v, minimum=0,
                                                maximum=MAXIMA["peak_tflops"]) * 1e12) for d, v in peaks.items()))


def presets() -> dict[str, Hardware]:
    """The shipped presets by name."""
    text = resources.files("archviz.cost").joinpath("hardware.toml").read_text(encoding="utf-8")
    data = loads(text, where="archviz/cost/hardware.toml")
    return {k: parse(k, v, "archviz/cost/hardware.toml") for k, v in data.items()}


def _file(path: str) -> list[Hardware]:
    # a FIFO, a device: refused, unread
    data = load_file(path, what="hardware TOML", max_bytes=MAX_FILE_BYTES, where=f"{option('hardware')} {path}",
                     hint="see archviz/cost/hardware.toml for the fields")
    if "name" in data and not isinstance(data.get("name"), dict):  # the file is one device
        return [parse(Path(path).stem, data, path)]
    if not data:
        raise ArchvizError(f"{option('hardware')} {path}: holds no device", hint="one table per device: [mygpu] name "
                                                                                 "= ...")
    return [parse(k, v, path) for k, v in data.items()]


def resolve(text: str) -> list[Hardware]:
    """The hardware option: comma-separated preset names and TOML files, in the order given."""
    known = presets()
    out: list[Hardware] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if item.lower() in known:
            out.append(known[item.lower()])
        elif item.endswith(".toml") or Path(item).is_file():
            out.extend(_file(item))
        else:
            raise ArchvizError(f"{option('hardware')} {item!r} is neither a preset nor a TOML file",
                               hint=f"presets: {', '.join(known)}; or a file with the fields of "
                                    "archviz/cost/hardware.toml")
    if not out:
        raise ArchvizError(f"{option('hardware')} names no device", hint=f"e.g. {option('hardware')} h200,b200 "
                                                                         f"(presets: {', '.join(known)})")
    return out


__all__ = ["Hardware", "hw_dtype", "PEAK_DTYPES", "FIELDS", "parse", "presets", "resolve"]
