"""Tests for the chapter 02 checkers: correct answers in many styles pass, stubs are 'not done',
shortcuts and wrong answers get a verdict that names what happened (table-driven; the generic stub and
garbage answers are tried on every checker in tests/checkers/test_exercises_common.py)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mha
from mha.course.exercises import (check_pe_bug, check_pe_shift_matrix, check_run_stack)
from mha.course.exercises.ch02 import build_x_buggy, ResidualBlock
from mha.positional import sinusoidal_positional_encoding
from exercise_support import (answers_for, mistakes_for, not_done_answers, raise_value_error, recorded,
                              right_answers, verdict, wrong_answers)


# ---------------------------------------------------------------- 2.1
def pe_solution(L, d_model):
    pos = torch.arange(L, dtype=torch.float32)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model/2,)
    angle = pos / 10000 ** (two_i / d_model)  # (L, d_model/2)
    pe = torch.zeros(L, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def pe_variant(L, d_model, *, base=10000.0, swap=False, exponent="2i", multiply=False, start=0, halves=False):
    pos = torch.arange(start, start + L, dtype=torch.float32)[:, None]
    j = torch.arange(d_model, dtype=torch.float32)
    e = {"2i": 2 * (j // 2), "j": j, "i": j // 2}[exponent]
    angle = pos * base ** (e / d_model) if multiply else pos / base ** (e / d_model)
    if halves:
        k = torch.arange(d_model // 2, dtype=torch.float32)
        a = pos / base ** (2 * k / d_model)
        return torch.cat([torch.sin(a), torch.cos(a)], dim=-1)
    even = j % 2 == 0
    return torch.where(~even if swap else even, torch.sin(angle), torch.cos(angle))


def pe_loops(length, width):  # renamed arguments, plain Python loops, float64 inside
    pe = torch.zeros(length, width, dtype=torch.float64)
    for pos in range(length):
        for i in range(0, width, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / width))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / width))
    return pe.float()


def pe_numpy_exp(L, d_model):
    freq = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    angle = np.arange(L)[:, None] * freq[None, :]
    return torch.from_numpy(np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(L, d_model))  # float64


# ---------------------------------------------------------------- 2.2
def build_x_solution(token_ids, embedding):
    L, d_model = token_ids.shape[1], embedding.embedding_dim
    return embedding(token_ids) + sinusoidal_positional_encoding(L, d_model)


def _pe(ids, emb):
    return sinusoidal_positional_encoding(ids.shape[1], emb.embedding_dim)


def _fills_ids(ids, emb):
    ids.fill_(0)
    return build_x_solution(ids, emb)


def _scales_weight(ids, emb):
    emb.weight.data.mul_(2)
    return build_x_solution(ids, emb) / 2


def _no_grad(ids, emb):
    with torch.no_grad():
        return build_x_solution(ids, emb)


# ---------------------------------------------------------------- 2.3
def blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks):
    if block == "encoder_self":
        return enc_x, enc_x, enc_x, masks["src_padding"]
    if block == "decoder_masked_self":
        return dec_x, dec_x, dec_x, masks["tgt_padding"] & masks["causal"]
    if block == "decoder_cross":
        return dec_h, enc_out, enc_out, masks["src_padding"]
    raise ValueError(block)


def patched(**overrides):
    """blocks_solution with one block's answer replaced by ``overrides[block](enc_x, dec_x, dec_h, enc_out, masks)``."""
    def fn(block, enc_x, dec_x, dec_h, enc_out, masks):
        if block in overrides:
            return overrides[block](enc_x, dec_x, dec_h, enc_out, masks)
        return blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)
    return fn


def _clones_and_ints(block, enc_x, dec_x, dec_h, enc_out, masks):
    q, k, v, m = blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)
    return [q.clone(), k.clone(), v.clone(), m.int()]


def _dict_lookup(block, source_x, target_x, target_h, memory, masks):  # renamed arguments, a table
    causal_and_pad = torch.logical_and(masks["tgt_padding"], masks["causal"][None, None])
    table = {"encoder_self": (source_x, source_x, source_x, masks["src_padding"].squeeze(1)),
             "decoder_masked_self": (target_x, target_x, target_x, causal_and_pad),
             "decoder_cross": (target_h, memory, memory, masks["src_padding"].float())}
    return table[block]


