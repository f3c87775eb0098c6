"""Tests for the chapter 02 checkers: reference passes, stubs are 'not done', wrong answers are named."""
import math

import pytest
import torch

from mha.exercises import check_block_inputs, check_build_x, check_positional_encoding, results
from mha.positional import sinusoidal_positional_encoding
from exercise_support import STUBS, raise_value_error, verdict


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


def test_2_1_reference_passes(capsys):
    ok, out = verdict(capsys, check_positional_encoding, pe_solution)
    assert ok and "✅" in out


def test_2_1_course_module_and_float64_pass(capsys):
    assert verdict(capsys, check_positional_encoding, sinusoidal_positional_encoding)[0]
    assert verdict(capsys, check_positional_encoding, lambda L, d: pe_solution(L, d).double())[0]


@pytest.mark.parametrize("stub", STUBS)
def test_2_1_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_positional_encoding, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("kwargs, needle", [
    (dict(swap=True), "sin 和 cos 放反了"),
    (dict(exponent="j"), "维度编号 j"),
    (dict(exponent="i"), "要乘 2"),
    (dict(base=1000.0), "底数写成了 1000"),
    (dict(base=math.e), "底数写成了 2.71828"),
    (dict(multiply=True), "应该是除以"),
    (dict(start=1), "位置从 1 开始"),
    (dict(halves=True), "前一半"),
])
def test_2_1_wrong_answers_are_named(capsys, kwargs, needle):
    ok, out = verdict(capsys, check_positional_encoding, lambda L, d: pe_variant(L, d, **kwargs))
    assert not ok and "❌" in out and needle in out, out


@pytest.mark.parametrize("wrong, needle", [
    (lambda L, d: pe_solution(L, d).T, "放反了，每一行是一个位置"),
    (lambda L, d: pe_solution(L, d)[None], "batch"),
    (lambda L, d: pe_solution(L, d).long(), "浮点"),
    (lambda L, d: pe_solution(L, d) * 2, "最大误差"),
    (lambda L, d: pe_solution(L, d)[:, : d - 1], "形状应该是"),
])
def test_2_1_shape_dtype_value_mistakes(capsys, wrong, needle):
    ok, out = verdict(capsys, check_positional_encoding, wrong)
    assert not ok and needle in out, out


@pytest.mark.parametrize("garbage", [
    "pe", 42, raise_value_error, lambda L, d: torch.full((L, d), float("nan")), lambda L, d: [[0.0] * d] * L,
    lambda L, d: (pe_solution(L, d), None), lambda: 0, lambda L, d: torch.zeros(L, d, dtype=torch.complex64),
])
def test_2_1_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_positional_encoding, garbage)
    assert not ok and "❌" in out


# ---------------------------------------------------------------- 2.2
def build_x_solution(token_ids, embedding):
    L, d_model = token_ids.shape[1], embedding.embedding_dim
    return embedding(token_ids) + sinusoidal_positional_encoding(L, d_model)


def test_2_2_reference_passes(capsys):
    ok, out = verdict(capsys, check_build_x, build_x_solution)
    assert ok and "✅" in out


def test_2_2_own_pe_passes(capsys):
    ok, _ = verdict(capsys, check_build_x, lambda ids, emb: emb(ids) + pe_solution(ids.shape[1], emb.embedding_dim))
    assert ok


@pytest.mark.parametrize("stub", STUBS)
def test_2_2_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_build_x, stub)
    assert not ok and "还没完成" in out


def _pe(ids, emb):
    return sinusoidal_positional_encoding(ids.shape[1], emb.embedding_dim)


def _mutating(ids, emb):
    ids[ids == 0] = 1
    return build_x_solution(ids, emb)


@pytest.mark.parametrize("wrong, needle", [
    (lambda ids, emb: emb(ids), "忘了加位置编码"),
    (lambda ids, emb: _pe(ids, emb).expand(ids.shape[0], -1, -1), "忘了词嵌入"),
    (lambda ids, emb: torch.cat([emb(ids), _pe(ids, emb).expand(ids.shape[0], -1, -1)], dim=-1), "拼接"),
    (lambda ids, emb: emb(ids) * _pe(ids, emb), "相乘"),
    (lambda ids, emb: emb(ids) * emb.embedding_dim ** 0.5 + _pe(ids, emb), "√d_model"),
    (lambda ids, emb: emb(ids) + sinusoidal_positional_encoding(emb.num_embeddings, emb.embedding_dim)[ids], "按 token id"),
    (lambda ids, emb: emb(ids) + pe_variant(ids.shape[1], emb.embedding_dim, swap=True), "sin 和 cos 放反了"),
    (lambda ids, emb: build_x_solution(ids, emb).squeeze(0), "batch 维"),
    (lambda ids, emb: emb(ids) + _pe(ids, emb) + 1, "最大误差"),
])
def test_2_2_wrong_answers_are_named(capsys, wrong, needle):
    ok, out = verdict(capsys, check_build_x, wrong)
    assert not ok and "❌" in out and needle in out, out


def test_2_2_mutating_the_ids_is_named(capsys):
    def fn(ids, emb):
        ids.fill_(0)
        return build_x_solution(ids, emb)
    ok, out = verdict(capsys, check_build_x, fn)
    assert not ok and "修改了 token_ids" in out


