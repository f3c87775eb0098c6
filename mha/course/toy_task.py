"""A toy task that needs two positions at once, to compare one head with several.

Task ("look back twice"): a sequence of random tokens x_0 ... x_{T-1} from a
vocabulary of V tokens; at every position t the model must output *both*
tokens ``x[t - k1]`` and ``x[t - k2]`` (two answers, two classifiers).
Positions t < max(k1, k2) have no answer and are ignored.

Model: token embedding + learned position embedding -> one
:class:`mha.MultiHeadAttention` (causal mask) -> one Linear readout that
gives two sets of V logits. There is no residual connection and no MLP, so
all the information must travel through the attention layer, and the
readout is linear: it cannot untangle a blend of two tokens.

One head forms one weighted average of the value vectors. To fetch two
tokens it has to blend them, and a linear readout then finds the stronger
one only. With several heads (same d_model, same number of parameters: the
four Linear layers do not depend on h) one head can look k1 steps back and
another k2 steps back; Concat keeps their answers apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
import torch.nn.functional as F

from mha.layer import MultiHeadAttention
from mha.masks import causal_mask

from .training import deterministic

__all__ = ["ToyConfig", "make_batch", "LookBackModel", "accuracy", "train", "head_offsets", "deterministic"]


@dataclass(frozen=True)
class ToyConfig:
    """Sizes of the task, the model and the training run."""

    vocab: int = 8  # V
    seq_len: int = 12  # T
    offsets: tuple = (1, 3)  # (k1, k2): look back k1 and k2 steps
    d_model: int = 32
    batch: int = 64
    steps: int = 300
    lr: float = 1e-2
    eval_every: int = 10
    eval_batch: int = 512

    def __post_init__(self):
        if len(self.offsets) < 1 or min(self.offsets) < 1 or max(self.offsets) >= self.seq_len:
            raise ValueError(f"every offset must lie in [1, seq_len - 1] = [1, {self.seq_len - 1}], got {self.offsets}")


def make_batch(cfg: ToyConfig, batch: int, generator: torch.Generator | None = None):
    """Random tokens and their targets.

    Returns:
        x: (batch, T) token ids; targets: (batch, T, n_offsets) with
        ``targets[:, t, i] = x[:, t - offsets[i]]``; valid: (T,) bool,
        True where every offset points inside the sequence.
    """
    x = torch.randint(cfg.vocab, (batch, cfg.seq_len), generator=generator)  # (B, T)
    targets = torch.stack([x.roll(k, dims=1) for k in cfg.offsets], dim=-1)  # (B, T, n): x[t - k]
    valid = torch.arange(cfg.seq_len) >= max(cfg.offsets)  # (T,)
    return x, targets, valid


class LookBackModel(nn.Module):
    """Embeddings -> MultiHeadAttention (causal) -> linear readout of ``len(offsets)`` tokens."""

    def __init__(self, cfg: ToyConfig, n_heads: int):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.attn = MultiHeadAttention(cfg.d_model, n_heads, dropout=0.0)
        self.readout = nn.Linear(cfg.d_model, len(cfg.offsets) * cfg.vocab)

    def forward(self, x: torch.Tensor):
        """x (B, T) -> ``(logits (B, T, n_offsets, V), weights (B, h, T, T))``."""
        B, T = x.shape
        h = self.tok(x) + self.pos(torch.arange(T, device=x.device))  # (B, T, d_model)
        out, weights = self.attn(h, h, h, mask=causal_mask(T, device=x.device), need_weights=True)  # (B, T, d_model)
        logits = self.readout(out).view(B, T, len(self.cfg.offsets), self.cfg.vocab)  # (B, T, n, V)
        return logits, weights


def accuracy(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor) -> float:
    """Fraction of correct answers over the valid positions and all offsets."""
    correct = logits.argmax(-1) == targets  # (B, T, n)
    return correct[:, valid].float().mean().item()


@dataclass
class History:
    """What :func:`train` returns: the model and its accuracy curve on a fixed evaluation batch."""

    model: LookBackModel
    steps: list = field(default_factory=list)
    accuracy: list = field(default_factory=list)

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1]


def train(cfg: ToyConfig, n_heads: int, seed: int = 0) -> History:
    """Train a :class:`LookBackModel` with ``n_heads`` heads; deterministic for a given seed."""
    with deterministic():
        torch.manual_seed(seed)
        model = LookBackModel(cfg, n_heads)
        data = torch.Generator().manual_seed(seed + 1)
        x_eval, y_eval, valid = make_batch(cfg, cfg.eval_batch, torch.Generator().manual_seed(12345))
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        hist = History(model)
        for step in range(cfg.steps + 1):
            if step % cfg.eval_every == 0 or step == cfg.steps:
                with torch.no_grad():
                    hist.steps.append(step)
                    hist.accuracy.append(accuracy(model(x_eval)[0], y_eval, valid))
            if step == cfg.steps:
                break
            x, y, valid = make_batch(cfg, cfg.batch, data)
            logits, _ = model(x)  # (B, T, n, V)
            loss = F.cross_entropy(logits[:, valid].reshape(-1, cfg.vocab), y[:, valid].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return hist


def head_offsets(weights: torch.Tensor, min_t: int = 0) -> torch.Tensor:
    """Average attention of each head to each look-back offset.

    Args:
        weights: (B, h, T, T) attention weights of a causal layer.
        min_t: only query positions t >= min_t count (e.g. max(offsets)).

    Returns:
        (h, T) tensor: entry [i, k] is head i's mean weight on key t - k,
        averaged over the batch and the query positions t >= max(min_t, k).
    """
    B, h, T, _ = weights.shape
    rows = []
    for k in range(T):
        ts = torch.arange(max(min_t, k), T)  # query positions that have a key k steps back
        if len(ts) == 0:
            rows.append(weights.new_zeros(h))
            continue
        rows.append(weights[:, :, ts, ts - k].mean(dim=(0, 2)))  # (h,)
    return torch.stack(rows, dim=1)  # (h, T)
