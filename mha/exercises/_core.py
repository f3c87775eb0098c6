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

import functools
import math
import traceback
from collections import OrderedDict

import torch

__all__ = ["Mistake", "NotDone", "checker", "summary", "results", "call", "expect_tensor",
           "expect_shape", "expect_close", "is_stub"]

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


def call(fn, *args, what: str = "你的函数", **kwargs):
    """Call the student's ``fn``; turn a stub into :class:`NotDone` and a crash into :class:`Mistake`."""
    if is_stub(fn):
        raise NotDone()
    if not callable(fn):
        raise Mistake(f"{what} 应该是一个函数（callable），却收到了 {type(fn).__name__}")
    try:
        out = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotDone() from None
    except Exception as e:  # the student's code crashed: say where, not a traceback
        last = traceback.extract_tb(e.__traceback__)[-1]
        raise Mistake(f"{what} 运行时抛出了 {type(e).__name__}: {e}（第 {last.lineno} 行：{last.line}）") from None
    if out is Ellipsis:
        raise NotDone()
    return out


def expect_tensor(x, what: str) -> torch.Tensor:
    """The answer must be a tensor with finite values."""
    if is_stub(x):
        raise NotDone()
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise Mistake(f"{what} 应该返回一个张量，却返回了长度为 {len(x)} 的 tuple；只返回要求的那一个张量")
    if not isinstance(x, torch.Tensor):
        raise Mistake(f"{what} 应该是 torch.Tensor，却是 {type(x).__name__}")
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
    if actual.dtype != expected.dtype:
        raise Mistake(f"{what} 的 dtype 应该是 {expected.dtype}，实际是 {actual.dtype}")
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
            print(line)
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
