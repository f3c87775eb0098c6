"""The machinery behind every ``check_*`` function: verdicts, stub detection, the summary.

A checker is written as a plain function that *raises* :class:`Mistake` with a
specific Chinese message when the student's answer is wrong and returns
normally when it is right. :func:`checker` wraps it so that the public
``check_*`` function

* prints exactly one verdict (passed / not done yet / what is wrong),
* returns a :class:`Verdict`, true when the answer passed (a notebook shows nothing for it: the
  printed line is the verdict, no stray ``True``/``False`` under it),
* never raises, whatever the student hands in,
* records the result for :func:`summary`.
"""
from __future__ import annotations

import contextlib
import fnmatch
import functools
import inspect
import math
import os
import reprlib
import site
import sys
import sysconfig
import traceback
from collections import OrderedDict

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from .. import readers_name

__all__ = ["Mistake", "NotDone", "checker", "summary", "results", "call", "expect_tensor",
           "expect_shape", "expect_close", "is_stub", "part", "as_int", "as_number", "as_shape",
           "as_shape_dict", "expect_gradients", "watch_shortcuts", "describe", "short_repr", "type_name",
           "exception_text", "is_plain_tensor", "plain", "handed", "SDPA", "LINEAR", "torch_mha", "PREDICT_SHAPES"]

PASS = "✅ 通过"
FAIL = "❌ 未通过"
TODO = "⏳ 还没完成"

# chapter -> OrderedDict(exercise id -> (title, status or None))
_REGISTRY: "OrderedDict[str, OrderedDict[str, list]]" = OrderedDict()


class Verdict:
    """What a checker returns: ``bool(verdict)`` is whether the answer passed, and it equals that bool.

    A notebook cell that ends with the checker's call displays nothing for it (``_ipython_display_``):
    the one printed line already says passed / not done / what is wrong."""

    __slots__ = ("passed",)

    def __init__(self, passed: bool):
        self.passed = bool(passed)

    def __bool__(self) -> bool:
        return self.passed

    def __eq__(self, other):
        return self.passed == bool(other) if isinstance(other, (bool, Verdict)) else NotImplemented

    def __hash__(self):
        return hash(self.passed)

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:
        """Show nothing: the verdict was printed."""


class Mistake(Exception):
    """Raised inside a checker: the answer is wrong; the message says how and hints at why."""


class NotDone(Exception):
    """Raised inside a checker: the answer is still the stub."""


def is_stub(obj) -> bool:
    """True for the placeholders a stub cell leaves: ``None`` and ``...``."""
    return obj is None or obj is Ellipsis


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../mha
_CHECKER_DIR = os.path.dirname(os.path.abspath(__file__))  # .../mha/course/exercises


# ---------------------------------------------------------------- shortcuts
# Each coding exercise lists what it forbids: the functions the student is asked to write (their
# ``mha`` and PyTorch counterparts) and the shortcuts its prompt names. Everything else is allowed:
# printing, ``mha.fmt``, helpers, every other torch function. An item of ``forbid`` is either
# * a torch-function pattern (fnmatch on the function's name): ``"*attention*"`` catches
#   ``F.scaled_dot_product_attention``, ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``,
#   ``F.multi_head_attention_forward`` ...; ``"linear"`` catches ``F.linear``, ``nn.Linear``'s forward
#   and ``torch.ops.aten.linear``. A TorchFunctionMode sees them (a TorchDispatchMode does not: it sits
#   below the decomposition of ``aten::linear`` and ``aten::scaled_dot_product_attention``);
# * a Python function or class (its ``__init__`` and ``forward``), seen by a profile hook that only
#   compares code objects.
# The checker is a learning aid, not an exam: the watch names a shortcut, it does not fight tampering.
SDPA = "*attention*"
LINEAR = "linear"


def torch_mha():
    return torch.nn.MultiheadAttention


