"""Chapter 11's search for the one-head cap: many random restarts of ``mha.course.toy_task.search_one_head``
for V = 3, 4, 5 and the chapter's V = 8. Writes ``mha/course/data/toy_task_bound_search.json`` (the histogram
of right answers per restart, its maximum, and the first restarts' counts that the tests recompute).

    OMP_NUM_THREADS=1 python tools/toy_task_bound_search.py   # about 70 s on one shared core

The chapter proves only that no pair {a, b} gets all 8 of its answers right; the cap 1/V + (1 - 1/V) 3/4 is the
hand-built solution's accuracy, and this search is the evidence that nothing beats it.
"""
from __future__ import annotations

import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.course.toy_task import SEARCH_FILE, one_head_bound, pairs_all_right, search_one_head  # noqa: E402

SETTINGS = {"steps": 600, "seed": 0, "lr": 0.05, "init_scale": 0.3}
GRID = ((3, 1000), (4, 1000), (5, 1000), (8, 2000))  # (vocab, restarts)
FIRST = 10  # counts of the first restarts, recomputed by tests/course/test_toy_task.py


def main() -> None:
    runs = []
    for vocab, restarts in GRID:
        start = time.perf_counter()
        found = search_one_head(vocab, restarts=restarts, **SETTINGS)
        counts = found.counts.tolist()
        cap = round(one_head_bound(vocab) * 2 * vocab * vocab)  # right answers of the hand-built solution
        hist = {str(c): counts.count(c) for c in sorted(set(counts))}
        runs.append({"vocab": vocab, "restarts": restarts, "answers": 2 * vocab * vocab, "cap": cap,
                     "max": max(counts), "histogram": hist, "first_counts": counts[:FIRST],
                     "pairs_all_right": int(pairs_all_right(found.right).max()),
                     "seconds": round(time.perf_counter() - start, 1)})
        print(runs[-1], flush=True)
    SEARCH_FILE.write_text(json.dumps({"settings": SETTINGS, "runs": runs}, ensure_ascii=False, indent=1) + "\n",
                           encoding="utf-8")
    print("wrote", SEARCH_FILE)


if __name__ == "__main__":
    main()
