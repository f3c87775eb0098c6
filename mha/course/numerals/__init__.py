"""Chinese numerals -> Arabic digits: a small Transformer built from :class:`mha.MultiHeadAttention` (chapter 13).

* :mod:`~mha.course.numerals.words`: the reading rules (:func:`to_chinese`) and :func:`parse` (``strict=True``: only those);
* :mod:`~mha.course.numerals.reader`: :func:`read`, every common writing (二千, 一十二, 一百一, 大写) and how it differs;
* :mod:`~mha.course.numerals.data`: vocabularies, padding, the held-out split;
* :mod:`~mha.course.numerals.model`: :class:`NumeralTransformer` (pre-LN encoder-decoder, KV-cache decoding,
  attention maps, :func:`ablate_heads`);
* :mod:`~mha.course.numerals.train`: :func:`train` (warm-up + cosine, progress bar, snapshots);
* :mod:`~mha.course.numerals.analysis`: what the heads do, measured over many numbers (and ablations);
* :func:`load_pretrained`: the trained weights shipped in ``mha/course/data`` (no training needed).

Command line: ``python -m mha.course.numerals 两千零二十六 贰仟零贰拾陆`` or one numeral per line on standard input
(``--strict``: standard readings only, ``--explain``: say how an input differs from the standard).
"""
from __future__ import annotations

import json
import pathlib

import torch

from .data import held_out_numbers, is_held_out, make_batch
from .evaluate import exact_match, mistakes, predict
from .model import BLOCKS, NumeralConfig, NumeralTransformer, ablate_heads
from .train import History, TrainConfig, train
from .reader import Reading, read
from .words import ALPHABET, MAX_NUMBER, NumeralError, parse, to_chinese

__all__ = ["to_chinese", "parse", "read", "Reading", "NumeralError", "ALPHABET", "MAX_NUMBER", "NumeralConfig", "NumeralTransformer",
           "ablate_heads", "BLOCKS", "TrainConfig", "History", "train", "retrain", "held_out_numbers", "is_held_out",
           "make_batch", "exact_match", "mistakes", "predict", "KINDS", "shipped_info", "load_pretrained",
           "load_snapshots", "model_from_state", "ACCURACY_THRESHOLD", "CATEGORY_THRESHOLD"]

DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"
INFO_FILE = DATA_DIR / "numerals.json"
KINDS = ("4heads", "1head")
ACCURACY_THRESHOLD = 0.99  # the shipped models and every retraining must reach this on the held-out numbers
CATEGORY_THRESHOLD = 0.995  # ... and the 4-head model this in every row of the per-category table (categories.py)


def shipped_info(kind: str = "4heads") -> dict:
    """What ``mha/course/data/numerals.json`` records about a shipped model: configs, seed, time, accuracy, loss curve."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return json.loads(INFO_FILE.read_text(encoding="utf-8"))[kind]


def model_from_state(info: dict, state: dict) -> NumeralTransformer:
    """A model of the configuration ``info`` records (see :func:`shipped_info`) with the weights ``state`` (eval mode)."""
    model = NumeralTransformer(NumeralConfig(**info["model"]))
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval()


def load_pretrained(kind: str = "4heads") -> NumeralTransformer:
    """The shipped, trained model (float32, eval mode): ``"4heads"`` (default) or ``"1head"``.

    The weights are stored in float16 (``mha/course/data/numerals_*.pt``); their
    held-out accuracy is measured after that rounding (:func:`shipped_info`).
    """
    info = shipped_info(kind)
    state = torch.load(DATA_DIR / info["file"], map_location="cpu", weights_only=True)
    return model_from_state(info, state)


def load_snapshots(kind: str = "4heads") -> dict:
    """``{step: model}`` for the weights saved during the shipped model's training (step 0 = untrained)."""
    info = shipped_info(kind)
    if not info.get("snapshot_file"):
        raise ValueError(f"no snapshots are shipped for {kind!r}")
    states = torch.load(DATA_DIR / info["snapshot_file"], map_location="cpu", weights_only=True)
    return {int(step): model_from_state(info, state) for step, state in sorted(states.items(), key=lambda kv: int(kv[0]))}


def retrain(kind: str = "4heads", progress: bool = True, plot: bool = True):
    """Train the shipped configuration again from scratch (same seed): ``(model, history)``.

    Shows a progress bar and, with ``plot=True``, the loss curve. About a
    minute on one laptop CPU core (2500 steps of 64 numbers; several minutes
    on a busy shared machine).
    """
    info = shipped_info(kind)
    model, history = train(NumeralConfig(**info["model"]),
                           TrainConfig(**{**info["train"], "snapshot_steps": tuple(info["train"]["snapshot_steps"])}),
                           seed=info["seed"], progress=progress)
    if plot:
        import matplotlib.pyplot as plt

        history.plot()
        plt.show()
    return model, history