def _mask_edit_in_place(block, enc_x, dec_x, dec_h, enc_out, masks):
    if block == "decoder_masked_self":
        m = masks["causal"]
        m &= masks["tgt_padding"][0, 0]  # in place on the caller's (L, L) tensor
        return dec_x, dec_x, dec_x, masks["tgt_padding"] & m
    return blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)


def _dec_h_in_place(block, enc_x, dec_x, dec_h, enc_out, masks):
    dec_h += 0.5
    return blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)


# ---------------------------------------------------------------- 2.1 (positions from start) and 2.2 (bug hunt)
def pe_from(start, L, d_model):
    return sinusoidal_positional_encoding(start + L, d_model)[start:]


def PE_BUG_SOLUTION(**changes):
    return {"crashes": (3, 5), "silently_wrong": (1, 5), "fixed": build_x_solution, **changes}


RIGHT_2_2_BUG = answers_for(check_pe_bug, [PE_BUG_SOLUTION(), PE_BUG_SOLUTION(crashes=[3, 7], silently_wrong=(1, 2)),
                                           PE_BUG_SOLUTION(crashes=torch.tensor([3, 5]))])  # review r10 L6: a tensor of sizes

NOT_DONE_2_2_BUG = answers_for(check_pe_bug, [PE_BUG_SOLUTION(crashes=...), PE_BUG_SOLUTION(fixed=...)])

WRONG_2_2_BUG = mistakes_for(check_pe_bug, [
    (PE_BUG_SOLUTION(crashes=(2, 4)), ["B ≠ 2", "本章例子"]),  # the chapter's own shape, named in the prompt
    (PE_BUG_SOLUTION(crashes=(2, 3)), "B ≠ 2"),
    (PE_BUG_SOLUTION(crashes=(4, 4)), ["没有报错", "B == L"]),
    (PE_BUG_SOLUTION(crashes=(1, 4)), ["没有报错", "B = 1"]),
    (PE_BUG_SOLUTION(crashes=(3, 1)), ["没有报错", "L = 1", "(3, 3, d_model)"]),  # review r5 M3: not the B = 1 reason
    (PE_BUG_SOLUTION(silently_wrong=(3, 3)), ["结果是对的", "B == L"]),
    (PE_BUG_SOLUTION(silently_wrong=(2, 3)), "报错了"),
    (PE_BUG_SOLUTION(silently_wrong=(1, 1)), "结果是对的"),
    (PE_BUG_SOLUTION(fixed=build_x_buggy), ['answer["fixed"] 还不对']),
    (PE_BUG_SOLUTION(fixed=lambda ids, emb: emb(ids)), "忘了加位置编码"),
    # a table of max(B, L) rows: right while B <= L, it crashes on a batch with B > L (issue 27)
    (PE_BUG_SOLUTION(fixed=lambda ids, emb: emb(ids) + sinusoidal_positional_encoding(max(ids.shape), emb.embedding_dim)),
     ["还不对", "运行时抛出了"]),
    (PE_BUG_SOLUTION(crashes=(0, 3)), "1 到 64"),
    (PE_BUG_SOLUTION(crashes=(2, 3, 4)), "(B, L)"),
    ({"crashes": (2, 3)}, "缺少键"),
    ([(2, 3)], "字典"),
])


# ---------------------------------------------------------------- 2.1 moving k positions is a rotation
def shift_solution(k, d_model):
    M = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        a = torch.tensor(k / 10000 ** (2 * i / d_model))
        c, s = torch.cos(a), torch.sin(a)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s  # PE[pos + k] = PE[pos] @ M: row 2i feeds sin, row 2i+1 cos
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M


def _block_diag(k, d_model):  # vectorised, float64
    omega = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    return torch.block_diag(*[torch.stack([torch.stack([ci, -si]), torch.stack([si, ci])]) for ci, si in zip(c, s)])


