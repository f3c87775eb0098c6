"""The sqrt(d_k) explorer's numbers: the spread of random scores and how peaked their softmax gets."""
from __future__ import annotations

import math

import torch

from mha.steps import attention_scores, masked_softmax

__all__ = ["D_K_CHOICES", "N_PAIRS", "N_QUERIES", "N_KEYS", "score_stats"]

D_K_CHOICES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
N_PAIRS = 4096  # independent (q, k) pairs for the histogram and the std
N_QUERIES, N_KEYS = 256, 16  # a (256, 16) score table for the softmax statistics


@torch.no_grad()
def score_stats(d_k: int, scaled: bool = True, seed: int = 0) -> dict:
    """Scores of random q, k with entries ~ N(0, 1), with or without the 1/sqrt(d_k).

    Returns a dict with
        ``pair_scores`` (N_PAIRS,): q_i . k_i (/ sqrt(d_k)) of independent pairs;
        ``std``: their standard deviation (about sqrt(d_k) unscaled, about 1 scaled);
        ``weights`` (N_QUERIES, N_KEYS): softmax of each query's scores over N_KEYS keys;
        ``row`` (N_KEYS,): the first of those rows;
        ``max_weight`` / ``entropy``: of that row (entropy in nats);
        ``mean_max_weight`` / ``mean_entropy``: averaged over all rows;
        ``uniform_entropy``: ln(N_KEYS), the entropy of a perfectly flat row.
    """
    if not isinstance(d_k, int) or d_k < 1:
        raise ValueError(f"d_k 必须是正整数，现在是 {d_k!r}")
    g = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(d_k) if scaled else 1.0
    q = torch.randn(N_PAIRS, d_k, generator=g)  # (N, d_k)
    k = torch.randn(N_PAIRS, d_k, generator=g)  # (N, d_k)
    pair_scores = (q * k).sum(dim=-1) * scale  # (N,)
    q = torch.randn(1, 1, N_QUERIES, d_k, generator=g)  # (B=1, h=1, L, d_k)
    k = torch.randn(1, 1, N_KEYS, d_k, generator=g)  # (B=1, h=1, S, d_k)
    scores = attention_scores(q, k)  # (1, 1, L, S), divided by sqrt(d_k)
    if not scaled:
        scores = scores * math.sqrt(d_k)  # undo the scaling: plain q . k
    weights = masked_softmax(scores)[0, 0]  # (L, S)
    entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (L,), 0 log 0 = 0
    return {
        "d_k": d_k, "scaled": scaled,
        "pair_scores": pair_scores, "std": pair_scores.std().item(),
        "weights": weights, "row": weights[0],
        "max_weight": weights[0].max().item(), "entropy": entropy[0].item(),
        "mean_max_weight": weights.max(dim=-1).values.mean().item(), "mean_entropy": entropy.mean().item(),
        "uniform_entropy": math.log(N_KEYS),
    }
