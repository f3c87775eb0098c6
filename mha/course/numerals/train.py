"""Training the numeral Transformer: Adam, linear warm-up then cosine decay (LambdaLR), a tqdm bar.

``train()`` is deterministic for a given seed on a given machine: the data
come from Python's ``random.Random(seed)`` (the same numbers everywhere), the
initial weights from ``torch.manual_seed(seed)``, and the run uses
deterministic algorithms on a fixed number of threads. Other CPUs may round
differently, so a retrained model is *equivalent* (same accuracy threshold),
not bit-identical, to the shipped one.
"""
from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..training import deterministic
from .data import PAD, training_batch
from .model import NumeralConfig, NumeralTransformer

__all__ = ["TrainConfig", "History", "train", "lr_at"]


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation settings (the shipped models use the defaults)."""

    steps: int = 2500
    batch_size: int = 64
    lr: float = 5e-3  # peak learning rate, reached at the end of the warm-up
    warmup: int = 100  # steps of linear warm-up from 0
    clip: float = 1.0  # gradient norm clipping
    threads: int = 1  # torch threads during training (results depend on it in the last bits)
    snapshot_steps: tuple = (0, 300, 1000)  # weights kept for "early vs late" pictures

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or not self.lr > 0 or not 0 <= self.warmup <= self.steps:
            raise ValueError(f"invalid training config: {self}")
        if any(not 0 <= s <= self.steps for s in self.snapshot_steps):
            raise ValueError(f"snapshot_steps must lie in [0, {self.steps}], got {self.snapshot_steps}")

    def to_dict(self) -> dict:
        return asdict(self)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up, then cosine decay to 0."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class History:
    """What a training run recorded: the loss and learning rate of every step, its time, snapshots."""

    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    seconds: float = 0.0
    snapshots: dict = field(default_factory=dict)  # step -> state_dict (weights *before* that step)

    def smoothed(self, window: int = 20) -> list[float]:
        """The loss averaged over consecutive windows of ``window`` steps (one value per window)."""
        return [sum(self.loss[i: i + window]) / len(self.loss[i: i + window])
                for i in range(0, len(self.loss), window)]

    def plot(self, window: int = 20, ax=None):
        """Draw the loss curve (window means, log scale); returns the ``Axes``."""
        from ..pictures.numerals import plot_loss

        return plot_loss(self.smoothed(window), window, ax=ax)


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train(model_cfg: NumeralConfig | None = None, train_cfg: TrainConfig | None = None, seed: int = 0,
          progress: bool = True) -> tuple[NumeralTransformer, History]:
    """Train a :class:`NumeralTransformer` from scratch.

    Args:
        model_cfg: model sizes (default :class:`NumeralConfig`: 4 heads).
        train_cfg: optimisation settings (default :class:`TrainConfig`).
        seed: seeds the initial weights and the training numbers.
        progress: show a tqdm progress bar (a widget in Jupyter, text elsewhere).

    Returns:
        ``(model, history)``; the model is in eval mode.
    """
    model_cfg = NumeralConfig() if model_cfg is None else model_cfg
    train_cfg = TrainConfig() if train_cfg is None else train_cfg
    history = History()
    bar = tqdm(total=train_cfg.steps, desc="训练", unit="步", file=sys.stdout, ncols=80) if progress else None
    start = time.perf_counter()
    with deterministic(train_cfg.threads), torch.enable_grad():
        torch.manual_seed(seed)
        model = NumeralTransformer(model_cfg)
        model.train()
        rng = random.Random(seed)
        # base lr 1: LambdaLR's factor is then the learning rate itself, lr_at bit for bit
        opt = torch.optim.Adam(model.parameters(), lr=1.0)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_at(step, train_cfg))
        for step in range(train_cfg.steps):
            if step in train_cfg.snapshot_steps:
                history.snapshots[step] = _state(model)
            lr = schedule.get_last_lr()[0]
            batch = training_batch(rng, train_cfg.batch_size)
            logits = model(batch.src, batch.src_mask, batch.tgt_in)  # (B, T, V_tgt)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1), ignore_index=PAD)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.clip)
            opt.step()
            schedule.step()
            history.loss.append(loss.item())
            history.lr.append(lr)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{history.loss[-1]:.4f}", refresh=False)
        if bar is not None:
            bar.close()
        if train_cfg.steps in train_cfg.snapshot_steps:
            history.snapshots[train_cfg.steps] = _state(model)
    history.seconds = time.perf_counter() - start
    model.eval()
    return model, history