@pytest.mark.parametrize("garbage", [
    "x", 42, raise_value_error, lambda ids, emb: torch.full((1, 4, 6), float("nan")),
    lambda ids, emb: ids, lambda ids, emb: emb, lambda ids, emb: (build_x_solution(ids, emb), None),
    lambda ids, emb: build_x_solution(ids, emb).double(), lambda ids, emb: emb(ids.float()),
])
def test_2_2_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_build_x, garbage)  # float64 of the right values may pass; nothing may raise
    assert isinstance(ok, bool) and ("✅" in out) == ok


# ---------------------------------------------------------------- 2.3
def blocks_solution(block, enc_x, dec_x, enc_out, masks):
    if block == "encoder_self":
        return enc_x, enc_x, enc_x, masks["src_padding"]
    if block == "decoder_masked_self":
        return dec_x, dec_x, dec_x, masks["tgt_padding"] & masks["causal"]
    if block == "decoder_cross":
        return dec_x, enc_out, enc_out, masks["src_padding"]
    raise ValueError(block)


def patched(**overrides):
    """blocks_solution with one block's answer replaced by ``overrides[block](enc_x, dec_x, enc_out, masks)``."""
    def fn(block, enc_x, dec_x, enc_out, masks):
        if block in overrides:
            return overrides[block](enc_x, dec_x, enc_out, masks)
        return blocks_solution(block, enc_x, dec_x, enc_out, masks)
    return fn


def test_2_3_reference_passes(capsys):
    ok, out = verdict(capsys, check_block_inputs, blocks_solution)
    assert ok and "✅" in out


def test_2_3_int_masks_and_clones_pass(capsys):
    def fn(block, enc_x, dec_x, enc_out, masks):
        q, k, v, m = blocks_solution(block, enc_x, dec_x, enc_out, masks)
        return q.clone(), k.clone(), v.clone(), m.int()
    assert verdict(capsys, check_block_inputs, fn)[0]


@pytest.mark.parametrize("stub", STUBS)
def test_2_3_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_block_inputs, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("overrides, needle", [
    # the lecture's slip: the first block fed from the decoder side
    (dict(encoder_self=lambda e, d, o, m: (d, d, d, m["tgt_padding"])), "笔误"),
    (dict(encoder_self=lambda e, d, o, m: (e, e, e, None)), "忘了 padding 掩码"),
    (dict(encoder_self=lambda e, d, o, m: (e, e, e, m["src_padding"] & torch.ones(e.shape[1], e.shape[1], dtype=torch.bool).tril())),
     "不需要因果掩码"),
    (dict(decoder_masked_self=lambda e, d, o, m: (d, d, d, m["causal"])), "漏了 padding 掩码"),
    (dict(decoder_masked_self=lambda e, d, o, m: (d, d, d, m["tgt_padding"])), "漏了因果掩码"),
    (dict(decoder_masked_self=lambda e, d, o, m: (d, d, d, m["tgt_padding"] | m["causal"])), "应该用 &"),
    (dict(decoder_masked_self=lambda e, d, o, m: (d, o, o, m["src_padding"])), "第二个块"),
    (dict(decoder_cross=lambda e, d, o, m: (o, d, d, m["tgt_padding"])), "放反了"),
    (dict(decoder_cross=lambda e, d, o, m: (d, d, d, m["tgt_padding"])), "解码器的自注意力"),
    (dict(decoder_cross=lambda e, d, o, m: (d, e, e, m["src_padding"])), "而不是编码器的输入"),
    (dict(decoder_cross=lambda e, d, o, m: (d, o, o, m["tgt_padding"])), "用了解码器这边的掩码"),
    (dict(decoder_cross=lambda e, d, o, m: (d, o, o, None)), "忘了掩码"),
    (dict(decoder_cross=lambda e, d, o, m: (d, o, d, m["src_padding"])), "K 和 V"),
    (dict(encoder_self=lambda e, d, o, m: (e, e, e, ~m["src_padding"])), "真假反了"),
])
def test_2_3_wrong_answers_are_named(capsys, overrides, needle):
    ok, out = verdict(capsys, check_block_inputs, patched(**overrides))
    assert not ok and "❌" in out and needle in out, out


def test_2_3_in_place_mask_edit_is_named(capsys):
    def fn(block, enc_x, dec_x, enc_out, masks):
        if block == "decoder_masked_self":
            m = masks["tgt_padding"]
            m &= torch.zeros_like(m)  # in place on the caller's tensor, and wrong anyway
            return dec_x, dec_x, dec_x, masks["tgt_padding"] & masks["causal"]
        return blocks_solution(block, enc_x, dec_x, enc_out, masks)
    ok, out = verdict(capsys, check_block_inputs, fn)
    assert not ok and "原地修改" in out


@pytest.mark.parametrize("garbage", [
    "x", 42, raise_value_error, lambda *a: (1, 2, 3, 4), lambda *a: None and 0,
    lambda b, e, d, o, m: (e, e, e), lambda b, e, d, o, m: (e, e, e, "mask"),
    lambda b, e, d, o, m: (torch.full_like(e, float("nan")),) * 3 + (None,),
    lambda b, e, d, o, m: (e, e, e, torch.ones(7, 7)), lambda b, e, d, o, m: (e, e, e, torch.ones(2, 2, 1, 1)),
])
def test_2_3_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_block_inputs, garbage)
    assert not ok


def test_summary_records_attempts(capsys):
    check_build_x(build_x_solution)
    check_positional_encoding(None)
    capsys.readouterr()
    res = results("ch02")
    assert res["2.2"] == "pass" and res["2.1"] == "todo"
    assert set(res) == {"2.1", "2.2", "2.3"}
