"""mha: multi-head attention, step by step.

Two rooms in one package:

* **the core** (this folder, imports only torch): the full layer
  :class:`MultiHeadAttention` (with ``decode()`` for the KV cache and
  ``n_kv_heads`` for GQA/MQA), each step of the lecture as a function in
  :mod:`mha.steps`, masks in :mod:`mha.masks`, the KV cache, input validation,
  interop with ``torch.nn.MultiheadAttention`` and the positional encoding;
* **the course** (:mod:`mha.course`): what the book needs around it — printing
  (``fmt``), exercise checkers and self-checks, figures, interactive explorers,
  the toy task, the trained numeral Transformer, the benchmark and package data.
  It needs matplotlib, ipywidgets, altair and jupyterquiz; the core does not.

Names the chapters have always imported keep working as aliases of their new
home: ``mha.fmt`` is :func:`mha.course.display.fmt`, and ``mha.exercises``,
``mha.selfcheck``, ``mha.viz``, ``mha.widgets``, ``mha.interactive``,
``mha.numerals``, ``mha.toy_task``, ``mha.bench``, ``mha.display`` (with all
their submodules, e.g. ``mha.viz.curves`` or ``python -m mha.numerals``) are
the very modules under ``mha.course``. Nothing of the course loads until such
a name is used.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

from . import masks, positional, steps
from .gqa import GroupedQueryAttention
from .interop import from_torch, to_torch
from .kv_cache import KVCache
from .layer import MultiHeadAttention
from .masks import causal_mask, padding_mask, padding_mask_from_lengths
from .steps import *  # noqa: F401,F403  (the six steps, one function each: see mha.steps.__all__)

__version__ = "0.1.0"

__all__ = [
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "KVCache",
    "from_torch",
    "to_torch",
    "padding_mask",
    "padding_mask_from_lengths",
    "causal_mask",
] + steps.__all__  # (``fmt`` is the course's: ``mha.fmt`` works, ``from mha import *`` leaves it out)

# The old module names that now live in mha.course (readers' saved notebooks import them).
COURSE_ALIASES = ("bench", "display", "exercises", "interactive", "numerals", "selfcheck", "toy_task", "viz",
                  "widgets")


def _course_name(fullname: str) -> str | None:
    """``mha.viz.curves`` -> ``mha.course.viz.curves``; None for names that are not aliases."""
    parts = fullname.split(".")
    if len(parts) >= 2 and parts[0] == __name__ and parts[1] in COURSE_ALIASES:
        return ".".join([__name__, "course", *parts[1:]])
    return None


class _AliasedPackage(types.ModuleType):
    """A course package reached by its old name too. Importing ``mha.numerals.train`` for the first time
    binds the submodule on the package, as every import does; here that would hide the function
    ``mha.numerals.train`` that the package exports under the same name, so such a binding is skipped."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and not isinstance(self.__dict__.get(name, value), types.ModuleType):
            return
        super().__setattr__(name, value)


class _CourseAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import ``mha.<old>`` as the module ``mha.course.<old>`` itself (one module object, two names)."""

    def find_spec(self, fullname, path=None, target=None):
        real = _course_name(fullname)
        found = None if real is None else importlib.util.find_spec(real)  # imports the parents only
        if found is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=found.submodule_search_locations is not None)

    def create_module(self, spec):
        module = importlib.import_module(_course_name(spec.name))
        spec.loader_state = module.__spec__
        if hasattr(module, "__path__") and type(module) is types.ModuleType:
            module.__class__ = _AliasedPackage
        return module

    def exec_module(self, module):
        # The import system has just stamped the alias spec on the real module: give it back its own.
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):  # `python -m mha.numerals` runs mha.course.numerals.__main__
        real = _course_name(fullname)
        return importlib.util.find_spec(real).loader.get_code(real)


# One finder, also after importlib.reload(mha) (which defines the class anew).
sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ != "_CourseAlias"]
sys.meta_path.insert(0, _CourseAlias())


def __getattr__(name: str):
    if name == "fmt":
        from .course.display import fmt

        return fmt
    if name in COURSE_ALIASES or name == "course":
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
