"""Exercises as records, and the checker bodies that families of exercises share.

A record (:class:`Which`) says what is right (computed by the course package, never typed in), the typical wrong
answers with why each is wrong (the verdict text; the self-check offers the same answers as its wrong options)
and the kind of answer; :func:`predict_which` is its checker. The other families: :func:`check_repair` for
find-the-bug-and-repair, :func:`check_mask` for building a mask, :func:`dict_answer` and :func:`as_names` for
answers that name things, ``answers.name_the_match`` for "equal to a known wrong answer", :func:`attend` for the
attention a typical mistake computes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .answers import MAX_DIMS, as_int, expect_close, expect_shape, expect_tensor, name_the_match, part, plain, same
from .gradients import expect_gradients
from .verdicts import Mistake, NotDone, checker


RECORDS: dict = {}  # exercise id -> record (a Which, read by the checker, the self-check and the tests)


@dataclass(frozen=True)
class Bug:
    """One case of a find-the-bug-and-repair exercise: the buggy function's result ``wrong`` (what the student's
    repair gets, its own leaf), the right result ``want``, and the typical wrong repairs ``[(result, why)]``."""
    wrong: object
    want: object
    where: str
    wrongs: list
    shape_hint: str
    hint: str
    args: tuple = ()  # what the repair gets after ``wrong`` (n_heads)


def check_repair(run, bugs, atol: float = 1e-6) -> None:
    """The repair part of a find-the-bug exercise: ``run(wrong, *args)`` calls the student's repair on each :class:`Bug`;
    a typical wrong repair is named, then the shape, the values and the gradient back to ``wrong`` are checked."""
    for bug in bugs:
        what = f'{bug.where} answer["repair"] 的返回值'
        out = expect_tensor(run(bug.wrong, *bug.args), what)
        name_the_match(out, bug.wrongs, prefix=bug.where, same=lambda a, b: same(a, b, atol=atol, rtol=1e-5))
        expect_shape(out, bug.want.shape, what, hint=bug.shape_hint)
        expect_close(out, bug.want, what, hint=bug.hint)
        expect_gradients(out, {"wrong": bug.wrong}, 'answer["repair"] 的返回值')


def dict_answer(answer, keys, example: str) -> dict:
    """The answer must be a dict with ``keys`` (``...`` in any of them: not done yet)."""
    if not isinstance(answer, dict) or not set(keys) <= set(answer):
        got = "，缺少键 " + str([k for k in keys if k not in answer]) if isinstance(answer, dict) else \
            f"，却收到了 {type(answer).__name__}"
        raise Mistake(f"答案应该是字典 {example}{got}")
    if any(answer[k] is Ellipsis for k in keys):
        raise NotDone()
    return answer


def as_names(value, allowed, what: str) -> frozenset:
    """A list/tuple/set of names, each one of ``allowed`` (a single name counts as a list of one)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise Mistake(f"{what} 应该是名字的列表，例如 [{', '.join(repr(a) for a in list(allowed)[:2])}]，"
                      f"可选的有 {list(allowed)}")
    unknown = [v for v in value if v not in allowed]
    if unknown:
        raise Mistake(f"{what} 里有不认识的名字 {unknown}；可选的有 {list(allowed)}")
    return frozenset(value)


