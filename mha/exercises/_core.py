"""The machinery behind every ``check_*`` function: verdicts, stub detection, the summary.

A checker is written as a plain function that *raises* :class:`Mistake` with a
specific Chinese message when the student's answer is wrong and returns
normally when it is right. :func:`checker` wraps it so that the public
``check_*`` function

* prints exactly one verdict (passed / not done yet / what is wrong),
* returns ``True`` or ``False``,
* never raises, whatever the student hands in,
* records the result for :func:`summary`.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import sys
import traceback
from collections import OrderedDict

import numpy as np
import torch

__all__ = ["Mistake", "NotDone", "checker", "summary", "results", "call", "expect_tensor",
           "expect_shape", "expect_close", "is_stub", "part", "as_int", "as_number", "as_shape",
           "as_shape_dict", "expect_gradients", "watch_shortcuts", "MHA", "SDPA", "TORCH_MHA", "NO_SHORTCUTS"]

PASS = "✅ 通过"
FAIL = "❌ 未通过"
TODO = "⏳ 还没完成"

# chapter -> OrderedDict(exercise id -> (title, status or None))
_REGISTRY: "OrderedDict[str, OrderedDict[str, list]]" = OrderedDict()


class Mistake(Exception):
    """Raised inside a checker: the answer is wrong; the message says how and hints at why."""


class NotDone(Exception):
    """Raised inside a checker: the answer is still the stub."""


def is_stub(obj) -> bool:
    """True for the placeholders a stub cell leaves: ``None`` and ``...``."""
    return obj is None or obj is Ellipsis


# ---------------------------------------------------------------- shortcuts
# What a coding exercise may forbid. A checker passes ``forbid=`` to :func:`call`; while the
# student's code runs, a profile hook watches every Python call and every C builtin call, so a
# shortcut is caught however it was imported (``mha.split_heads``, ``from mha.steps import *``,
# a subclass of ``mha.MultiHeadAttention``, a wrapped ``nn.MultiheadAttention`` ...).
MHA = "mha"  # any function or class of the course package (its checkers excepted)
SDPA = "F.scaled_dot_product_attention"
TORCH_MHA = "nn.MultiheadAttention"
NO_SHORTCUTS = (MHA, SDPA, TORCH_MHA)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../mha
_CHECKER_DIR = os.path.dirname(os.path.abspath(__file__))  # .../mha/exercises


@functools.lru_cache(maxsize=None)
def _torch_mha_codes() -> dict:
    from torch import nn
    import torch.nn.functional as F

    return {nn.MultiheadAttention.__init__.__code__: "nn.MultiheadAttention",
            nn.MultiheadAttention.forward.__code__: "nn.MultiheadAttention",
            F.multi_head_attention_forward.__code__: "F.multi_head_attention_forward"}


def _shortcut_name(frame, event, arg, forbid) -> str | None:
    """The forbidden thing this profile event enters, or None."""
    if event == "c_call":
        if SDPA in forbid and arg is torch._C._nn.scaled_dot_product_attention:
            return SDPA
        return None
    if event != "call":
        return None
    code = frame.f_code
    if MHA in forbid and code.co_filename.startswith(_PACKAGE_DIR) and not code.co_filename.startswith(_CHECKER_DIR):
        module = frame.f_globals.get("__name__", "mha")
        return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
    if TORCH_MHA in forbid:
        return _torch_mha_codes().get(code)
    return None


def _via_checker(frame, stop) -> bool:
    """True when the call comes through a callable the checker itself handed to the student."""
    while frame is not None and frame is not stop:
        if frame.f_code.co_filename.startswith(_CHECKER_DIR):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def watch_shortcuts(forbid, base=None):
    """Record the first forbidden call made inside the block: yields a list that gets its name.

    ``base`` is the frame that runs the student's code (default: the caller's); a forbidden call
    reached through a frame of the checkers (a callable the checker handed over) is allowed.
    """
    hits: list[str] = []
    if not forbid:
        yield hits
        return
    forbid = frozenset(forbid)
    base = base if base is not None else sys._getframe(2)
    previous = sys.getprofile()

    def profile(frame, event, arg):
        if hits:
            return
        name = _shortcut_name(frame, event, arg, forbid)
        if name is not None and not _via_checker(frame.f_back if event == "call" else frame, base):
            hits.append(name)

    sys.setprofile(profile)
    try:
        yield hits
    finally:
        sys.setprofile(previous)


SHORTCUT_HINT = "请只用 torch 的基本运算（view、transpose、@、softmax、masked_fill……）写出来"


def shortcut_message(name: str, hint: str | None = None) -> str:
    return f"这道题要你自己实现，不能调用现成的 {name}（检查时发现你的代码调用了它）；{hint or SHORTCUT_HINT}"


# ---------------------------------------------------------------- inputs that must not change
def _tensors_in(obj, path: str):
    """Yield (path, tensor) for every tensor in an argument: tensors, lists/tuples/dicts of them, modules."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _tensors_in(item, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from _tensors_in(item, f"{path}[{key!r}]")
    elif isinstance(obj, torch.nn.Module):
        for name, tensor in obj.state_dict(keep_vars=True).items():
            yield f"{path}.{name}", tensor


