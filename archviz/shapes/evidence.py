"""Evidence for the dims' names: a dim of the meta pass is named B, T, B·T or a dim the user named only where it
follows that input across a second pass at other sizes (a 7x7 map at B = 7 stays 7, as it stays 7 at B = 5).

The second pass is the evidence's whole cost, so it does only what the evidence needs: it runs only when some dim
of the first pass has a symbol's value (nothing could be named otherwise), records the calls of only the modules
such a dim appears in (the others have nothing to confirm), and reuses what the first pass set up -- the model's
mode, its module paths, the memo's block kinds -- with no call sites, and with the blocks the memo answers noted as
copies of the one that ran rather than copied."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import ShapeError
from ..records import ModelRecord
from ..sources import Built, stubs
from .forward import ForwardRun, run_forward
from .inputs import default_inputs, merge_inputs, parse_inputs
from .memo import BlockMemo
from .symbols import choose_dims, cuts, derived, name_dims, strided_cuts
from .tracer import Tracer


@dataclasses.dataclass
class Second:
    """The second pass: its sizes, which symbols took another value, its calls and routed sizes."""
    B: int
    T: int
    vary: set[str]
    calls: dict[str, list]
    routed: set[int]
    user: dict[str, int] = dataclasses.field(default_factory=dict)  # the user's named dims, resized
    copied: dict[str, str] = dataclasses.field(default_factory=dict)  # memoised block -> the block that ran
    fixed: set[str] = dataclasses.field(default_factory=set)  # the user's dims the model took at no other size
    cuts: tuple[int, ...] = ()  # the config's ratios and windows (T is a multiple of them): derived dims' divisors
    strided: tuple[int, ...] = ()  # the model's own strides, their running products (symbols.strided_cuts)
    flows: dict[str, tuple] = dataclasses.field(default_factory=dict)  # the raw flows (archviz.shapes.flow)
    _heads: dict[str, str | None] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def sizes_text(self) -> str:
        text = ", ".join([f"{s} = {getattr(self, s)}" for s in ("B", "T") if s in self.vary] +
                         [f"{s} = {v}" for s, v in self.user.items() if s not in self.fixed])
        if self.fixed:
            text += (f" ({', '.join(sorted(self.fixed))} named nowhere: the model failed at another size of "
                     f"{'it' if len(self.fixed) == 1 else 'them'})")
        return text

    def calls_of(self, path: str) -> list:
        """The calls of `path` in this pass: those of the block that ran where the memo answered its block."""
        return self._of(self.calls, path) or []

    def flow_of(self, path: str) -> tuple | None:
        """The raw flow of `path` in this pass, as `calls_of` finds calls, but that of the block that ran first where
        the memo answered `path` (or a block above it): the answer's own flow is the output it made, one step."""
        for _ in range(64):  # a copy of a copy (layer 4 answered as layer 3, itself answered as layer 2)
            head = self._copied_head(path) if self.copied else None
            if head is None:
                break
            path = self.copied[head] + path[len(head):]
        return self._of(self.flows, path)

    def _of(self, table: dict, path: str) -> Any:
        copied = self.copied
        for _ in range(64):  # a copy inside a copy (an expert of a memoised layer) resolves again
            got = table.get(path)
            if got is not None or not copied:
                return got
            head = self._copied_head(path)
            if head is None:
                return None
            path = copied[head] + path[len(head):]
        return None

    def _copied_head(self, path: str) -> str | None:
        """The longest head of `path` (itself first) that the memo answered, or None; each head looked up once for
        all the paths below it."""
        memo, copied = self._heads, self.copied
        seen = []
        head: str | None = path
        while True:
            if head in memo:
                head = memo[head]
                break
            if head in copied:
                break
            seen.append(head)
            cut = head.rfind(".")
            if cut < 0:
                head = None
                break
            head = head[:cut]
        for h in seen:
            memo[h] = head
        return head


def symbol_values(B: int, T: int, used: set[str], user: dict[str, int]) -> set[int]:
    """The sizes a dim would be named for: those of the used symbols (B, T, B·T) and of the dims the user named."""
    values = {v for s, v in (("B", B), ("T", T)) if s in used} | set(user.values())
    if {"B", "T"} <= used:
        values.add(B * T)
    return values


def symbol_multiples(B: int, T: int, used: set[str]) -> tuple[int, ...]:
    """The sizes whose multiples a traced count may be (T, B·T of the used symbols): an MoE's routed rows are
    top-k·B·T (16128 = 6·B·T), which no symbol equals but the second pass names by its formula."""
    return tuple(v for s, v in (("T", T), ("B·T", B * T)) if set(s.split("·")) <= used and v > 1)


def concerned(calls: dict[str, list], values: set[int], multiples: tuple[int, ...] = ()) -> set[str]:
    """The paths whose recorded calls hold a dim of one of `values`, or a multiple of one of `multiples`: the only
    ones a name could be given to."""
    seen: dict[int, bool] = {}  # the memo copies one call entry to every block it answers: judge each entry once
    out: set[str] = set()

    def follows(d: int) -> bool:
        return d in values or any(d > m and d % m == 0 for m in multiples)

    for path, entries in calls.items():
        for entry in entries:
            hit = seen.get(id(entry))
            if hit is None:
                hit = seen[id(entry)] = any(follows(int(d)) for side in entry for shape, _ in side for d in shape)
            if hit:
                out.add(path)
                break
    return out