def PREDICT_SHAPES() -> tuple:
    """What an exercise that asks to *predict* shapes forbids: running the layer or its steps."""
    from mha import steps
    from mha.layer import MultiHeadAttention
    return (SDPA, torch_mha(), MultiHeadAttention, steps.split_heads, steps.merge_heads, steps.attention_scores,
            steps.attention, steps.project)


def _codes(item) -> dict:
    """code object -> the name a verdict gives, for a forbidden Python function or class."""
    name, item = item if isinstance(item, tuple) else (None, item)  # (how a verdict names it, the function)
    fns = [getattr(item, m) for m in ("__init__", "forward") if m in vars(item)] if isinstance(item, type) else [item]
    module = readers_name(item.__module__)
    import mha
    if getattr(mha, getattr(item, "__name__", ""), None) is item:  # what the chapters write: mha.split_heads
        module = "mha"
    name = name or (f"nn.{item.__qualname__}" if module.startswith("torch.nn") else f"{module}.{item.__qualname__}")
    return {inspect.unwrap(fn).__code__: name for fn in fns if hasattr(inspect.unwrap(fn), "__code__")}


def _torch_name(func) -> str:
    """``F.linear``, ``torch.ops.aten.linear.default``, ``torch.matmul`` ..."""
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"torch.ops.{func}"
    name = getattr(func, "__name__", "?")
    if getattr(torch.nn.functional, name, None) is func:
        return f"F.{name}"
    space, _, short = name.partition("_")  # torch.linalg.pinv is the builtin linalg_pinv
    if space in ("linalg", "fft", "special") and getattr(getattr(torch, space), short, None) is func:
        return f"torch.{space}.{short}"
    return f"torch.{name}"


class _Watch(TorchFunctionMode):
    """While the student's code runs: ``hits`` names every forbidden thing it called, in order."""

    def __init__(self, forbid):
        super().__init__()
        self.patterns = [f for f in forbid if isinstance(f, str)]
        self.codes = {c: n for f in forbid if not isinstance(f, str) for c, n in _codes(f).items()}
        self.hits: list[str] = []
        self.paused = 0  # > 0 inside a callable the checker itself handed over

    def __torch_function__(self, func, types, args=(), kwargs=None):
        base = getattr(func, "__name__", "").split(".")[0]
        if not self.paused and any(fnmatch.fnmatchcase(base, p) for p in self.patterns):
            self.hits.append(_torch_name(func))
        return func(*args, **(kwargs or {}))

    def profile(self, frame, event, arg):
        if event == "call" and not self.paused and frame.f_code in self.codes:
            self.hits.append(self.codes[frame.f_code])


_WATCHES: list[_Watch] = []


