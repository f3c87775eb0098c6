"""Measuring what the heads of a numeral model do, over many numbers at once.

All functions run one *teacher-forced* pass (the decoder reads the correct
digits) and work on its attention maps. Shape legend: B numbers, h heads,
T target steps (digits + ``<eos>``), S source characters.

Greedy decoding writes the right answer exactly when every step, given the
right digits before it, picks the right next token; so
:func:`teacher_forced_exact_match` equals greedy exact match
(:func:`mha.numerals.exact_match`) while needing one forward pass instead of T.
"""
from __future__ import annotations

import math

import torch

from .data import PAD, Batch, make_batch
from .model import NumeralTransformer, ablate_heads
from .words import digit_sources

__all__ = ["teacher_forced", "correct_rows", "teacher_forced_exact_match", "digit_peak_rate", "char_kinds",
           "zero_peak_kinds", "mass_on", "evenness", "previous_token_rate", "ablation_accuracies"]

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


def mass_on(weights: torch.Tensor, batch: Batch, char: str, rows: str = "all") -> torch.Tensor:
    """(h,): mean attention weight on the character ``char``, over the numbers that contain it.

    Args:
        weights: (B, h, L, S) encoder (L = S) or cross (L = T) weights.
        rows: ``"all"`` averages over every real query row; ``"first"`` uses row 0 only.
    """
    total, count = torch.zeros(weights.shape[1]), 0
    cross = weights.shape[2] != weights.shape[3] or weights.shape[2] == batch.tgt_in.shape[1]
    for b, word in enumerate(batch.words):
        if char not in word:
            continue
        j = word.index(char)
        L = (len(str(batch.numbers[b])) + 1) if cross else len(word)
        L = 1 if rows == "first" else L
        total += weights[b, :, :L, j].mean(dim=1)
        count += 1
    return total / max(count, 1)


@torch.no_grad()
def ablation_accuracies(model: NumeralTransformer, numbers, heads=None) -> dict:
    """``{(block, layer, head): exact match with that head zeroed}`` (teacher-forced, see module doc)."""
    heads = model.heads() if heads is None else heads
    batch = make_batch(numbers)  # padded once, reused for every head
    out = {}
    for key in heads:
        with ablate_heads(model, key):
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
