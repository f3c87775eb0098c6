"""mha: multi-head attention, step by step.

Two rooms in one package:

* **the core** (this folder, imports only torch): the full layer
  :class:`MultiHeadAttention` (with ``decode()`` for the KV cache and
  ``n_kv_heads`` for GQA/MQA), each step of the lecture as a function in
  :mod:`mha.steps`, masks in :mod:`mha.masks`, the KV cache, input validation,
  interop with ``torch.nn.MultiheadAttention`` and the positional encoding;
* **the course** (:mod:`mha.course`): what the book needs around it -- printing
  (:func:`mha.course.display.fmt`), exercise checkers and self-checks, figures,
  the toy task, the trained numeral Transformer, the benchmark and package data.
  It needs matplotlib, ipywidgets, altair and jupyterquiz; the core does not.

``mha.fmt`` is :func:`mha.course.display.fmt`, loaded on first use, so that every
chapter prints through one short name. Nothing else of the course loads with ``import mha``.
"""
from __future__ import annotations

import importlib

from . import masks, positional, steps
from .gqa import GroupedQueryAttention
from .interop import from_torch, to_torch
from .kv_cache import KVCache
from .layer import MultiHeadAttention
from .masks import causal_mask, padding_mask, padding_mask_from_lengths
from .steps import *  # noqa: F401,F403  (the steps and their helpers: see mha.steps.__all__)

__version__ = "0.2.0"

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


def __getattr__(name: str):
    if name == "fmt":
        from .course.display import fmt

        return fmt
    if name == "course":
        return importlib.import_module(f"{__name__}.course")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
