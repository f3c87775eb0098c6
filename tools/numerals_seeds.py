"""1 head vs 4 heads over three seeds: train both shipped configurations with seeds 0, 1, 2 and write
``mha/course/data/numerals_seeds.json`` (held-out errors and the per-category table of each run).

    python tools/numerals_seeds.py        # six trainings, about six minutes on one laptop core

Seed 0 is the shipped pair; ``tests/course/test_numerals_training.py`` checks that retraining it reproduces
its row. The chapter reads the JSON instead of training six models.
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.course.numerals import (DATA_DIR, KINDS, NumeralConfig, TrainConfig, held_out_numbers, mistakes,  # noqa: E402
                          shipped_info, train)
from mha.course.numerals.categories import category_table, category_tests  # noqa: E402

SEEDS = (0, 1, 2)
SEEDS_FILE = DATA_DIR / "numerals_seeds.json"


def run(kind: str, seed: int, test=None, categories=None) -> dict:
    """Train ``kind``'s shipped configuration with ``seed``; its held-out errors and category table (float64)."""
    info = shipped_info(kind)
    model, history = train(NumeralConfig(**info["model"]), TrainConfig(**{**info["train"], "snapshot_steps": ()}),
                           seed=seed, progress=False)
    model = model.double()
    test = held_out_numbers() if test is None else test
    table = category_table(model, category_tests() if categories is None else categories)
    return {"kind": kind, "seed": seed, "held_out_count": len(test), "held_out_errors": len(mistakes(model, test)),
            "categories": {name: list(v) for name, v in table.items()}, "train_seconds": round(history.seconds, 1)}


def main() -> None:
    test, categories = held_out_numbers(), category_tests()
    runs = []
    for kind in KINDS:
        for seed in SEEDS:
            runs.append(run(kind, seed, test, categories))
            print(runs[-1]["kind"], seed, runs[-1]["held_out_errors"], runs[-1]["train_seconds"], flush=True)
    SEEDS_FILE.write_text(json.dumps(runs, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
