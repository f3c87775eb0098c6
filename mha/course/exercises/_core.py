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
import reprlib
import site
import sys
import sysconfig
import threading
import traceback
from collections import OrderedDict

import numpy as np
import torch

from .. import readers_name

__all__ = ["Mistake", "NotDone", "checker", "summary", "results", "call", "expect_tensor",
           "expect_shape", "expect_close", "is_stub", "part", "as_int", "as_number", "as_shape",
           "as_shape_dict", "expect_gradients", "watch_shortcuts", "describe", "short_repr", "type_name",
           "exception_text", "is_plain_tensor", "MHA", "SDPA", "TORCH_MHA", "NO_SHORTCUTS"]

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
# a subclass of ``mha.MultiHeadAttention``, a wrapped ``nn.MultiheadAttention``,
# ``torch.ops.aten.scaled_dot_product_attention`` ...), in the calling thread and in the threads
# it starts. Two things are refused whatever ``forbid`` says: calling the checkers' own functions
# (``mha.exercises._core.call``, ``mha.exercises.ch05._softmax_attention`` ...), and switching the
# hook off (``sys.setprofile(None)``): a check that could not watch the code cannot pass it.
MHA = "mha"  # any function or class of the course package (its checkers excepted)
SDPA = "F.scaled_dot_product_attention"
TORCH_MHA = "nn.MultiheadAttention"
NO_SHORTCUTS = (MHA, SDPA, TORCH_MHA)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../mha
_CHECKER_DIR = os.path.dirname(os.path.abspath(__file__))  # .../mha/course/exercises


def _in_checkers(frame) -> bool:
    return frame is not None and frame.f_code.co_filename.startswith(_CHECKER_DIR)


def _calling_frame(frame, event):
    """The frame that made the call a profile event reports: a Python call runs in a new frame
    (the caller is its f_back); a C builtin runs inside the caller's own frame."""
    return frame.f_back if event == "call" else frame


@functools.lru_cache(maxsize=None)
def _torch_mha_codes() -> dict:
    from torch import nn
    import torch.nn.functional as F

    return {nn.MultiheadAttention.__init__.__code__: "nn.MultiheadAttention",
            nn.MultiheadAttention.forward.__code__: "nn.MultiheadAttention",
            F.multi_head_attention_forward.__code__: "F.multi_head_attention_forward"}


@functools.lru_cache(maxsize=None)
def _op_call_codes() -> frozenset:
    """The Python ``__call__`` of ``torch.ops.aten.X`` and ``torch.ops.aten.X.default``: the overload
    form reaches its kernel through a builtin with no name, so the op is named from ``self`` here."""
    classes = (getattr(torch._ops, "OpOverloadPacket", None), getattr(torch._ops, "OpOverload", None))
    return frozenset(c.__call__.__code__ for c in classes if c is not None and hasattr(c.__call__, "__code__"))


def _kernel_family(name: str) -> str | None:
    """Which forbidden family a torch kernel belongs to, by its name: every fused attention kernel
    (``scaled_dot_product_attention``, ``_scaled_dot_product_flash_attention_for_cpu``,
    ``_efficient_attention_forward`` ...) has "attention" in its name, and no basic operation does."""
    if "multi_head_attention" in name or "transformer_encoder_layer" in name:
        return TORCH_MHA
    if "attention" in name:
        return SDPA
    return None


def _builtin_name(fn) -> str:
    """How a verdict names a C builtin: ``F.scaled_dot_product_attention``, ``torch.ops.aten.X``, ``torch.X``."""
    if fn is torch._C._nn.scaled_dot_product_attention:
        return SDPA
    module = getattr(fn, "__module__", None) or "torch"
    return f"{module.replace('torch._ops.', 'torch.ops.')}.{getattr(fn, '__name__', '?')}"


