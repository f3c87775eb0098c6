"""Chapter 13 reads its ablation table from mha/course/data/numerals_ablations.json (the study takes ~15 s,
the chapter must run in 30): the stored table is the shipped model's, recomputed here."""
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

torch = pytest.importorskip("torch")

from mha.course.numerals import DATA_DIR  # noqa: E402
from mha.course.numerals.analysis import ABLATION_FILE, stored_ablation_study  # noqa: E402


@pytest.mark.slow  # 59 ablations of 1000 numbers: ~15 s
def test_the_stored_ablation_study_is_recomputed_from_the_shipped_model():
    import numerals_seeds

    torch.set_num_threads(1)
    assert numerals_seeds.ablations_row() == json.loads((DATA_DIR / ABLATION_FILE).read_text(encoding="utf-8"))


def test_the_stored_study_reads_back_with_head_keys():
    study = stored_ablation_study()
    heads = {(b, l, h) for b in ("encoder", "decoder", "cross") for l in range(2) for h in range(4)}
    assert set(study["ablated"]["zero"]) == set(study["ablated"]["mean"]) == heads
    assert set(study["ablated"]["position_mean"]) == set(study["top"]) and set(study["pair"]) <= set(study["top"])
    assert set(study["joint"]) == {"zero", "mean", "position_mean"} and study["numbers"] == 1000