def check_mask(out, want, where: str, named=(), hint: str = "", bad_hint: str = "", shapes=()) -> None:
    """The family of mask-building exercises: ``out`` (what the student's function returned) must have ``want``'s
    shape (a shape in ``shapes`` is named, see ``expect_shape``), positions and dtype bool. A wrong mask equal to one
    of ``named`` ``[(mask, why)]`` is named; an inverted one is called inverted; otherwise the first wrong position
    is shown."""
    if isinstance(out, torch.Tensor) and out.is_floating_point() and (out < 0).any() and \
            ((out == 0) | (out <= -1e4)).all():  # 0 where allowed, -inf / -1e9 / finfo.min where not
        raise Mistake(f"{where} 是浮点的加法掩码（0 和一个极大的负数）：PyTorch 也收这种写法，但这道题要 dtype 为 torch.bool 的掩码；"
                      "用比较运算（!=、<=）和 & 直接得到 bool")
    out = expect_tensor(out, where)
    expect_shape(out, want.shape, where, hint=hint, named=shapes)
    got = out if out.dtype == torch.bool else out.ne(0)
    if torch.equal(got, want):
        if out.dtype != torch.bool:
            raise Mistake(f"{where} 的位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool：`masked_fill(~mask, ...)` 需要 bool，"
                          "对整数张量 `~` 是按位取反（~1 == -2），对浮点张量 `~` 直接报错；比较运算 `!=`、`<=` 和 `&` 本来就给出 bool")
        return
    name_the_match(got, named, prefix=f"{where}：")
    if want.any() and not want.all() and torch.equal(got, ~want):
        raise Mistake(f"{where} 的极性反了：True 应该表示“可以看”，你标出的是被挡住的位置")
    bad = tuple((got != want).nonzero()[0].tolist())
    raise Mistake(f"{where} 在下标 {bad} 处不对，应该是 {bool(want[bad])}" + (f"；{bad_hint}" if bad_hint else ""))


def expect_same_gradients(got, want, got_wrt: dict, want_wrt: list, what: str, hint: str, **tol) -> None:
    """``got`` is differentiable and, for one random upstream gradient, its gradients w.r.t. ``got_wrt`` (name ->
    tensor) equal those of the reference ``want`` w.r.t. ``want_wrt`` (the same tensors' copies, in that order)."""
    expect_gradients(got, got_wrt, what)
    g = torch.randn(want.shape, dtype=want.dtype)
    got_grads = torch.autograd.grad((got * g.to(got.dtype)).sum(), list(got_wrt.values()), allow_unused=True)
    want_grads = torch.autograd.grad((want * g).sum(), want_wrt)
    for name, a, b in zip(got_wrt, got_grads, want_grads):
        expect_close(a, b, f"{what}对 {name} 的梯度", hint=hint, **tol)


def attend(q, k, v, mask=None, *, scale=None, dim=-1, invert=False, use_mask=True, fill=True, zero=False,
           fill_value=-1e9):
    """``(output, weights)`` of attention as the lecture writes it (scores / √d_k, ``masked_fill(mask == 0, -1e9)``,
    softmax over the keys), with the typical mistakes as switches, for naming them: what the scores are divided by
    (``scale``), the softmax's axis (``dim``), the mask inverted or not used, ``fill=False`` (the masked weights only
    set to 0 after the softmax), a ``fill_value`` that is not small enough (0 as ``scores * mask`` gives, -10);
    ``zero``: the masked weights set to 0 after it as well, as the solutions do."""
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale is None else scale)
    keep = None if mask is None or not use_mask else (mask == 0 if invert else mask != 0)  # bool, any mask dtype
    if keep is not None and fill:
        scores = scores.masked_fill(~keep, fill_value)
    weights = torch.softmax(scores, dim=dim)
    if keep is not None and (zero or not fill):
        weights = weights.masked_fill(~keep, 0.0)
    return weights @ v, weights


# ---------------------------------------------------------------- which positions change (a reasoning family)
def as_index_list(value, what: str) -> list[int]:
    """A list of position numbers: list/tuple/set/range, a 1-d integer tensor or array; each item via as_int.

    What ``.nonzero()`` gives without ``.flatten()`` (a (k, 1) tensor or array) and the one-tensor tuple of
    ``nonzero(as_tuple=True)`` are read as the list of k positions."""
    if isinstance(value, tuple) and len(value) == 1 and isinstance(value[0], (torch.Tensor, np.ndarray)):
        value = value[0]
    if isinstance(value, (torch.Tensor, np.ndarray)) and not getattr(value, "is_nested", False) \
            and value.ndim == 2 and value.shape[1] == 1:
        value = value.reshape(-1)
    if isinstance(value, torch.Tensor):
        value = plain(value).detach()
    n = value.numel() if isinstance(value, torch.Tensor) else len(value) if hasattr(value, "__len__") else 0
    if n > MAX_DIMS:  # checked before looking at every item: a million numbers are no list of positions
        raise Mistake(f"{what} 有 {n} 项，太多了：这里的位置只有几个，例如 [0, 3]")
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            raise Mistake(f"{what} 是布尔张量（每个位置变没变）；要的是发生变化的位置编号列表，"
                          "可以用 .nonzero().flatten().tolist()")
        if value.dim() > 1:
            raise Mistake(f"{what} 应该是位置编号的列表，却是形状 {tuple(value.shape)} 的张量")
        value = value.reshape(-1).tolist()
    elif isinstance(value, np.ndarray) and value.ndim <= 1:
        value = value.reshape(-1).tolist()
    if isinstance(value, (range, tuple, set, frozenset)):
        value = list(value)
    if not isinstance(value, list):
        raise Mistake(f"{what} 应该是位置编号的列表，例如 [0, 3]，却是 {type(value).__name__}")
    return [as_int(p, f"{what} 里的位置编号") for p in value]


