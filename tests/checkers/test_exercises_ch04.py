"""Exercise checkers of chapter 04, table-driven: every correct style passes, every wrong, forbidden or broken
answer gets a verdict that names what happened (never the checker's own error). The stub answers of these
exercises are the generic ones; they, and the generic garbage, are tried in tests/checkers/test_exercises_common.py."""
import numpy as np
import torch
from torch import nn

import mha
from mha.course.exercises import (check_packed_from_heads, check_split_bug_repair, check_heads_that_move, results)
from mha.course.exercises.ch04 import split_heads_buggy
from mha.steps import split_heads as imported_split_heads
from exercise_support import answers_for, verdict_allowing_prints, every, mistakes_for, not_done_answers, raise_value_error, right_answers, wrong_answers


# ---------------------------------------------------------------- references
def split_heads_ref(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, n_heads, d_model // n_heads).transpose(1, 2)


def per_head_linears_ref(W_q, n_heads):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(d_model, d_k)
        with torch.no_grad():
            small.weight.copy_(W_q.weight[i * d_k:(i + 1) * d_k])
            small.bias.copy_(W_q.bias[i * d_k:(i + 1) * d_k])
        smalls.append(small)
    return smalls




def test_references_agree_with_mha():
    x = torch.randn(2, 4, 512)
    assert torch.equal(split_heads_ref(x, 8), mha.split_heads(x, 8))


# ---------------------------------------------------------------- correct answers, in many styles
def _split_loop(x, n_heads):
    d_k = x.shape[-1] // n_heads
    return torch.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(n_heads)], dim=1)


def _split_float64_inside(x, n_heads):
    B, L, d_model = x.shape
    return x.double().reshape(B, L, n_heads, -1).permute(0, 2, 1, 3).float()


def _linears_from_data(W_q, n_heads):
    d_k = W_q.out_features // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(W_q.in_features, d_k)
        small.weight.data = W_q.weight.data[i * d_k:(i + 1) * d_k].clone()
        small.bias.data = W_q.bias.data[i * d_k:(i + 1) * d_k].clone()
        smalls.append(small)
    return smalls


# ---------------------------------------------------------------- 4.1 which heads and tokens one changed number reaches
def _heads_by_experiment():
    """An honest answer: the three experiments, with a fresh layer and the chapter's split, printed as it goes."""
    layer = mha.MultiHeadAttention(12, 4)
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        q = layer.W_q(x)
        x2, q2 = x.clone(), q.clone()
        x2[0, 2, 1] += 1
        q2[0, 2, 7:10] += 1
        hx, hq = (mha.split_heads(t - q, 4)[0] for t in (layer.W_q(x2), q2))  # (h, L, d_k)
        layer.W_q.weight[9, 1] += 1.0
        hw = mha.split_heads(layer.W_q(x) - q, 4)[0]
    print(mha.fmt(hw.abs().amax(dim=(1, 2)), 3))
    return {"weight": [i for i in range(4) if hw[i].abs().max() > 1e-6],
            "tokens": (hx[3].abs().amax(-1) > 1e-6).nonzero(),  # (k, 1): .nonzero() without .flatten()
            "slice": [i for i in range(4) if (hq[i, 2] != 0).any()]}


