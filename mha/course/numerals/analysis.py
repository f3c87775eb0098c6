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
           "previous_token_rate", "ablation_accuracies", "positional_table", "positional_hit_rate",
           "digit_peak_rate_from", "digit_peak_by_char", "mass_on_by_query", "joint_peak_rate", "head_summary"]

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


def zero_step_kind_shares(batch: Batch) -> dict:
    """``{kind: fraction}``: the chance baseline of :func:`zero_peak_kinds`, over the same rows.

    For every step that writes a 0 (numbers other than 0), the share of that word's characters that are of each
    kind, averaged over those steps: where a head that picks a character of its word at random would land.
    """
    shares = {k: 0.0 for k in KINDS}
    total = 0
    for n, word in zip(batch.numbers, batch.words):
        if n == 0:
            continue
        kinds = char_kinds(word)
        for _ in range(str(n).count("0")):
            for k in KINDS:
                shares[k] += kinds.count(k) / len(kinds)
            total += 1
    return {k: v / max(total, 1) for k, v in shares.items()}


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


def digit_peak_breakdown(cross: torch.Tensor, batch: Batch, table: dict | None = None) -> dict:
    """The alignment statistic of :func:`digit_peak_rate`, by context, with its chance baseline.

    For each context, ``{"count": n, "hit": (h,) fraction whose peak is the naming character,
    "weight": (h,) mean weight on it, "chance": mean 1 / S (a head that looks anywhere)}``. Contexts:
    ``"all"``, each place (``"个"`` ... ``"千万"``), ``"after 万"`` (the naming character follows 万)
    and ``"after 零"`` (it follows 零). Only numbers written as their standard reading (``digit_sources``).
    With a :func:`positional_table`, each entry also has ``"position"``: the content-blind guesser's hit rate.
    """
    stats: dict = {}

    def add(ctx, b, t, src, S):
        entry = stats.setdefault(ctx, {"count": 0, "hit": torch.zeros(cross.shape[1]),
                                       "weight": torch.zeros(cross.shape[1]), "chance": 0.0, "position": 0.0})
        row = cross[b, :, t, :S]  # (h, S)
        entry["count"] += 1
        entry["position"] += float(table is not None and table.get((t, S)) == src)
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
        entry["position"] /= entry["count"]
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


def _digit_rows(batch: Batch, first: int = 0):
    """Yield ``(b, t, src, S)`` for every non-zero output digit t >= ``first`` and the character that names it."""
    for b, n in enumerate(batch.numbers):
        for t, src in enumerate(digit_sources(n)):
            if src is not None and t >= first:
                yield b, t, src, _real(batch, b)


def positional_table(batch: Batch) -> dict:
    """``{(t, S): j}``: the source index j that most often names output digit t in numbers S characters long.

    A *content-blind* guesser: it knows the step t and the length S of the reading, never the characters.
    Build it on training numbers, score it on held-out ones with :func:`positional_hit_rate`.
    """
    counts: dict = {}
    for b, t, src, S in _digit_rows(batch):
        cell = counts.setdefault((t, S), {})
        cell[src] = cell.get(src, 0) + 1
    return {key: max(cell, key=lambda j: (cell[j], -j)) for key, cell in counts.items()}


def positional_hit_rate(table: dict, batch: Batch, first: int = 0) -> tuple[float, int]:
    """``(rate, n)``: how often :func:`positional_table`'s guess is the naming character, over n digits t >= first.

    A pair (t, S) the table never saw counts as a miss.
    """
    rows = list(_digit_rows(batch, first))
    hits = sum(table.get((t, S)) == src for b, t, src, S in rows)
    return hits / max(len(rows), 1), len(rows)


def digit_peak_rate_from(cross: torch.Tensor, batch: Batch, first: int = 0) -> tuple[torch.Tensor, int]:
    """``((h,) rate, n)``: :func:`digit_peak_rate` over the n non-zero digits at steps t >= ``first`` only."""
    hits, rows = torch.zeros(cross.shape[1]), 0
    for b, t, src, S in _digit_rows(batch, first):
        hits += (cross[b, :, t, :S].argmax(-1) == src).float()
        rows += 1
    return hits / max(rows, 1), rows


