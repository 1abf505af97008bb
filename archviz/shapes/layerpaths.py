"""Layer numbers as a forward uses them, so that the block memo answers a layer from another only when both take the
same path. While a memoised block's forward runs, each int that numbers it (`self.layer_id` below it, a `layer_idx`
argument) is a `Tracked` int: it behaves as the int it holds and notes what the code decides from it -- a comparison
and its answer, a truth test, and any use of a value made from it that the code could read (hashing it, formatting
it, a float from it). Arithmetic on it stays tracked (`self.layer_id % 2 == 0` is one decision on `layer_id`).
A block then answers for another of its kind when every decision the first one's forward noted replays the same on
the other's numbers (`holds`): `if self.layer_id == 0:` runs layer 0 and layer 1, and answers layers 2.. from layer
1. A use that no Python method sees (C code reading the int: indexing a list, a tensor op) is not noted here; the
memo takes the number's value as decided where the forward also read a list whose items differ
(archviz/shapes/memo.py, `_indexed`)."""

from __future__ import annotations

import operator
from typing import Any, Callable

# A decision: (slot, ops, test, answer). slot: where the number lives (a module path and attribute, or an argument
# of the call); ops: what was made of it before the test, ((op name, operand), ...); test: ("cmp", op name, operand),
# ("bool",) or ("value",); answer: what the test gave.
Decision = tuple[Any, tuple, tuple, Any]

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt, "__le__": operator.le,
    "__gt__": operator.gt, "__ge__": operator.ge}


def _reflected(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: fn(b, a)


_ARITH: dict[str, Callable[[Any, Any], Any]] = {}
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("truediv", operator.truediv), ("mod", operator.mod),
                   ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift)):
    _ARITH[f"__{_name}__"] = _fn
    _ARITH[f"__r{_name}__"] = _reflected(_fn)
_UNARY: dict[str, Callable[[Any], Any]] = {"__neg__": operator.neg, "__pos__": operator.pos, "__abs__": abs,
                                           "__invert__": operator.invert}
_VALUE_USES = ("__hash__", "__index__", "__int__", "__float__", "__round__", "__trunc__", "__floor__",
               "__ceil__", "__str__", "__repr__", "__format__", "__divmod__", "__rdivmod__")
_REPLAYABLE = (int, float, str, type(None))


class Log:
    """The decisions noted while tracked forwards run (`running` > 0)."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.running = 0


class Tracked(int):
    """An int that notes the decisions made from it into a `Log` (see the module's docstring). `_paths`: for each
    slot it stands for, what was made of that slot's number to get it (one number can be a layer's attribute and,
    passed on, an argument of the block below)."""

    _v: int
    _paths: tuple[tuple[Any, tuple], ...]
    _log: Log

    def __new__(cls, value: int, paths: tuple[tuple[Any, tuple], ...], log: Log) -> "Tracked":
        obj = int.__new__(cls, value)
        obj._v, obj._paths, obj._log = int.__int__(value), paths, log
        return obj

    def _note(self, test: tuple, answer: Any, step: tuple = ()) -> None:
        log = self._log
        if log.running:
            for slot, ops in self._paths:
                log.decisions.append((slot, ops + step, test, answer))

    def _then(self, step: tuple, value: int) -> "Tracked":
        return Tracked(value, tuple((slot, ops + step) for slot, ops in self._paths), self._log)

    def __bool__(self) -> bool:
        answer = self._v != 0
        self._note(("bool",), answer)
        return answer

    def __reduce__(self) -> Any:
        return (int, (self._v,))


def used(other: Any) -> Any:
    """A value as a plain one; a tracked number is a use of its value."""
    if isinstance(other, Tracked):
        other._note(("value",), other._v)
        return other._v
    return other


def _whole(self: Tracked, result: Any) -> Any:
    """A result that cannot be replayed (a tensor made from the number): the number's value itself is the decision."""
    self._note(("value",), self._v)
    return result


def _compare(name: str) -> Callable[[Tracked, Any], Any]:
    fn = _CMP[name]

    def compare(self: Tracked, other: Any) -> Any:
        other = used(other)
        answer = fn(self._v, other)
        if type(answer) is bool and isinstance(other, _REPLAYABLE):
            self._note(("cmp", name, other), answer)
            return answer
        return _whole(self, answer)

    return compare


def _arith(name: str) -> Callable[[Tracked, Any], Any]:
    fn = _ARITH[name]

    def arith(self: Tracked, other: Any) -> Any:
        other = used(other)
        result = fn(self._v, other)
        if not isinstance(other, _REPLAYABLE):
            return _whole(self, result)
        if type(result) is int:
            return self._then(((name, other),), result)
        self._note(("value",), result, ((name, other),))  # a float made from the number: its value decides
        return result

    return arith


def _unary(name: str) -> Callable[[Tracked], Any]:
    fn = _UNARY[name]
    return lambda self: self._then(((name, None),), fn(self._v))


def _value_use(name: str) -> Callable[..., Any]:
    fn = getattr(int, name)

    def use(self: Tracked, *args: Any) -> Any:
        self._note(("value",), self._v)
        return fn(self._v, *args)

    return use


for _name in _CMP:
    setattr(Tracked, _name, _compare(_name))
for _name in _ARITH:
    setattr(Tracked, _name, _arith(_name))
for _name in _UNARY:
    setattr(Tracked, _name, _unary(_name))
for _name in _VALUE_USES:
    setattr(Tracked, _name, _value_use(_name))


def track(value: Any, slot: Any, log: Log) -> Tracked:
    """`value` tracked for `slot` (a number already tracked for other slots: tracked for this one too)."""
    if isinstance(value, Tracked):
        return Tracked(value._v, value._paths + ((slot, ()),), log)
    return Tracked(value, ((slot, ()),), log)


def _apply(value: Any, ops: tuple) -> Any:
    for name, operand in ops:
        value = _UNARY[name](value) if name in _UNARY else _ARITH[name](value, operand)
    return value


def holds(decisions: tuple[Decision, ...], value_of: Callable[[Any], Any]) -> bool:
    """Whether every decision gives the same answer on the numbers `value_of(slot)` reads (None: not there)."""
    for slot, ops, test, answer in decisions:
        value = value_of(slot)
        if value is None:
            return False
        try:
            made = _apply(plain(value), ops)
            if test[0] == "cmp":
                got = _CMP[test[1]](made, test[2])
            elif test[0] == "bool":
                got = made != 0
            else:
                got = made
        except Exception:  # noqa: BLE001 - an op the other number cannot take (a division by 0): another path
            return False
        if type(got) is not type(answer) or got != answer:
            return False
    return True


def plain(v: Any) -> Any:
    """The int a (maybe tracked) number holds, read without noting a use."""
    return v._v if isinstance(v, Tracked) else v


def is_number(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


__all__ = ["Decision", "Log", "Tracked", "holds", "is_number", "plain", "track", "used"]
