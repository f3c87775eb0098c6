"""Chapter 11's long runs: the look-back toy task trained for 3,000 steps over seeds 0-4, h = 1, 2, 4 heads
with Value from token embeddings only (the chapter's model), h = 1, 2 with token + position embeddings (the
model of the chapter's first version). Writes ``mha/course/data/toy_task_runs.json``; the chapter plots it
instead of training 25 models.

    OMP_NUM_THREADS=1 python tools/toy_task_runs.py            # 25 runs, about 10 minutes on one shared core
    OMP_NUM_THREADS=1 python tools/toy_task_runs.py --review   # seeds 5-8 of the one-head models, 10,000 steps, ~10 minutes

Every run is deterministic (``mha.course.toy_task.train``, one thread); ``tests/course/test_toy_task.py`` retrains
seed 0 and compares it with its stored curve. The stored curve keeps every 25th step up to step 200 and
every 100th after it; ``steps_to_95`` is read from the full curve (every 25th step).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.course.toy_task import ToyConfig, train  # noqa: E402

DATA_FILE = ROOT / "mha" / "course" / "data" / "toy_task_runs.json"
REVIEW_FILE = ROOT / "mha" / "course" / "data" / "toy_task_review.json"
STEPS = 3000
EVAL_EVERY = 25
SEEDS = (0, 1, 2, 3, 4)
GRID = (("tokens", (1, 2, 4)), ("tokens+positions", (1, 2)))
REVIEW_STEPS, REVIEW_SEEDS = 10000, (5, 6, 7, 8)


def kept(step: int) -> bool:
    """The steps the JSON stores: every 25th up to 200 (where several heads learn), every 100th after."""
    return step <= 200 or step % 100 == 0


def run(values: str, heads: int, seed: int, steps: int = STEPS) -> dict:
    cfg = ToyConfig(steps=steps, eval_every=EVAL_EVERY, values=values)
    start = time.perf_counter()
    hist = train(cfg, heads, seed=seed)
    seconds = time.perf_counter() - start
    reached = [s for s, a in zip(hist.steps, hist.accuracy) if a >= 0.95]
    return {"values": values, "heads": heads, "seed": seed,
            "accuracy": [round(a, 4) for s, a in zip(hist.steps, hist.accuracy) if kept(s)],
            "final_per_answer": [round(a, 4) for a in hist.per_answer[-1]],
            "steps_to_95": reached[0] if reached else None, "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--review", action="store_true", help="seeds 5-8 of the one-head models, 10,000 steps")
    args = parser.parse_args()
    if args.review:
        grid, seeds, steps, out = (("tokens", (1,)), ("tokens+positions", (1,))), REVIEW_SEEDS, REVIEW_STEPS, REVIEW_FILE
    else:
        grid, seeds, steps, out = GRID, SEEDS, STEPS, DATA_FILE
    runs = []
    for values, heads in grid:
        for h in heads:
            for seed in seeds:
                runs.append(run(values, h, seed, steps))
                r = runs[-1]
                print(values, h, seed, r["accuracy"][-1], r["final_per_answer"], r["steps_to_95"], r["seconds"], flush=True)
    result = {"config": {**{k: v for k, v in vars(ToyConfig(steps=steps, eval_every=EVAL_EVERY)).items() if k != "values"},
                         "offsets": list(ToyConfig().offsets)},
              "steps": [s for s in range(0, steps + 1, EVAL_EVERY) if kept(s)], "runs": runs}
    out.write_text(json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
