"""How the layer reads a mask's shape: 3-D is (B, L, S), per-head masks are 4-D, a wrong 3-D mask is loud."""
import pytest
import torch

import mha
from layers import small_layer

B, H, L = 2, 2, 3


@pytest.fixture
def layer():
    return small_layer(8, H)


@pytest.fixture
def x():
    return torch.randn(B, L, 8, dtype=torch.float64)


def per_head():
    """(h, L, S): head 0 may attend only itself, head 1 is causal."""
    return torch.stack([torch.eye(L, dtype=torch.bool), mha.causal_mask(L)])


def test_3d_mask_is_one_mask_per_sentence_shared_by_the_heads(layer, x):
    per_sentence = per_head()  # with B == h this (2, 3, 3) mask is (B, L, S): sentence 0 eye, sentence 1 causal
    _, w = layer(x, x, x, mask=per_sentence, need_weights=True)
    _, w_4d = layer(x, x, x, mask=per_sentence[:, None].expand(B, H, L, L).clone(), need_weights=True)
    torch.testing.assert_close(w, w_4d, atol=0, rtol=0)
    assert torch.equal(w[0, 1], torch.eye(L, dtype=w.dtype))  # sentence 0, head 1: the eye, not head 1's causal
    assert not torch.equal(w[1, 0], torch.eye(L, dtype=w.dtype))  # sentence 1, head 0: causal, not head 0's eye
    assert (w[1][:, ~mha.causal_mask(L)] == 0).all()
    assert mha.masks.normalize_mask(per_sentence, B, H, L, L).shape == (B, 1, L, L)


def test_per_head_mask_is_4d(layer, x):
    mask = per_head()[None]  # (1, h, L, S)
    _, w = layer(x, x, x, mask=mask, need_weights=True)
    assert torch.equal(w[:, 0], torch.eye(L, dtype=w.dtype).expand(B, L, L))  # every sentence, head 0: itself
    assert (w[:, 1][:, ~mha.causal_mask(L)] == 0).all() and not torch.equal(w[:, 1], w[:, 0])
    fused = layer(x, x, x, mask=mask)
    torch.testing.assert_close(fused, layer(x, x, x, mask=mask, need_weights=True)[0], atol=1e-12, rtol=0)


def test_3d_mask_with_the_heads_first_is_refused_when_h_is_not_b():
    layer = small_layer(8, 4)
    x = torch.randn(B, L, 8, dtype=torch.float64)
    mask = torch.ones(4, L, L, dtype=torch.bool)  # (h, L, S) with h = 4 != B = 2
    with pytest.raises(ValueError) as error:
        layer(x, x, x, mask=mask)
    message = str(error.value)
    assert "a 3-D mask is read as (B, L, S) = (2, 3, 3)" in message and "got (4, 3, 3)" in message
    assert "for a per-head mask pass (1, h, L, S) = (1, 4, 3, 3)" in message
    layer(x, x, x, mask=mask[None])  # the 4-D spelling is accepted


def test_3d_mask_of_one_and_a_wrong_length_names_both_shapes(layer, x):
    torch.testing.assert_close(layer(x, x, x, mask=mha.causal_mask(L)[None]), layer(x, x, x, mask=mha.causal_mask(L)))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 4\) \(read as \(2, 1, 3, 4\)\) cannot broadcast "
                                         r"to \(B, h, L, S\) = \(2, 2, 3, 3\)"):
        layer(x, x, x, mask=torch.ones(B, L, 4, dtype=torch.bool))