def digit_peak_by_char(cross: torch.Tensor, batch: Batch, first: int = 1) -> dict:
    """``{character: ((h,) rate, n)}``: :func:`digit_peak_rate` split by the character that names the digit.

    Only steps t >= ``first`` (step 0 always names the first character). ``batch`` may use any writing
    that keeps the standard reading's character positions (e.g. 大写: 两千 -> 贰仟).
    """
    hits: dict = {}
    for b, t, src, S in _digit_rows(batch, first):
        ch = batch.words[b][src]
        h, n = hits.get(ch, (torch.zeros(cross.shape[1]), 0))
        hits[ch] = (h + (cross[b, :, t, :S].argmax(-1) == src).float(), n + 1)
    return {ch: (h / n, n) for ch, (h, n) in hits.items()}


def mass_on_by_query(weights: torch.Tensor, batch: Batch, char: str) -> dict:
    """Encoder self-attention on ``char``, split by where the query character stands.

    Returns ``{"before" | "at" | "after": ((h,) mean weight on char, n query rows, uniform baseline mean 1/S)}``
    over the numbers whose reading contains ``char`` (its first occurrence).

    Args:
        weights: (B, h, S, S) encoder self-attention weights of one layer.
    """
    sums = {g: [torch.zeros(weights.shape[1]), 0, 0.0] for g in ("before", "at", "after")}
    for b, word in enumerate(batch.words):
        if char not in word:
            continue
        j, S = word.index(char), len(word)
        for i in range(S):
            entry = sums["before" if i < j else "at" if i == j else "after"]
            entry[0] += weights[b, :, i, j]
            entry[1] += 1
            entry[2] += 1 / S
    return {g: (s / max(n, 1), n, c / max(n, 1)) for g, (s, n, c) in sums.items()}


def joint_peak_rate(cross: torch.Tensor, batch: Batch, heads) -> float:
    """Fraction of non-zero output digits where at least one of ``heads`` peaks on the naming character."""
    rows = list(_digit_rows(batch))
    hits = sum(bool((cross[b, list(heads), t, :S].argmax(-1) == src).any()) for b, t, src, S in rows)
    return hits / max(len(rows), 1)


@torch.no_grad()
def aligned_heads(batch: Batch, maps: dict) -> list:
    """``[(layer, head), ...]``: the cross-attention heads whose peak names the digit's source character more
    often than :func:`positional_table`'s content-blind guess, on ``batch`` (:func:`teacher_forced`'s output)."""
    positional = positional_hit_rate(positional_table(batch), batch)[0]
    peaks = [digit_peak_rate(cross, batch) for cross in maps["cross"]]
    return [(l, h) for l, peak in enumerate(peaks) for h in range(peak.shape[0]) if peak[h] > positional]


def head_summary(model: NumeralTransformer, train_numbers, test_numbers, ablation_numbers) -> dict:
    """What chapter 13 reads off one trained model, for comparing seeds (``tools/numerals_seeds.py --heads``).

    Heads are chosen on ``train_numbers`` and reported on ``test_numbers``: the *aligned* heads (cross-attention
    heads of any layer whose peak names the digit more often than :func:`positional_table`'s guess), their joint
    mean-ablation on ``ablation_numbers`` (means from ``train_numbers``), the encoder head that puts most weight on
    万 (:func:`mass_on_by_query` of it) and the cosine similarities of the 两/二/贰 embeddings.
    """
    from .data import SRC_TOKENS

    tb, tm = teacher_forced(model, train_numbers)
    hb, hm = teacher_forced(model, test_numbers)
    where = positional_table(tb)
    n_layers = len(tm["cross"])
    aligned = aligned_heads(tb, tm)
    pos, n_digits = positional_hit_rate(where, hb)
    test_peak = [digit_peak_rate(hm["cross"][l], hb) for l in range(n_layers)]
    means = head_means(model, train_numbers)
    keys = [("cross", l, h) for l, h in aligned]
    alone = ablation_accuracies(model, ablation_numbers, heads=keys, mode="mean", means=means)
    with ablate_heads(model, keys, means=means, mode="mean"):
        joint = teacher_forced_exact_match(model, ablation_numbers)
    wan_train = [mass_on(tm["encoder"][l], tb, "万", "encoder") for l in range(len(tm["encoder"]))]
    wan = max(((l, h) for l in range(len(wan_train)) for h in range(wan_train[l].shape[0])),
              key=lambda lh: wan_train[lh[0]][lh[1]])
    by_query = mass_on_by_query(hm["encoder"][wan[0]], hb, "万")
    emb = model.src_embed.weight

    def cos(a, b):
        return round(torch.nn.functional.cosine_similarity(emb[SRC_TOKENS.index(a)], emb[SRC_TOKENS.index(b)], dim=-1).item(), 3)

    return {"digits": n_digits, "positional": round(pos, 4),
            "aligned": [{"layer": l, "head": h, "hit": round(test_peak[l][h].item(), 4),
                         "alone_mean_ablation": alone[("cross", l, h)]} for l, h in aligned],
            "either": round(joint_peak_rate(hm["cross"][n_layers - 1], hb, [h for l, h in aligned if l == n_layers - 1]), 4),
            "joint_mean_ablation": joint, "ablation_numbers": len(ablation_numbers),
            "wan_head": {"layer": wan[0], "head": wan[1],
                         **{g: [round(w[wan[1]].item(), 3), n, round(c, 3)] for g, (w, n, c) in by_query.items()}},
            "cos": {"两二": cos("两", "二"), "二贰": cos("二", "贰"), "两贰": cos("两", "贰"),
                    "二 vs 其余": sorted(cos("二", c) for c in "一三四五六七八九")[::7]}}


