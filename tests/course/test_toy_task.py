"""The look-back toy task of chapter 11: data, model shapes, determinism, the one-vs-many-heads result, the
one-head cap (its hand-built solution, the search and its shipped histogram), and the shipped long runs (one seed
retrained and compared)."""
import json
import pathlib

import pytest
import torch

from mha.course.toy_task import (LookBackModel, ToyConfig, accuracy, answer_accuracy, deterministic, group_runs, head_offsets,
                          load_runs, load_search, long_runs_alt, make_batch, one_head_bound, pairs_all_right,
                          search_one_head, train, LONG_FILE, REVIEW_FILE, RUNS_FILE, SEARCH_FILE)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_make_batch_targets_look_back():
    cfg = ToyConfig(seq_len=10, offsets=(2, 5))
    x, y, valid = make_batch(cfg, 4, torch.Generator().manual_seed(0))
    assert x.shape == (4, 10) and y.shape == (4, 10, 2) and valid.shape == (10,)
    assert valid.tolist() == [False] * 5 + [True] * 5
    for t in range(5, 10):
        assert torch.equal(y[:, t, 0], x[:, t - 2])
        assert torch.equal(y[:, t, 1], x[:, t - 5])


def test_bad_values_option():
    with pytest.raises(ValueError, match="values must be one of"):
        ToyConfig(values="positions")


@pytest.mark.parametrize("values", ["tokens", "tokens+positions"])
def test_value_input_is_what_the_option_says(values):
    cfg = ToyConfig(values=values)
    model = LookBackModel(cfg, 2)
    seen = {}
    model.attn.register_forward_pre_hook(lambda module, args: seen.update(q=args[0], v=args[2]))
    x, _, _ = make_batch(cfg, 3, torch.Generator().manual_seed(0))
    model(x)
    tok = model.tok(x)
    assert torch.equal(seen["q"], tok + model.pos.weight)                 # Query: token + position
    assert torch.equal(seen["v"], tok if values == "tokens" else tok + model.pos.weight)


def test_bad_offsets():
    with pytest.raises(ValueError, match="offset"):
        ToyConfig(seq_len=4, offsets=(1, 4))
    with pytest.raises(ValueError, match="offset"):
        ToyConfig(offsets=(0, 2))


def test_model_shapes_and_same_parameter_count():
    cfg = ToyConfig()
    x, _, _ = make_batch(cfg, 3)
    counts = set()
    for h in (1, 2, 4):
        logits, w = LookBackModel(cfg, h)(x)
        assert logits.shape == (3, cfg.seq_len, 2, cfg.vocab)
        assert w.shape == (3, h, cfg.seq_len, cfg.seq_len)
        assert torch.all(w.triu(diagonal=1) == 0)  # causal
        counts.add(sum(p.numel() for p in LookBackModel(cfg, h).parameters()))
    assert len(counts) == 1


def test_accuracy_counts_only_valid_positions():
    y = torch.zeros(1, 4, 1, dtype=torch.long)
    logits = torch.zeros(1, 4, 1, 3)
    logits[0, :2, 0, 1] = 1.0  # wrong at the first two positions, right (class 0 ties -> argmax 0) later
    valid = torch.tensor([False, False, True, True])
    assert accuracy(logits, y, valid) == 1.0
    assert accuracy(logits, y, torch.ones(4, dtype=torch.bool)) == 0.5


def test_head_offsets_of_a_known_pattern():
    T = 6
    w = torch.zeros(1, 2, T, T)
    for t in range(T):
        w[0, 0, t, max(t - 1, 0)] = 1.0  # head 0 looks 1 back
        w[0, 1, t, max(t - 3, 0)] = 1.0  # head 1 looks 3 back
    off = head_offsets(w, min_t=3)
    assert off.shape == (2, T)
    assert off.argmax(1).tolist() == [1, 3]
    assert off[0, 1] == 1.0 and off[1, 3] == 1.0


def test_deterministic_restores_settings():
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    with deterministic(1):
        assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == before


def test_training_is_reproducible():
    cfg = ToyConfig(steps=20, eval_every=10)
    a, b = train(cfg, 2, seed=3), train(cfg, 2, seed=3)
    assert a.steps == [0, 10, 20]
    assert a.accuracy == b.accuracy


def test_answer_accuracy_splits_the_answers():
    y = torch.tensor([[[0, 1], [2, 3]]])  # (1, T=2, 2)
    logits = torch.nn.functional.one_hot(torch.tensor([[[0, 0], [2, 0]]]), 4).float()  # right, wrong / right, wrong
    assert answer_accuracy(logits, y, torch.tensor([True, True])) == [1.0, 0.0]
    assert accuracy(logits, y, torch.tensor([True, True])) == 0.5


