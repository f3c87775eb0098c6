"""The look-back toy task of chapter 11: data, model shapes, determinism, and the one-vs-many-heads result."""
import pytest
import torch

from mha.course.toy_task import LookBackModel, ToyConfig, accuracy, deterministic, head_offsets, make_batch, train


def test_make_batch_targets_look_back():
    cfg = ToyConfig(seq_len=10, offsets=(2, 5))
    x, y, valid = make_batch(cfg, 4, torch.Generator().manual_seed(0))
    assert x.shape == (4, 10) and y.shape == (4, 10, 2) and valid.shape == (10,)
    assert valid.tolist() == [False] * 5 + [True] * 5
    for t in range(5, 10):
        assert torch.equal(y[:, t, 0], x[:, t - 2])
        assert torch.equal(y[:, t, 1], x[:, t - 5])


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


def test_two_heads_beat_one_head():
    """The chapter's claim, on a short run: one head stays far below, two heads split the offsets."""
    cfg = ToyConfig(steps=120, eval_every=40)
    one, two = train(cfg, 1), train(cfg, 2)
    assert two.final_accuracy > 0.95
    assert two.final_accuracy > one.final_accuracy + 0.25
    x, _, _ = make_batch(cfg, 128, torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, w = two.model(x)
    assert sorted(head_offsets(w, min_t=3).argmax(1).tolist()) == [1, 3]