ABLATION_MODES = ("zero", "mean", "position_mean")
ABLATION_FILE = "numerals_ablations.json"  # in mha/course/data: chapter 13's ablation_study of the shipped model


@torch.no_grad()
def ablation_study(model: NumeralTransformer, numbers, means: dict, pair, n_top: int = 6) -> dict:
    """Chapter 13's ablations on ``numbers`` (teacher-forced exact match, see :func:`ablation_accuracies`).

    Every head alone, zeroed and replaced by its mean (``means``: :func:`head_means`); the ``n_top`` heads whose
    zeroing hurts most, the heads of ``pair`` and the ``n_top`` whose mean hurts most also by their per-position
    mean; and the heads of ``pair`` all at once, in each mode.

    Returns:
        ``{"numbers": N, "base": accuracy with every head, "ablated": {mode: {(block, layer, head): accuracy}},
        "top": [(block, layer, head), ...], "pair": [...], "joint": {mode: accuracy}}``.
    """
    pair = [tuple(key) for key in pair]
    ablated = {mode: ablation_accuracies(model, numbers, mode=mode, means=means) for mode in ABLATION_MODES[:2]}
    worst = {mode: sorted(ablated[mode], key=lambda k: ablated[mode][k])[:n_top] for mode in ablated}
    top = worst["zero"] + [k for k in pair if k not in worst["zero"]]
    top += [k for k in worst["mean"] if k not in top]
    ablated["position_mean"] = ablation_accuracies(model, numbers, heads=top, mode="position_mean", means=means)
    joint = {}
    for mode in ABLATION_MODES:
        with ablate_heads(model, pair, means=means, mode=mode):
            joint[mode] = teacher_forced_exact_match(model, numbers)
    return {"numbers": len(numbers), "base": teacher_forced_exact_match(model, numbers), "ablated": ablated,
            "top": top, "pair": pair, "joint": joint}


def _key(text: str) -> tuple:
    block, layer, head = text.split("/")
    return block, int(layer), int(head)


def ablation_study_to_json(study: dict) -> dict:
    """:func:`ablation_study`'s result with its (block, layer, head) keys written ``"block/layer/head"``."""
    name = "/".join
    return {**study, "ablated": {m: {name(map(str, k)): a for k, a in acc.items()} for m, acc in study["ablated"].items()},
            "top": [name(map(str, k)) for k in study["top"]], "pair": [name(map(str, k)) for k in study["pair"]]}


def stored_ablation_study() -> dict:
    """The shipped model's :func:`ablation_study` (1000 held-out numbers, means of 2000 training numbers), as
    ``tools/numerals_seeds.py --ablations`` wrote it; ``tests/course/test_numerals_ablations.py`` recomputes it."""
    import json

    from . import DATA_DIR

    raw = json.loads((DATA_DIR / ABLATION_FILE).read_text(encoding="utf-8"))
    return {**raw, "ablated": {m: {_key(k): a for k, a in acc.items()} for m, acc in raw["ablated"].items()},
            "top": [_key(k) for k in raw["top"]], "pair": [_key(k) for k in raw["pair"]]}
