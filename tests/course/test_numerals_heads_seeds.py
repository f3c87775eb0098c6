"""Chapter 13's head readings over three seeds: the shipped JSON's seed-0 row is the shipped model's."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

torch = pytest.importorskip("torch")

from mha.course.numerals import DATA_DIR  # noqa: E402

ROWS = json.loads((DATA_DIR / "numerals_heads_seeds.json").read_text(encoding="utf-8"))


def test_three_seeds_each_with_aligned_heads_above_the_positional_guess():
    assert [r["seed"] for r in ROWS] == [0, 1, 2]
    for r in ROWS:   # what the chapter says holds on every seed
        assert len(r["aligned"]) >= 2 and all(a["hit"] > r["positional"] for a in r["aligned"])
        assert r["joint_mean_ablation"] < min(a["alone_mean_ablation"] for a in r["aligned"])
        assert abs(r["cos"]["二贰"]) < 0.125                     # within one sd of random 64-d vectors


def test_the_seed_0_row_is_recomputed_from_the_shipped_model():
    import numerals_seeds

    torch.set_num_threads(1)
    assert numerals_seeds.heads_row(0) == ROWS[0]
