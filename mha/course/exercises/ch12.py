"""Checkers for chapter 12, from the classroom to production.

* 12.1 one decode step with a KV cache, on raw per-head tensors: append the new k, v, attend the new query
  to every cached key; checked against the last row of causal attention over the whole sequence;
* 12.2 the KV cache of a whole GQA model in bytes, for any layers, batch, context, heads, K/V heads, d_k, dtype;
* 12.3 design an experiment: which measurement can show that GQA speeds up generation (a choice; the verdict
  names why each other design cannot).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .answers import as_int, as_parts, expect_close, expect_tensor, name_the_match, same
from .records import attend
from .running import call
from .verdicts import Mistake, checker, describe

__all__ = ["check_decode_step", "check_kv_cache_bytes", "check_gqa_experiment"]


# ---------------------------------------------------------------- 12.1 one decode step with a KV cache

DECODE_CASES = [(2, 3, 4, 5), (1, 2, 6, 8), (3, 1, 1, 4)]  # (B, h, S cached, d_k)


@checker("ch12", "12.1", "KV 缓存的一步解码：接上新的 k、v，再让新 query 看全部 key")
def check_decode_step(fn):
    """``fn(q, k_new, v_new, K_cache, V_cache) -> (out, K, V)``: q, k_new, v_new (B, h, 1, d_k), the caches
    (B, h, S, d_k); out (B, h, 1, d_k) and the caches after appending (B, h, S + 1, d_k)."""
    for B, h, S, d_k in DECODE_CASES:
        g = torch.Generator().manual_seed(100 * S + d_k)
        q_all, k_all, v_all = (torch.randn(B, h, S + 1, d_k, generator=g) * 2 for _ in range(3))
        q, k_new, v_new = q_all[:, :, -1:], k_all[:, :, -1:], v_all[:, :, -1:]
        K_cache, V_cache = k_all[:, :, :-1].clone(), v_all[:, :, :-1].clone()
        case = f"B={B}, h={h}, 缓存 S={S}, d_k={d_k}："
        out = as_parts(call(fn, q, k_new, v_new, K_cache, V_cache, what="你的函数"), 3, "应该返回三个张量 (out, K, V)")
        got, K, V = (expect_tensor(t, f"{case}返回的{n}") for t, n in zip(out, ("输出", " K", " V")))
        if tuple(got.shape) != tuple(q.shape) and tuple(q.shape) in (tuple(K.shape), tuple(V.shape)):
            raise Mistake(f"{case}返回的三个张量顺序不对：形状是 {[tuple(t.shape) for t in out]}，"
                          "应该按 (out, K, V) 返回，out 是 (B, h, 1, d_k)，K、V 是 (B, h, S + 1, d_k)")
        want = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=True)[:, :, -1:]  # the full layer's last row
        for cache, cache_in, new, name in ((K, K_cache, k_new, "K"), (V, V_cache, v_new, "V")):
            full = torch.cat([cache_in, new], dim=2)
            if tuple(cache.shape) != tuple(full.shape):
                raise Mistake(f"{case}返回的 {name} 形状是 {tuple(cache.shape)}，应该是 {tuple(full.shape)}："
                              "缓存里每个 token 一行，新 token 的 k、v 接在 S 那一维（dim=2）的末尾")
            if not same(cache, full, atol=1e-6):
                if same(cache, torch.cat([new, cache_in], dim=2), atol=1e-6):
                    raise Mistake(f"{case}新的 {name} 接在了缓存的最前面：这一步的输出碰巧不变（softmax 加权和不管 key 的顺序），"
                                  "但缓存的第 j 行不再是第 j 个 token：分块送入时右下角对齐的因果掩码会让 query 看错 key；接在末尾")
                raise Mistake(f"{case}返回的 {name} 不是“旧缓存后面接上新的 {name.lower()}”")
        if same(got, want):
            continue
        name_the_match(got, [
            (attend(q, K_cache, V_cache)[0], "新 query 只看了旧缓存，没看它自己的 key：k_new、v_new 接进缓存之后，新 query 要看全部 S + 1 个 key，"
             "包括它自己（不需要掩码）"),
            (F.scaled_dot_product_attention(q, K, V, is_causal=True),
             "新 query 只看到了第一个 key：PyTorch 的 is_causal=True 把掩码对齐在左上角，L=1 时只留下第 1 列。"
             "新 token 是序列的最后一个，本来就该看全部 key，一步解码不需要掩码（要掩码就用右下角对齐的 mha.causal_mask(1, S + 1)）"),
            (attend(q, K, V, scale=1.0)[0], "少除了 √d_k：分数是 q·kᵀ / √d_k"),
            (V.sum(dim=2, keepdim=True), "softmax 做在了长度为 1 的那一维上，每个权重都成了 1：softmax 要沿 key 那一维（dim=-1）"),
        ], prefix=case, same=same)
        expect_close(got, want, f"{case}输出", hint="新 query 和接好的 S + 1 个 key 打分、除以 √d_k、沿 key 做 softmax，再乘 V")


# ---------------------------------------------------------------- 12.2 the KV cache of a GQA model

BYTES_CASES = [(5, 6, 10, 21, 3, 16, 4),  # first: no factor stands in for another (2, 5, 4, 6, 7, 8 ...)
               (32, 3, 4096, 32, 4, 128, 4), (32, 8, 4096, 32, 8, 128, 2), (2, 3, 10, 8, 2, 16, 4), (80, 1, 1000, 64, 8, 128, 2),
               (4, 2, 7, 8, 1, 8, 4), (3, 5, 11, 6, 6, 4, 1)]  # (layers, B, S, h, h_kv, d_k, bytes per number)


@checker("ch12", "12.2", "GQA 模型的 KV 缓存有多大")
def check_kv_cache_bytes(fn):
    """``fn(n_layers, B, S, h, h_kv, d_k, nbytes) -> int``: bytes of the K and V caches of every layer."""
    for n_layers, B, S, h, h_kv, d_k, nbytes in BYTES_CASES:
        case = f"n_layers={n_layers}, B={B}, S={S}, h={h}, h_kv={h_kv}, d_k={d_k}, 每个数 {nbytes} 字节"
        got = as_int(call(fn, n_layers, B, S, h, h_kv, d_k, nbytes, what="你的函数"), f"{case} 时的字节数")
        want = 2 * n_layers * B * S * h_kv * d_k * nbytes
        if got == want:
            continue
        name_the_match(got, [
            (want * h // h_kv, "你按 h 个头算了：GQA 的缓存只存 h_kv 个 K/V 头，查询头共享它们，查询 q 不进缓存"),
            (want * h // h_kv // n_layers, "这是一层、h 个头的缓存（普通多头注意力一层的公式）：有 n_layers 层，每层只存 h_kv 个 K/V 头"),
            (want * (h + 2 * h_kv) // (2 * h_kv), "把查询 q 也算进了缓存：缓存只存 K 和 V，查询每步新算、用完就丢"),
            (want * 8, "这是位（bit）数，不是字节数：nbytes 已经是每个数的字节数，不用再乘 8"),
            (want * 4 // nbytes, f"每个数的字节数用参数 nbytes（这一组 nbytes = {nbytes}），不要写死 4"),
            (want * (h // h_kv) // h_kv, "你用了每组的查询头数 g = h / h_kv；缓存里存的是 h_kv 个 K/V 头"),
            (want // 2, "只算了 K 或 V 一份：缓存里 K 和 V 各存一份"),
            (want // n_layers, "只算了一层：每一层注意力都有自己的缓存"),
            (want // nbytes, "这是数的个数，不是字节数：还要乘每个数占的字节"),
            (want // B, "只算了一个样本：batch 里每个序列各有一份缓存"),
        ], prefix=f"{case}：", suffix=f"（应该是 {want}，你给了 {got}）", same=lambda g, w: g == w != want)
        raise Mistake(f"{case}：应该是 {want}，你给了 {got}。提示：每层 K、V 两份，每份 (B, h_kv, S, d_k) 个数")


# ---------------------------------------------------------------- 12.3 design an experiment

EXPERIMENT_RIGHT = "B"
EXPERIMENT_WHY = {
    "A": "prefill 一次处理 L 个 query，分数要 B·h·L·S·d_k 次乘法，和 h_kv 无关；GQA 省的是每步要读的缓存，这个实验量不到它",
    "C": "参数量不是速度：W_k、W_v 变小了，可省下的是逐 token 生成时读缓存的时间，要直接量那一步",
    "D": "S=10、B=1 时缓存只有几 KB 到几十 KB，读它的时间淹没在投影和 Python 的开销里；只测一次也分不清差别和噪声",
}


@checker("ch12", "12.3", "设计一个实验：GQA 真的让生成变快了吗")
def check_gqa_experiment(answer):
    """``answer``: the letter "A" to "D" of the experiment that can show GQA's speed-up in generation."""
    choice = answer.strip(" \t\n.。()（）").upper() if isinstance(answer, str) else None  # "B", "b", "(B)", "B."
    if choice not in ("A", "B", "C", "D"):
        raise Mistake(f"答案写成一个字母 \"A\"、\"B\"、\"C\" 或 \"D\"，却收到了 {describe(answer)}")
    if choice != EXPERIMENT_RIGHT:
        raise Mistake(f"选 {choice} 不行：{EXPERIMENT_WHY[choice]}")