RIGHT_4 = {"weight": [3], "tokens": [2], "slice": [2, 3]}
RIGHT = answers_for(check_heads_that_move, [
    RIGHT_4, {"weight": (3,), "tokens": torch.tensor([2]), "slice": range(2, 4)},
    {"weight": [9 // 3], "tokens": np.array([2]), "slice": {3, 2}}, _heads_by_experiment(),
])
WRONG_4_1 = mistakes_for(check_heads_that_move, [
    ({**RIGHT_4, "weight": [0]}, ["看的是列 1", "(out, in)", "这一层 d_k = 3"]),  # weight read as (in, out), or 9 // 64
    ({**RIGHT_4, "weight": [0, 1, 2, 3]}, ["每个头都会变", "只进一个头"]),  # chapter 4's x experiment, copied
    ({**RIGHT_4, "weight": [1]}, ["轮流", "9 % 4 = 1"]),
    ({**RIGHT_4, "weight": [2]}, ["除以了 n_heads", "9 // 4 = 2"]),  # before it, this read as counted from 1
    ({**RIGHT_4, "weight": [4]}, "从 1 开始数"),
    ({**RIGHT_4, "tokens": [0, 1, 2, 3, 4]}, "逐 token"),
    ({**RIGHT_4, "tokens": []}, ["自己的那一段特征", "代码下标 3 的头那一段是下标 9–11"]),
    ({**RIGHT_4, "tokens": [1]}, "特征的下标，不是 token"),
    ({**RIGHT_4, "tokens": [3]}, "从 1 开始数"),
    ({**RIGHT_4, "slice": [0, 1, 2, 3]}, ["只搬数", "只进一个头"]),
    ({**RIGHT_4, "slice": [0, 1, 3]}, ["轮流", "n % 4"]),
    ({**RIGHT_4, "slice": [1, 2]}, ["除以了 n_heads", "n // 4"]),
    ({**RIGHT_4, "slice": [2]}, ["切片的开头", "跨过了头的边界"]),
    ({**RIGHT_4, "slice": [3, 4]}, "从 1 开始数"),
    ({**RIGHT_4, "slice": [3]}, ['answer["slice"]', "d_k = 3"]),
    ({**RIGHT_4, "weight": [5]}, "超出了范围"),
    ({**RIGHT_4, "weight": torch.ones(4, dtype=torch.bool)}, "布尔张量"),
    ({"from_x": [0, 1, 2], "tokens": [2], "from_q": [2]}, "缺少键"),  # the exercise before it changed
    ((2, 3, 4, 4), "字典"),  # the old shape exercise's kind of answer
])


test_right_answers_pass = right_answers(RIGHT)


# ---------------------------------------------------------------- wrong answers, each named
def _view_without_transpose(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, n_heads, L, d_model // n_heads)


def _swapped_h_dk(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, d_model // n_heads, n_heads).transpose(1, 2)


def _interleaved(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, d_model // n_heads, n_heads).permute(0, 3, 1, 2)


def _resizes_x(x, n_heads):
    B, L, d_model = x.shape
    x.resize_(B, L, n_heads, d_model // n_heads)
    return x.transpose(1, 2)


def _scales_x_in_place(x, n_heads):
    x.mul_(1.0)  # a no-op value-wise: still fine
    x[0, 0, 0] = 123.0
    return split_heads_ref(x, n_heads)


def _hard_coded_64(x, n_heads):
    B, L, _ = x.shape
    return x.view(B, L, -1, 64).transpose(1, 2)


def _split_no_grad(x, n_heads):
    with torch.no_grad():
        return split_heads_ref(x, n_heads)


def _columns(W_q, n_heads):
    d_k = W_q.in_features // n_heads
    smalls = per_head_linears_ref(W_q, n_heads)
    with torch.no_grad():
        for i, small in enumerate(smalls):
            small.weight.copy_(W_q.weight[:, i * d_k:(i + 1) * d_k].T)
    return smalls


def _linears(W_q, n_heads, bias=True, copy_bias=True, bias_rows=None):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(d_model, d_k, bias=bias)
        with torch.no_grad():
            small.weight.copy_(W_q.weight[i * d_k:(i + 1) * d_k])
            if bias and copy_bias:
                small.bias.copy_(W_q.bias[bias_rows if bias_rows is not None else slice(i * d_k, (i + 1) * d_k)])
        smalls.append(small)
    return smalls


def _mutates_big(W_q, n_heads):
    smalls = per_head_linears_ref(W_q, n_heads)
    with torch.no_grad():
        W_q.weight.zero_()
    return smalls


def _frozen(W_q, n_heads):
    return [lin.requires_grad_(False) for lin in per_head_linears_ref(W_q, n_heads)]


def _wrong_bias_shape(W_q, n_heads):
    smalls = per_head_linears_ref(W_q, n_heads)
    smalls[0].bias = nn.Parameter(W_q.bias.detach().clone())
    return smalls


class _Peek(nn.Linear):
    """Looks like nn.Linear(d_model, d_k) but forwards to the big Linear: its own parameters are random."""

    def __init__(self, big, i, d_k):
        super().__init__(big.in_features, d_k)
        self.big, self.i, self.d_k = [big], i, d_k

    def forward(self, x):
        return self.big[0](x)[..., self.i * self.d_k:(self.i + 1) * self.d_k]


def _peeks(W_q, n_heads):
    return [_Peek(W_q, i, W_q.in_features // n_heads) for i in range(n_heads)]


SHORTCUT = "不能调用现成的"



# ---------------------------------------------------------------- the reworked 4.2 (bug hunt) and 4.3 (the reverse)
def split_fixed(x, h):
    B, L, d = x.shape
    return x.view(B, L, h, d // h).transpose(1, 2)


def big_from_heads_ref(smalls):
    big = nn.Linear(smalls[0].in_features, sum(s.out_features for s in smalls))
    with torch.no_grad():
        big.weight.copy_(torch.cat([s.weight for s in smalls]))
        big.bias.copy_(torch.cat([s.bias for s in smalls]))
    return big


def _big(weights, bias):
    big = nn.Linear(weights.shape[1], weights.shape[0], bias=bias is not None)
    with torch.no_grad():
        big.weight.copy_(weights)
        if bias is not None:
            big.bias.copy_(bias)
    return big


# ---------------------------------------------------------------- 4.2 reworked: the shape on which the bug is right, and the rescue
def repair_ref(wrong, h):
    B, _, L, d_k = wrong.shape
    return wrong.reshape(B, L, h, d_k).transpose(1, 2)  # wrong holds x's numbers in x's order


def _repair_detached(wrong, h):
    return repair_ref(wrong, h).detach()


def _repair_in_place(wrong, h):
    wrong.data.mul_(2.0)  # changes the caller's tensor
    return repair_ref(wrong, h) / 2


OK = (2, 1, 8, 2)
RIGHT_REPAIR = answers_for(check_split_bug_repair, [
    {"right_anyway": OK, "repair": repair_ref},
    {"right_anyway": (3, 1, 12, 4), "repair": lambda w, h: mha.split_heads(w.reshape(w.shape[0], w.shape[2], -1), h)},
    {"right_anyway": [1, 1, 6, 3], "repair": lambda w, h: split_fixed(w.flatten(1).view(w.shape[0], w.shape[2], -1), h)},
    {"right_anyway": OK, "repair": lambda w, h: repair_ref(w.double(), h)},
])
NOT_DONE_REPAIR = answers_for(check_split_bug_repair, [{"right_anyway": ..., "repair": repair_ref},
                                                        {"right_anyway": OK, "repair": ...}])
WRONG_REPAIR = mistakes_for(check_split_bug_repair, [
    ({"right_anyway": (2, 3, 8, 2), "repair": repair_ref}, "是错的"),
    ({"right_anyway": (2, 1, 8, 1), "repair": repair_ref}, "n_heads ≥ 2"),
    ({"right_anyway": OK, "repair": lambda w, h: w}, "wrong 本身"),
    ({"right_anyway": OK, "repair": lambda w, h: mha.split_heads(mha.merge_heads(w), h)}, "wrong 本身"),
    ({"right_anyway": OK, "repair": lambda w, h: w.transpose(1, 2).reshape(w.shape)}, "轴 1 不是头"),
    ({"right_anyway": OK, "repair": lambda w, h: w.reshape(w.shape[0], w.shape[2], h, -1)}, "还差 transpose"),
    ({"right_anyway": OK, "repair": lambda w, h: repair_ref(w, h) + 1e-3}, "数值不对"),
    ({"right_anyway": OK, "repair": _repair_detached}, "不能求梯度"),
    ({"right_anyway": OK, "repair": _repair_in_place}, ["修改了输入", "参数 wrong"]),
    ({"right_anyway": OK}, "缺少键"),
])


# ---------------------------------------------------------------- 4.3 reworked: qnet/knet/vnet per head -> one packed Linear
def _pack(rows, bias=True, frozen=False):
    packed = nn.Linear(rows[0].in_features, sum(r.out_features for r in rows), bias=bias)
    with torch.no_grad():
        packed.weight.copy_(torch.cat([r.weight for r in rows]))
        if bias:
            packed.bias.copy_(torch.cat([r.bias for r in rows]))
    return packed.requires_grad_(not frozen)


def packed_ref(heads):
    return _pack([triple[role] for role in range(3) for triple in heads])  # all Q, then all K, then all V


def packed_by_role(heads):
    q, k, v = zip(*heads)
    return _pack([*q, *k, *v])


def _pack_zero_bias(heads):
    packed = packed_ref(heads)
    with torch.no_grad():
        packed.bias.zero_()  # the weights copied, the biases forgotten
    return packed


def _pack_random_bias(heads):
    packed = nn.Linear(heads[0][0].in_features, 3 * len(heads) * heads[0][0].out_features)
    with torch.no_grad():
        packed.weight.copy_(torch.cat([t[r].weight for r in range(3) for t in heads]))  # the bias stays random
    return packed


def _pack_without_no_grad(heads):
    rows = [t[r] for r in range(3) for t in heads]
    packed = nn.Linear(rows[0].in_features, sum(r.out_features for r in rows))
    packed.weight.copy_(torch.cat([r.weight for r in rows]))  # outside torch.no_grad(): torch refuses
    return packed


RIGHT_PACKED = answers_for(check_packed_from_heads, [packed_ref, packed_by_role])
WRONG_PACKED = mistakes_for(check_packed_from_heads, [
    (lambda heads: _pack([lin for triple in heads for lin in triple]), "按头排了"),
    (lambda heads: _pack([t[r] for r in (1, 0, 2) for t in heads]), ["顺序是 K、Q、V"]),
    (lambda heads: _pack([t[r] for r in (0, 2, 1) for t in heads]), ["顺序是 Q、V、K"]),
    (lambda heads: _pack([t[r] for r in range(3) for t in heads[::-1]]), "头的顺序反了"),
    (lambda heads: _pack([t[r] for r in range(3) for t in heads], bias=False), "没有偏置"),
    (lambda heads: _pack([t[r] for r in range(3) for t in heads], frozen=True), "不能训练"),
    (_pack_zero_bias, "bias 没有复制"),
    (_pack_random_bias, "bias 没有复制"),
    (lambda heads: heads[0][0], "形状应为"),
    (lambda heads: heads, "应该返回一个 nn.Linear"),
    (_pack_without_no_grad, ["leaf Variable", "放进 with torch.no_grad(): 里"]),
])

# residue of issue 27: d_model / n_heads gives 64.0, named (the prompt asks for integers)
test_wrong_answers_are_named = wrong_answers(WRONG_4_1, WRONG_REPAIR, WRONG_PACKED)
test_new_right_answers_pass = right_answers(RIGHT_REPAIR, RIGHT_PACKED)
test_new_stubs_are_not_done = not_done_answers(NOT_DONE_REPAIR)


def test_results_registry_lists_chapter():
    assert set(results("ch04")) == {"4.1", "4.2", "4.3"}


def test_repair_that_prints_with_mha_fmt_passes(capsys):
    def printing(w, h):
        print(mha.fmt(w[0, 0, 0], 2))  # debugging prints with the book's own helper are allowed
        return repair_ref(w, h)
    ok, last = verdict_allowing_prints(capsys, check_split_bug_repair, {"right_anyway": OK, "repair": printing})
    assert ok is True and "✅" in last, last