def _shortcut_name(frame, event, arg, forbid) -> str | None:
    """The forbidden thing this profile event enters, or None."""
    if event == "c_call":
        family = _kernel_family(getattr(arg, "__name__", "") or "")
        return _builtin_name(arg) if family in forbid else None
    if event != "call":
        return None
    code = frame.f_code
    if code in _op_call_codes():
        op = f"torch.ops.{frame.f_locals.get('self')}"  # e.g. torch.ops.aten.scaled_dot_product_attention.default
        return op if _kernel_family(op) in forbid else None
    if MHA in forbid and code.co_filename.startswith(_PACKAGE_DIR) and not code.co_filename.startswith(_CHECKER_DIR):
        module = readers_name(frame.f_globals.get("__name__", "mha"))
        return f"{module}.{getattr(code, 'co_qualname', code.co_name)}"
    if TORCH_MHA in forbid:
        return _torch_mha_codes().get(code)
    return None


@functools.lru_cache(maxsize=None)
def _checker_codes() -> frozenset:
    """The code of every module-level function of ``mha.exercises`` (``call``, ``_softmax_attention``,
    the ``check_*`` wrappers ...). Methods are left out: the checkers hand students objects whose
    methods they are meant to call (ch13's recording model, ch03's spy Linear). So are generators
    (the context managers ``watch_shortcuts``, ch13's ``_refuse_calls``): the ``with`` that ends one
    resumes it from contextlib, which looks like a call from outside; and they only add watching."""
    codes = set()
    for name, module in list(sys.modules.items()):
        if module is None or not (name == __package__ or name.startswith(__package__ + ".")):
            continue
        for value in list(vars(module).values()):
            if callable(value) and not isinstance(value, type):
                for fn in (value, inspect.unwrap(value)):  # the wrapper and what it wraps
                    code = getattr(fn, "__code__", None)
                    if (code is not None and code.co_filename.startswith(_CHECKER_DIR)
                            and not code.co_flags & inspect.CO_GENERATOR):
                        codes.add(code)
    return frozenset(codes)


def _checker_machinery(frame, event) -> str | None:
    """The checkers' own function this event enters from the student's code, or None."""
    if event != "call" or frame.f_code not in _checker_codes() or _in_checkers(frame.f_back):
        return None
    code = frame.f_code
    qualname = getattr(code, "co_qualname", code.co_name)
    return f"{readers_name(frame.f_globals.get('__name__', __package__))}.{code.co_name if '<locals>' in qualname else qualname}"


def _via_checker(frame, stop) -> bool:
    """True when the call comes through a callable the checker itself handed to the student."""
    while frame is not None and frame is not stop:
        if _in_checkers(frame):
            return True
        frame = frame.f_back
    return False


def _sets_a_profile(frame, event, arg) -> bool:
    """The event calls ``sys.setprofile`` or ``threading.setprofile`` (which would silence the hook)."""
    if event == "c_call":
        return arg is sys.setprofile
    return event == "call" and frame.f_code is threading.setprofile.__code__


class _Watch:
    """The profile hook for one run of the student's code, and what it saw.

    ``hits``: the forbidden things called, in order; ``tampered``: the student's code switched the
    hook off or replaced it, so nothing after that was seen. Events are passed on to the hook that
    was there before (ch13 stacks its own refusals under :func:`call`).
    """

    def __init__(self, forbid, base, previous):
        self.forbid, self.base, self.previous = frozenset(forbid), base, previous
        self.hits: list[str] = []
        self.tampered = False
        self.active = True

    def __call__(self, frame, event, arg):
        if not self.active:  # a thread the student started outlived the call: stop watching it
            sys.setprofile(None)
            return
        if not self.hits:
            name = _checker_machinery(frame, event)
            if name is None:
                name = _shortcut_name(frame, event, arg, self.forbid)
                if name is not None and _via_checker(_calling_frame(frame, event), self.base):
                    name = None  # reached through a callable the checker handed over
            if name is not None:
                self.hits.append(name)
        if _sets_a_profile(frame, event, arg) and not _in_checkers(_calling_frame(frame, event)):
            self.tampered = True  # switched off (or re-installed after a gap): some calls went unseen
        if self.previous is not None:
            self.previous(frame, event, arg)


