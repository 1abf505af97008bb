"""Token ids [T] or [B, T]: which the forward of a model file (or factory) takes, for the meta pass's default input.

Read from the code where its first use of its first argument makes it clear (`b, t = idx.size()`: [B, T], as
nanoGPT; `(num_toks,) = input_ids.shape`: [T], as mistral-inference's packed sequences; `bsz = tokens.size(0)`,
`seqlen = len(tokens)`; `assert x.dim() == 1`), following the ids into a method of the same object they are passed
to (`self.forward_partial(input_ids, seqlens)`). Where the code does not say (gpt-oss hands them to its embedding
first), the pass tries [B, T] and, where the model's own code fails on it, [T]. The note says which decided.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import textwrap
from typing import Any, Callable

from ..errors import ArchvizError, ShapeError
from ..input_specs import check_input_specs
from ..sources import Built
from .inputs import consumer_default, forward_arguments

#: Uses of the ids that say nothing of their rank: looked past.
_SILENT = frozenset({"device", "dtype", "is_cuda", "is_meta", "requires_grad", "to", "long", "int", "cpu", "cuda",
                     "contiguous"})
_BATCH_NAMES = frozenset({"b", "bs", "bsz", "bz", "nb", "batch", "batch_size", "batchsize", "n_batch", "num_batch"})
_POSITION_NAMES = frozenset({"t", "l", "n", "s", "len", "length", "ntok", "ntoks", "num_toks", "n_tokens",
                             "num_tokens", "seqlen", "seq_len", "seqlen_sum", "seq_length", "n_ctx"})
_DEPTH = 3  # methods followed


def may_take_1d(built: Built, inputs: Any, input_specs: list[str] | None) -> bool:
    """The pass feeds default token ids [B, T] that could be [T] instead: a model file's or factory's forward whose
    first argument the default fills with token ids (not an image), inputs not giving that argument."""
    if built.kind == "hf" or inputs is not None or built.tokens_1d or consumer_default(built) is not None or \
            forward_arguments(built.model) is None:
        return False
    first = next(iter(inspect.signature(built.model.forward).parameters), None)
    return first not in {name for name, _, _ in check_input_specs(input_specs)}


def decide_rank(built: Built, run: Callable[[], Any]) -> tuple[Any, str | None]:
    """(`run()` on the token ids the code asks for, a note saying which and what decided): the code's first use of
    them (`first_use_rank`) where it is clear, else `retry_1d`."""
    read = first_use_rank(built.model)
    if read is None:
        return retry_1d(built, run)
    rank, why = read
    built.tokens_1d = rank == 1
    try:
        result = run()
    except BaseException:
        built.tokens_1d = False
        raise
    return result, f"token ids {'[T]' if rank == 1 else '[B, T]'}, as the code's first use of them says: {why}"


def retry_1d(built: Built, run: Callable[[], Any]) -> tuple[Any, str | None]:
    """(`run()`, None); if the pass fails on token ids [B, T], (`run()` once more on [T], a note saying so):
    gpt-oss's forward takes 1-D tokens. The first error stands when [T] fails too."""
    try:
        return run(), None
    except ShapeError as first:
        if first.__cause__ is None or isinstance(first.__cause__, ArchvizError):
            raise  # the model's own code did not fail (a kernel without a rule, a package to install)
        built.tokens_1d = True
        try:
            result = run()
        except ShapeError:
            built.tokens_1d = False
            raise first from None
        why = first.message[:160]
    return result, (f"token ids [T], not [B, T]: the code's first use of them does not say, and "
                    f"{type(built.model).__name__}.forward failed on [B, T] ({why}) and ran on 1-D tokens")


def first_use_rank(model: Any) -> tuple[int, str] | None:
    """(1 for [T] or 2 for [B, T], why: the method, statement, file and line) where the forward's first use of its
    first argument makes the rank clear; None where it does not (or the source cannot be read)."""
    forward = getattr(type(model), "forward", None)
    return _rank_in(type(model), forward, 0, _DEPTH) if forward is not None else None


def _parsed(fn: Any) -> tuple[ast.FunctionDef, str, int] | None:
    """(the function's AST, its file, its first line) or None."""
    fn = inspect.unwrap(fn)
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or ""
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return node, file, start


def _rank_in(cls: type, fn: Any, position: int | str, depth: int) -> tuple[int, str] | None:
    """The rank `fn`'s first use of its argument at `position` (after self; or of that name) says."""
    parsed = _parsed(fn)
    if parsed is None:
        return None
    node, file, start = parsed
    params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)][1:]  # after self
    name = position if isinstance(position, str) else params[position] if position < len(params) else None
    if name is None:
        return None
    parents = {id(child): parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}
    uses = sorted((n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and
                   isinstance(n.ctx, ast.Load)), key=lambda n: (n.lineno, n.col_offset))
    where = f"{getattr(fn, '__qualname__', node.name)} ({os.path.basename(file)}:{{line}})"
    for use in uses:
        up = parents.get(id(use))
        if isinstance(up, ast.Attribute) and up.attr in _SILENT:
            continue
        rank = _said(use, name, parents)
        if rank is not None:
            line = start + _statement(use, parents).lineno - 1
            text = linecache.getline(file, line).strip()[:100] or ast.unparse(_statement(use, parents))[:100]
            return rank, f"`{text}` in " + where.format(line=line)
        callee = _passed_to(use, parents, cls)
        if callee is not None and depth > 0:
            return _rank_in(cls, *callee, depth - 1)
        return None
    return None


