"""Tests for the chapter 02 checkers: correct answers in many styles pass, stubs are 'not done',
shortcuts and wrong answers get a verdict that names what happened (table-driven; the generic stub and
garbage answers are tried on every checker in tests/checkers/test_exercises_common.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

import mha
from mha.course.exercises import (check_block_inputs, check_build_x, check_pe_bug, check_pe_shift_matrix, check_positional_encoding,
                           check_positional_encoding_from, check_run_stack)
from mha.course.exercises.ch02 import build_x_buggy, ResidualBlock
from mha.positional import sinusoidal_positional_encoding
from exercise_support import (answers_for, mistakes_for, not_done_answers, raise_value_error, recorded,
                              right_answers, wrong_answers)


def test_summary_records_attempts(capsys):
    res = recorded(capsys, "ch02", (check_pe_bug, PE_BUG_SOLUTION()), (check_pe_shift_matrix, None),
                   (check_positional_encoding_from, lambda s, L, d: pe_solution(s + L, d)[s:]),
                   (check_block_inputs, blocks_solution))
    assert res["2.2"] == "pass" and res["2.1"] == "todo" and res["2.3"] is None  # replaced tasks: out of the summary
    assert set(res) == {"2.1", "2.2", "2.3"}


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


RIGHT_2_1 = answers_for(check_positional_encoding, [
    pe_solution, pe_loops, pe_numpy_exp, lambda L, d: pe_solution(L, d).double()])

WRONG_2_1 = mistakes_for(check_positional_encoding, [
    # shortcuts: the course's own helper, however it is reached
    (sinusoidal_positional_encoding, "不能调用现成的 mha.positional.sinusoidal_positional_encoding"),
    (lambda L, d: mha.positional.sinusoidal_positional_encoding(L, d).clone(), "自己算出这张表"),
    # named mistakes
    (lambda L, d: pe_variant(L, d, swap=True), "sin 和 cos 放反了"),
    (lambda L, d: pe_variant(L, d, exponent="j"), "维度编号 j"),
    (lambda L, d: pe_variant(L, d, exponent="i"), "要乘 2"),
    (lambda L, d: pe_variant(L, d, base=1000.0), "底数写成了 1000"),
    (lambda L, d: pe_variant(L, d, base=math.e), "底数写成了 2.71828"),
    (lambda L, d: pe_variant(L, d, multiply=True), "应该是除以"),
    (lambda L, d: pe_variant(L, d, start=1), "位置从 1 开始"),
    (lambda L, d: pe_variant(L, d, halves=True), "前一半"),
    (lambda L, d: pe_solution(L, d).T, "放反了，每一行是一个位置"),
    (lambda L, d: pe_solution(L, d)[None], "batch"),
    (lambda L, d: pe_solution(L, d).long(), "浮点"),
    (lambda L, d: torch.zeros(L, d, dtype=torch.complex64), "浮点"),
    (lambda L, d: pe_solution(L, d) * 2, "最大误差"),
    (lambda L, d: pe_solution(L, d)[:, : d - 1], "形状应该是"),
    # garbage gets a verdict that names it
    (lambda L, d: None, "忘了写 return"),
    (lambda L, d: torch.full((L, d), float("nan")), "NaN"),
    (lambda L, d: [[0.0] * d] * L, "torch.Tensor"),
    (lambda L, d: (pe_solution(L, d), None), "tuple"),
    (raise_value_error, "ValueError"),
    (lambda: 0, "TypeError"),
    ("pe", "应该是一个函数"),
    (42, "应该是一个函数"),
])


# ---------------------------------------------------------------- 2.2
def build_x_solution(token_ids, embedding):
    L, d_model = token_ids.shape[1], embedding.embedding_dim
    return embedding(token_ids) + sinusoidal_positional_encoding(L, d_model)


RIGHT_2_2 = answers_for(check_build_x, [
    build_x_solution,
    lambda ids, emb: emb(ids) + pe_solution(ids.shape[1], emb.embedding_dim),
    lambda ids, emb: emb.weight[ids] + pe_loops(ids.shape[1], emb.embedding_dim)[None],
    lambda ids, emb: build_x_solution(ids, emb).double(),
    lambda tokens, table: F.embedding(tokens, table.weight) + pe_numpy_exp(tokens.shape[1], table.embedding_dim).float(),
])


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


WRONG_2_2 = mistakes_for(check_build_x, [
    (lambda ids, emb: emb(ids), "忘了加位置编码"),
    (lambda ids, emb: _pe(ids, emb).expand(ids.shape[0], -1, -1), "忘了词嵌入"),
    (lambda ids, emb: torch.cat([emb(ids), _pe(ids, emb).expand(ids.shape[0], -1, -1)], dim=-1), "拼接"),
    (lambda ids, emb: emb(ids) * _pe(ids, emb), "相乘"),
    (lambda ids, emb: emb(ids) * emb.embedding_dim ** 0.5 + _pe(ids, emb), "√d_model"),
    (lambda ids, emb: emb(ids) + sinusoidal_positional_encoding(emb.num_embeddings, emb.embedding_dim)[ids], "按 token id"),
    (lambda ids, emb: emb(ids) + pe_variant(ids.shape[1], emb.embedding_dim, swap=True), "sin 和 cos 放反了"),
    (lambda ids, emb: build_x_solution(ids, emb).squeeze(0), "batch 维"),
    (lambda ids, emb: emb(ids) + _pe(ids, emb) + 1, "最大误差"),
    # inputs changed in place: named as such
    (_fills_ids, "原地改动了传进来的参数 ids"),
    (_scales_weight, "原地改动了传进来的参数 emb.weight"),
    # no gradient: the embedding could not learn
    (_no_grad, "不能求梯度"),
    (lambda ids, emb: emb.weight.detach()[ids] + _pe(ids, emb), "不能求梯度"),
    # garbage
    (lambda ids, emb: ids, "浮点"),
    (lambda ids, emb: emb, "torch.Tensor"),
    (lambda ids, emb: (build_x_solution(ids, emb), None), "tuple"),
    (lambda ids, emb: torch.full((1, 4, 6), float("nan")), "NaN"),
    (lambda ids, emb: emb(ids.float()), "RuntimeError"),
    (lambda ids, emb: None, "忘了写 return"),
    (raise_value_error, "ValueError"),
    ("x", "应该是一个函数"),
])


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


RIGHT_2_3 = answers_for(check_block_inputs, [blocks_solution, _clones_and_ints, _dict_lookup])

NOT_DONE_2_3 = answers_for(check_block_inputs, [
    lambda *a: (..., ..., ..., ...), patched(decoder_cross=lambda *a: (a[2], a[3], a[3], ...))])


def _mask_edit_in_place(block, enc_x, dec_x, dec_h, enc_out, masks):
    if block == "decoder_masked_self":
        m = masks["causal"]
        m &= masks["tgt_padding"][0, 0]  # in place on the caller's (L, L) tensor
        return dec_x, dec_x, dec_x, masks["tgt_padding"] & m
    return blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)


def _dec_h_in_place(block, enc_x, dec_x, dec_h, enc_out, masks):
    dec_h += 0.5
    return blocks_solution(block, enc_x, dec_x, dec_h, enc_out, masks)


WRONG_2_3 = mistakes_for(check_block_inputs, [
    # the lecture's slip: the first block fed from the decoder side
    (patched(encoder_self=lambda e, d, h, o, m: (d, d, d, m["tgt_padding"])), "笔误"),
    (patched(encoder_self=lambda e, d, h, o, m: (e, e, e, None)), "忘了 padding 掩码"),
    (patched(encoder_self=lambda e, d, h, o, m: (e, e, e, m["src_padding"] & torch.ones(e.shape[1], e.shape[1], dtype=torch.bool).tril())),
     "不需要因果掩码"),
    (patched(encoder_self=lambda e, d, h, o, m: (e, e, e, ~m["src_padding"])), "真假反了"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (d, d, d, m["causal"])), "漏了 padding 掩码"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (d, d, d, m["tgt_padding"])), "漏了因果掩码"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (d, d, d, m["tgt_padding"] | m["causal"])), "应该用 &"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (d, d, d, None)), "没有掩码"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (d, o, o, m["src_padding"])), "第二个块"),
    (patched(decoder_masked_self=lambda e, d, h, o, m: (h, h, h, m["tgt_padding"] & m["causal"])), "dec_h 正是这个块"),
    # cross-attention: the query is the previous block's output dec_h, not the decoder input dec_x
    (patched(decoder_cross=lambda e, d, h, o, m: (d, o, o, m["src_padding"])), "而不是解码器的输入 dec_x"),
    (patched(decoder_cross=lambda e, d, h, o, m: (o, h, h, m["tgt_padding"])), "放反了"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, h, h, m["tgt_padding"])), "解码器的自注意力"),
    (patched(decoder_cross=lambda e, d, h, o, m: (d, d, d, m["tgt_padding"])), "解码器的自注意力"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, e, e, m["src_padding"])), "而不是编码器的输入"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, o, o, m["tgt_padding"])), "用了解码器这边的掩码"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, o, o, None)), "忘了掩码"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, o, o, m["src_padding"] & m["src_padding"].new_ones(1).tril())), "掩码不对"),
    (patched(decoder_cross=lambda e, d, h, o, m: (h, o, h, m["src_padding"])), "K 和 V"),
    # inputs changed in place, and parts that are None / of the wrong dtype
    (_mask_edit_in_place, "原地改动了传进来的参数 masks['causal']"),
    (_dec_h_in_place, "原地改动了传进来的参数 dec_h"),
    (patched(decoder_cross=lambda e, d, h, o, m: (None, o, o, m["src_padding"])), "query 是 None"),
    (patched(encoder_self=lambda e, d, h, o, m: (e.double(), e, e, m["src_padding"])), "dtype 变成了 torch.float64"),
    (patched(encoder_self=lambda e, d, h, o, m: (e, e, e, m["src_padding"].float() * 2)), "交给 MultiHeadAttention 时出错"),
    (patched(encoder_self=lambda e, d, h, o, m: (e * 1.5, e, e, m["src_padding"])), "不是 enc_x、dec_x、dec_h、enc_out"),
    # garbage
    (lambda *a: (1, 2, 3, 4), "应该是张量"),
    (lambda *a: None, "忘了写 return"),
    (lambda b, e, d, h, o, m: (e, e, e), "4 项"),
    (lambda b, e, d, h, o, m: (e, e, e, "mask"), "掩码应该是张量"),
    (lambda b, e, d, h, o, m: (torch.full_like(e, float("nan")),) * 3 + (None,), "不是 enc_x"),
    (lambda b, e, d, h, o, m: (e, e, e, torch.ones(7, 7)), "无法广播"),
    (lambda b, e, d, h, o, m: (e, e, e, torch.ones(2, 2, 1, 1)), "第 1 维应该是 1"),
    (lambda block, enc_x, dec_x, enc_out, masks: blocks_solution(block, enc_x, dec_x, dec_x, enc_out, masks), "TypeError"),
    (raise_value_error, "ValueError"),
    ("x", "应该是一个函数"),
    (42, "应该是一个函数"),
])

# ---------------------------------------------------------------- 2.1 (positions from start) and 2.2 (bug hunt)
def pe_from(start, L, d_model):
    return sinusoidal_positional_encoding(start + L, d_model)[start:]


RIGHT_2_1_FROM = answers_for(check_positional_encoding_from, [
    lambda start, L, d: pe_solution(start + L, d)[start:],
    lambda start, L, d: pe_loops(start + L, d)[start:start + L].double(),
])

WRONG_2_1_FROM = mistakes_for(check_positional_encoding_from, [
    (lambda start, L, d: pe_solution(L, d), ["从 0 开始数了", "KV cache"]),
    (lambda start, L, d: pe_solution(start + L, d), "整张表"),
    (lambda start, L, d: pe_solution(start + L + 1, d)[start + 1:], "多加了 1"),
    (lambda start, L, d: pe_solution(start + L, d)[start:].flip(-1), "数值不对"),
    (lambda start, L, d: sinusoidal_positional_encoding(start + L, d)[start:], ["不能调用现成的", "sinusoidal_positional_encoding"]),
    (lambda start, L, d: pe_solution(start + L, d)[start:].long(), "dtype"),
])


def PE_BUG_SOLUTION(**changes):
    return {"crashes": (2, 3), "silently_wrong": (1, 5), "fixed": build_x_solution, **changes}


RIGHT_2_2_BUG = answers_for(check_pe_bug, [PE_BUG_SOLUTION(), PE_BUG_SOLUTION(crashes=[3, 7], silently_wrong=(1, 2))])

NOT_DONE_2_2_BUG = answers_for(check_pe_bug, [PE_BUG_SOLUTION(crashes=...), PE_BUG_SOLUTION(fixed=...)])

WRONG_2_2_BUG = mistakes_for(check_pe_bug, [
    (PE_BUG_SOLUTION(crashes=(4, 4)), ["没有报错", "B == L"]),
    (PE_BUG_SOLUTION(crashes=(1, 4)), ["没有报错", "B = 1"]),
    (PE_BUG_SOLUTION(silently_wrong=(3, 3)), ["结果是对的", "B == L"]),
    (PE_BUG_SOLUTION(silently_wrong=(2, 3)), "报错了"),
    (PE_BUG_SOLUTION(silently_wrong=(1, 1)), "结果是对的"),
    (PE_BUG_SOLUTION(fixed=build_x_buggy), ['answer["fixed"] 还不对']),
    (PE_BUG_SOLUTION(fixed=lambda ids, emb: emb(ids)), "忘了加位置编码"),
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
    (_shift_variant(omega=lambda i, d: 1 / 10000 ** (i / d)), "2i/d_model"),
    (lambda k, d: torch.eye(d), "单位矩阵"),
    (lambda k, d: shift_solution(k, 2), "(2, 2)"),
    (lambda k, d: shift_solution(k, d) * 2, ["第 2 行第 2 列", "应为 1，你的是 2"]),
    (lambda k, d: np.linalg.lstsq(sinusoidal_positional_encoding(60, d, dtype=torch.float64)[20:40].numpy(),
                                  sinusoidal_positional_encoding(60, d, dtype=torch.float64)[20 + k:40 + k].numpy(),
                                  rcond=None)[0], "应为"),  # a numpy fit: not the formula's M off the blocks
    (_fitted, ["torch.linalg_lstsq", "拟合"]),
    (lambda k, d: torch.linalg.pinv(torch.eye(d)), "torch.linalg_pinv"),
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


RIGHT_2_3_STACK = answers_for(check_run_stack, [stack_solution, _stack_keywords])

WRONG_2_3_STACK = mistakes_for(check_run_stack, [
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
    (_stack(enc_mask=lambda m: m["causal"]), "cannot broadcast"),
    (_stack(cross_mask=lambda m: m["tgt_padding"]), ["交叉注意力块的输入不对", "cannot broadcast"]),
    (_stack(enc_mask=lambda m: m["causal"]), "编码器自注意力块的输入不对"),
    (_stack_mutating, "原地改动了传进来的参数 masks"),
    (_stack_swapped_cross, ["交叉注意力块的输入不对", "Key = Value 是编码器最后一层的输出"]),
    (lambda e, d, ex, dx, m: ex, "编码器那边的形状"),
    (lambda e, d, ex, dx, m: dx[:, :1], "形状应该是"),
    (lambda e, d, ex, dx, m: dx, "数值不对"),
    (lambda e, d, ex, dx, m: None, "忘了写 return"),
])


def test_the_blocks_of_2_3_carry_their_residual():
    block = ResidualBlock(4)
    q, kv = torch.randn(1, 3, 4), torch.randn(1, 5, 4)
    with torch.no_grad():
        assert torch.allclose(block(q, kv, kv) - q, block.attn(q, kv, kv))


test_right_answers_pass = right_answers(RIGHT_2_1, RIGHT_2_2, RIGHT_2_3, RIGHT_2_1_FROM, RIGHT_2_2_BUG, RIGHT_2_1_SHIFT,
                                        RIGHT_2_3_STACK)
test_stubs_are_not_done = not_done_answers(NOT_DONE_2_3, NOT_DONE_2_2_BUG)
test_wrong_answers_are_named = wrong_answers(WRONG_2_1, WRONG_2_2, WRONG_2_3, WRONG_2_1_FROM, WRONG_2_2_BUG, WRONG_2_1_SHIFT,
                                             WRONG_2_3_STACK)
