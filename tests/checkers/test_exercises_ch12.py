"""Chapter 12 checkers, table-driven: honest answers in several styles pass, every named wrong answer fails with
a verdict that names its mistake. The generic stub and garbage answers are tried on every checker in
tests/checkers/test_exercises_common.py."""
import fractions
import math

import numpy as np
import torch
import torch.nn.functional as F

import mha
from mha.course.exercises import check_decode_step, check_gqa_experiment, check_kv_cache_bytes
from exercise_support import answers_for, mistakes_for, raise_value_error, right_answers, verdict_allowing_prints, wrong_answers


# ---------------------------------------------------------------- 12.1 one decode step with a KV cache
def decode_explicit(q, k_new, v_new, K_cache, V_cache):
    K, V = torch.cat([K_cache, k_new], dim=2), torch.cat([V_cache, v_new], dim=2)  # (B, h, S + 1, d_k)
    w = torch.softmax(q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return w @ V, K, V


def decode_sdpa(q, k_new, v_new, K_cache, V_cache):  # the fused kernel, no mask: the new token sees every key
    K, V = torch.cat((K_cache, k_new), -2), torch.cat((V_cache, v_new), -2)
    return F.scaled_dot_product_attention(q, K, V), K, V


def decode_bottom_right_mask(q, k_new, v_new, K_cache, V_cache):  # a mask, aligned the way mha aligns it
    K, V = torch.cat([K_cache, k_new], dim=2), torch.cat([V_cache, v_new], dim=2)
    return mha.attention(q, K, V, mask=mha.causal_mask(1, K.shape[2]))[0], K, V


def decode_with_kvcache(q, k_new, v_new, K_cache, V_cache):  # the course's own cache object, a list back
    cache = mha.KVCache().append(K_cache, V_cache) if K_cache.shape[2] else mha.KVCache()
    cache = cache.append(k_new, v_new)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, cache.keys) * q.shape[-1] ** -0.5
    return [scores.softmax(-1) @ cache.values, cache.keys, cache.values]


def test_an_answer_that_prints_passes(capsys):
    def noisy(*args):
        print("shapes", [tuple(a.shape) for a in args])
        return decode_explicit(*args)

    ok, last = verdict_allowing_prints(capsys, check_decode_step, noisy)
    assert ok and "✅" in last, last