@contextlib.contextmanager
def watch_shortcuts(forbid, base=None):
    """Watch the block: yields a :class:`_Watch` whose ``hits`` name the forbidden calls made inside
    it (in this thread or in a thread started inside it) and whose ``tampered`` says whether the
    block switched the watching off.

    ``base`` is the frame that runs the student's code (default: the caller's); a forbidden call
    reached through a frame of the checkers (a callable the checker handed over) is allowed.
    """
    base = base if base is not None else sys._getframe(2)
    previous, previous_for_threads = sys.getprofile(), threading.getprofile()
    watch = _Watch(forbid, base, previous)
    sys.setprofile(watch)
    threading.setprofile(watch)  # threads started inside the block (a ThreadPoolExecutor ...)
    try:
        yield watch
    finally:
        if sys.getprofile() is not watch or threading.getprofile() is not watch:
            watch.tampered = True
        sys.setprofile(previous)
        threading.setprofile(previous_for_threads)
        watch.active = False


SHORTCUT_HINT = "请只用 torch 的基本运算（view、transpose、@、softmax、masked_fill……）写出来"
UNWATCHED = ("你的代码关掉或替换了检查用的监视（sys.setprofile / threading.setprofile），检查没法确认它没有调用现成的实现，"
             "所以不能通过；去掉这一句再运行")


def shortcut_message(name: str, hint: str | None = None) -> str:
    return f"这道题要你自己实现，不能调用现成的 {name}（检查时发现你的代码调用了它）；{hint or SHORTCUT_HINT}"


