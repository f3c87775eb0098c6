"""A toy task that needs two positions at once, to compare one head with several.

Task ("look back twice"): a sequence of random tokens x_0 ... x_{T-1} from a
vocabulary of V tokens; at every position t the model must output *both*
tokens ``x[t - k1]`` and ``x[t - k2]`` (two answers, two classifiers).
Positions t < max(k1, k2) have no answer and are ignored.

Model: token embedding + learned position embedding -> one
:class:`mha.MultiHeadAttention` (causal mask) -> one Linear readout that
gives two sets of V logits. There is no residual connection and no MLP, so
all the information must travel through the attention layer, and the
readout is linear.

``ToyConfig.values`` says what the Value input is:

* ``"tokens"`` (the chapter's model): Query and Key see token + position,
  Value sees the token embedding only. One head's output at t is then a blend
  ``sum_s a_ts W^V tok(x_s)``; with its weight on t-1 and t-3 a linear readout
  that answers x[t-1] right on all four inputs of a pair {a, b} needs
  lambda_ab + lambda_ba > 1, and x[t-3] needs < 1 (chapter 11 proves it), so no
  pair gets all eight answers right. The best accuracy found is 0.78125
  (:func:`one_head_bound`, a conjecture backed by :func:`search_one_head`).
  Several heads (same d_model, same parameters: the four Linear layers do not
  depend on h) look k1 and k2 steps back separately; Concat keeps the answers
  apart.
* ``"tokens+positions"``: Value sees token + position, as Query and Key. The
  position part of a blend carries lambda, and with content-dependent lambda
  one head can escape the plateau after a long run.
"""
from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

import torch
from torch import nn
import torch.nn.functional as F

from mha.layer import MultiHeadAttention
from mha.masks import causal_mask

from .training import deterministic

__all__ = ["ToyConfig", "make_batch", "LookBackModel", "accuracy", "answer_accuracy", "train", "head_offsets",
           "deterministic", "VALUES", "load_runs", "group_runs", "one_head_bound", "long_runs_alt", "RUNS_FILE",
           "REVIEW_FILE", "LONG_FILE", "SEARCH_FILE", "BoundSearch", "search_one_head", "pairs_all_right", "load_search"]

VALUES = ("tokens", "tokens+positions")  # what the Value input of the attention layer is


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
    values: str = "tokens"  # Value input: "tokens" (token embedding only) or "tokens+positions"

    def __post_init__(self):
        if self.values not in VALUES:
            raise ValueError(f"values must be one of {VALUES}, got {self.values!r}")
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
    """Embeddings -> MultiHeadAttention (causal) -> linear readout of ``len(offsets)`` tokens.

    Query and Key are token + position embeddings; Value is the token embedding alone when
    ``cfg.values == "tokens"``, token + position when ``"tokens+positions"``."""

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
        tok = self.tok(x)  # (B, T, d_model)
        h = tok + self.pos(torch.arange(T, device=x.device))  # (B, T, d_model)
        v = tok if self.cfg.values == "tokens" else h  # (B, T, d_model)
        out, weights = self.attn(h, h, v, mask=causal_mask(T, device=x.device), need_weights=True)  # (B, T, d_model)
        logits = self.readout(out).view(B, T, len(self.cfg.offsets), self.cfg.vocab)  # (B, T, n, V)
        return logits, weights


def accuracy(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor) -> float:
    """Fraction of correct answers over the valid positions and all offsets."""
    correct = logits.argmax(-1) == targets  # (B, T, n)
    return correct[:, valid].float().mean().item()


def answer_accuracy(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor) -> list:
    """Fraction of correct answers for each offset separately, over the valid positions: a list of n floats."""
    correct = logits.argmax(-1) == targets  # (B, T, n)
    return correct[:, valid].float().mean(dim=(0, 1)).tolist()


@dataclass
class History:
    """What :func:`train` returns: the model, its accuracy curve on a fixed evaluation batch (both answers
    together) and the same curve per answer (``per_answer[i]`` is a list of (n_offsets,) accuracies)."""

    model: LookBackModel
    steps: list = field(default_factory=list)
    accuracy: list = field(default_factory=list)
    per_answer: list = field(default_factory=list)

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
                    logits = model(x_eval)[0]
                    hist.steps.append(step)
                    hist.accuracy.append(accuracy(logits, y_eval, valid))
                    hist.per_answer.append(answer_accuracy(logits, y_eval, valid))
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