@dataclass(frozen=True)
class Ask:
    """One question of a :class:`Which` exercise: the self-check's ``question``, why the right answer is right,
    the verdict's ``hint`` when no typical mistake names the answer, the typical wrong answers ``((positions,
    why), ...)`` and how many positions there are (``size``, the exercise's when None)."""
    question: str
    right_why: str
    hint: str
    wrongs: tuple
    size: int | None = None


@dataclass(frozen=True)
class Which:
    """An exercise that asks which positions (output rows, heads, tokens, weight rows ...) something changes.

    The answer is ``{key: [positions]}``, one list per :class:`Ask` (key ``""``: the list itself). ``right()``
    computes ``{key: list}`` by running the course package; the checker names the typical wrong answers with their
    why, the self-check asks ``setting + question`` with the same options. ``ordered``: the order matters."""
    id: str
    chapter: str
    title: str
    right: Callable  # () -> {key: [positions]}
    asks: dict  # key -> Ask
    size: int = 0
    setting: str = ""  # what the self-check's questions share
    range_why: str = ""  # said when a position is out of range
    ordered: bool = False
    kind: str = "positions"

    @property
    def keys(self) -> tuple:
        return tuple(self.asks)


def _positions(answer, ex: Which) -> dict:
    if ex.ordered and isinstance(answer, (set, frozenset)):
        raise Mistake("你的答案是一个集合，集合没有顺序；这里每一项的位置有意义，写成列表 [...]")
    if ex.keys == ("",):
        return {"": as_index_list(part(answer, "你的答案"), "你的答案")}
    if not isinstance(answer, dict):
        keys = ", ".join(f'"{k}": [...]' for k in ex.keys)
        raise Mistake(f"答案应该是字典 {{{keys}}}，却收到了 {type(answer).__name__}")
    missing = [k for k in ex.keys if k not in answer]
    if missing:
        raise Mistake(f"字典里缺少键 {missing}；需要 {'、'.join(repr(k) for k in ex.keys)} 这 {len(ex.keys)} 个键")
    got = {k: as_index_list(part(answer[k], f'answer["{k}"]'), f'answer["{k}"]') for k in ex.keys}
    return got if ex.ordered else {k: sorted(set(v)) for k, v in got.items()}


def predict_which(ex: Which):
    """The checker of a :class:`Which` exercise: each key's list is compared with the truth, a typical wrong
    answer is named with its why, a 1-based answer and a position out of range are said as such."""
    RECORDS[ex.id] = ex

    @checker(ex.chapter, ex.id, ex.title)
    def check(answer):
        got, truth = _positions(answer, ex), ex.right()
        for key, ask in ex.asks.items():
            g, t, n = got[key], truth[key], ask.size or ex.size
            name = f'answer["{key}"] = {g}' if key else f"你的答案 {g}"
            if g == t:
                continue
            for wrong, why in ask.wrongs:
                if g == list(wrong):
                    raise Mistake(f"{name}：{why}")
            if g == [p + 1 for p in t]:
                raise Mistake(f"{name}：编号从 0 开始数（0 到 {n - 1}），你的答案像是从 1 开始数的")
            if ex.ordered and len(g) != n:
                raise Mistake(f"{name} 有 {len(g)} 个数：要写 {n} 个，每一行一个")
            if any(p < 0 or p >= n for p in g):
                raise Mistake(f"{name} 超出了范围：只有 {n} 个（0 到 {n - 1}）{ex.range_why}")
            raise Mistake(f"{name} 不对。提示：{ask.hint}")
    return check