@dataclass(frozen=True)
class PassGiven:
    """What the first pass ran at: B and T, the symbols its inputs used, the dims the user named (name -> size) and
    the input specs."""
    B: int
    T: int
    used: set[str]
    user: dict[str, int]
    input_specs: list[str] | None
    fixed_t: bool = False  # the model takes one T only (a fixed context): the second pass varies B alone


def second_pass(built: Built, record: ModelRecord, first: Tracer, first_memo: BlockMemo | None, given: PassGiven,
                registry: stubs.StubRegistry, memo: bool, only: set[str]) -> Second | None:
    """The same forward with B and T (and the user's named dims) at other values, recording the calls of `only`;
    run inside the first pass's `pass_mode`. None when no used symbol can take another value (max_batch_size 1)
    or the model fails at those sizes (then names are by value, as before)."""
    B, T, used, user, input_specs = given.B, given.T, given.used, given.user, given.input_specs
    # +8 (+16, ...) keeps a multiple of 8 one, and tells apart dims named alike in size (H = W = 64). A model that
    # takes no other size of a dim the user named (channels C = 3, fixed by the first convolution) fails there: then
    # each of the user's dims is tried alone, and those the model takes no other size of are named nowhere.
    def run(resized: set[str], record_only: set[str]) -> Second | None:
        user2 = {name: size + 8 * (i + 1) if name in resized else size for i, (name, size) in enumerate(user.items())}
        vary = {s for s, a, b in (("B", B, B2), ("T", T, T2)) if a != b and s in used} | resized
        if not vary:
            return None
        tracer = Tracer(built.model, first.display, like=first, sites=False, only=record_only, flow=bool(record_only))
        try:
            base = default_inputs(built, B2, T2)
        except ShapeError:
            base = ((), {})
        try:
            args, kwargs = merge_inputs(built.model, base, parse_inputs(input_specs, B2, T2, user2)[1]) \
                if input_specs else base
            _, error = run_forward(built, record, tracer, (args, kwargs), registry,
                                   ForwardRun(memo=memo, notes=[], like=first_memo))
        except ShapeError:
            return None
        if error is not None:
            return None
        return Second(B2, T2, vary, tracer.calls, set(tracer.policy.policy_sizes) - {B2, T2, B2 * T2}, user2,
                      tracer.copied or {}, fixed=set(user) - resized, cuts=cuts(record), flows=tracer.flows,
                      strided=strided_cuts(record))

    B2, T2, _ = choose_dims(record, None, T if given.fixed_t else None, differ=(B, T))
    second = run(set(user), only)
    if second is not None or not user:
        return second
    takes = {name for name in user if run({name}, set()) is not None}  # trial passes: they record nothing
    return run(takes, only) if takes != set(user) else None


def named(shape: tuple, other: tuple | None, B: int, T: int, routed: set[int], used: set[str],
          second: Second | None, user: dict[int, str]) -> tuple:
    """`shape` named by value (B, T, B·T, R), a name kept only where the second pass's `other` shape has the same
    name at its own sizes: a 7x7 map at B = 7 stays 7, as it stays 7 at B = 5. Symbols the second pass could not
    vary, and shapes it has no counterpart for, keep their names by value. A dim that is no symbol but changed with
    B and T is named by the expression that gives it at both sizes (`symbols.derived`: T/4, B·32, T+128)."""
    first = name_dims(shape, B, T, routed, used, user)
    if second is None or other is None or len(other) != len(shape):
        return first
    again = name_dims(other, second.B, second.T, second.routed, used, {v: k for k, v in second.user.items()})
    out = []
    derive = second.vary <= {"B", "T"} and not second.user
    for d, a, b, o in zip(shape, first, again, other):
        if derive and not isinstance(a, str) and int(o) != int(d):
            out.append(derived(int(d), int(o), (B, T), (second.B, second.T), second.cuts, second.strided))
            continue
        if derive and a in ("B", "T", "B·T") and a != b and int(o) != int(d):
            # a derived dim equal to a symbol at the first sizes only (ceil(T/2) = 7 = B at B = 7, T = 13)
            text = derived(int(d), int(o), (B, T), (second.B, second.T), second.cuts, second.strided)
            out.append(int(d) if " at " in text else text)
            continue
        if isinstance(b, str) and b in second.user and user.get(int(d)) is not None and \
                second.user[b] - int(d) == 8 * (list(second.user).index(b) + 1):
            out.append(b)  # a named dim whose size another shares in the first pass: the second tells them apart
            continue
        joint = _joint(int(d), int(o), T, second, user) if not isinstance(a, str) and second.user else None
        if joint is not None:  # image tokens and text tokens concatenated: T+T_txt
            out.append(joint)
            continue
        if not isinstance(a, str) or a in second.fixed:
            out.append(int(d) if isinstance(a, str) else a)
            continue
        needs = {"B·T": {"B", "T"}, "B": {"B"}, "T": {"T"}}.get(a, {a} if a in second.user else set())
        if a == b or not needs <= second.vary:
            out.append(a)
        else:
            out.append(int(d))
    return tuple(out)


def _joint(d: int, o: int, T: int, second: Second, user: dict[int, str]) -> str | None:
    """`T+U` for a dim that is T plus a dim U the user (or a further sequence) named at both passes' sizes: two
    sequences concatenated (joint attention over image and text tokens); None otherwise."""
    for size, name in user.items():
        if name in second.user and name not in second.fixed and d == T + size and o == second.T + second.user[name] \
                and "T" in second.vary:
            return f"T+{name}"
    return None


__all__ = ["Second", "concerned", "named", "second_pass", "symbol_multiples", "symbol_values"]