def _shift_variant(omega=None, sign=1):
    def fn(k, d_model):
        M = torch.zeros(d_model, d_model, dtype=torch.float64)
        for i in range(d_model // 2):
            a = torch.tensor(sign * k * (omega(i, d_model) if omega else 1 / 10000 ** (2 * i / d_model)), dtype=torch.float64)
            M[2 * i, 2 * i], M[2 * i, 2 * i + 1], M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = a.cos(), -a.sin(), a.sin(), a.cos()
        return M
    return fn


def _numpy_fit(how):  # M fitted in numpy on 4000 positions: exact enough to pass the value check
    def fit(k, d):
        pe = sinusoidal_positional_encoding(4000, d, dtype=torch.float64).numpy()
        n = 4000 - abs(k)
        a, b = (pe[:n], pe[k:k + n]) if k >= 0 else (pe[-k:], pe[:n])
        return torch.tensor(np.linalg.pinv(a) @ b if how == "pinv" else np.linalg.lstsq(a, b, rcond=None)[0])
    return fit


def _fitted(k, d_model):  # least squares on the table: the named shortcut
    pe = sinusoidal_positional_encoding(60, d_model, dtype=torch.float64)
    return torch.linalg.lstsq(pe[20:40], pe[20 + k:40 + k]).solution


def _numpy_shift(k, d_model):
    M = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        a = k / 10000 ** (2 * i / d_model)
        M[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return M


RIGHT_2_1_SHIFT = answers_for(check_pe_shift_matrix, [shift_solution, _block_diag, _numpy_shift,
                                                      lambda k, d: shift_solution(k, d).double()])

WRONG_2_1_SHIFT = mistakes_for(check_pe_shift_matrix, [
    (lambda k, d: shift_solution(k, d).T, "转置"),
    (_shift_variant(sign=-1), "往回挪 k 格"),
    (_shift_variant(omega=lambda i, d: 1.0), "忘了乘每一对维度自己的频率"),
    (_shift_variant(omega=lambda i, d: 1 / 10000 ** (i / d)), "2m/d_model"),
    (lambda k, d: torch.eye(d), "单位矩阵"),
    (lambda k, d: shift_solution(k, 2), "(2, 2)"),
    (lambda k, d: shift_solution(k, d) * 2, ["第 2 行第 2 列", "应为 1，你的是 2"]),
    (lambda k, d: np.linalg.lstsq(sinusoidal_positional_encoding(60, d, dtype=torch.float64)[20:40].numpy(),
                                  sinusoidal_positional_encoding(60, d, dtype=torch.float64)[20 + k:40 + k].numpy(),
                                  rcond=None)[0], ["np.linalg.lstsq", "拟合"]),  # a numpy fit is named too
    (_numpy_fit("pinv"), ["np.linalg.pinv", "拟合"]),  # review r6 H1: a good fit on a long table used to pass
    (_numpy_fit("lstsq"), ["np.linalg.lstsq", "拟合"]),
    (_fitted, ["torch.linalg.lstsq", "拟合"]),
    (lambda k, d: torch.linalg.pinv(torch.eye(d)), "torch.linalg.pinv"),  # the public name
    (lambda k, d: shift_solution(k, d).long(), "dtype"),
    (lambda k, d: shift_solution(k, d)[None], "形状应该是"),
    (lambda k, d: shift_solution(k, d) @ torch.ones(3), "RuntimeError"),
])


# ---------------------------------------------------------------- 2.3 N layers stacked
def stack_solution(enc_layers, dec_layers, enc_x, dec_x, masks):
    h = enc_x
    for block in enc_layers:  # encoder: all N layers first
        h = block(h, h, h, masks["src_padding"])
    y = dec_x
    for self_attn, cross_attn in dec_layers:
        y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
        y = cross_attn(y, h, h, masks["src_padding"])  # K = V: the encoder's last output, in every layer
    return y


def _stack(enc_in="chained", memory="last", dec_in="chained", self_mask=lambda m: m["tgt_padding"] & m["causal"],
           cross_mask=lambda m: m["src_padding"], enc_mask=lambda m: m["src_padding"], cross_query="self", residual=False):
    """The solution with one choice made wrong (the keywords name the choices)."""
    def fn(enc_layers, dec_layers, enc_x, dec_x, masks):
        def run(block, q, kv, mask):
            out = block(q, kv, kv, mask)
            return out + q if residual else out
        h, outs = enc_x, []
        for block in enc_layers:
            inp = h if enc_in == "chained" else enc_x
            h = run(block, inp, inp, enc_mask(masks))
            outs.append(h)
        y = dec_x
        for n, (self_attn, cross_attn) in enumerate(dec_layers):
            kv = {"last": h, "same": outs[n], "enc_x": enc_x}[memory]
            inp = y if dec_in == "chained" else dec_x
            s = run(self_attn, inp, inp, self_mask(masks))
            y = run(cross_attn, s if cross_query == "self" else inp, kv, cross_mask(masks))
        return y
    return fn


def _stack_keywords(enc_layers, dec_layers, enc_x, dec_x, masks):  # keyword calls, a float mask, no_grad
    with torch.no_grad():
        memory = enc_x
        for block in enc_layers:
            memory = block(query=memory, key=memory, value=memory, mask=masks["src_padding"].float())
        y = dec_x
        for self_attn, cross_attn in dec_layers:
            y = cross_attn(self_attn(y, y, y, mask=masks["causal"] & masks["tgt_padding"]), memory, memory,
                           mask=masks["src_padding"])
    return y


def _stack_mutating(enc_layers, dec_layers, enc_x, dec_x, masks):
    masks["src_padding"].fill_(True)  # changes the caller's mask in place
    return stack_solution(enc_layers, dec_layers, enc_x, dec_x, masks)


def _stack_swapped_cross(enc_layers, dec_layers, enc_x, dec_x, masks):  # the encoder asks, the decoder answers
    h = enc_x
    for block in enc_layers:
        h = block(h, h, h, masks["src_padding"])
    y = dec_x
    for self_attn, cross_attn in dec_layers:
        y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
        y = cross_attn(h, y, y, masks["src_padding"])
    return y


def _stack_first_layer_only(enc_layers, dec_layers, enc_x, dec_x, masks):  # the chapter's three blocks, copied
    enc_self_attn = enc_layers[0]
    dec_self_attn, cross_attn = dec_layers[0]
    enc_out = enc_self_attn(enc_x, enc_x, enc_x, mask=masks["src_padding"])
    dec_h = dec_self_attn(dec_x, dec_x, dec_x, mask=masks["tgt_padding"] & masks["causal"])
    return cross_attn(dec_h, enc_out, enc_out, mask=masks["src_padding"])


def _stack_self_then_cross(enc_layers, dec_layers, enc_x, dec_x, masks):  # all blocks 2, then all blocks 3
    h = enc_x
    for block in enc_layers:
        h = block(h, h, h, masks["src_padding"])
    y = dec_x
    for self_attn, _ in dec_layers:
        y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
    for _, cross_attn in dec_layers:
        y = cross_attn(y, h, h, masks["src_padding"])
    return y


def _stack_swapped_cross_tgt_mask(enc_layers, dec_layers, enc_x, dec_x, masks):  # runs in layer 1, breaks layer 2
    h = enc_x
    for block in enc_layers:
        h = block(h, h, h, masks["src_padding"])
    y = dec_x
    for self_attn, cross_attn in dec_layers:
        y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
        y = cross_attn(h, y, y, masks["tgt_padding"])
    return y


def _stack_masks_first_layer(which):  # review r4 L3: a mask passed in layer 1 only
    def fn(enc_layers, dec_layers, enc_x, dec_x, masks):
        later = lambda n, name: n == 0 or which not in (name, "all")
        h = enc_x
        for n, block in enumerate(enc_layers):
            h = block(h, h, h, masks["src_padding"] if later(n, "enc") else None)
        y = dec_x
        for n, (self_attn, cross_attn) in enumerate(dec_layers):
            causal = masks["causal"] if later(n, "causal") else torch.ones_like(masks["causal"])
            y = self_attn(y, y, y, masks["tgt_padding"] & causal if later(n, "all") else None)
            y = cross_attn(y, h, h, masks["src_padding"] if later(n, "all") else None)
        return y
    return fn


RIGHT_2_3_STACK = answers_for(check_run_stack, [stack_solution, _stack_keywords])

def _stack_reversed(enc_layers, dec_layers, enc_x, dec_x, masks):  # review r11 L3: top layer first
    h = enc_x
    for block in reversed(enc_layers):
        h = block(h, h, h, masks["src_padding"])
    y = dec_x
    for self_attn, cross_attn in reversed(dec_layers):
        y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
        y = cross_attn(y, h, h, masks["src_padding"])
    return y


def _stack_cross_where(keep):  # review r11 L3: block 3 run only in the layers keep(n, N) says
    def fn(enc_layers, dec_layers, enc_x, dec_x, masks):
        h = enc_x
        for block in enc_layers:
            h = block(h, h, h, masks["src_padding"])
        y = dec_x
        for n, (self_attn, cross_attn) in enumerate(dec_layers):
            y = self_attn(y, y, y, masks["tgt_padding"] & masks["causal"])
            if keep(n, len(dec_layers)):
                y = cross_attn(y, h, h, masks["src_padding"])
        return y
    return fn


WRONG_2_3_STACK = mistakes_for(check_run_stack, [
    (_stack_reversed, "顺序反了"),
    (_stack_cross_where(lambda n, N: n == N - 1), "只有最后一层做了交叉注意力"),
    (_stack_cross_where(lambda n, N: n < N - 1), "块 2）的输出"),
    (_stack(memory="same"), "最后一层"),
    (_stack(memory="enc_x"), "编码器的输入 enc_x"),
    (_stack(enc_in="enc_x"), "上一层编码器的输出"),
    (_stack(dec_in="dec_x"), "上一层解码器的输出"),
    (_stack(cross_query="input"), "Query 用了这一层的输入"),
    (_stack(self_mask=lambda m: m["tgt_padding"]), "漏了因果掩码"),
    (_stack(self_mask=lambda m: m["causal"]), "漏了目标句的 padding 掩码"),
    (_stack(self_mask=lambda m: m["tgt_padding"] | m["causal"]), "|（或）"),
    (_stack(cross_mask=lambda m: None), "交叉注意力没有用源句的 padding 掩码"),
    (_stack(enc_mask=lambda m: None), "编码器自注意力没有用 padding 掩码"),
    (_stack(residual=True), "残差连接"),
    (_stack(enc_mask=lambda m: m["causal"]), "编码器一开始就看到整句源句，不需要因果掩码"),
    (_stack(cross_mask=lambda m: m["tgt_padding"]), ["交叉注意力块的输入不对", "不是目标句的"]),
    (_stack(cross_mask=lambda m: m["causal"]), ["交叉注意力块的输入不对", "不需要因果掩码"]),  # review r7 M1
    (_stack(self_mask=lambda m: m["src_padding"]), ["解码器掩码自注意力块的输入不对", "目标句自己的位置"]),  # review r7 M1
    (_stack(cross_mask=lambda m: m["src_padding"] & m["causal"]), ["两个掩码合不到一起", "交叉注意力"]),  # review r7 M1
    (_stack(enc_mask=lambda m: m["causal"]), "编码器自注意力块的输入不对"),
    (_stack_mutating, "原地改动了传进来的参数 masks"),
    (_stack_first_layer_only, ["只跑了第 1 层", "后面的层没有用上"]),
    (_stack_self_then_cross, "先把所有层的掩码自注意力跑完"),
    (_stack_masks_first_layer("causal"), "从第 2 层起解码器的掩码自注意力漏了因果掩码"),
    (_stack_masks_first_layer("enc"), "从第 2 层起编码器自注意力漏了 padding 掩码"),
    (_stack_masks_first_layer("all"), "只有第 1 层用了掩码"),
    (_stack_swapped_cross_tgt_mask, ["交叉注意力块的输入不对", "Query 和 Key/Value 放反了"]),  # student r3 L2
    (_stack_swapped_cross, ["交叉注意力块的输入不对", "放反了"]),
    (lambda e, d, ex, dx, m: ex, "编码器那边的形状"),
    (lambda e, d, ex, dx, m: dx[:, :1], "形状应该是"),
    (lambda e, d, ex, dx, m: dx, "数值不对"),
    (lambda e, d, ex, dx, m: None, "忘了写 return"),
])


@pytest.mark.parametrize("answer", [_stack(cross_mask=lambda m: m["tgt_padding"]), _stack_swapped_cross],
                         ids=["cross block, target mask", "query and key/value swapped"])
def test_2_3_names_a_wrong_block_input_as_a_verdict_not_a_crash(capsys, answer):  # review r9 L1
    ok, out = verdict(capsys, check_run_stack, answer)
    assert not ok and "交叉注意力块的输入不对" in out, out
    assert "抛出了" not in out and "Error" not in out, out  # the checker's stand-in block, not the student's crash
    assert "第 " in out and " 行" in out, out  # the student's line that called the block


def test_the_blocks_of_2_3_carry_their_residual():
    block = ResidualBlock(4)
    q, kv = torch.randn(1, 3, 4), torch.randn(1, 5, 4)
    with torch.no_grad():
        assert torch.allclose(block(q, kv, kv) - q, block.attn(q, kv, kv))


test_right_answers_pass = right_answers(RIGHT_2_2_BUG, RIGHT_2_1_SHIFT,
                                        RIGHT_2_3_STACK)
test_stubs_are_not_done = not_done_answers(NOT_DONE_2_2_BUG)
test_wrong_answers_are_named = wrong_answers(WRONG_2_2_BUG, WRONG_2_1_SHIFT,
                                             WRONG_2_3_STACK)
