"""The long-budget 1-head run that ch13 quotes (mha/course/data/numerals_long_budget.json) reproduces."""
import json

import torch

from mha.course.numerals import DATA_DIR, held_out_numbers, model_from_state
from mha.course.numerals.analysis import teacher_forced_exact_match

DATA = json.loads((DATA_DIR / "numerals_long_budget.json").read_text(encoding="utf-8"))


def test_shipped_long_budget_model_makes_the_errors_the_json_records():
    path = DATA_DIR / DATA["shipped_file"]
    assert path.stat().st_size < 1_000_000
    state = torch.load(path, map_location="cpu", weights_only=True)
    model = model_from_state({"model": {"n_heads": 1}}, state).double()
    assert model.cfg.n_heads == 1
    run = [r for r in DATA["runs"] if r["seed"] == 4][0]
    test = held_out_numbers()
    errors = round((1 - teacher_forced_exact_match(model, test)) * len(test))
    assert errors == run["errors"]["chapter_2000"]
    other = [n for n in held_out_numbers(6000, seed=777) if n not in set(test)][:4000]
    assert round((1 - teacher_forced_exact_match(model, other)) * len(other)) == run["errors"]["other_4000"]


def test_long_budget_runs_are_the_chapters_configuration_at_three_times_the_steps():
    from mha.course.numerals import shipped_info
    steps = shipped_info("1head")["train"]["steps"]
    assert {r["seed"] for r in DATA["runs"]} == {4, 5, 6}  # three seeds the chapter does not train
    assert all(r["heads"] == 1 and r["steps"] == 3 * steps for r in DATA["runs"])