def handed(fn):
    """Wrap a callable the checker hands to the student: what it calls inside is not the student's."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        for w in _WATCHES:
            w.paused += 1
        try:
            return fn(*args, **kwargs)
        finally:
            for w in _WATCHES:
                w.paused -= 1
    return run


@contextlib.contextmanager
def watch_shortcuts(forbid):
    """Watch the block; yields the :class:`_Watch` whose ``hits`` name the forbidden calls made in it."""
    watch, previous = _Watch(forbid), sys.getprofile()
    _WATCHES.append(watch)
    sys.setprofile(watch.profile if watch.codes else previous)
    try:
        with watch:
            yield watch
    finally:
        sys.setprofile(previous)
        _WATCHES.remove(watch)


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
    except Exception:  # a builtin without a signature, or a student's callable with a broken __signature__
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
    * a crash (``sys.exit()`` and torch errors included) -> :class:`Mistake` quoting the exception and the line;
    * a call to something in ``forbid`` (see :func:`watch_shortcuts`) -> :class:`Mistake` naming it;
    * a tensor argument (or a module's parameter) changed in place -> :class:`Mistake`, except the
      arguments whose position or keyword is in ``may_modify``;
    * returning ``None`` -> :class:`Mistake` ("did you forget ``return``?").

    Only ``KeyboardInterrupt`` gets through, so that the student can stop a function that hangs.
    """
    if is_stub(fn):
        raise NotDone()
    if not callable(fn):
        raise Mistake(f"{what} 应该是一个函数（callable），却收到了 {type_name(fn)}")
    snapshot = _snapshot(fn, args, kwargs, set(may_modify))
    crash = None
    with watch_shortcuts(forbid) as watch:
        try:
            out = fn(*args, **kwargs)
        except NotImplementedError as e:  # the stub's raise, or torch's "not implemented for 'Long'"
            out, crash = (NotImplemented, None) if _is_stub_raise(e) else (None, e)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the student's code crashed (or called sys.exit()): say where, not a traceback
            crash = e
    if watch.hits:
        raise Mistake(shortcut_message(watch.hits[0], shortcut_hint))
    if crash is not None:
        raise Mistake(_crash_message(crash, what, len(args))) from None
    if out is NotImplemented or out is Ellipsis:
        raise NotDone()
    if isinstance(out, torch.Tensor):
        out = plain(out)
    if isinstance(out, torch.nn.Module) and not _module_initialised(out):
        raise Mistake(f"{what} 得到的 {type_name(out)} 对象没有初始化：它的 __init__ 要先调用 super().__init__()，"
                      "nn.Module 才能正常工作")
    changed = _changed(snapshot)
    if changed is not None:
        raise Mistake(f"{what} 修改了输入：原地改动了传进来的{changed}（例如 x[...] = ...、+=、masked_fill_ 或 x2 = x 之后再改 x2）；"
                      "不要改动输入，需要时先用 .clone() 复制一份")
    if out is None and not isinstance(fn, type) and not may_return_none:
        raise Mistake(f"{what} 返回了 None：是不是忘了写 return？")
    return out


def _is_stub_raise(error: NotImplementedError) -> bool:
    """``raise NotImplementedError`` written by the student (a stub), not one torch raised for a dtype."""
    frames = traceback.extract_tb(error.__traceback__)
    return not frames or not frames[-1].filename.startswith((_TORCH_DIR, _PACKAGE_DIR))


def _module_initialised(module) -> bool:
    """``nn.Module.__init__`` ran on it (it sets ``_modules``, which repr, parameters() and calls need)."""
    return "_modules" in _safely(lambda m: object.__getattribute__(m, "__dict__"), module, {})


def _crash_message(crash: BaseException, what: str, n_args: int) -> str:
    """What a verdict says about an exception the student's function raised."""
    if isinstance(crash, SystemExit):
        return f"{what} 调用了 sys.exit()（或 exit()、quit()），检查没法继续；去掉它，用 return 返回结果"
    frames = traceback.extract_tb(crash.__traceback__)
    if isinstance(crash, TypeError) and len(frames) == 1:  # the call itself failed: wrong arguments
        return (f"{what} 的参数和题目给的不一样（{exception_text(crash)}）：检查参数的个数和顺序，"
                f"检查函数会这样调用它：{n_args} 个位置参数")
    hint = ""
    if isinstance(crash, RuntimeError) and "leaf Variable that requires grad" in str(crash):
        hint = "。提示：要原地改写一个 Parameter（例如 layer.weight.copy_(...)），把这几行放进 with torch.no_grad(): 里"
    return f"{what} 运行时抛出了 {exception_text(crash)}{_where(_students_frame(frames))}{hint}"