def checker_call_message(name: str) -> str:
    return (f"答案里不能调用检查程序自己的函数 {name}（检查时发现你的代码调用了它）；"
            "mha.exercises 只用来检查答案，请自己写出来")


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
    * a crash (``sys.exit()`` included) -> :class:`Mistake` naming the exception and the line;
    * a call to something in ``forbid`` (:data:`MHA`, :data:`SDPA`, :data:`TORCH_MHA`), to the
      checkers' own functions, or switching the watching off -> :class:`Mistake`;
    * a tensor argument (or a module's parameter) changed in place -> :class:`Mistake`, except the
      arguments whose position or keyword is in ``may_modify``;
    * returning ``None`` -> :class:`Mistake` ("did you forget ``return``?").

    ``shortcut_hint`` replaces the default advice after a forbidden call (e.g. for questions
    whose answer is a shape: "write the shape from the arguments"). ``may_return_none``: the
    exercise asks for a function that works in place (e.g. loading weights), so ``None`` is fine.
    Only ``KeyboardInterrupt`` gets through, so that the student can stop a function that hangs.
    """
    if is_stub(fn):
        raise NotDone()
    if not callable(fn):
        raise Mistake(f"{what} 应该是一个函数（callable），却收到了 {type_name(fn)}")
    snapshot = _snapshot(fn, args, kwargs, set(may_modify))
    crash = None
    with watch_shortcuts(forbid, base=sys._getframe()) as watch:
        try:
            out = fn(*args, **kwargs)
        except NotImplementedError:
            out = NotImplemented
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the student's code crashed (or called sys.exit()): say where, not a traceback
            crash = e
    if not watch.hits and not watch.tampered and crash is None:
        watch.hits += _fused_kernels_behind(out, (args, kwargs), watch.forbid)
    if watch.hits:
        name = watch.hits[0]
        if name.startswith(__package__ + "."):
            raise Mistake(checker_call_message(name))
        raise Mistake(shortcut_message(name, shortcut_hint))
    if watch.tampered:
        raise Mistake(UNWATCHED)
    if crash is not None:
        raise Mistake(_crash_message(crash, what, len(args))) from None
    if out is NotImplemented or out is Ellipsis:
        raise NotDone()
    _expect_usable(out, what)
    changed = _changed(snapshot)
    if changed is not None:
        raise Mistake(f"{what} 修改了输入：原地改动了传进来的{changed}（例如 x[...] = ...、+=、masked_fill_ 或 x2 = x 之后再改 x2）；"
                      "不要改动输入，需要时先用 .clone() 复制一份")
    if out is None and not isinstance(fn, type) and not may_return_none:
        raise Mistake(f"{what} 返回了 None：是不是忘了写 return？")
    return out


def _fused_kernels_behind(out, inputs, forbid) -> list:
    """The fused attention kernels in the autograd graph of ``out`` (built after ``inputs``): a backstop
    for calls the profile hook could not see (run in a thread that existed before the call, or while
    the hook was switched off and on again from C). Only results that need gradients carry a graph."""
    if not (SDPA in forbid or TORCH_MHA in forbid) or not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return []
    before = {t.grad_fn for _, t in _tensors_in(inputs, "") if t.grad_fn is not None}  # the inputs' own history
    stack, seen = [out.grad_fn], set()
    while stack and len(seen) < 100_000:
        node = stack.pop()
        if node is None or node in seen or node in before:
            continue
        seen.add(node)
        family = _kernel_family(_snake_case(node.name()))  # ScaledDotProductFlashAttentionForCpuBackward0
        if family in forbid:
            return [SDPA if family == SDPA else f"torch.{_snake_case(node.name()).removesuffix('_backward0')}"]
        stack.extend(next_node for next_node, _ in node.next_functions)
    return []


def _snake_case(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _expect_usable(out, what: str) -> None:
    """Refuse what no exercise takes and what the checkers cannot even look at: a tensor without
    ordinary values (nested, sparse, meta, quantized) or an nn.Module whose ``__init__`` never
    called ``super().__init__()`` (it cannot even be printed)."""
    if isinstance(out, torch.Tensor):
        unusual = _unusual_tensor(out)
        if unusual is not None:
            raise Mistake(f"{what} 的返回值{unusual}")
    elif isinstance(out, torch.nn.Module) and not _module_initialised(out):
        raise Mistake(f"{what} 得到的 {type_name(out)} 对象没有初始化：它的 __init__ 要先调用 super().__init__()，"
                      "nn.Module 才能正常工作")


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
    return f"{what} 运行时抛出了 {exception_text(crash)}{_where(_students_frame(frames))}"


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
    grads = torch.autograd.grad(output.sum(), [wrt[n] for n in names], allow_unused=True)
    for name, grad in zip(names, grads):
        if grad is None:
            raise Mistake(f"梯度传不到 {name}：{what} 的计算和 {name} 断开了（.detach()、no_grad 或重新建的张量？）")
        if not torch.isfinite(grad).all():
            raise Mistake(f"{name} 的梯度里有 NaN 或 inf：检查掩码和 softmax（被屏蔽的位置用很小的有限数，或者事后把 NaN 清掉）")


def _unusual_tensor(x: torch.Tensor) -> str | None:
    """Why a tensor has no ordinary values to compare (a verdict's second half), or None for a plain one."""
    if x.is_nested:
        return "应该是普通张量，却是嵌套张量（torch.nested）；返回一个形状规整的普通张量"
    if x.layout != torch.strided:
        return f"应该是普通（稠密）张量，却是 {x.layout}；用 .to_dense() 转回来"
    if x.is_meta:
        return "是 meta 设备上的张量，只有形状、没有数值（.to('meta') 或 device='meta'）；在 CPU 上算出真正的结果再返回"
    if x.is_quantized:
        return "是量化张量（quantized）；返回普通的浮点张量，需要时用 .dequantize()"
    return None


def is_plain_tensor(x) -> bool:
    """A tensor with ordinary values that can be compared (not nested, sparse, meta or quantized)."""
    return isinstance(x, torch.Tensor) and _unusual_tensor(x) is None


def expect_tensor(x, what: str) -> torch.Tensor:
    """The answer must be a tensor with finite values."""
    if is_stub(x):
        raise NotDone()
    if isinstance(x, tuple) and x and isinstance(x[0], torch.Tensor):
        raise Mistake(f"{what} 应该返回一个张量，却返回了长度为 {len(x)} 的 tuple；只返回要求的那一个张量")
    if not isinstance(x, torch.Tensor):
        raise Mistake(f"{what} 应该是 torch.Tensor，却是 {type_name(x)}")
    unusual = _unusual_tensor(x)
    if unusual is not None:
        raise Mistake(f"{what} {unusual}")
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
            except KeyboardInterrupt:  # the student stopped the cell
                raise
            except BaseException as e:  # nothing may crash the student's notebook
                line = f"{FAIL}：{exercise_id} {title} —— {_unexpected(e)}"
            if record:
                chapter_entries[exercise_id][1] = status
            print(" ".join(line.splitlines()))  # one line, even when a message quotes a multi-line repr
            return status == "pass"

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