def test_two_heads_beat_one_head():
    """The chapter's claim, on a short run: one head stays far below, two heads split the offsets."""
    cfg = ToyConfig(steps=120, eval_every=40)
    one, two = train(cfg, 1), train(cfg, 2)
    assert two.final_accuracy > 0.95
    assert one.final_accuracy < one_head_bound(cfg.vocab)
    assert two.final_accuracy > one.final_accuracy + 0.25
    x, _, _ = make_batch(cfg, 128, torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, w = two.model(x)
    assert sorted(head_offsets(w, min_t=3).argmax(1).tolist()) == [1, 3]


def test_one_head_bound_is_reached_by_a_construction_and_matches_the_count():
    """The bound 1/V + (1 - 1/V) 3/4 equals the accuracy of the chapter's hand-built one-head solution."""
    for V in (3, 8, 11):
        e = torch.eye(V, dtype=torch.float64)
        pairs = torch.tensor([(a, b) for a in range(V) for b in range(V)])
        m = 0.52 * e[pairs[:, 0]] + 0.48 * e[pairs[:, 1]]
        right_1 = m.argmax(1) == pairs[:, 0]
        # readout 2 prefers the later token of the two: the order term 0.44 c must beat 10 * (0.52 - 0.48) = 0.4
        # between neighbours and stay below 10 * 0.48 = 4.8 for every outsider, 0.44 * (V - 1) <= 4.4
        right_3 = (10 * m + 0.44 * torch.arange(V, dtype=torch.float64)).argmax(1) == pairs[:, 1]
        both = (right_1.double().mean() + right_3.double().mean()).item() / 2
        assert abs(both - one_head_bound(V)) < 1e-12, V
    assert one_head_bound(8) == 0.78125


def test_pairs_all_right_counts_full_pairs_only():
    V = 3
    right = torch.ones(2, V, V, 2, dtype=torch.bool)  # restart 0: everything right, 3 full pairs
    right[1, 0, 0, 1] = False  # restart 1: one diagonal answer wrong spoils the pairs {0, 1} and {0, 2}
    assert pairs_all_right(right).tolist() == [3, 1]
    right[1, 2, 1, 0] = False  # an off-diagonal answer spoils only its own pair {1, 2}
    assert pairs_all_right(right).tolist() == [3, 0]


def test_search_finds_the_hand_built_cap_and_never_beats_it():
    """A short search (V = 4) reaches the hand-built 26 of 32 and no restart finds a pair with all 8 answers right."""
    found = search_one_head(4, restarts=40, steps=300, seed=3)
    cap = round(one_head_bound(4) * 32)
    assert found.right.shape == (40, 4, 4, 2) and found.lam.shape == (40, 4, 4)
    assert found.counts.max().item() == cap
    assert (pairs_all_right(found.right) == 0).all()


def test_search_restarts_do_not_depend_on_how_many_run():
    a = search_one_head(3, restarts=6, steps=40, seed=1)
    b = search_one_head(3, restarts=2, steps=40, seed=1)
    assert torch.equal(a.right[:2], b.right) and torch.equal(a.lam[:2], b.lam)
    assert not torch.equal(a.lam[0], a.lam[1])  # the restarts start apart


def test_search_rejects_bad_sizes():
    with pytest.raises(ValueError, match="vocab >= 2"):
        search_one_head(1)


def test_shipped_search_is_reproduced_and_never_beats_the_cap():
    """The first restarts of the shipped search (tools/toy_task_bound_search.py), recomputed; its histogram
    tops out at the hand-built solution for every V."""
    data = load_search()
    assert [r["vocab"] for r in data["runs"]] == [3, 4, 5, 8]
    for run in data["runs"]:
        assert sum(run["histogram"].values()) == run["restarts"]
        assert run["cap"] == round(one_head_bound(run["vocab"]) * run["answers"]) == run["max"]
        assert max(int(c) for c in run["histogram"]) == run["max"] and run["pairs_all_right"] == 0
    run = data["runs"][-1]
    found = search_one_head(run["vocab"], restarts=4, **data["settings"])
    assert found.counts.tolist() == run["first_counts"][:4]
    assert SEARCH_FILE.stat().st_size < 4_000


def test_shipped_runs_cover_the_grid_and_agree_with_the_bound():
    data, review = load_runs(RUNS_FILE), load_runs(REVIEW_FILE)
    groups = group_runs(data)
    assert sorted(groups) == [("tokens", 1), ("tokens", 2), ("tokens", 4), ("tokens+positions", 1), ("tokens+positions", 2)]
    assert all([r["seed"] for r in rs] == [0, 1, 2, 3, 4] for rs in groups.values())
    assert data["steps"][-1] == 3000 and review["steps"][-1] == 10000
    assert sorted({r["seed"] for r in review["runs"]}) == [5, 6, 7, 8]
    assert all(len(r["accuracy"]) == len(data["steps"]) for r in data["runs"])
    bound = one_head_bound(data["config"]["vocab"])
    one_tok = groups[("tokens", 1)] + group_runs(review)[("tokens", 1)]
    assert all(max(r["accuracy"]) < bound for r in one_tok), "a one-head run with token-only values beat the conjectured cap"
    assert RUNS_FILE.stat().st_size < 16_000 and REVIEW_FILE.stat().st_size < 16_000


def test_the_long_run_figure_alt_is_made_from_the_data():
    cells = json.loads((ROOT / "book" / "11_why_many_heads.ipynb").read_text(encoding="utf-8"))["cells"]
    alts = [c["metadata"]["mystnb"]["image"]["alt"] for c in cells
            if "RUNS_FILE" not in "".join(c["source"]) and "groups[key]" in "".join(c["source"])]
    assert alts == [long_runs_alt(load_runs(RUNS_FILE))]


def _kept(steps, accuracy, stored_steps):
    at = dict(zip(steps, accuracy))
    return [at[s] for s in stored_steps if s in at]


@pytest.mark.parametrize("values", ["tokens", "tokens+positions"])
def test_retraining_seed_0_reproduces_the_start_of_its_shipped_curve(values):
    """The first 300 steps of seed 0 (the data stream does not depend on the run's length), to 0.005."""
    data = load_runs(RUNS_FILE)
    run = group_runs(data)[(values, 1)][0]
    hist = train(ToyConfig(steps=300, eval_every=data["config"]["eval_every"], values=values), 1, seed=0)
    mine = _kept(hist.steps, hist.accuracy, data["steps"])
    assert len(mine) == len([s for s in data["steps"] if s <= 300])
    assert max(abs(a - b) for a, b in zip(mine, run["accuracy"])) <= 0.005


@pytest.mark.slow
def test_retraining_seed_0_reproduces_its_whole_shipped_run():
    """Seed 0 of the chapter's one-head model, all 3,000 steps (about 15-60 s on one core), to 0.005."""
    data = load_runs(RUNS_FILE)
    run = group_runs(data)[("tokens", 1)][0]
    hist = train(ToyConfig(steps=data["steps"][-1], eval_every=data["config"]["eval_every"]), 1, seed=0)
    mine = _kept(hist.steps, hist.accuracy, data["steps"])
    assert max(abs(a - b) for a, b in zip(mine, run["accuracy"])) <= 0.005
    assert max(abs(a - b) for a, b in zip(hist.per_answer[-1], run["final_per_answer"])) <= 0.005


def test_the_search_finds_a_better_solution_when_one_exists():
    # both tokens side by side (two heads) can answer all 2 V^2: the search must get there
    found = search_one_head(4, restarts=10, steps=300, seed=3, features="two_heads")
    assert (found.counts == 32).all()
    blend = search_one_head(4, restarts=10, steps=300, seed=3).counts
    assert blend.max() < 32


def test_the_search_refuses_unknown_features():
    with pytest.raises(ValueError, match="features must be one of"):
        search_one_head(4, restarts=1, steps=1, features="three_heads")


@pytest.mark.parametrize("values, heads", [("tokens", 1), ("tokens+positions", 1)])
def test_the_outside_long_runs_reproduce_at_step_200(values, heads):
    """Seed 9 of the outside 15,000-step re-run (toy_task_long_review.json), its first 200 steps, to 0.005."""
    data = load_runs(LONG_FILE)
    assert LONG_FILE.stat().st_size < 16_000
    run = group_runs(data)[(values, heads)][0]
    assert run["seed"] == 9
    hist = train(ToyConfig(steps=200, eval_every=25, values=values), heads, seed=run["seed"])
    assert abs(hist.accuracy[-1] - run["acc_at"]["200"]) <= 0.005


@pytest.mark.slow
def test_the_outside_long_run_of_seed_9_ends_below_the_plateau():
    """Seed 9, one head, Value = token only, all 15,000 steps (about 40 s): final 0.5618, highest 0.687."""
    run = group_runs(load_runs(LONG_FILE))[("tokens", 1)][0]
    hist = train(ToyConfig(steps=15000, eval_every=25), 1, seed=9)
    assert abs(hist.accuracy[-1] - run["final"]) <= 0.005 and abs(max(hist.accuracy) - run["max"]) <= 0.005
