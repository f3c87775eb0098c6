"""Measuring what the heads of a numeral model do, over many numbers at once.

All functions run one *teacher-forced* pass (the decoder reads the correct
digits) and work on its attention maps. Shape legend: B numbers, h heads,
T target steps (digits + ``<eos>``), S source characters.

Greedy decoding writes the right answer exactly when every step, given the
right digits before it, picks the right next token; so
:func:`teacher_forced_exact_match` equals greedy exact match
(:func:`mha.course.numerals.exact_match`) while needing one forward pass instead of T.
"""
from __future__ import annotations

import math

import torch

from .data import PAD, Batch, make_batch
from .model import BLOCKS, NumeralTransformer, ablate_heads
from .words import digit_sources

__all__ = ["teacher_forced", "correct_rows", "teacher_forced_exact_match", "digit_peak_rate", "char_kinds",
           "zero_peak_kinds", "mass_on", "mass_chance", "digit_peak_breakdown", "PLACE_NAMES", "head_means", "evenness",
           "previous_token_rate", "ablation_accuracies"]

KINDS = ("digit", "unit", "万", "零")


@torch.no_grad()
def teacher_forced(model: NumeralTransformer, numbers) -> tuple[Batch, dict]:
    """``(batch, maps)``: the padded batch of ``numbers`` and :meth:`NumeralTransformer.attention_maps`."""
    batch = make_batch(numbers)
    return batch, model.attention_maps(batch.src, batch.src_mask, batch.tgt_in)