# ---------------------------------------------------------------- the long runs, shipped as data

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
RUNS_FILE = DATA_DIR / "toy_task_runs.json"  # 3,000 steps, seeds 0-4 (tools/toy_task_runs.py)
REVIEW_FILE = DATA_DIR / "toy_task_review.json"  # 10,000 steps, seeds 5-8 of the one-head models
LONG_FILE = DATA_DIR / "toy_task_long_review.json"  # outside review: 15,000 steps, seeds 9-11, every model
SEARCH_FILE = DATA_DIR / "toy_task_bound_search.json"  # the offline search for the one-head cap (tools/toy_task_bound_search.py)


def load_runs(path=RUNS_FILE) -> dict:
    """The long runs: ``{"config", "steps", "runs": [{values, heads, seed, accuracy, final_per_answer,
    steps_to_95, seconds}]}``."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def group_runs(data: dict) -> dict:
    """``{(values, heads): [run, ...]}`` in seed order."""
    groups: dict = {}
    for run in sorted(data["runs"], key=lambda r: r["seed"]):
        groups.setdefault((run["values"], run["heads"]), []).append(run)
    return groups


def one_head_bound(vocab: int) -> float:
    """The conjectured cap on one head's accuracy (both answers together) when its output is a blend of two
    token values and the readout is linear: the accuracy of the chapter's hand-built solution, every answer
    right when x[t-1] = x[t-3] (a fraction 1/V of the positions), 3 of the 4 answers of each pair (a, b),
    (b, a) otherwise. Proven is only that no pair {a, b} gets all 8 of its answers right; that the cap is
    this number is a conjecture, backed by :func:`search_one_head` (never above it, often reaching it)."""
    return (1 / vocab) * 1 + (1 - 1 / vocab) * 3 / 4


@dataclass
class BoundSearch:
    """What :func:`search_one_head` returns.

    ``right``: (R, V, V, 2) bool, ``right[r, a, b, i]``: restart r answers answer i (0: x[t-1] = a,
    1: x[t-3] = b) right on the blend of (a, b); ``lam``: (R, V, V), the share of t-1 in each blend."""

    right: torch.Tensor
    lam: torch.Tensor

    @property
    def counts(self) -> torch.Tensor:
        """(R,) right answers of each restart, out of 2 V^2."""
        return self.right.sum(dim=(1, 2, 3))


SEARCH_FEATURES = ("blend", "two_heads", "positions")


def _features(lam, e, pairs, features: str):
    """What the readouts see for each pair: (R, P, F). ``blend``: one head's blend (F = V); ``two_heads``: both
    tokens side by side, as two heads can give them (F = 2V); ``positions``: the blend plus lam itself, the
    position part a Value with positions adds (F = V + 1)."""
    R, P = lam.shape[0], pairs.shape[0]
    blend = lam * e[pairs[:, 0]] + (1 - lam) * e[pairs[:, 1]]  # (R, P, V)
    if features == "two_heads":
        return torch.cat([e[pairs[:, 0]], e[pairs[:, 1]]], dim=-1).expand(R, P, -1)  # (R, P, 2V)
    if features == "positions":
        return torch.cat([blend, lam], dim=-1)  # (R, P, V + 1)
    return blend


def _blend_margins(s, W, b, e, pairs, features: str = "blend"):
    """Margin (true score - best other score) of each answer: (R, V*V, 2); s (R, V, V), W (R, 2, V, F), b (R, 2, V)."""
    R = s.shape[0]
    lam = torch.sigmoid(s).reshape(R, -1, 1)  # (R, P, 1)
    mix = _features(lam, e, pairs, features)  # (R, P, F)
    logits = torch.einsum("rpv,rkcv->rpkc", mix, W) + b[:, None]  # (R, P, 2, V): two affine readouts
    true = logits.gather(3, pairs.expand(R, -1, -1)[..., None]).squeeze(3)  # (R, P, 2)
    other = logits.masked_fill(F.one_hot(pairs, e.shape[0]).bool(), float("-inf")).amax(3)  # (R, P, 2)
    return true - other


def search_one_head(vocab: int = 8, restarts: int = 200, steps: int = 300, seed: int = 0, lr: float = 0.05,
                    init_scale: float = 0.3, features: str = "blend") -> BoundSearch:
    """Search for a one-head solution with as many right answers as possible.

    The idealised head of chapter 11: on input (a, b) = (x[t-1], x[t-3]) its output is the blend
    ``lam_ab e_a + (1 - lam_ab) e_b`` with a free share ``lam_ab`` per ordered pair, then two affine
    readouts (weights and biases free) and argmax. One-hot values lose nothing: a readout's scores
    depend on the values only through the (V, V) table u_c . v_d, and one-hot values let that table be
    anything. Each restart starts at random and maximises a smoothed count of right answers,
    ``sum sigmoid(margin * (1 + step / 50))`` (a sharper step each iteration), with Adam; restarts are
    independent and restart r's start depends only on (seed, r). Deterministic (float64).

    ``features`` (controls of the search's power, see :func:`_features`): ``"two_heads"`` has a 128/128
    solution for V = 8; ``"positions"`` gives the readouts lam itself, the channel a Value with positions opens.

    Returns:
        :class:`BoundSearch` with the right answers of every restart after ``steps`` steps.
    """
    if vocab < 2 or restarts < 1 or steps < 0:
        raise ValueError(f"need vocab >= 2, restarts >= 1, steps >= 0, got {vocab}, {restarts}, {steps}")
    if features not in SEARCH_FEATURES:
        raise ValueError(f"features must be one of {SEARCH_FEATURES}, got {features!r}")
    V = vocab
    F_in = {"blend": V, "two_heads": 2 * V, "positions": V + 1}[features]
    e = torch.eye(V, dtype=torch.float64)  # one-hot token values, (V, V)
    pairs = torch.tensor([(a, b) for a in range(V) for b in range(V)])  # (P, 2): (x[t-1], x[t-3])
    starts = []
    for r in range(restarts):
        g = torch.Generator().manual_seed(seed * 1_000_003 + r)
        starts.append((torch.randn(V, V, generator=g, dtype=torch.float64),
                       torch.randn(2, V, F_in, generator=g, dtype=torch.float64) * init_scale,
                       torch.randn(2, V, generator=g, dtype=torch.float64)))
    s, W, b = (torch.stack(t).requires_grad_() for t in zip(*starts))  # (R, V, V), (R, 2, V, F), (R, 2, V)
    with deterministic():
        opt = torch.optim.Adam([s, W, b], lr=lr)
        for step in range(steps):
            loss = -torch.sigmoid(_blend_margins(s, W, b, e, pairs, features) * (1 + step / 50)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            right = _blend_margins(s, W, b, e, pairs, features) > 0  # (R, P, 2)
    return BoundSearch(right=right.view(restarts, V, V, 2), lam=torch.sigmoid(s.detach()))


def pairs_all_right(right: torch.Tensor) -> torch.Tensor:
    """(R, V, V, 2) right answers -> (R,) number of pairs {a, b}, a < b, whose 8 answers on (a, b), (b, a),
    (a, a), (b, b) are all right (chapter 11 proves there are none)."""
    every = right.all(dim=-1)  # (R, V, V): both answers right on (a, b)
    diag = every.diagonal(dim1=1, dim2=2)  # (R, V): both right on (a, a)
    full = every & every.transpose(1, 2) & diag[:, :, None] & diag[:, None, :]  # (R, V, V)
    return full.triu(diagonal=1).sum(dim=(1, 2))


def load_search(path=SEARCH_FILE) -> dict:
    """The offline search: ``{"settings", "runs": [{vocab, restarts, cap, max, histogram: {count: restarts},
    first_counts}]}`` (tools/toy_task_bound_search.py)."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def long_runs_alt(data: dict) -> str:
    """The alt text of the chapter's long-run figure, from the same numbers the chapter prints."""
    g = group_runs(data)
    steps = data["steps"][-1]
    one = [r["accuracy"][-1] for r in g[("tokens", 1)]]
    pos = [r["accuracy"][-1] for r in g[("tokens+positions", 1)]]
    many = [r["steps_to_95"] for h in (2, 4) for r in g[("tokens", h)]]
    return (f"{len(one)} 个种子、{steps} 步的准确率曲线，线是中位数，色带从最差的种子到最好的种子。V 只有 token 的 1 头模型最后在 {min(one):.2f} 到 {max(one):.2f} 之间，"
            f"都低于猜想的上限 {one_head_bound(data['config']['vocab']):.3f}；V 带位置的 1 头模型最后在 {min(pos):.2f} 到 {max(pos):.2f} 之间；"
            f"2 头和 4 头模型每个种子都在 {max(many)} 步以内超过 0.95")
