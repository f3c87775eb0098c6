"""Checkers for chapter 10, masks and the three attentions of the Transformer.

* 10.1 build a causal mask,
* 10.2 combine a padding mask with a causal mask,
* 10.3 predict every shape in cross-attention with L != S.
"""
from __future__ import annotations

import torch

from ._core import Mistake, NotDone, call, checker, expect_shape, expect_tensor, is_stub

__all__ = ["check_causal_mask", "check_combine_masks", "check_cross_attention_shapes"]


# ---------------------------------------------------------------- 10.1 causal mask

@checker("ch10", "10.1", "构造因果掩码")
def check_causal_mask(fn):
    """``fn(L) -> (L, L) bool``, True on and below the diagonal (query i may see keys 0..i).

    Accepted: exactly shape (L, L) and dtype torch.bool.
    """
    for L in (4, 1, 6):
        out = expect_tensor(call(fn, L, what="你的因果掩码函数"), "你的因果掩码")
        if out.dim() == 4 and out.shape[:2] == (1, 1) and out.shape[2:] == (L, L):
            raise Mistake(f"形状应该是 (L, L) = {(L, L)}，你返回了 {tuple(out.shape)}。"
                          "因果掩码只和位置有关，(L, L) 会自动广播到 (B, h, L, L)，不必自己加轴")
        expect_shape(out, (L, L), "你的因果掩码", hint="行是 query i，列是 key j")
        ones = torch.ones(L, L, dtype=torch.bool)
        want = ones.tril()
        as_bool = out.ne(0) if out.dtype != torch.bool else out
        if L > 1:
            if torch.equal(as_bool, ones.triu(1)):
                raise Mistake("极性反了：你在“未来”的位置放了 True。本课约定 True = 可以看；"
                              "True = 不许看 是 torch.nn.MultiheadAttention 的 attn_mask 的约定。"
                              "用 tril 保留下三角（含对角线）")
            if torch.equal(as_bool, ones.triu()):
                raise Mistake("取成了上三角：query i 只能看 j ≤ i 的 key，也就是下三角（行号 ≥ 列号），用 tril 而不是 triu")
            if torch.equal(as_bool, ones.tril(-1)):
                raise Mistake("把对角线也屏蔽了：位置 i 可以看它自己（j = i），用 tril(diagonal=0)，"
                              "否则第 0 个 query 一个 key 也看不到")
            if torch.equal(as_bool, ones):
                raise Mistake("全是 True：这等于没有掩码，每个位置都能看到未来的 token")
        if out.dtype != torch.bool:
            if torch.equal(as_bool, want):
                raise Mistake(f"位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool。"
                              "`masked_fill(~mask, ...)` 需要 bool：对整数张量 `~` 是按位取反（~1 == -2），对浮点数会直接报错")
            raise Mistake(f"dtype 应该是 torch.bool，实际是 {out.dtype}")
        if not torch.equal(out, want):
            raise Mistake(f"L={L} 时位置不对：应该是 {want.int().tolist()}，你得到的是 {out.int().tolist()}")


# ---------------------------------------------------------------- 10.2 padding & causal

@checker("ch10", "10.2", "把 padding mask 和因果掩码合在一起")
def check_combine_masks(fn):
    """``fn(pad (B, 1, 1, S) bool, causal (L, S) bool) -> (B, 1, L, S) bool`` = pad AND causal.

    Accepted: exactly shape (B, 1, L, S), dtype torch.bool (what ``pad & causal`` broadcasts to).
    """
    cases = [
        torch.tensor([[1, 2, 3, 0]]),
        torch.tensor([[5, 6, 7, 0, 0], [4, 0, 0, 0, 0], [1, 2, 3, 4, 5]]),
        torch.tensor([[7, 8, 9, 9, 9, 0], [3, 3, 0, 0, 0, 0]]),
    ]
    for ids in cases:
        B, S = ids.shape
        L = S
        pad = (ids != 0)[:, None, None, :]  # (B, 1, 1, S)
        causal = torch.ones(L, S, dtype=torch.bool).tril()  # (L, S)
        pad_copy, causal_copy = pad.clone(), causal.clone()
        out = expect_tensor(call(fn, pad, causal, what="你的合并函数"), "合并后的掩码")
        if not torch.equal(pad, pad_copy) or not torch.equal(causal, causal_copy):
            raise Mistake("你的函数修改了输入的掩码（例如用了 `&=`）；要返回一个新张量")
        want = pad & causal  # (B, 1, L, S)
        if tuple(out.shape) == (B, L, S):
            raise Mistake(f"形状应该是 (B, 1, L, S) = {(B, 1, L, S)}，你返回的是 (B, L, S) = {(B, L, S)}。"
                          "少了头的轴：和 (B, h, L, S) 右对齐广播时 B 会被对到 h 上；保留那个长度为 1 的轴")
        expect_shape(out, (B, 1, L, S), "合并后的掩码",
                     hint="(B, 1, 1, S) 与 (L, S) 广播：右端对齐，长度 1 的轴被拉长，得到 (B, 1, L, S)")
        as_bool = out.ne(0) if out.dtype != torch.bool else out
        expanded_pad = pad.expand(B, 1, L, S)
        named = [
            (pad | causal, "用了“或”（|）而不是“与”（&）：一个 key 只有在“不是 PAD”并且“不在未来”时才能看，两个条件都要满足"),
            (~want, "极性反了：True 应该表示“可以看”。你得到的是“被屏蔽”的位置"),
            (causal.expand(B, 1, L, S), "只用了因果掩码，padding mask 被丢掉了：PAD 那几列也必须是 False"),
            (expanded_pad, "只用了 padding mask，因果掩码被丢掉了：对角线以上（未来）的位置也必须是 False"),
        ]
        if torch.equal(as_bool, want):
            if out.dtype != torch.bool:
                raise Mistake(f"位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool；用 `&` 直接合并两个 bool 掩码")
            continue
        for wrong, msg in named:
            if torch.equal(as_bool, wrong):
                raise Mistake(msg)
        bad = (as_bool != want).nonzero()[0].tolist()
        raise Mistake(f"形状对了，但有位置不对，例如下标 {tuple(bad)}（batch, 1, query, key）；应该等于 pad & causal")