def correct_rows(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(B,) bool: every non-PAD target position predicted right (argmax of logits (B, T, V))."""
    right = (logits.argmax(-1) == batch.tgt_out) | (batch.tgt_out == PAD)  # (B, T)
    return right.all(dim=1)


@torch.no_grad()
def teacher_forced_exact_match(model: NumeralTransformer, numbers) -> float:
    """Fraction of numbers whose every digit and ``<eos>`` the model predicts right under teacher forcing.

    ``numbers``: a list of numbers or an already padded :class:`Batch` of them.
    """
    batch = numbers if isinstance(numbers, Batch) else make_batch(numbers)
    logits = model(batch.src, batch.src_mask, batch.tgt_in)  # (B, T, V)
    return int(correct_rows(logits, batch).sum()) / len(batch.numbers)  # exact fraction, like exact_match


def _real(batch: Batch, b: int) -> int:
    return len(batch.words[b])


def digit_peak_rate(cross: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(h,): for each head, the fraction of non-zero output digits whose strongest source character names that digit.

    Args:
        cross: (B, h, T, S) cross-attention weights of one decoder layer; row t
            is the step that *writes* digit t (it reads ``<bos>`` or digit t-1).
    """
    hits = torch.zeros(cross.shape[1])
    total = 0
    for b, n in enumerate(batch.numbers):
        for t, src in enumerate(digit_sources(n)):
            if src is None:
                continue
            peak = cross[b, :, t, : _real(batch, b)].argmax(-1)  # (h,)
            hits += (peak == src).float()
            total += 1
    return hits / max(total, 1)


def char_kinds(word: str) -> list[str]:
    """The kind of each character: ``"digit"`` (一 ... 九, 两), ``"unit"`` (十 百 千), ``"万"`` or ``"零"``."""
    return ["零" if c == "零" else "万" if c == "万" else "unit" if c in "十百千" else "digit" for c in word]


def zero_peak_kinds(cross: torch.Tensor, batch: Batch) -> dict:
    """``{kind: (h,) fraction}``: where each head's strongest source character lies when it writes a 0 digit.

    Only numbers other than 0 count (the 0 of 零 is named by its own character).
    """
    counts = {k: torch.zeros(cross.shape[1]) for k in KINDS}
    total = 0
    for b, n in enumerate(batch.numbers):
        if n == 0:
            continue
        kinds = char_kinds(batch.words[b])
        for t, d in enumerate(str(n)):
            if d != "0":
                continue
            peak = cross[b, :, t, : _real(batch, b)].argmax(-1)  # (h,)
            for head, j in enumerate(peak.tolist()):
                counts[kinds[j]][head] += 1
            total += 1
    return {k: v / max(total, 1) for k, v in counts.items()}


def mass_on(weights: torch.Tensor, batch: Batch, char: str, kind: str, rows: str = "all") -> torch.Tensor:
    """(h,): mean attention weight on the character ``char``, over the numbers that contain it.

    Args:
        weights: (B, h, L, S) weights of one layer: ``kind="encoder"`` (L = S, the rows are the
            characters) or ``kind="cross"`` (L = T, the rows are the steps that write digits and <eos>).
        rows: ``"all"`` averages over every real query row; ``"first"`` uses row 0 only.
    """
    if kind not in ("encoder", "cross"):
        raise ValueError(f"kind must be 'encoder' or 'cross', got {kind!r}")
    if rows not in ("all", "first"):
        raise ValueError(f"rows must be 'all' or 'first', got {rows!r}")
    total, count = torch.zeros(weights.shape[1]), 0
    for b, word in enumerate(batch.words):
        if char not in word:
            continue
        j = word.index(char)
        L = (len(str(batch.numbers[b])) + 1) if kind == "cross" else len(word)
        L = 1 if rows == "first" else L
        total += weights[b, :, :L, j].mean(dim=1)
        count += 1
    return total / max(count, 1)


def mass_chance(batch: Batch, char: str, kind: str, rows: str = "all") -> float:
    """The :func:`mass_on` of a head that spreads its weight evenly over the real characters: mean 1 / S."""
    inverse = [1 / len(w) for w in batch.words if char in w]
    return sum(inverse) / max(len(inverse), 1)


PLACE_NAMES = ("个", "十", "百", "千", "万", "十万", "百万", "千万")


def digit_peak_breakdown(cross: torch.Tensor, batch: Batch) -> dict:
    """The alignment statistic of :func:`digit_peak_rate`, by context, with its chance baseline.

    For each context, ``{"count": n, "hit": (h,) fraction whose peak is the naming character,
    "weight": (h,) mean weight on it, "chance": mean 1 / S (a head that looks anywhere)}``. Contexts:
    ``"all"``, each place (``"个"`` ... ``"千万"``), ``"after 万"`` (the naming character follows 万)
    and ``"after 零"`` (it follows 零). Only numbers written as their standard reading (``digit_sources``).
    """
    stats: dict = {}

    def add(ctx, b, t, src, S):
        entry = stats.setdefault(ctx, {"count": 0, "hit": torch.zeros(cross.shape[1]),
                                       "weight": torch.zeros(cross.shape[1]), "chance": 0.0})
        row = cross[b, :, t, :S]  # (h, S)
        entry["count"] += 1
        entry["hit"] += (row.argmax(-1) == src).float()
        entry["weight"] += row[:, src].float()
        entry["chance"] += 1 / S

    for b, n in enumerate(batch.numbers):
        word, digits = batch.words[b], str(n)
        S = len(word)
        for t, src in enumerate(digit_sources(n)):
            if src is None:
                continue
            add("all", b, t, src, S)
            add(PLACE_NAMES[len(digits) - 1 - t], b, t, src, S)
            if src > 0 and word[src - 1] in "万零":
                add(f"after {word[src - 1]}", b, t, src, S)
    for entry in stats.values():
        entry["hit"] /= entry["count"]
        entry["weight"] /= entry["count"]
        entry["chance"] /= entry["count"]
    return stats


@torch.no_grad()
def head_means(model: NumeralTransformer, numbers) -> dict:
    """``{(block, layer, head): (mean (d_k,), per-position mean (P, d_k))}`` of every head's output.

    The output of a head is its d_k columns of the Concat that ``W_o`` receives (teacher forcing);
    the means run over the real (non-padding) query positions of ``numbers``. These are the values
    mean-ablation puts in place of a head (:func:`mha.course.numerals.ablate_heads` with ``mode="mean"``).
    """
    batch = make_batch(numbers)
    src_real = batch.src_mask[:, 0, 0, :]  # (B, S)
    tgt_real = batch.tgt_out != PAD  # (B, T)
    captured, handles = {}, []
    for block in BLOCKS:
        layers = model.cfg.n_encoder_layers if block == "encoder" else model.cfg.n_decoder_layers
        for layer in range(layers):
            attn = model.attention(block, layer)
            handles.append(attn.W_o.register_forward_pre_hook(
                lambda module, inputs, key=(block, layer): captured.__setitem__(key, inputs[0].detach())))
    try:
        model(batch.src, batch.src_mask, batch.tgt_in)
    finally:
        for handle in handles:
            handle.remove()
    out = {}
    for (block, layer), concat in captured.items():  # (B, L, d_model)
        real = (src_real if block == "encoder" else tgt_real).to(concat.dtype)[..., None]  # (B, L, 1)
        attn = model.attention(block, layer)
        for head in range(attn.n_heads):
            part = concat[..., head * attn.d_k: (head + 1) * attn.d_k]  # (B, L, d_k)
            per_position = (part * real).sum(0) / real.sum(0).clamp_min(1)  # (L, d_k)
            mean = (part * real).sum((0, 1)) / real.sum()  # (d_k,)
            out[(block, layer, head)] = (mean, per_position)
    return out


@torch.no_grad()
def ablation_accuracies(model: NumeralTransformer, numbers, heads=None, mode: str = "zero", means=None) -> dict:
    """``{(block, layer, head): exact match with that head ablated}`` (teacher-forced, see module doc).

    ``mode``: ``"zero"``, ``"mean"`` or ``"position_mean"`` (:func:`mha.course.numerals.ablate_heads`); the mean
    modes use ``means`` (default: :func:`head_means` of ``numbers`` themselves).
    """
    heads = model.heads() if heads is None else heads
    if mode != "zero" and means is None:
        means = head_means(model, numbers)
    batch = make_batch(numbers)  # padded once, reused for every head
    out = {}
    for key in heads:
        with ablate_heads(model, key, means=means, mode=mode):
            out[key] = teacher_forced_exact_match(model, batch)
    return out


def _causal_rows(weights: torch.Tensor, batch: Batch, first: int):
    """Yield ``(t, row)`` for every real decoder query row t >= ``first``; row is (h, t + 1), the keys it may see."""
    for b, n in enumerate(batch.numbers):
        for t in range(first, len(str(n)) + 1):
            yield t, weights[b, :, t, : t + 1]  # (h, t + 1)


def _mean_over_rows(per_row: list, n_heads: int) -> torch.Tensor:
    """(h,): the mean of a list of (h,) values, zeros when the list is empty."""
    return torch.stack(per_row).mean(0) if per_row else torch.zeros(n_heads)


def evenness(weights: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(h,): how evenly each head spreads its weight in causal self-attention, 1 = perfectly uniform.

    For every real query row t >= 1 (which sees t + 1 tokens) the entropy of the row is divided by
    its largest possible value log(t + 1); the result is averaged over rows and numbers.

    Args:
        weights: (B, h, T, T) decoder self-attention weights.
    """
    per_row = []
    for t, row in _causal_rows(weights, batch, first=1):
        entropy = -(row * row.clamp_min(1e-30).log()).sum(-1)  # (h,)
        per_row.append(entropy / math.log(t + 1))
    return _mean_over_rows(per_row, weights.shape[1])


def previous_token_rate(weights: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(h,): fraction of decoder rows t >= 2 whose strongest key is the token just before (t - 1).

    Args:
        weights: (B, h, T, T) decoder self-attention weights.
    """
    per_row = [(row.argmax(-1) == t - 1).float() for t, row in _causal_rows(weights, batch, first=2)]
    return _mean_over_rows(per_row, weights.shape[1])