def _parameter_names(fn, n: int) -> list:
    """Names of the first ``n`` positional parameters of ``fn`` (for messages), or ordinals."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [f"参数 {params[i]}" if i < len(params) else f"第 {i + 1} 个参数" for i in range(n)]


def _snapshot(fn, args, kwargs, may_modify):
    labels = _parameter_names(fn, len(args))
    named = [(labels[i], a) for i, a in enumerate(args) if i not in may_modify]
    named += [(f"参数 {k}", a) for k, a in kwargs.items() if k not in may_modify]
    return [(path, t, t.detach().clone()) for label, a in named for path, t in _tensors_in(a, label)]


def _changed(snapshot) -> str | None:
    for path, tensor, before in snapshot:
        now = tensor.detach()
        if now.shape != before.shape or now.dtype != before.dtype or not torch.equal(now, before):
            return path
    return None


def call(fn, *args, what: str = "你的函数", forbid=(), may_modify=(), shortcut_hint=None,
         may_return_none: bool = False, **kwargs):
    """Call the student's ``fn`` and turn everything that can go wrong into a verdict.

    * a stub (``None``, ``...``, ``raise NotImplementedError``, returning ``...``) -> :class:`NotDone`;
    * a crash -> :class:`Mistake` naming the exception and the line;
    * a call to something in ``forbid`` (:data:`MHA`, :data:`SDPA`, :data:`TORCH_MHA`) -> :class:`Mistake`;
    * a tensor argument (or a module's parameter) changed in place -> :class:`Mistake`, except the
      arguments whose position or keyword is in ``may_modify``;
    * returning ``None`` -> :class:`Mistake` ("did you forget ``return``?").

    ``shortcut_hint`` replaces the default advice after a forbidden call (e.g. for questions
    whose answer is a shape: "write the shape from the arguments"). ``may_return_none``: the
    exercise asks for a function that works in place (e.g. loading weights), so ``None`` is fine.
    """
    if is_stub(fn):
        raise NotDone()
    if not callable(fn):
        raise Mistake(f"{what} 应该是一个函数（callable），却收到了 {type(fn).__name__}")
    snapshot = _snapshot(fn, args, kwargs, set(may_modify))
    crash = None
    with watch_shortcuts(forbid, base=sys._getframe()) as shortcuts:
        try:
            out = fn(*args, **kwargs)
        except NotImplementedError:
            out = NotImplemented
        except Exception as e:  # the student's code crashed: say where, not a traceback
            crash = e
    if shortcuts:
        raise Mistake(shortcut_message(shortcuts[0], shortcut_hint))
    if crash is not None:
        frames = traceback.extract_tb(crash.__traceback__)
        if isinstance(crash, TypeError) and len(frames) == 1:  # the call itself failed: wrong arguments
            raise Mistake(f"{what} 的参数和题目给的不一样（TypeError: {crash}）：检查参数的个数和顺序，"
                          f"检查函数会这样调用它：{len(args)} 个位置参数") from None
        last = _students_frame(frames)
        where = f"（第 {last.lineno} 行：{last.line}）" if last is not None and last.line else ""
        raise Mistake(f"{what} 运行时抛出了 {type(crash).__name__}: {crash}{where}") from None
    if out is NotImplemented or out is Ellipsis:
        raise NotDone()
    changed = _changed(snapshot)
    if changed is not None:
        raise Mistake(f"{what} 修改了输入：原地改动了传进来的{changed}（例如 x[...] = ...、+=、masked_fill_ 或 x2 = x 之后再改 x2）；"
                      "不要改动输入，需要时先用 .clone() 复制一份")
    if out is None and not isinstance(fn, type) and not may_return_none:
        raise Mistake(f"{what} 返回了 None：是不是忘了写 return？")
    return out


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


def _students_frame(frames):
    """The deepest traceback frame in the student's own code (not in the checkers or in torch)."""
    for frame in reversed(frames):
        if not frame.filename.startswith((_CHECKER_DIR, _TORCH_DIR)):
            return frame
    return None


# ---------------------------------------------------------------- one rule for numbers
def _scalar(value):
    """A Python/numpy/0-d torch number as a Python int or float; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool:
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return value.item()
    if isinstance(value, np.generic) and not isinstance(value, np.bool_):
        return value.item()
    return value


def part(value, what: str):
    """One part of an answer: ``...`` is not done yet, ``None`` is named as such."""
    if value is Ellipsis:
        raise NotDone()
    if value is None:
        raise Mistake(f"{what} 是 None：这一项还没有填，或者计算它的函数少写了 return")
    return value


def as_int(value, what: str) -> int:
    """Accept Python, numpy and 0-d torch integers, and integral floats (``262656.0``), the same everywhere."""
    value = _scalar(part(value, what))
    if isinstance(value, bool) or isinstance(value, (np.bool_,)):
        raise Mistake(f"{what} 应该是整数，却是布尔值 {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return int(value)
        raise Mistake(f"{what} 应该是整数，却是 {value!r}")
    raise Mistake(f"{what} 应该是整数，却收到了 {type(value).__name__}：{value!r}")


def as_number(value, what: str) -> float:
    """A finite real number: Python, numpy or 0-d torch, int or float."""
    value = _scalar(part(value, what))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mistake(f"{what} 应该是一个数，却收到了 {type(value).__name__}：{value!r}")
    if not math.isfinite(value):
        raise Mistake(f"{what} 应该是一个有限的数，却是 {value!r}")
    return float(value)


def as_shape(value, what: str) -> tuple:
    """A shape: a tuple, list or ``torch.Size`` of integers (see :func:`as_int`)."""
    value = part(value, what)
    if isinstance(value, torch.Tensor):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，而不是张量；可以用 tuple(t.shape)")
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (tuple, list, torch.Size)):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，却收到了 {type(value).__name__}：{value!r}")
    return tuple(as_int(n, f"{what} 的第 {i + 1} 项") for i, n in enumerate(value))


def as_shape_dict(value, keys, what: str = "答案") -> dict:
    """A dict with exactly the needed ``keys`` (extra keys allowed), each a shape."""
    value = part(value, what)
    if not isinstance(value, dict):
        raise Mistake(f"{what} 应该是一个 dict（键是 {tuple(keys)}），却是 {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise Mistake(f"{what} 缺少这些键：{missing}")
    return {k: as_shape(value[k], f'{what}["{k}"]') for k in keys}


# ---------------------------------------------------------------- gradients
def expect_gradients(output: torch.Tensor, wrt: dict, what: str) -> None:
    """The answer must be differentiable: gradients reach every tensor in ``wrt`` (name -> tensor)."""
    if not output.requires_grad:
        raise Mistake(f"{what} 不能求梯度（requires_grad=False）：是不是在 torch.no_grad() 里算的，"
                      "或者用了 .detach() / .item() / numpy？这样的层没法训练")
    names = list(wrt)
    grads = torch.autograd.grad(output.sum(), [wrt[n] for n in names], allow_unused=True)
    for name, grad in zip(names, grads):
        if grad is None:
            raise Mistake(f"梯度传不到 {name}：{what} 的计算和 {name} 断开了（.detach()、no_grad 或重新建的张量？）")
        if not torch.isfinite(grad).all():
            raise Mistake(f"{name} 的梯度里有 NaN 或 inf：检查掩码和 softmax（被屏蔽的位置用很小的有限数，或者事后把 NaN 清掉）")


def expect_tensor(x, what: str) -> torch.Tensor:
    """The answer must be a tensor with finite values."""
    if is_stub(x):
        raise NotDone()
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise Mistake(f"{what} 应该返回一个张量，却返回了长度为 {len(x)} 的 tuple；只返回要求的那一个张量")
    if not isinstance(x, torch.Tensor):
        raise Mistake(f"{what} 应该是 torch.Tensor，却是 {type(x).__name__}")
    if x.layout != torch.strided:
        raise Mistake(f"{what} 应该是普通（稠密）张量，却是 {x.layout}；用 .to_dense() 转回来")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise Mistake(f"{what} 里出现了 NaN 或 inf；检查除法、softmax 和掩码（被屏蔽的位置要在 softmax 之前填入很小的数）")
    return x


def expect_shape(x: torch.Tensor, expected, what: str, hint: str = "") -> None:
    """The tensor must have exactly ``expected`` shape."""
    expected = tuple(expected)
    if tuple(x.shape) != expected:
        msg = f"{what} 的形状应该是 {expected}，实际是 {tuple(x.shape)}"
        raise Mistake(msg + (f"。提示：{hint}" if hint else ""))


def expect_close(actual: torch.Tensor, expected: torch.Tensor, what: str, hint: str = "", atol=1e-5, rtol=1e-4) -> None:
    """Values must match the reference; shapes are checked first."""
    expect_shape(actual, expected.shape, what)
    if actual.is_floating_point() != expected.is_floating_point():
        raise Mistake(f"{what} 的 dtype 应该是 {expected.dtype}，实际是 {actual.dtype}")
    actual, expected = actual.detach().double(), expected.detach().double()  # float32 or float64 answers alike
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
        diff = (actual - expected).abs().max().item()
        msg = f"{what} 的形状对了，但数值不对（最大误差 {diff:.3g}）"
        raise Mistake(msg + (f"。提示：{hint}" if hint else ""))


def checker(chapter: str, exercise_id: str, title: str):
    """Decorate ``fn(answer) -> None`` (raising :class:`Mistake`/:class:`NotDone`) into a safe checker.

    The returned function takes the student's answer and ``record=True``
    (reference-solution cells pass ``record=False`` so the summary shows only
    the student's own attempts).
    """
    chapter_entries = _REGISTRY.setdefault(chapter, OrderedDict())
    chapter_entries[exercise_id] = [title, None]

    def wrap(fn):
        @functools.wraps(fn)
        def check(answer=None, *, record: bool = True) -> bool:
            status = "fail"
            try:
                with torch.random.fork_rng():
                    torch.manual_seed(0)
                    fn(answer)
                status, line = "pass", f"{PASS}：{exercise_id} {title}"
            except NotDone:
                status, line = "todo", f"{TODO}：{exercise_id} {title} —— 把 `...` 或 `raise NotImplementedError` 换成你的代码，再运行这一格"
            except Mistake as m:
                line = f"{FAIL}：{exercise_id} {title} —— {m}"
            except Exception as e:  # a bug in the checker itself must not crash the student's notebook
                line = f"{FAIL}：{exercise_id} {title} —— 检查时出错（{type(e).__name__}: {e}）"
            if record:
                chapter_entries[exercise_id][1] = status
            print(" ".join(line.splitlines()))  # one line, even when a message quotes a multi-line repr
            return status == "pass"

        check.exercise_id = exercise_id
        check.chapter = chapter
        return check

    return wrap


def results(chapter: str) -> dict:
    """``{exercise id: "pass" | "fail" | "todo" | None}`` for one chapter (None = not attempted)."""
    if chapter not in _REGISTRY:
        raise ValueError(f"unknown chapter {chapter!r}; known: {list(_REGISTRY)}")
    return {k: v[1] for k, v in _REGISTRY[chapter].items()}


def summary(chapter: str) -> None:
    """Print which of a chapter's exercises pass (use :func:`results` for the data)."""
    res = results(chapter)
    marks = {"pass": PASS, "fail": FAIL, "todo": TODO, None: "· 未运行"}
    print(f"本章练习（{chapter}）：")
    for exercise_id, (title, _) in _REGISTRY[chapter].items():
        print(f"  {marks[res[exercise_id]]}  {exercise_id} {title}")
    n_pass = sum(1 for s in res.values() if s == "pass")
    print(f"通过 {n_pass} / {len(res)}")


def finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
