"""The layer under torch.compile and torch.export: no graph break on any path, and value checks only in eager mode."""
import pytest
import torch

import mha
from mha import KVCache, steps
from mha.validate import tracing

B, L, D, H = 2, 5, 16, 4


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(B, L, D, requires_grad=True)
    pad = torch.ones(B, 1, 1, L, dtype=torch.bool)
    pad[1, ..., -2:] = False  # the second sequence has 2 padding tokens
    attn = torch.rand(L, L) > 0.3
    attn[0] = False  # one fully masked query row
    return x, pad, attn


def _paths():
    """Every way to call the layer, as (name, layer, call(layer, x, pad, attn) -> output)."""
    mha_layer = mha.MultiHeadAttention(D, H, dropout=0.0)
    gqa_layer = mha.MultiHeadAttention(D, H, dropout=0.0, n_kv_heads=2)
    cache = KVCache(torch.randn(B, 2, 3, D // H), torch.randn(B, 2, 3, D // H))
    return [
        ("fused", mha_layer, lambda m, x, pad, attn: m(x, x, x)),
        ("need_weights", mha_layer, lambda m, x, pad, attn: m(x, x, x, need_weights=True)[0]),
        ("padding mask", mha_layer, lambda m, x, pad, attn: m(x, x, x, pad)),
        ("attn mask", mha_layer, lambda m, x, pad, attn: m(x, x, x, attn)),
        ("0/1 float mask", mha_layer, lambda m, x, pad, attn: m(x, x, x, pad.float())),
        ("is_causal", mha_layer, lambda m, x, pad, attn: m(x, x, x, is_causal=True)),
        ("is_causal + padding", mha_layer, lambda m, x, pad, attn: m(x, x, x, pad, is_causal=True)),
        ("GQA", gqa_layer, lambda m, x, pad, attn: m(x, x, x, pad)),
        ("GQA need_weights", gqa_layer, lambda m, x, pad, attn: m(x, x, x, need_weights=True)[0]),
        ("decode", gqa_layer, lambda m, x, pad, attn: m.decode(x[:, -1:], x[:, -1:], x[:, -1:], cache)[0]),
        ("decode need_weights", gqa_layer,
         lambda m, x, pad, attn: m.decode(x[:, -1:], x[:, -1:], x[:, -1:], cache, need_weights=True)[0]),
    ]


PATHS = {name: (layer, call) for name, layer, call in _paths()}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", list(PATHS))
def test_no_graph_break(name):
    layer, call = PATHS[name]
    x, pad, attn = _inputs()
    explanation = torch._dynamo.explain(lambda: call(layer, x, pad, attn))()
    assert explanation.graph_break_count == 0, [str(b.reason) for b in explanation.break_reasons]
    assert explanation.graph_count == 1


@pytest.mark.parametrize("name", ["padding mask", "GQA", "decode"])
def test_fullgraph_forward_and_backward_match_eager(name):
    layer, call = PATHS[name]
    x, pad, attn = _inputs()
    compiled = torch.compile(lambda x: call(layer, x, pad, attn), fullgraph=True, backend="aot_eager")
    out = compiled(x)
    (grad,) = torch.autograd.grad(out.pow(2).sum(), x)
    eager = call(layer, x, pad, attn)
    (eager_grad,) = torch.autograd.grad(eager.pow(2).sum(), x)
    torch.testing.assert_close(out, eager, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(grad, eager_grad, atol=1e-6, rtol=1e-5)


def test_eager_refuses_nan_but_compiled_does_not_check():
    """The NaN check reads values, so it runs in eager mode only: compiled code gets NaN out, no error, no break."""
    layer = mha.MultiHeadAttention(D, H, dropout=0.0).eval()
    x = torch.randn(B, L, D)
    x[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"query must hold finite numbers, got 1 NaN"):
        layer(x, x, x)
    out = torch.compile(layer, fullgraph=True, backend="eager")(x, x, x)
    assert out[0].isnan().all() and not out[1].isnan().any()  # NaN spreads within batch 0 only


def test_without_the_skip_the_value_check_breaks_the_graph(monkeypatch):
    import mha.validate

    monkeypatch.setattr(mha.validate, "tracing", lambda: False)
    layer, call = PATHS["fused"]
    x, pad, attn = _inputs()
    assert torch._dynamo.explain(lambda: call(layer, x, pad, attn))().graph_break_count >= 1


def test_tracing_is_true_only_while_tracing():
    assert not tracing()
    seen = torch.compile(lambda t: t + 1 if tracing() else t - 1, fullgraph=True, backend="eager")(torch.zeros(1))
    assert seen.item() == 1


def test_fused_gqa_uses_the_kernels_grouping(monkeypatch):
    """Where SDPA takes enable_gqa, the fused path does not repeat K/V heads (no copy)."""
    if not steps.SDPA_HAS_GQA:
        pytest.skip("this torch's SDPA has no enable_gqa")
    layer, call = PATHS["GQA"]
    x, pad, attn = _inputs()
    expected = call(layer, x, pad, attn)
    monkeypatch.setattr(steps, "repeat_kv_heads", lambda *a: pytest.fail("K/V heads repeated on the fused path"))
    torch.testing.assert_close(call(layer, x, pad, attn), expected)


@pytest.mark.parametrize("has_gqa, zeros_masked_rows", [(False, False), (True, False), (False, True)])
def test_older_torch_fallbacks_give_the_same_numbers(monkeypatch, has_gqa, zeros_masked_rows):
    """The repeat_interleave and masked-row-guard branches (torch < 2.5) agree with the pinned torch's kernel."""
    x, pad, attn = _inputs()
    expected = {name: call(layer, x, pad, attn) for name, (layer, call) in PATHS.items()}
    monkeypatch.setattr(steps, "SDPA_HAS_GQA", has_gqa and steps.SDPA_HAS_GQA)
    monkeypatch.setattr(steps, "SDPA_ZEROS_MASKED_ROWS", zeros_masked_rows)
    for name, (layer, call) in PATHS.items():
        torch.testing.assert_close(call(layer, x, pad, attn), expected[name], atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 5), reason="torch >= 2.5 only")
def test_pinned_sdpa_returns_zeros_for_fully_masked_rows():
    """What lets the fused path drop the guard: verified on this torch, not assumed."""
    assert steps.SDPA_ZEROS_MASKED_ROWS
    q = torch.randn(1, 2, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert out[:, :, 1].eq(0).all() and not out.isnan().any()
