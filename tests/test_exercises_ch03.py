"""Exercise checkers of chapter 03: references pass, stubs say "not done", each typical mistake is named."""
import math

import pytest
import torch

from mha.exercises import check_count_parameters, check_project_matmul, check_projection_shape, results
from exercise_support import raise_not_implemented, raise_value_error, return_ellipsis


# ---------------------------------------------------------------- references
def projection_shape_ref(B, L, d_model, n_heads):
    return (B, L, d_model)


def count_parameters_ref(d_model, n_heads, bias=True):
    return 4 * (d_model * d_model + (d_model if bias else 0))


def project_ref(x, linear):
    out = x @ linear.weight.T
    if linear.bias is not None:
        out = out + linear.bias
    return out


CHECKERS = [
    (check_projection_shape, projection_shape_ref),
    (check_count_parameters, count_parameters_ref),
    (check_project_matmul, project_ref),
]


def _returns_nan(*args):
    return torch.full((2, 4, 6), float("nan"))


@pytest.mark.parametrize("check, ref", CHECKERS)
def test_reference_passes(check, ref, capsys):
    assert check(ref) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check, ref", CHECKERS)
@pytest.mark.parametrize("stub", [raise_not_implemented, return_ellipsis, None, ...])
def test_stub_is_not_done(check, ref, stub, capsys):
    assert check(stub) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("check, ref", CHECKERS)
@pytest.mark.parametrize("garbage", [
    "a string", 42, 3.5, raise_value_error, _returns_nan,
    lambda *a: "text", lambda *a: torch.zeros(3, dtype=torch.long), lambda *a: torch.zeros(1, 2, 3),
    lambda *a: (1.5, 2), lambda *a: [None], lambda *a: float("nan"), lambda *a: True, lambda *a: {"x": 1},
])
def test_garbage_never_raises(check, ref, garbage, capsys):
    assert check(garbage) is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "❌" in out


def test_record_false_is_not_recorded(capsys):
    check_projection_shape(None)
    check_projection_shape(projection_shape_ref, record=False)
    assert results("ch03")["3.1"] == "todo"
    check_projection_shape(projection_shape_ref)
    assert results("ch03")["3.1"] == "pass"


# ---------------------------------------------------------------- 3.1 mistakes
@pytest.mark.parametrize("wrong, message", [
    (lambda B, L, d, h: (B, h, L, d // h), "分头之后"),
    (lambda B, L, d, h: (B, L, h, d // h), "分头之后"),
    (lambda B, L, d, h: (B, L, d // h), "不是一个头的宽度"),
    (lambda B, L, d, h: (d, d), "权重矩阵"),
    (lambda B, L, d, h: (L, d), "batch"),
    (lambda B, L, d, h: (B, L, d / 1), "整数"),
    (lambda B, L, d, h: (2, 4, 512), "应为 (3, 5, 4)"),
])
def test_projection_shape_mistakes(wrong, message, capsys):
    assert check_projection_shape(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


def test_projection_shape_accepts_list_and_size(capsys):
    assert check_projection_shape(lambda B, L, d, h: [B, L, d])
    assert check_projection_shape(lambda B, L, d, h: torch.Size([B, L, d]))


# ---------------------------------------------------------------- 3.2 mistakes
@pytest.mark.parametrize("wrong, message", [
    (lambda d, h, bias=True: 4 * d * d, "忘了偏置"),
    (lambda d, h, bias=True: 4 * (d * d + d), "bias=False"),
    (lambda d, h, bias=True: 3 * (d * d + (d if bias else 0)), "忘了最终的 W_o"),
    (lambda d, h, bias=True: h * 4 * (d * d + (d if bias else 0)), "多乘了 n_heads"),
    (lambda d, h, bias=True: 4 * (d * (d // h) + ((d // h) if bias else 0)), "一个头"),
    (lambda d, h, bias=True: 4 * (d * d + (1 if bias else 0)), "偏置不是一个数"),
    (lambda d, h, bias=True: 2 * d * d, "四个 nn.Linear"),
])
def test_count_parameters_mistakes(wrong, message, capsys):
    assert check_count_parameters(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


def test_count_parameters_accepts_numel_sum(capsys):
    from mha import MultiHeadAttention

    def from_layer(d, h, bias=True):
        return sum(p.numel() for p in MultiHeadAttention(d, h, bias=bias).parameters())

    assert check_count_parameters(from_layer) is True


def test_count_parameters_reference_formula():
    from mha import MultiHeadAttention

    for d, h in [(512, 8), (6, 2), (12, 3)]:
        for bias in (True, False):
            layer = MultiHeadAttention(d, h, bias=bias)
            assert sum(p.numel() for p in layer.parameters()) == count_parameters_ref(d, h, bias)


# ---------------------------------------------------------------- 3.3 mistakes
def _no_transpose(x, linear):
    return x @ linear.weight + (linear.bias if linear.bias is not None else 0)


def _no_bias(x, linear):
    return x @ linear.weight.T


def _bias_always(x, linear):
    return x @ linear.weight.T + linear.bias


def _calls_linear(x, linear):
    return linear(x)


def _mutates(x, linear):
    x.mul_(1.0).add_(0.0)
    x += 1.0
    return project_ref(x - 1.0, linear)


def _uses_functional(x, linear):
    return torch.nn.functional.linear(x, linear.weight, linear.bias)


@pytest.mark.parametrize("wrong, message", [
    (_no_transpose, "忘了转置"),
    (_no_bias, "忘了加偏置"),
    (_bias_always, "bias=False"),
    (_calls_linear, "直接调用了 linear(x)"),
    (_mutates, "修改了输入 x"),
    (lambda x, linear: project_ref(x, linear) * 1.01, "数值不对"),
])
def test_project_matmul_mistakes(wrong, message, capsys):
    assert check_project_matmul(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


def test_project_matmul_accepts_functional_linear(capsys):
    assert check_project_matmul(_uses_functional) is True


def test_reference_project_matches_mha_project():
    import mha

    layer = mha.MultiHeadAttention(16, 4).requires_grad_(False)
    x = torch.randn(2, 3, 16)
    assert torch.allclose(project_ref(x, layer.W_q), mha.project(x, layer.W_q), atol=1e-6)
    assert math.isclose(project_ref(x, layer.W_q).sum().item(), layer.W_q(x).sum().item(), rel_tol=1e-4, abs_tol=1e-4)