def no_append(q, k_new, v_new, K_cache, V_cache):
    out = torch.softmax(q @ K_cache.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ V_cache
    return out, torch.cat([K_cache, k_new], 2), torch.cat([V_cache, v_new], 2)


def strictly_past(q, k_new, v_new, K_cache, V_cache):  # appends, then masks the new token's own key
    K, V = torch.cat([K_cache, k_new], 2), torch.cat([V_cache, v_new], 2)
    own = torch.arange(K.shape[2]) == K.shape[2] - 1
    scores = (q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(own, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V, K, V


def causal_top_left(q, k_new, v_new, K_cache, V_cache):
    K, V = torch.cat([K_cache, k_new], 2), torch.cat([V_cache, v_new], 2)
    return F.scaled_dot_product_attention(q, K, V, is_causal=True), K, V


def cat_dim(dim):
    def fn(q, k_new, v_new, K_cache, V_cache):
        K, V = torch.cat([K_cache, k_new], dim), torch.cat([V_cache, v_new], dim)
        return q.clone(), K, V
    return fn


def prepended(q, k_new, v_new, K_cache, V_cache):
    K, V = torch.cat([k_new, K_cache], 2), torch.cat([v_new, V_cache], 2)
    return decode_explicit(q, k_new, v_new, K_cache, V_cache)[0], K, V


def unscaled(q, k_new, v_new, K_cache, V_cache):
    K, V = torch.cat([K_cache, k_new], 2), torch.cat([V_cache, v_new], 2)
    return torch.softmax(q @ K.transpose(-2, -1), dim=-1) @ V, K, V


def softmax_wrong_dim(q, k_new, v_new, K_cache, V_cache):
    K, V = torch.cat([K_cache, k_new], 2), torch.cat([V_cache, v_new], 2)
    return torch.softmax(q @ K.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-2) @ V, K, V


test_decode_right = right_answers(answers_for(check_decode_step, [
    decode_explicit, decode_sdpa, decode_bottom_right_mask, decode_with_kvcache,
    lambda *a: tuple(t.double() for t in decode_explicit(*a)),
]))

test_decode_wrong = wrong_answers(mistakes_for(check_decode_step, [
    (no_append, ["只看了旧缓存"]),
    (strictly_past, ["只看了旧缓存", "包括它自己"]),
    (lambda *a: decode_explicit(*a)[::-1], ["顺序不对", "(out, K, V)"]),  # (V, K, out)
    (lambda *a: (*decode_explicit(*a)[1:], decode_explicit(*a)[0]), ["顺序不对"]),  # (K, V, out)
    (causal_top_left, ["左上角", "不需要掩码"]),
    (cat_dim(-1), ["RuntimeError", "Sizes of tensors must match"]),  # torch names the wrong dimension
    (cat_dim(1), ["RuntimeError", "Sizes of tensors must match"]),
    (lambda q, k, v, K, V: (q.clone(), K, V), ["形状", "dim=2"]),  # forgot to append at all
    (prepended, ["最前面", "接在末尾"]),
    (lambda q, k, v, K, V: (decode_explicit(q, k, v, K, V)[0], torch.cat([K, 2 * k], 2), torch.cat([V, v], 2)),
     ["不是“旧缓存后面接上新的 k”"]),
    (unscaled, ["√d_k"]),
    (softmax_wrong_dim, ["dim=-1"]),
    (lambda *a: decode_explicit(*a)[0], ["三个张量"]),
    (lambda *a: (decode_explicit(*a)[0] + 1, *decode_explicit(*a)[1:]), ["数值不对"]),
    (raise_value_error, ["ValueError: boom"]),
]))


# ---------------------------------------------------------------- 12.2 the KV cache of a GQA model
def cache_bytes(n_layers, B, S, h, h_kv, d_k, nbytes):
    return 2 * n_layers * B * S * h_kv * d_k * nbytes


def cache_bytes_by_tensor(n_layers, B, S, h, h_kv, d_k, nbytes):  # build one layer's cache on the meta device
    k = torch.empty(B, h_kv, S, d_k, dtype={1: torch.int8, 2: torch.bfloat16, 4: torch.float32}[nbytes], device="meta")
    return n_layers * 2 * k.numel() * k.element_size()


test_bytes_right = right_answers(answers_for(check_kv_cache_bytes, [
    cache_bytes, cache_bytes_by_tensor,
    lambda n_layers, B, S, h, h_kv, d_k, nbytes: float(cache_bytes(n_layers, B, S, h, h_kv, d_k, nbytes)),
    lambda *a: np.int64(cache_bytes(*a)),
    lambda *a: fractions.Fraction(cache_bytes(*a)),  # an exact Fraction that is a whole number
    lambda n_layers, B, S, h, h_kv, d_k, nbytes: 2 * n_layers * B * S * (h // (h // h_kv)) * d_k * nbytes,
    lambda n_layers, B, S, h, h_kv, d_k, nbytes: 2 * n_layers * B * S * (h * d_k) * (h_kv / h) * nbytes,  # d_model, shared
]))

test_bytes_wrong = wrong_answers(mistakes_for(check_kv_cache_bytes, [
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * S * h * d_k * n, ["按 h 个头算了"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * S * (h // h_kv) * d_k * n, ["g = h / h_kv"]),
    (lambda L, B, S, h, h_kv, d_k, n: L * B * S * h_kv * d_k * n, ["K 和 V 各存一份"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * B * S * h_kv * d_k * n, ["只算了一层"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * S * h_kv * d_k, ["不是字节数"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * S * h_kv * d_k * n, ["一个样本"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * S * h_kv * d_k * n * 8, ["位（bit）数"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * B * h_kv * S * d_k * 4 * L, ["用参数 nbytes", "不要写死 4"]),  # cell 54's literal 4
    (lambda L, B, S, h, h_kv, d_k, n: 2 * B * h * S * d_k * 4, ["一层、h 个头"]),  # the chapter's per-layer MHA formula
    (lambda L, B, S, h, h_kv, d_k, n: 2 * B * S * h * d_k * n, ["一层、h 个头"]),
    (lambda L, B, S, h, h_kv, d_k, n: L * B * S * (h + 2 * h_kv) * d_k * n, ["查询 q 也算进了缓存"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * S * h_kv * d_k * n + 1, ["应该是", "(B, h_kv, S, d_k)"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2 * L * B * (S + 1) * h_kv * d_k * n, ["应该是", "(B, h_kv, S, d_k)"]),
    (lambda L, B, S, h, h_kv, d_k, n: 2.5, ["应该是整数"]),
    (lambda L, B, S: 1, ["TypeError"]),
]))


# ---------------------------------------------------------------- 12.3 design an experiment
test_experiment_right = right_answers(answers_for(check_gqa_experiment, ["B", "b", " B\n", "(B)", "B."]))

test_experiment_wrong = wrong_answers(mistakes_for(check_gqa_experiment, [
    ("A", ["选 A 不行", "和 h_kv 无关"]),
    ("C", ["参数量不是速度"]),
    ("D", ["几 KB", "噪声"]),
    ("d.", ["选 D 不行"]),
    ("BC", ["一个字母"]),
    ("E", ["一个字母"]),
    ("AB", ["一个字母"]),
    ("", ["一个字母"]),
    (2, ["一个字母"]),
]))
