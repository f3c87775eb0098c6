"""Answer coercion and comparison: one rule for numbers, shapes and tensors, the same in every checker."""
from __future__ import annotations

import decimal
import math
import numbers

import numpy as np
import torch

from .verdicts import Mistake, NotDone, describe, exception_text, is_stub, short_repr, type_name


def _scalar(value):
    """A Python/numpy/0-d torch number, a ``Fraction`` or ``Decimal``, as a Python int or float; anything else unchanged."""
    if isinstance(value, numbers.Rational) and not isinstance(value, (int, np.generic)):  # Fraction(9, 16) is 0.5625
        return value.numerator if value.denominator == 1 else float(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if is_plain_tensor(value) and value.dim() == 0 and value.dtype != torch.bool:
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


def as_parts(value, n: int, expected: str, verb: str = "返回了") -> tuple:
    """A tuple or list of exactly ``n`` parts; ``expected`` says what they are ("应该返回三个张量 (out, K, V)").
    A stub in any part: not done yet (a stub answer never gets here: the checker and ``call`` catch it)."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise Mistake(f"{expected}，却{verb} {describe(value)}")
    if any(is_stub(v) for v in value):
        raise NotDone()
    return tuple(value)


def as_int(value, what: str) -> int:
    """Accept Python, numpy and 0-d torch integers, and integral floats (``262656.0``), the same everywhere."""
    value = _scalar(part(value, what))
    if isinstance(value, bool) or isinstance(value, (np.bool_,)):
        raise Mistake(f"{what} 应该是整数，却是布尔值 {short_repr(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value):
            return int(value)
        raise Mistake(f"{what} 应该是整数，却是 {short_repr(value)}")
    raise Mistake(f"{what} 应该是整数，却收到了 {describe(value)}")


def as_number(value, what: str) -> float:
    """A finite real number: Python, numpy or 0-d torch, int or float, an exact ``Fraction`` or a ``Decimal``."""
    value = _scalar(part(value, what))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mistake(f"{what} 应该是一个数，却收到了 {describe(value)}")
    if not math.isfinite(value):
        raise Mistake(f"{what} 应该是一个有限的数，却是 {short_repr(value)}")
    return float(value)


MAX_DIMS = 64  # more items than any tensor has dimensions


def as_shape(value, what: str, n: int = 0, most: int = 0, expected: str = "") -> tuple:
    """A shape: a tuple, list, ``torch.Size`` or 1-D integer array/tensor of integers (see :func:`as_int`); with ``n``, a shape the student
    names (``expected``, "(B, L)"): ``n`` sizes from 1 to ``most``."""
    value = part(value, what)
    if isinstance(value, torch.Tensor) and not (value.ndim == 1 and value.numel() <= MAX_DIMS
                                                and not value.is_floating_point() and not value.is_complex()):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，而不是张量；可以用 tuple(t.shape)")
    if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 1 and len(value) <= MAX_DIMS:
        value = value.tolist()  # a few integers written as an array or a tensor: the same shape
    if not isinstance(value, (tuple, list, torch.Size)):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，却收到了 {describe(value)}")
    if len(value) > MAX_DIMS:  # checked before looking at every item: a list of a million numbers is no shape
        raise Mistake(f"{what} 有 {len(value)} 项，不像一个形状：形状里每一维一个数，例如 (1, 2, 3)")
    shape = tuple(as_int(size, f"{what} 的第 {i + 1} 项") for i, size in enumerate(value))
    if n and (len(shape) != n or min(shape) < 1 or max(shape) > most):
        raise Mistake(f"{what} 应该是 {expected}，{'两三四'[n - 2]}个 1 到 {most} 之间的整数，却是 {shape}")
    return shape


def plain(x: torch.Tensor) -> torch.Tensor:
    """The answer as an ordinary dense CPU ``torch.Tensor`` (a subclass, a sparse, quantized or GPU tensor alike),
    keeping its autograd graph; :class:`Mistake` when it has no values to compare (a meta tensor ...)."""
    try:
        if x.is_nested:
            x = x.to_padded_tensor(0.0)
        if x.layout != torch.strided:
            x = x.to_dense()
        if x.is_quantized:
            x = x.dequantize()
        if type(x) not in (torch.Tensor, torch.nn.Parameter):
            x = x.as_subclass(torch.Tensor)
        return x.cpu()
    except KeyboardInterrupt:
        raise
    except BaseException as e:
        raise Mistake(f"返回的张量没法当作普通张量读出数值（{exception_text(e)}）；返回在 CPU 上算出的普通张量") from None


def is_plain_tensor(x) -> bool:
    """A dense tensor of the plain type (what :func:`plain` returns)."""
    return isinstance(x, torch.Tensor) and type(x) in (torch.Tensor, torch.nn.Parameter) and x.layout == torch.strided \
        and not x.is_nested and not x.is_meta and not x.is_quantized


NAN_HINT = "检查除法、softmax 和掩码（被屏蔽的位置要在 softmax 之前填入很小的数）"


def expect_tensor(x, what: str, nan_hint: str = NAN_HINT, floating=False) -> torch.Tensor:
    """The answer must be a tensor with finite values (``nan_hint`` says where a NaN may come from), of a floating
    dtype if ``floating`` (a str: why); it comes back as a plain tensor."""
    if is_stub(x):
        raise NotDone()
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise Mistake(f"{what} 应该返回一个张量，却返回了长度为 {len(x)} 的 tuple；只返回要求的那一个张量")
    if not isinstance(x, torch.Tensor):
        raise Mistake(f"{what} 应该是 torch.Tensor，却是 {type_name(x)}")
    x = plain(x)
    if floating and not x.is_floating_point():
        why = f"：{floating}" if isinstance(floating, str) else ""
        raise Mistake(f"{what} 的 dtype 应该是浮点数（例如 torch.float32），实际是 {x.dtype}{why}")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise Mistake(f"{what} 里出现了 NaN 或 inf；{nan_hint}")
    return x


def expect_shape(x: torch.Tensor, expected, what: str, hint: str = "", named=()) -> None:
    """The tensor must have exactly ``expected`` shape; a typical wrong shape in ``named`` ``[(shape or None, why)]``
    is named by its why."""
    expected = tuple(expected)
    if tuple(x.shape) != expected:
        name_the_match(tuple(x.shape), named, same=lambda got, wrong: wrong is not None and got == tuple(wrong))
        msg = f"{what} 的形状应该是 {expected}，实际是 {tuple(x.shape)}"
        raise Mistake(msg + (f"。提示：{hint}" if hint else ""))


def same(a, b: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Same shape and values (compared in float64, so float32 and float64 answers alike); names a typical mistake."""
    return (isinstance(a, torch.Tensor) and tuple(a.shape) == tuple(b.shape)
            and torch.allclose(a.detach().double(), b.detach().double(), atol=atol, rtol=rtol))


def name_the_match(got, named, prefix: str = "", suffix: str = "", same=torch.equal) -> None:
    """Equal to a known wrong answer: raise :class:`Mistake` with the message of the first ``(wrong answer,
    message)`` in ``named`` that ``same(got, wrong)`` (call it once ``got`` is known to be wrong; ``named`` may be
    a generator, each wrong answer is computed only when reached); return quietly when none matches."""
    if prefix.endswith("时"):  # "n_heads=2 时" + "偏置…": a comma between the setting and the reason
        prefix += "，"
    for wrong, message in named:
        if same(got, wrong):
            raise Mistake(prefix + message + suffix)


def expect_close(actual: torch.Tensor, expected: torch.Tensor, what: str, hint: str = "", atol=1e-5, rtol=1e-4) -> None:
    """Values must match the reference; shapes are checked first."""
    actual = plain(actual)
    expect_shape(actual, expected.shape, what)
    if actual.is_floating_point() != expected.is_floating_point() or actual.is_complex():
        raise Mistake(f"{what} 的 dtype 应该是 {expected.dtype}，实际是 {actual.dtype}")
    # float32 or float64 answers alike; an answer on the GPU is compared on the CPU
    actual, expected = actual.detach().cpu().double(), expected.detach().cpu().double()
    if not torch.allclose(actual, expected, atol=atol, rtol=rtol):
        diff = (actual - expected).abs().max().item()
        msg = f"{what} 的形状对了，但数值不对（最大误差 {diff:.3g}）"
        raise Mistake(msg + (f"。提示：{hint}" if hint else ""))
