"""The shortcut guard: which forbidden functions the student's code called.

Each coding exercise lists what it forbids: the functions the student is asked to write (their ``mha`` and
PyTorch counterparts) and the shortcuts its prompt names. Everything else is allowed: printing, ``mha.fmt``,
helpers, every other torch function. An item of ``forbid`` is either

* a torch-function pattern (fnmatch on the function's name): ``"*attention*"`` catches
  ``F.scaled_dot_product_attention``, ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu`` ...;
  ``"linear"`` catches ``F.linear``, ``nn.Linear``'s forward and ``torch.ops.aten.linear``. A TorchFunctionMode
  sees them (a TorchDispatchMode does not: it sits below the decomposition of ``aten::linear``);
* a Python function or class (its ``__init__`` and ``forward``), seen by a profile hook that only compares
  code objects; ``(name, function)`` says how a verdict names it.

The checker is a learning aid, not an exam: the watch names a shortcut, it does not fight tampering.
"""
from __future__ import annotations

import contextlib
import fnmatch
import inspect
import sys

import torch
from torch.overrides import TorchFunctionMode

SDPA = "*attention*"  # F.scaled_dot_product_attention, the fused kernels, F.multi_head_attention_forward ...
LINEAR = "linear"


def _codes(item) -> dict:
    """code object -> the name a verdict gives, for a forbidden Python function or class."""
    name, item = item if isinstance(item, tuple) else (None, item)  # (how a verdict names it, the function)
    fns = [getattr(item, m) for m in ("__init__", "forward") if m in vars(item)] if isinstance(item, type) else [item]
    module = item.__module__
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

    def __torch_function__(self, func, types, args=(), kwargs=None):
        base = getattr(func, "__name__", "").split(".")[0]
        if any(fnmatch.fnmatchcase(base, p) for p in self.patterns):
            self.hits.append(_torch_name(func))
        return func(*args, **(kwargs or {}))

    def profile(self, frame, event, arg):
        if event == "call" and frame.f_code in self.codes:
            self.hits.append(self.codes[frame.f_code])


@contextlib.contextmanager
def watch_shortcuts(forbid):
    """Watch the block; yields the :class:`_Watch` whose ``hits`` name the forbidden calls made in it."""
    watch, previous = _Watch(forbid), sys.getprofile()
    sys.setprofile(watch.profile if watch.codes else previous)
    try:
        with watch:
            yield watch
    finally:
        sys.setprofile(previous)


SHORTCUT_HINT = "请只用 torch 的基本运算（view、transpose、@、softmax、masked_fill……）写出来"


def shortcut_message(name: str, hint: str | None = None) -> str:
    return f"这道题要你自己实现，不能调用现成的 {name}（检查时发现你的代码调用了它）；{hint or SHORTCUT_HINT}"