# ---------------------------------------------------------------- 10.3 cross-attention shapes

KEYS = ("mask", "q", "k", "v", "scores", "weights", "heads", "output")


def _cross_shapes(B, L, S, d_model, n_heads):
    d_k = d_model // n_heads
    return {
        "mask": (B, 1, 1, S),
        "q": (B, n_heads, L, d_k),
        "k": (B, n_heads, S, d_k),
        "v": (B, n_heads, S, d_k),
        "scores": (B, n_heads, L, S),
        "weights": (B, n_heads, L, S),
        "heads": (B, n_heads, L, d_k),
        "output": (B, L, d_model),
    }


def _as_shape(value, key):
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (tuple, list)) and all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        return tuple(value)
    raise Mistake(f"shapes[{key!r}] 应该是由整数组成的 tuple，例如 (2, 3)，却收到了 {value!r}")


def _shape_mistake(key, got, want, B, L, S, d_model, n_heads):
    """A message that names the mistake behind a wrong shape."""
    d_k = d_model // n_heads
    h = n_heads
    base = f"shapes[{key!r}] 应该是 {want}，你写的是 {got}"
    if key == "mask":
        if got == (B, 1, L, S):
            return None  # also fine: broadcastable to (B, h, L, S)
        if got == (B, S):
            return base + "：(B, S) 会被右对齐到 (B, h, L, S) 的 (L, S) 上，要写成 (B, 1, 1, S)"
        if got in ((B, 1, 1, L), (B, L)):
            return base + "：padding mask 来自编码器一侧，屏蔽的是 key（长度 S），不是 decoder 的 query（长度 L）"
    if key in ("q", "heads") and got == (B, h, S, d_k):
        return base + "：Q 来自 decoder，长度是 L；K、V 才来自编码器，长度是 S"
    if key in ("k", "v") and got == (B, h, L, d_k):
        return base + "：K、V 来自编码器的输出，长度是 S，不是 decoder 的 L"
    if key in ("q", "k", "v", "heads") and got[-1] == d_model and len(got) == 4:
        return base + f"：分头后每个头只有 d_k = d_model / n_heads = {d_k} 维，不是 d_model = {d_model}"
    if key in ("q", "k", "v", "heads") and len(got) == 4 and got[1] != h and got[2] == h:
        return base + "：分头后要 transpose，把头的轴放到 token 的轴前面：(B, h, 长度, d_k)"
    if key in ("scores", "weights"):
        if got == (B, h, S, L):
            return base + "：行是 query（L 个），列是 key（S 个）；scores = Q Kᵀ 得到 (L, d_k) @ (d_k, S) = (L, S)"
        if got in ((B, h, L, L), (B, h, S, S)):
            return base + "：交叉注意力里 L ≠ S，scores 不是方阵，而是 (L, S)"
        if got == (B, L, S):
            return base + "：每个头有自己的一张权重表，别忘了头的轴 h"
    if key == "output":
        if got == (B, S, d_model):
            return base + "：输出的每一行对应一个 query，长度跟着 decoder 的 L，而不是编码器的 S"
        if got == (B, h, L, d_k):
            return base + "：最后还有 Concat 和 W^O，输出回到 (B, L, d_model)"
    return base


@checker("ch10", "10.3", "预测交叉注意力里的每个形状（L ≠ S）")
def check_cross_attention_shapes(fn):
    """``fn(B, L, S, d_model, n_heads) -> dict`` with the shapes of KEYS.

    mask: the encoder padding mask, (B, 1, 1, S) (also accepted: (B, 1, L, S)).
    q, k, v: after the projections and the split; scores, weights, heads
    (= weights @ v), output. L is the decoder (query) length, S the encoder (key) length.
    """
    configs = [(2, 3, 5, 8, 2), (1, 4, 7, 12, 3), (3, 6, 2, 16, 4)]
    for B, L, S, d_model, n_heads in configs:
        answer = call(fn, B, L, S, d_model, n_heads, what="你的函数")
        if is_stub(answer):
            raise NotDone()
        if not isinstance(answer, dict):
            raise Mistake(f"应该返回一个 dict（键是 {', '.join(KEYS)}），却收到了 {type(answer).__name__}")
        if all(is_stub(answer.get(k)) for k in KEYS):
            raise NotDone()
        missing = [k for k in KEYS if k not in answer or is_stub(answer[k])]
        if missing:
            raise Mistake(f"dict 里还缺这些键（或值还是 ...）：{', '.join(missing)}")
        want = _cross_shapes(B, L, S, d_model, n_heads)
        for key in KEYS:
            got = _as_shape(answer[key], key)
            if got == want[key]:
                continue
            msg = _shape_mistake(key, got, want[key], B, L, S, d_model, n_heads)
            if msg is not None:
                raise Mistake(msg + f"（B={B}, L={L}, S={S}, d_model={d_model}, n_heads={n_heads}）")
