"""Vocabularies, tokenisation, padding and the train / held-out split of the numeral task.

Shape legend: B batch, S source length (Chinese characters), T target length
(digits plus one BOS or EOS).

Source: the characters of the Chinese numeral, ids from :data:`SRC_TOKENS`,
padded on the right with ``<pad>`` (id 0) to the longest numeral of the batch.
Target: the Arabic digits. The decoder reads ``<bos> d1 d2 ...`` and must
predict ``d1 d2 ... <eos>`` (the same sequence shifted by one), also padded
with ``<pad>`` (id 0), which the loss ignores.

The split holds out *numbers*, not patterns: a number with at least two
non-zero digits is held out when a hash of it lands in one of ten buckets, so
about 10 % of those numbers never appear in training, while every number with
a single non-zero digit (一, 两千, 三十万, 九千万 ...) stays in training.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from mha.masks import padding_mask
from .words import ALPHABET, MAX_NUMBER, STANDARD_ALPHABET, to_chinese

__all__ = ["SRC_TOKENS", "TGT_TOKENS", "PAD", "BOS", "EOS", "SRC_ID", "TGT_ID", "MAX_SOURCE_LEN", "MAX_TARGET_LEN",
           "LENGTH_WEIGHTS", "Batch", "encode_source", "encode_target", "decode_target", "make_batch",
           "is_held_out", "sample_number", "training_numbers", "held_out_numbers"]

SRC_TOKENS = ("<pad>",) + tuple(STANDARD_ALPHABET)  # 16 tokens: <pad>, 零, 一, 二, 两, ..., 万
TGT_TOKENS = ("<pad>", "<bos>", "<eos>") + tuple("0123456789")  # 13 tokens
PAD, BOS, EOS = 0, 1, 2  # <pad> is id 0 on both sides
SRC_ID = {tok: i for i, tok in enumerate(SRC_TOKENS)}
TGT_ID = {tok: i for i, tok in enumerate(TGT_TOKENS)}
MAX_SOURCE_LEN = 15  # 九千七百九十七万九千七百九十七
MAX_TARGET_LEN = 9  # 8 digits + <bos> (decoder input) or + <eos> (decoder output)
LENGTH_WEIGHTS = (1, 1, 2, 3, 4, 5, 6, 8)  # relative frequency of 1, 2, ..., 8 digit numbers in a batch
ZERO_RATES = (0.1, 0.5)  # per number: chance that each digit after the first is 0 (0.1 = uniform digits)
_HOLD_OUT_BUCKETS = 10  # 1 bucket in 10 is held out


@dataclass(frozen=True)
class Batch:
    """A padded batch: the numbers, their Chinese words and the model's tensors.

    Attributes:
        src: (B, S) source ids; src_mask: (B, 1, 1, S) bool, True = real character.
        tgt_in: (B, T) decoder input ``<bos> d1 ... dn <pad>...``.
        tgt_out: (B, T) decoder target ``d1 ... dn <eos> <pad>...``.
    """

    numbers: tuple
    words: tuple
    src: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def encode_source(words) -> tuple[torch.Tensor, torch.Tensor]:
    """Chinese numerals -> ``(ids (B, S) long, mask (B, 1, 1, S) bool)``, padded on the right.

    Raises ``ValueError`` naming the first character outside :data:`SRC_TOKENS`.
    """
    words = [words] if isinstance(words, str) else list(words)
    if not words or any(not isinstance(w, str) or not w for w in words):
        raise ValueError(f"expected a non-empty list of non-empty strings, got {words!r}")
    for w in words:
        bad = [ch for ch in w if ch not in SRC_ID]
        if bad:
            raise ValueError(f"{w!r} contains {bad[0]!r}, which is not in the source vocabulary {ALPHABET}")
    S = max(len(w) for w in words)
    ids = torch.full((len(words), S), PAD, dtype=torch.long)  # (B, S)
    for b, w in enumerate(words):
        ids[b, : len(w)] = torch.tensor([SRC_ID[ch] for ch in w])
    return ids, padding_mask(ids, PAD)  # (B, S), (B, 1, 1, S)


def encode_target(numbers) -> tuple[torch.Tensor, torch.Tensor]:
    """Numbers -> ``(tgt_in (B, T), tgt_out (B, T))`` with T = most digits in the batch + 1."""
    digits = [str(_validate_number(n)) for n in numbers]
    T = max(len(d) for d in digits) + 1
    tgt_in = torch.full((len(digits), T), PAD, dtype=torch.long)  # (B, T)
    tgt_out = torch.full((len(digits), T), PAD, dtype=torch.long)  # (B, T)
    for b, d in enumerate(digits):
        ids = [TGT_ID[c] for c in d]
        tgt_in[b, : len(ids) + 1] = torch.tensor([BOS] + ids)
        tgt_out[b, : len(ids) + 1] = torch.tensor(ids + [EOS])
    return tgt_in, tgt_out


def decode_target(ids: torch.Tensor) -> list[str]:
    """(B, T) predicted target ids -> digit strings, each cut at its first ``<eos>``.

    Special tokens before the ``<eos>`` (a ``<bos>`` or ``<pad>`` the model
    should not have produced) are kept as ``?`` so a wrong answer never looks right.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
        raise ValueError(f"ids must be a (B, T) tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    out = []
    for row in ids.tolist():
        text = []
        for i in row:
            if i == EOS:
                break
            text.append(TGT_TOKENS[i] if i >= 3 else "?")
        out.append("".join(text))
    return out


def make_batch(numbers) -> Batch:
    """The :class:`Batch` of a list of numbers."""
    numbers = tuple(_validate_number(n) for n in numbers)
    words = tuple(to_chinese(n) for n in numbers)
    src, src_mask = encode_source(words)
    tgt_in, tgt_out = encode_target(numbers)
    return Batch(numbers, words, src, src_mask, tgt_in, tgt_out)


def _validate_number(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"numbers must be ints in [0, {MAX_NUMBER:,}], got {n!r}")
    return n


# ---------------------------------------------------------------- the split and the sampler

def _mix(n: int) -> int:
    """splitmix64: a well-mixed 64-bit hash of n (Python ints, the same on every machine)."""
    mask = (1 << 64) - 1
    z = (n + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def is_held_out(n: int) -> bool:
    """True for the numbers training never sees: >= 2 non-zero digits and hash bucket 0 of 10."""
    nonzero = sum(1 for c in str(n) if c != "0")
    return nonzero >= 2 and _mix(n) % _HOLD_OUT_BUCKETS == 0


def sample_number(rng: random.Random) -> int:
    """One number: its digit count drawn with :data:`LENGTH_WEIGHTS`, then its digits.

    The first digit is 1-9 (0-9 for a one-digit number); each later digit is 0
    with probability 0.1 (uniform digits) or 0.5 (zero-rich, for the 零 rules),
    chosen per number, and otherwise 1-9.
    """
    length = rng.choices(range(1, len(LENGTH_WEIGHTS) + 1), weights=LENGTH_WEIGHTS)[0]
    if length == 1:
        return rng.randrange(10)
    zero_rate = rng.choice(ZERO_RATES)
    n = rng.randrange(1, 10)
    for _ in range(length - 1):
        n = 10 * n + (0 if rng.random() < zero_rate else rng.randrange(1, 10))
    return n


def training_numbers(rng: random.Random, count: int) -> list[int]:
    """``count`` numbers from :func:`sample_number`, none of them held out (repeats allowed)."""
    out = []
    while len(out) < count:
        n = sample_number(rng)
        if not is_held_out(n):
            out.append(n)
    return out


def held_out_numbers(count: int = 2000, seed: int = 2026) -> list[int]:
    """``count`` distinct held-out numbers, drawn like the training numbers; the same list on every machine."""
    rng = random.Random(seed)
    seen: dict[int, None] = {}
    tries = 0
    while len(seen) < count:
        n = sample_number(rng)
        tries += 1
        if is_held_out(n):
            seen[n] = None
        if tries > 1000 * count:
            raise RuntimeError(f"could not find {count} distinct held-out numbers")
    return list(seen)