def _where(frame) -> str:
    """``（第 N 行：code）`` for a traceback frame, or nothing when its line is unknown."""
    return f"（第 {frame.lineno} 行：{frame.line}）" if frame is not None and frame.line else ""


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
# Where code that is neither the student's nor the course's lives: the standard library and site-packages.
_LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep
                       for p in [*(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")), *site.getsitepackages()]})


def _students_frame(frames):
    """The deepest traceback frame in the student's own code (not in the checkers or in torch)."""
    for frame in reversed(frames):
        if not frame.filename.startswith((_CHECKER_DIR, _TORCH_DIR)):
            return frame
    return None


def _raised_by_student(error: BaseException) -> bool:
    """The exception was raised in the student's own code (a ``__repr__``, ``__eq__``, ``__len__`` of an
    answer the checker looked at), not in the course package, torch or a library."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and not frames[-1].filename.startswith((_PACKAGE_DIR, _TORCH_DIR) + _LIBRARY_DIRS)


# ---------------------------------------------------------------- showing the student's values
# A verdict quotes what came back; that must work for every value, also one whose __repr__ or
# __str__ raises, a module built without super().__init__(), a huge list: shown short, never raising.
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 60, 80, 8, 8, 6


def _safely(show, value, fallback):
    try:
        return show(value)
    except KeyboardInterrupt:
        raise
    except BaseException:  # the value's own __repr__/__str__ broke (even with sys.exit()): say so instead
        return fallback


def type_name(value) -> str:
    """The name of the value's type."""
    return _safely(lambda v: type(v).__name__, value, "?")


def short_repr(value) -> str:
    """``repr(value)``, cut short; ``<T 对象>`` when the value cannot show itself."""
    return _safely(_SHORT.repr, value, f"<{type_name(value)} 对象>")


def describe(value) -> str:
    """``type：repr`` of a student's value, for "expected X, got ..." verdicts."""
    return f"{type_name(value)}：{short_repr(value)}"


def exception_text(error: BaseException) -> str:
    """``Name: message`` of an exception, also when its __str__ raises."""
    message = _safely(str, error, "（异常信息无法显示）")
    if len(message) > 300:
        message = message[:297] + "..."
    return f"{type_name(error)}: {message}" if message else type_name(error)


# ---------------------------------------------------------------- one rule for numbers
def _scalar(value):
    """A Python/numpy/0-d torch number as a Python int or float; anything else unchanged."""
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
    """A finite real number: Python, numpy or 0-d torch, int or float."""
    value = _scalar(part(value, what))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Mistake(f"{what} 应该是一个数，却收到了 {describe(value)}")
    if not math.isfinite(value):
        raise Mistake(f"{what} 应该是一个有限的数，却是 {short_repr(value)}")
    return float(value)


MAX_DIMS = 64  # more items than any tensor has dimensions


def as_shape(value, what: str) -> tuple:
    """A shape: a tuple, list or ``torch.Size`` of integers (see :func:`as_int`)."""
    value = part(value, what)
    if isinstance(value, torch.Tensor):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，而不是张量；可以用 tuple(t.shape)")
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.size <= MAX_DIMS:
        value = value.tolist()
    if not isinstance(value, (tuple, list, torch.Size)):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，却收到了 {describe(value)}")
    if len(value) > MAX_DIMS:  # checked before looking at every item: a list of a million numbers is no shape
        raise Mistake(f"{what} 有 {len(value)} 项，不像一个形状：形状里每一维一个数，例如 (1, 2, 3)")
    return tuple(as_int(n, f"{what} 的第 {i + 1} 项") for i, n in enumerate(value))


def as_shape_dict(value, keys, what: str = "答案") -> dict:
    """A dict with exactly the needed ``keys`` (extra keys allowed), each a shape."""
    value = part(value, what)
    if not isinstance(value, dict):
        raise Mistake(f"{what} 应该是一个 dict（键是 {tuple(keys)}），却是 {type_name(value)}")
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
    grads = torch.autograd.grad(output.sum(), [wrt[n] for n in names], allow_unused=True, retain_graph=True)
    for name, grad in zip(names, grads):
        if grad is None:
            raise Mistake(f"梯度传不到 {name}：{what} 的计算和 {name} 断开了（.detach()、no_grad 或重新建的张量？）")
        if not torch.isfinite(grad).all():
            raise Mistake(f"{name} 的梯度里有 NaN 或 inf：检查掩码和 softmax（被屏蔽的位置用很小的有限数，或者事后把 NaN 清掉）")


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


def expect_tensor(x, what: str) -> torch.Tensor:
    """The answer must be a tensor with finite values; it comes back as a plain tensor."""
    if is_stub(x):
        raise NotDone()
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise Mistake(f"{what} 应该返回一个张量，却返回了长度为 {len(x)} 的 tuple；只返回要求的那一个张量")
    if not isinstance(x, torch.Tensor):
        raise Mistake(f"{what} 应该是 torch.Tensor，却是 {type_name(x)}")
    x = plain(x)
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise Mistake(f"{what} 里出现了 NaN 或 inf；检查除法、softmax 和掩码（被屏蔽的位置要在 softmax 之前填入很小的数）")
    return x


def expect_shape(x: torch.Tensor, expected, what: str, hint: str = "") -> None:
    """The tensor must have exactly ``expected`` shape."""
    expected = tuple(expected)
    if tuple(x.shape) != expected:
        msg = f"{what} 的形状应该是 {expected}，实际是 {tuple(x.shape)}"
        raise Mistake(msg + (f"。提示：{hint}" if hint else ""))


def name_the_match(got: torch.Tensor, named, prefix: str = "") -> None:
    """Raise :class:`Mistake` with the message of the first ``(wrong answer, message)`` that ``got`` equals
    (call it once ``got`` is known to be wrong); return quietly when none does."""
    for wrong, message in named:
        if torch.equal(got, wrong):
            raise Mistake(prefix + message)


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
        def check(answer=None, *, record: bool = True) -> Verdict:
            status = "fail"
            try:
                with torch.random.fork_rng(), torch.enable_grad():  # a chapter may switch autograd off
                    torch.manual_seed(0)
                    fn(answer)
                status, line = "pass", f"{PASS}：{exercise_id} {title}"
            except NotDone:
                status, line = "todo", f"{TODO}：{exercise_id} {title} —— 把 `...` 或 `raise NotImplementedError` 换成你的代码，再运行这一格"
            except Mistake as m:
                line = f"{FAIL}：{exercise_id} {title} —— {m}"
            except KeyboardInterrupt:  # the student stopped the cell
                raise
            except BaseException as e:  # nothing may crash the student's notebook
                line = f"{FAIL}：{exercise_id} {title} —— {_unexpected(e)}"
            if record:
                chapter_entries[exercise_id][1] = status
            print(" ".join(line.splitlines()))  # one line, even when a message quotes a multi-line repr
            return Verdict(status == "pass")

        check.exercise_id = exercise_id
        check.chapter = chapter
        return check

    return wrap


def _unexpected(error: BaseException) -> str:
    """The verdict for an exception that escaped a check: raised by the student's own code when the
    checker looked at the answer (a ``__repr__``, ``__eq__`` or ``__len__`` of it), or a checker bug."""
    if isinstance(error, SystemExit):
        return "你的代码调用了 sys.exit()（或 exit()、quit()），检查没法继续；去掉它再运行"
    if _raised_by_student(error):
        where = _where(traceback.extract_tb(error.__traceback__)[-1])
        return f"检查你的答案时，你自己写的代码抛出了 {exception_text(error)}{where}"
    return f"检查时出错（{exception_text(error)}）"


def _number(exercise_id: str) -> tuple:
    return tuple(int(n) for n in exercise_id.split("."))


def results(chapter: str) -> dict:
    """``{exercise id: "pass" | "fail" | "todo" | None}`` for one chapter (None = not attempted), in exercise order;
    reference-solution cells call the checker with ``record=False`` and are not counted."""
    if chapter not in _REGISTRY:
        raise ValueError(f"unknown chapter {chapter!r}; known: {list(_REGISTRY)}")
    return {k: _REGISTRY[chapter][k][1] for k in sorted(_REGISTRY[chapter], key=_number)}


def summary(chapter: str) -> None:
    """Print which of a chapter's exercises pass (use :func:`results` for the data)."""
    res = results(chapter)
    marks = {"pass": PASS, "fail": FAIL, "todo": TODO, None: "· 未运行"}
    print(f"本章练习（{chapter}）：")
    for exercise_id, status in res.items():
        print(f"  {marks[status]}  {exercise_id} {_REGISTRY[chapter][exercise_id][0]}")
    n_pass = sum(1 for s in res.values() if s == "pass")
    print(f"通过 {n_pass} / {len(res)}")


def finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