def _said(use: ast.Name, name: str, parents: dict[int, ast.AST]) -> int | None:
    up = parents.get(id(use))
    if isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "len" and up.args[:1] == [use]:
        return _by_target(up, parents)  # n = len(x): the first dim, read by the name it is given
    if not isinstance(up, ast.Attribute):
        return None
    if up.attr in ("ndim",) or (up.attr == "dim" and isinstance(parents.get(id(up)), ast.Call)):
        node = up if up.attr == "ndim" else parents[id(up)]
        return _asserted(node, parents)
    whole = up if up.attr == "shape" else parents.get(id(up)) if up.attr == "size" else None
    if whole is None or (up.attr == "size" and not isinstance(whole, ast.Call)):
        return None
    if isinstance(whole, ast.Call) and whole.args:  # x.size(i)
        return _by_index(whole.args[0], whole, parents)
    above = parents.get(id(whole))
    if isinstance(above, ast.Subscript) and above.value is whole:  # x.shape[i]
        return _by_index(above.slice, above, parents)
    if isinstance(above, ast.Assign) and above.value is whole and len(above.targets) == 1 and \
            isinstance(above.targets[0], (ast.Tuple, ast.List)):  # b, t = x.size()
        elts = above.targets[0].elts
        return len(elts) if len(elts) in (1, 2) and not any(isinstance(e, ast.Starred) for e in elts) else None
    if isinstance(above, ast.Call) and isinstance(above.func, ast.Name) and above.func.id == "len":
        return _asserted(above, parents)  # assert len(x.shape) == 2
    return None


def _by_index(index: ast.AST, node: ast.AST, parents: dict[int, ast.AST]) -> int | None:
    """x.size(i) / x.shape[i]: a second dim read (i ≥ 1, i ≤ -2) says [B, T]; the first, by the name it is given."""
    value = index.value if isinstance(index, ast.Constant) else -index.operand.value \
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and \
        isinstance(index.operand, ast.Constant) else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value >= 1 or value <= -2:
        return 2
    return _by_target(node, parents) if value == 0 else None


def _by_target(node: ast.AST, parents: dict[int, ast.AST]) -> int | None:
    """The first dim assigned to a name: a batch's name (bsz) says [B, T], a length's (seqlen, num_toks) [T]."""
    above = parents.get(id(node))
    if not (isinstance(above, ast.Assign) and above.value is node and len(above.targets) == 1 and
            isinstance(above.targets[0], ast.Name)):
        return None
    target = above.targets[0].id.lstrip("_").lower()
    return 2 if target in _BATCH_NAMES else 1 if target in _POSITION_NAMES else None


def _asserted(node: ast.AST, parents: dict[int, ast.AST]) -> int | None:
    """`assert x.dim() == 2` (or x.ndim, len(x.shape)): the rank asserted. A test in an `if` says nothing: the code
    may take both."""
    cmp = parents.get(id(node))
    if not (isinstance(cmp, ast.Compare) and cmp.left is node and len(cmp.ops) == 1 and
            isinstance(cmp.ops[0], ast.Eq) and isinstance(cmp.comparators[0], ast.Constant) and
            isinstance(parents.get(id(cmp)), ast.Assert)):
        return None
    value = cmp.comparators[0].value
    return value if value in (1, 2) and not isinstance(value, bool) else None


def _statement(node: ast.AST, parents: dict[int, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[id(node)]
    return node


def _passed_to(use: ast.Name, parents: dict[int, ast.AST], cls: type) -> tuple[Any, int | str] | None:
    """(the method, the argument's position or name) where the ids are passed as they are to a method of the same
    object (`self.forward_partial(input_ids, ...)`), not to a submodule."""
    up = parents.get(id(use))
    keyword = None
    if isinstance(up, ast.keyword):
        keyword, up = up.arg, parents.get(id(up))
    if not (isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and isinstance(up.func.value, ast.Name)
            and up.func.value.id == "self"):
        return None
    method = inspect.getattr_static(cls, up.func.attr, None)
    if not inspect.isfunction(method) or up.func.attr == "forward":
        return None
    if keyword is not None:
        return method, keyword
    index = next((i for i, a in enumerate(up.args) if a is use), None)
    return (method, index) if index is not None else None


__all__ = ["decide_rank", "first_use_rank", "may_take_1d", "retry_1d"]
