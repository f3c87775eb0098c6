"""1 head vs 4 heads over three seeds: train both shipped configurations with seeds 0, 1, 2 and write
``mha/course/data/numerals_seeds.json`` (held-out errors and the per-category table of each run).

    python tools/numerals_seeds.py                     # six trainings, 73-117 s each in the shipped run (573 s in all)
    python tools/numerals_seeds.py --heads             # the 4-head model of seeds 0-3: chapter 13's head readings
    python tools/numerals_seeds.py --heads --seed 3    # recompute one seed's row of those readings, keep the others
    python tools/numerals_seeds.py --ablations         # the shipped model's ablation study (about 15 s)

One training of 2500 steps on one thread took 73-556 s in 8 timed runs on a shared 2-core machine, depending on how
busy it was (the six of numerals_seeds.json: 573 s in all; the shipped model: 556 s; seed 3: 144 s).

``--heads`` writes ``mha/course/data/numerals_heads_seeds.json``: for each seed, the readings of
:func:`mha.course.numerals.analysis.head_summary` (aligned heads chosen on training numbers and reported on held-out
ones, their joint mean-ablation, the 万 head split by query position, the 两/二/贰 embedding cosines).
Seed 0 is the shipped model; ``tests/course/test_numerals_heads_seeds.py`` recomputes its row. Seeds 1-3 are
retrained (one training each, as above); ``--seed N`` recomputes only seed N's row, so that adding a seed does not
retrain the others. The chapter reads the JSON.

``--ablations`` writes ``mha/course/data/numerals_ablations.json``, chapter 13's
:func:`mha.course.numerals.analysis.ablation_study` of the shipped model, so that the chapter runs in
under 30 s; ``tests/course/test_numerals_ablations.py`` recomputes it.

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
from mha.course.numerals.analysis import head_summary  # noqa: E402
from mha.course.numerals.categories import category_table, category_tests  # noqa: E402
from mha.course.numerals.data import training_numbers  # noqa: E402

SEEDS = (0, 1, 2)
HEAD_SEEDS = (0, 1, 2, 3)   # --heads: chapter 13's head readings
SEEDS_FILE = DATA_DIR / "numerals_seeds.json"
HEADS_FILE = DATA_DIR / "numerals_heads_seeds.json"


def heads_arguments() -> tuple:
    """The numbers :func:`head_summary` reads: 2000 training numbers (choose), 2000 held-out (report), 1000 (ablate)."""
    import random

    test = held_out_numbers()
    return training_numbers(random.Random(7), 2000), test, test[:1000]


def heads_row(seed: int) -> dict:
    """The :func:`head_summary` of the 4-head model trained with ``seed`` (seed 0: the shipped model)."""
    import torch

    from mha.course.numerals import load_pretrained

    if seed == 0:
        model = load_pretrained()
    else:
        info = shipped_info("4heads")
        model, _ = train(NumeralConfig(**info["model"]), TrainConfig(**{**info["train"], "snapshot_steps": ()}),
                         seed=seed, progress=False)
    with torch.no_grad():
        return {"seed": seed, **head_summary(model.double().eval(), *heads_arguments())}


def ablations_row() -> dict:
    """The shipped model's :func:`ablation_study`: 1000 held-out numbers, means and the aligned pair (the last
    cross-attention layer's heads that beat the positional guess) from 2000 training numbers, as chapter 13 does."""
    import torch

    from mha.course.numerals import load_pretrained
    from mha.course.numerals import analysis as A

    model = load_pretrained().double().eval()
    train_numbers, _, ablation_numbers = heads_arguments()
    with torch.no_grad():
        batch, maps = A.teacher_forced(model, train_numbers)
        last = len(maps["cross"]) - 1
        pair = [("cross", l, h) for l, h in A.aligned_heads(batch, maps) if l == last]
        study = A.ablation_study(model, ablation_numbers, A.head_means(model, train_numbers), pair)
    return A.ablation_study_to_json(study)


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
    if "--ablations" in sys.argv[1:]:
        from mha.course.numerals.analysis import ABLATION_FILE

        (DATA_DIR / ABLATION_FILE).write_text(json.dumps(ablations_row(), indent=1) + "\n", encoding="utf-8")
        return
    if "--heads" in sys.argv[1:]:
        import torch

        torch.set_num_threads(1)
        args = sys.argv[1:]
        if "--seed" in args:
            # One seed: recompute its row and put it in place (kept in seed order), leaving the others as they are.
            seed = int(args[args.index("--seed") + 1])
            rows = [r for r in json.loads(HEADS_FILE.read_text(encoding="utf-8")) if r["seed"] != seed]
            rows = sorted(rows + [heads_row(seed)], key=lambda r: r["seed"])
        else:
            rows = [heads_row(seed) for seed in HEAD_SEEDS]
        HEADS_FILE.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return
    test, categories = held_out_numbers(), category_tests()
    runs = []
    for kind in KINDS:
        for seed in SEEDS:
            runs.append(run(kind, seed, test, categories))
            print(runs[-1]["kind"], seed, runs[-1]["held_out_errors"], runs[-1]["train_seconds"], flush=True)
    SEEDS_FILE.write_text(json.dumps(runs, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
