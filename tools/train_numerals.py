"""Train the shipped numeral models and write ``mha/course/data/numerals_*.pt`` and ``mha/course/data/numerals.json``.

    python tools/train_numerals.py            # both models, a few minutes on one CPU core

The 4-head model (the chapter's) keeps snapshots of its weights at the steps of
``TrainConfig.snapshot_steps``; the 1-head model has the same parameter count
and is trained the same way, for the comparison. Weights are stored in float16;
the accuracy written to the JSON is measured on the float16 weights, exactly as
:func:`mha.course.numerals.load_pretrained` loads them.
"""
from __future__ import annotations

import json
import pathlib
import platform
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.course.numerals import (ACCURACY_THRESHOLD, CATEGORY_THRESHOLD, DATA_DIR, INFO_FILE, NumeralConfig,  # noqa: E402
                          TrainConfig, exact_match, held_out_numbers, model_from_state, train)
from mha.course.numerals.categories import category_table  # noqa: E402

SEED = 0
WINDOW = 20  # the loss curve is stored as means over WINDOW steps
RUNS = {"4heads": dict(n_heads=4, file="numerals_4h.pt", snapshot_file="numerals_4h_snapshots.pt"),
        "1head": dict(n_heads=1, file="numerals_1h.pt", snapshot_file=None)}


def half(state: dict) -> dict:
    return {k: v.to(torch.float16) for k, v in state.items()}


def main(kinds) -> None:
    test = held_out_numbers()
    for kind in kinds:
        run = RUNS[kind]
        model_cfg = NumeralConfig(n_heads=run["n_heads"])
        train_cfg = TrainConfig() if run["snapshot_file"] else TrainConfig(snapshot_steps=())
        model, history = train(model_cfg, train_cfg, seed=SEED, progress=True)
        state = half(model.state_dict())
        torch.save(state, DATA_DIR / run["file"])
        if run["snapshot_file"]:
            torch.save({step: half(s) for step, s in history.snapshots.items()}, DATA_DIR / run["snapshot_file"])
        entry = {"file": run["file"], "snapshot_file": run["snapshot_file"], "model": model_cfg.to_dict(),
                 "train": {**train_cfg.to_dict(), "snapshot_steps": list(train_cfg.snapshot_steps)}, "seed": SEED}
        shipped = model_from_state(entry, state)
        accuracy = exact_match(shipped, test)
        table = category_table(shipped.double())
        entry.update({
            "parameters": sum(p.numel() for p in model.parameters()),
            "held_out_count": len(test),
            "held_out_exact_match": accuracy,
            "categories": {name: list(v) for name, v in table.items()},  # (right, total), float64, greedy
            "train_seconds": round(history.seconds, 1),
            "trained_with": f"torch {torch.__version__}, {platform.machine()}, {train_cfg.threads} thread(s)",
            "loss_window": WINDOW,
            "loss_curve": [float(f"{v:.4g}") for v in history.smoothed(WINDOW)],
        })
        info = json.loads(INFO_FILE.read_text(encoding="utf-8")) if INFO_FILE.exists() else {}  # re-read: runs
        info[kind] = entry  # for the two kinds may go in parallel processes
        INFO_FILE.write_text(json.dumps(info, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{kind}: held-out exact match {accuracy:.4f} in {history.seconds:.0f} s")
        for name, (right, total) in table.items():
            print(f"    {right / total:7.2%}  {right}/{total}  {name}")
        if kind == "4heads" and accuracy < ACCURACY_THRESHOLD:
            raise SystemExit(f"the 4-head model reached only {accuracy:.4f} < {ACCURACY_THRESHOLD}")
        weak = [name for name, (right, total) in table.items() if right / total < CATEGORY_THRESHOLD]
        if kind == "4heads" and weak:
            print(f"WARNING: categories below {CATEGORY_THRESHOLD}: {weak}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(RUNS))
