"""Tests for mha.positional.sinusoidal_positional_encoding."""
import math

import pytest
import torch

from mha.positional import sinusoidal_positional_encoding


def naive_pe(L, d_model, base=10000.0):
    """Loop version written straight from the formula, as an independent reference."""
    pe = torch.zeros(L, d_model, dtype=torch.float64)
    for pos in range(L):
        for j in range(d_model):
            i = j // 2
            angle = pos / base ** (2 * i / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


@pytest.mark.parametrize("L, d_model", [(1, 1), (4, 6), (5, 4), (7, 16), (3, 5), (50, 512)])
def test_matches_loop_formula(L, d_model):
    pe = sinusoidal_positional_encoding(L, d_model)
    assert pe.shape == (L, d_model)
    assert pe.dtype == torch.float32
    torch.testing.assert_close(pe.double(), naive_pe(L, d_model), atol=1e-6, rtol=0)


def test_first_row_is_sin0_cos0():
    pe = sinusoidal_positional_encoding(4, 6)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))


def test_known_values_lecture_size():
    # d_model = 6: frequencies 1, 10000^(-1/3), 10000^(-2/3)
    pe = sinusoidal_positional_encoding(4, 6)
    assert pe[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-6)
    assert pe[1, 1].item() == pytest.approx(math.cos(1.0), abs=1e-6)
    assert pe[3, 2].item() == pytest.approx(math.sin(3 / 10000 ** (2 / 6)), abs=1e-6)
    assert pe[3, 5].item() == pytest.approx(math.cos(3 / 10000 ** (4 / 6)), abs=1e-6)


def test_pairs_share_a_frequency_so_each_pair_has_norm_one():
    pe = sinusoidal_positional_encoding(20, 8)
    pair_norms = pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2  # sin^2 + cos^2
    torch.testing.assert_close(pair_norms, torch.ones(20, 4))


def test_rows_are_distinct_and_bounded():
    pe = sinusoidal_positional_encoding(30, 6)
    assert pe.abs().max() <= 1.0
    assert torch.unique(pe, dim=0).shape[0] == 30


def test_other_base_and_dtype():
    pe = sinusoidal_positional_encoding(6, 4, base=100.0, dtype=torch.float64)
    assert pe.dtype == torch.float64
    torch.testing.assert_close(pe, naive_pe(6, 4, base=100.0))


@pytest.mark.parametrize("L, d_model", [(0, 6), (4, 0), (-1, 6)])
def test_sizes_below_one_raise_value_error(L, d_model):
    with pytest.raises(ValueError, match="must be an int >= 1"):
        sinusoidal_positional_encoding(L, d_model)


@pytest.mark.parametrize("L, d_model", [(4.0, 6), ("4", 6), (True, 6), (4, None)])
def test_sizes_that_are_not_ints_raise_type_error(L, d_model):
    with pytest.raises(TypeError, match="must be an int"):
        sinusoidal_positional_encoding(L, d_model)


def test_bad_base_and_dtype():
    with pytest.raises(ValueError, match="base"):
        sinusoidal_positional_encoding(4, 6, base=1)
    with pytest.raises(TypeError, match="floating-point"):
        sinusoidal_positional_encoding(4, 6, dtype=torch.int64)
