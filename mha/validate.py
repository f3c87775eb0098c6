"""Input validation with messages that name what was expected and what came.

The entry points of :mod:`mha` (the layer's constructor, ``forward`` and ``decode``, the
mask builders, :class:`mha.KVCache`) call these helpers once, before touching torch, so a
student sees ``expected (B, L, 512), got (2, 4, 256)`` instead of a matrix-multiplication
error from deep inside PyTorch. The step functions of :mod:`mha.steps` do not validate
again: they are the plain math, called on inputs that were checked here.

One rule for every helper: a value of the wrong *type* raises ``TypeError``, a value of the
right type that is out of range or of the wrong shape raises ``ValueError``
(``tests/unit/test_errors.py`` holds the table).

(Not to be confused with the exercise checkers, ``mha.course.exercises.check_*``, which grade a
student's answer.)
"""
from __future__ import annotations

import numbers
import operator

import torch

__all__ = ["require_tensor", "require_float_tensor", "require_rank", "require_same_dtype_device",
           "require_finite", "tracing", "exporting", "require_int", "require_number", "require_head_config", "require_attention_inputs", "require_is_causal"]


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def require_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a ``torch.Tensor``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def require_float_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a floating-point tensor."""
    require_tensor(x, name)
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (e.g. torch.float32), got dtype {x.dtype}; "
            "token ids must go through an Embedding first"
        )
    return x


def require_rank(x: torch.Tensor, rank: int, name: str, legend: str) -> torch.Tensor:
    """Raise ``ValueError`` unless ``x.dim() == rank``; ``legend`` names the axes, e.g. ``(B, L, d_model)``."""
    if x.dim() != rank:
        raise ValueError(f"{name} must have shape {legend} ({rank} dims), got {_shape(x)} ({x.dim()} dims)")
    return x


def require_same_dtype_device(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``TypeError`` on a dtype mismatch, ``ValueError`` on a device mismatch."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but {first_name} has dtype {first.dtype}; expected all the same")
        if t.device != first.device:
            raise ValueError(f"{name} is on device {t.device} but {first_name} is on {first.device}; expected the same device")


def require_finite(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` naming the first tensor that holds NaN or infinity.

    One sum decides the common case cheaply (and, on a GPU, with one synchronisation):
    any NaN or infinity makes the sum NaN or infinite, so a finite sum means finite
    values. Only a non-finite sum (bad values, or huge ones whose sum overflows) pays
    for counting them. A tensor passed under several names (self-attention's query,
    key and value) is summed once; meta tensors have no values to check.

    Skipped while ``torch.compile`` or ``torch.export`` traces the code (:func:`tracing`):
    the check branches in Python on a tensor's value, which would break the compiled
    graph (and, on a GPU, wait for the device at every call). So eager mode refuses
    NaN and infinity with this error; a compiled or exported model does not check,
    exactly like ``nn.MultiheadAttention``, which never checks.
    """
    if tracing():
        return
    distinct: dict[int, tuple[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        if t.device.type != "meta":
            distinct.setdefault(id(t), (name, t))
    if not distinct or torch.isfinite(sum(t.detach().sum() for _, t in distinct.values())):
        return
    for name, t in distinct.values():
        n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
        if n_nan or n_inf:
            raise ValueError(
                f"{name} must hold finite numbers, got {n_nan} NaN and {n_inf} infinite value(s) "
                f"in shape {_shape(t)}; attention would spread them over other positions' outputs"
            )


def tracing() -> bool:
    """True while ``torch.compile`` (dynamo) or ``torch.export`` traces the code: value checks skip themselves.

    ``torch.compiler.is_compiling()`` is True inside both (torch >= 2.3); :func:`exporting`
    covers older versions' export. Shape and type checks still run: they read no values.
    """
    is_compiling = getattr(torch.compiler, "is_compiling", None)  # torch >= 2.3; pyproject allows older
    return bool(is_compiling and is_compiling()) or exporting()


def exporting() -> bool:
    """True while ``torch.export`` (so also ``torch.onnx.export(..., dynamo=True)``) traces the code.

    A check that reads tensor *values* (NaN, token ids in range) cannot run on an export's
    symbolic tensors and would stop it, so it skips itself then; shape and type checks still run.
    """
    is_exporting = getattr(torch.compiler, "is_exporting", None)  # torch >= 2.5; pyproject allows older
    return bool(is_exporting and is_exporting())


def require_int(value, name: str, minimum: int = 0) -> int:
    """Return ``value`` as a Python int; ``TypeError`` unless it is an integer (not a bool), ``ValueError`` below ``minimum``.

    Integers of any kind count (``3``, ``numpy.int64(3)``, ``torch.tensor(3)``); ``3.0``, ``"3"``,
    ``None`` and ``True`` do not. A symbolic size (``torch.SymInt``, while exporting) stays
    symbolic: ``operator.index`` would fix it to the example's value.
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        number = value if isinstance(value, torch.SymInt) else operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {number}")
    return number


def require_number(value, name: str, low: float, high: float, *, low_inclusive: bool = True,
                   high_inclusive: bool = False) -> float:
    """Return ``value`` as a float; ``TypeError`` unless it is a real number (not a bool; numpy and
    0-dim torch numbers count), ``ValueError`` outside ``[low, high)`` (brackets as the flags say)."""
    interval = f"{'[' if low_inclusive else '('}{low}, {high}{']' if high_inclusive else ')'}"
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_complex() and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in {interval}, got {type(value).__name__} {value!r}")
    above = low <= value if low_inclusive else low < value
    below = value <= high if high_inclusive else value < high
    if not (above and below):
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return float(value)


def require_head_config(d_model, n_heads, dropout: float, n_kv_heads=None) -> tuple:
    """Validate ``d_model``, ``n_heads`` (must divide ``d_model``), ``n_kv_heads`` (must divide ``n_heads``), ``dropout``.

    Returns them as plain Python numbers ``(d_model, n_heads, dropout, n_kv_heads)``.
    """
    d_model = require_int(d_model, "d_model", minimum=1)
    n_heads = require_int(n_heads, "n_heads", minimum=1)
    if n_kv_heads is not None:
        n_kv_heads = require_int(n_kv_heads, "n_kv_heads (None means n_heads)", minimum=1)
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model must be divisible by n_heads: got d_model={d_model}, n_heads={n_heads} "
            f"({d_model} / {n_heads} = {d_model / n_heads:.3g} is not a whole head width d_k)"
        )
    if n_kv_heads is not None and n_heads % n_kv_heads != 0:
        raise ValueError(
            f"n_heads must be divisible by n_kv_heads (each K/V head serves a whole group of query heads): "
            f"got n_heads={n_heads}, n_kv_heads={n_kv_heads}"
        )
    return d_model, n_heads, require_number(dropout, "dropout", 0.0, 1.0), n_kv_heads


def require_is_causal(is_causal) -> bool:
    """Raise ``TypeError`` unless ``is_causal`` is a Python bool (a mask belongs in ``mask``)."""
    if not isinstance(is_causal, bool):
        raise TypeError(
            f"is_causal must be True or False, got {type(is_causal).__name__}; pass a mask tensor as mask=..."
        )
    return is_causal


def require_attention_inputs(query, key, value, d_model: int, weight: torch.Tensor) -> None:
    """Validate query (B, L, d_model), key/value (B, S, d_model) against each other and the layer's ``weight``.

    The values must be finite: a NaN or infinity would come out as NaN on the explicit path
    but could be masked away on the fused one, so the two paths would disagree silently.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_float_tensor(t, name)
    require_rank(query, 3, "query", "(B, L, d_model)")
    require_rank(key, 3, "key", "(B, S, d_model)")
    require_rank(value, 3, "value", "(B, S, d_model)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.shape[-1] != d_model:
            raise ValueError(f"{name} must have last dim d_model={d_model}, got shape {_shape(t)}")
    if key.shape[:2] != value.shape[:2]:
        raise ValueError(f"key and value must have the same (B, S), got key {_shape(key)} and value {_shape(value)}")
    if query.shape[0] != key.shape[0]:
        raise ValueError(
            f"query and key must have the same batch size B, got query {_shape(query)} and key {_shape(key)}"
        )
    require_same_dtype_device({"query": query, "key": key, "value": value, "the layer's weights": weight})
    require_finite({"query": query, "key": key, "value": value})
