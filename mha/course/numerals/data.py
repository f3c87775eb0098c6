"""Vocabularies, tokenisation, padding and the train / held-out split of the numeral task.

Shape legend: B batch, S source length (Chinese characters), T target length
(digits plus one BOS or EOS).

Source: the characters of the Chinese numeral (any writing :func:`mha.course.numerals.read` accepts), ids from :data:`SRC_TOKENS`,
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
from mha.validate import require_int
from .styles import sample_style, write
from .words import ALPHABET, MAX_NUMBER, to_chinese

__all__ = ["SRC_TOKENS", "TGT_TOKENS", "PAD", "BOS", "EOS", "SRC_ID", "TGT_ID", "MAX_SOURCE_LEN", "MAX_TARGET_LEN",
           "LENGTH_WEIGHTS", "Batch", "encode_source", "encode_target", "decode_target", "make_batch",
           "is_held_out", "sample_number", "sample_hard_number", "training_numbers", "training_batch", "held_out_numbers",
           "HARD_SHARE"]

SRC_TOKENS = ("<pad>",) + tuple(ALPHABET)  # 29 tokens: <pad>, 零, 一, 二, 两, ..., 万 (ids 0-15 as before), 壹 ... 萬
TGT_TOKENS = ("<pad>", "<bos>", "<eos>") + tuple("0123456789")  # 13 tokens
PAD, BOS, EOS = 0, 1, 2  # <pad> is id 0 on both sides
SRC_ID = {tok: i for i, tok in enumerate(SRC_TOKENS)}
TGT_ID = {tok: i for i, tok in enumerate(TGT_TOKENS)}
MAX_SOURCE_LEN = 15  # 九千七百九十七万九千七百九十七
MAX_TARGET_LEN = 9  # 8 digits + <bos> (decoder input) or + <eos> (decoder output)
LENGTH_WEIGHTS = (1, 1, 2, 3, 4, 5, 6, 8)  # relative frequency of 1, 2, ..., 8 digit numbers in a batch
ZERO_RATES = (0.1, 0.5)  # per number: chance that each digit after the first is 0 (0.1 = uniform digits)
HARD_SHARE = 0.4  # share of training numbers drawn by sample_hard_number
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


def make_batch(numbers, words=None) -> Batch:
    """The :class:`Batch` of a list of numbers, written as ``words`` (default: their standard readings)."""
    numbers = tuple(_validate_number(n) for n in numbers)
    words = tuple(to_chinese(n) for n in numbers) if words is None else tuple(words)
    if len(words) != len(numbers):
        raise ValueError(f"need one writing per number: {len(numbers)} numbers, {len(words)} writings")
    src, src_mask = encode_source(words)
    tgt_in, tgt_out = encode_target(numbers)
    return Batch(numbers, words, src, src_mask, tgt_in, tgt_out)


def _validate_number(n) -> int:
    n = require_int(n, "number")
    if n > MAX_NUMBER:
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


def _digits(first: int, rest) -> int:
    n = first
    for d in rest:
        n = 10 * n + d
    return n


def sample_hard_number(rng: random.Random) -> int:
    """One number of a kind the uniform sampler rarely draws and the model easily gets wrong.

    Equally often: a leading 十 (10-19 and 十X万: 100000-199999), one or two zeros in a long number,
    a zero that bridges 万 (X万零Y: the units group is 1-999), a run of a repeated digit, a round
    number (two non-zero digits, then zeros).
    """
    kind = rng.randrange(6)
    length = rng.randrange(5, 9)
    digits = [rng.randrange(1, 10) for _ in range(length - 1)]
    if kind == 0:  # leading 十: 十X万... or 十X
        return _digits(1, [rng.randrange(10) if rng.random() < 0.7 else 0 for _ in range(5 if rng.random() < 0.8 else 1)])
    if kind in (1, 2):  # one or two zeros anywhere after the first digit
        for k in rng.sample(range(len(digits)), min(kind, len(digits))):
            digits[k] = 0
    elif kind == 3:  # zero bridging 万: a non-empty 万 group, then 1 ... 999
        return rng.randrange(1, 10 ** rng.randrange(1, 5)) * 10000 + rng.randrange(1, 10 ** rng.randrange(1, 4))
    elif kind == 4:  # a run of one digit (2-5 long) somewhere
        run, d = rng.randrange(2, min(5, len(digits)) + 1), rng.randrange(10)
        start = rng.randrange(len(digits) - run + 1)
        digits[start: start + run] = [d] * run
    else:  # round: two non-zero digits, then zeros
        digits = [rng.randrange(1, 10)] + [0] * (length - 2)
    return _digits(rng.randrange(1, 10), digits)


def training_numbers(rng: random.Random, count: int) -> list[int]:
    """``count`` numbers, none of them held out (repeats allowed): :func:`sample_number`, and with
    probability :data:`HARD_SHARE` :func:`sample_hard_number`."""
    out = []
    while len(out) < count:
        n = sample_hard_number(rng) if rng.random() < HARD_SHARE else sample_number(rng)
        if not is_held_out(n):
            out.append(n)
    return out


def training_batch(rng: random.Random, count: int) -> Batch:
    """A training :class:`Batch`: :func:`training_numbers`, each written in a style drawn by
    :func:`mha.course.numerals.styles.sample_style` (standard, 二, 两百, 一十, short form, 大写)."""
    numbers = training_numbers(rng, count)
    return make_batch(numbers, [write(n, sample_style(rng), rng) for n in numbers])


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
