"""Checkers for chapter 02, Q、K、V 从哪里来.

2.1 moving k positions is a rotation: the matrix M with PE[pos + k] = PE[pos] @ M (a function)
2.2 bug hunt: a build_x that takes the PE of the batch size instead of the length; find the shapes where it
    crashes and where it silently goes wrong, and fix it (a dict)
2.3 N layers stacked: run the attention blocks of an N-layer encoder and decoder, each block fed from the right
    place (a function)
"""
from __future__ import annotations

import math

import numpy as np
import torch

from mha.layer import MultiHeadAttention
from mha.positional import sinusoidal_positional_encoding
from .answers import as_shape, expect_close, expect_shape, expect_tensor, name_the_match, part, same
from .gradients import expect_gradients
from .records import dict_answer
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_pe_shift_matrix", "check_pe_bug", "check_run_stack"]


# ---------------------------------------------------------------- 2.2 (bug hunt: the PE of the batch size)
def build_x_buggy(token_ids: torch.Tensor, embedding: torch.nn.Embedding) -> torch.Tensor:
    """The bug of exercise 2.2: the PE table is made for ``token_ids.shape[0]`` (B) positions, not L."""
    B, L = token_ids.shape
    return embedding(token_ids) + sinusoidal_positional_encoding(B, embedding.embedding_dim)


def _run_buggy(B: int, L: int):
    """(raised?, silently wrong?) for the buggy build_x on a (B, L) batch."""
    embedding = torch.nn.Embedding(10, 4)
    ids = torch.randint(0, 10, (B, L))
    try:
        with torch.no_grad():
            got = build_x_buggy(ids, embedding)
    except RuntimeError:
        return True, False
    with torch.no_grad():
        right = embedding(ids) + sinusoidal_positional_encoding(L, 4)
    return False, got.shape != right.shape or not torch.allclose(got, right)


@checker("ch02", "2.2", "找 bug：位置编码用了 batch 的大小")
def check_pe_bug(answer):
    """``answer = {"crashes": (B, L), "silently_wrong": (B, L), "fixed": build_x}``: a batch shape on which
    :func:`build_x_buggy` raises, one on which it runs but returns a wrong x, and the fixed function."""
    dict_answer(answer, ("crashes", "silently_wrong", "fixed"), '{"crashes": (B, L), "silently_wrong": (B, L), "fixed": 函数}')
    crash_shape = as_shape(answer["crashes"], 'answer["crashes"]', 2, 64, "token_ids 的形状 (B, L)")
    if crash_shape[0] == 2:
        raise Mistake(f'answer["crashes"] = {crash_shape}：B = 2 正是本章例子的批大小，题目说过它会报错；'
                      "要找一个 B ≠ 2 也报错的形状：(B, d_model) 的表加到 (B, L, d_model) 上，什么时候广播不了？")
    raised, _ = _run_buggy(*crash_shape)
    if not raised:
        B, L = crash_shape
        why = ("B == L 时两张表一样大，结果碰巧是对的" if B == L else
               "B = 1 时 (1, d_model) 的表会广播到每个位置" if B == 1 else
               f"L = 1 时嵌入是 (B, 1, d_model)，它长度为 1 的那一维会广播到表的 B 行上，结果的形状是 ({B}, {B}, d_model)，不报错却算错")
        raise Mistake(f'answer["crashes"] = {crash_shape}：build_x_buggy 在这个形状上没有报错（{why}）；'
                      "(B, d_model) 的表加到 (B, L, d_model) 上，什么时候广播不了？")
    wrong_shape = as_shape(answer["silently_wrong"], 'answer["silently_wrong"]', 2, 64, "token_ids 的形状 (B, L)")
    raised, wrong = _run_buggy(*wrong_shape)
    if raised:
        raise Mistake(f'answer["silently_wrong"] = {wrong_shape}：build_x_buggy 在这个形状上报错了；要找的是不报错、却悄悄算错的形状')
    if not wrong:
        raise Mistake(f'answer["silently_wrong"] = {wrong_shape}：在这个形状上 build_x_buggy 的结果是对的（B == L 时表的大小碰巧对上）；'
                      "还有哪种 B 能让 (B, d_model) 的表广播到 (B, L, d_model) 上？")
    try:
        _check_fixed_build_x(part(answer["fixed"], 'answer["fixed"]'))
    except Mistake as m:
        raise Mistake(f'两个形状都找对了；修好的函数 answer["fixed"] 还不对：{m}') from None


def _check_fixed_build_x(fn):
    """``fn(token_ids (B, L) long, embedding nn.Embedding(V, d_model)) -> x (B, L, d_model)``,
    ``x = embedding(token_ids) + PE`` with the sinusoidal PE of chapter 2."""
    for B, L, vocab, d_model in [(1, 4, 10, 6), (3, 5, 12, 8), (5, 3, 9, 4)]:  # B > L in the last
        embedding = torch.nn.Embedding(vocab, d_model)
        token_ids = torch.randint(0, vocab, (B, L))
        token_ids[0, 0] = vocab - 1  # a large id, so "PE indexed by token id" cannot hide
        what = f"build_x(token_ids {tuple(token_ids.shape)}, Embedding({vocab}, {d_model}))"
        out = expect_tensor(call(fn, token_ids, embedding, what="build_x"), what,  # changing an input is named
                            floating="词嵌入加位置编码是小数，应该是浮点张量")
        with torch.no_grad():
            emb = embedding(token_ids)  # (B, L, d_model)
        pe = sinusoidal_positional_encoding(L, d_model)  # (L, d_model)
        want = emb + pe  # (B, L, d_model)
        expect_shape(out, (B, L, d_model), what, named=[
            ((B, L, 2 * d_model), f"{what} 的形状是 {(B, L, 2 * d_model)}，应为 {(B, L, d_model)}："
                                  "你把位置编码拼接（cat）到了嵌入后面；位置编码要逐元素加到嵌入上，宽度不变"),
            ((L, d_model) if B == 1 else None, f"{what} 的形状是 {(L, d_model)}，应为 {(B, L, d_model)}："
                                               "batch 维不见了（别用 squeeze）")])
        if same(out, want, atol=1e-5, rtol=1e-5):
            expect_gradients(out, {"embedding.weight": embedding.weight}, what)  # the embedding must stay trainable
            continue
        pe_by_id = sinusoidal_positional_encoding(vocab, d_model)[token_ids]  # (B, L, d_model)
        name_the_match(out, [
            (emb, "只有词嵌入，忘了加位置编码；没有位置编码，注意力分不清词的先后顺序"),
            (pe.expand(B, L, d_model), "只有位置编码，忘了词嵌入 embedding(token_ids)；这样每句话的 x 都一样"),
            (emb * pe, "把嵌入和位置编码相乘了；应该相加 x = embedding(token_ids) + PE"),
            (emb * math.sqrt(d_model) + pe, "嵌入乘了 √d_model。原论文确实这样做，但本课的 x 就是嵌入加位置编码，不缩放"),
            (emb + pe_by_id, "按 token id 取了位置编码；位置编码按位置 0, 1, ..., L-1 取，与词是什么无关"),
            (emb + pe.view(L, d_model // 2, 2).flip(-1).reshape(L, d_model), "位置编码里 sin 和 cos 放反了：偶数维 sin，奇数维 cos")],
            prefix=f"{what}：", same=lambda a, b: same(a, b, atol=1e-4, rtol=1e-5))
        expect_close(out, want, what, hint="x = embedding(token_ids) + PE，PE 的形状是 (L, d_model)，会沿 batch 维自动广播",
                     atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- 2.1 (moving k positions is a rotation: PE[pos + k] = PE[pos] @ M)
SHIFT_CASES = [(1, 4), (3, 6), (0, 8), (5, 16), (-2, 6), (12, 10)]  # (k, d_model)
FIT = ("*lstsq*", "*pinv*", "*solve*", "*inv*",  # fitting M from the table instead of writing it down
       *((f"np.linalg.{name}", getattr(np.linalg, name)) for name in ("lstsq", "pinv", "solve", "inv", "tensorsolve", "tensorinv")))


def _frequencies(d_model: int, exponent: str = "2i") -> torch.Tensor:
    """omega_i = 1 / 10000^(2i / d_model) for the pairs i = 0 .. d_model/2 - 1 (float64)."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    two_i = {"2i": 2 * i, "i": i}[exponent]
    return 1.0 / 10000.0 ** (two_i / d_model)


def shift_matrix(k: int, d_model: int, *, angle_scale=None, sign: int = 1, exponent: str = "2i") -> torch.Tensor:
    """The (d_model, d_model) M with PE[pos + k] = PE[pos] @ M (a row vector times M, as x W in the book):
    one 2x2 block [[cos, -sin], [sin, cos]] of the angle k * omega_i per pair of dimensions (2i, 2i+1).
    The keywords make the typical wrong cousins (the defaults give the truth)."""
    omega = _frequencies(d_model, exponent) if angle_scale is None else torch.full((d_model // 2,), float(angle_scale),
                                                                                  dtype=torch.float64)
    a = sign * k * omega
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    ev, od = torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)
    m[ev, ev], m[od, od] = torch.cos(a), torch.cos(a)
    m[ev, od], m[od, ev] = -torch.sin(a), torch.sin(a)
    return m


@checker("ch02", "2.1", "位置编码挪 k 格是一次旋转：写出矩阵 M")
def check_pe_shift_matrix(fn):
    """``fn(k, d_model) -> (d_model, d_model)`` tensor M with ``PE[pos + k] = PE[pos] @ M`` for every position."""
    for k, d_model in SHIFT_CASES:
        what = f"pe_shift_matrix({k}, {d_model})"
        out = call(fn, k, d_model, what="pe_shift_matrix", forbid=FIT,
                   shortcut_hint="这道题要你用三角公式写出 M，而不是从位置编码表里拟合（最小二乘、求逆、解方程）")
        if isinstance(out, np.ndarray) and out.dtype.kind in "iuf":  # numpy's cos and sin are as good
            out = torch.from_numpy(out.copy())
        out = expect_tensor(out, what, floating="cos、sin 是小数，要用浮点张量")
        expect_shape(out, (d_model, d_model), what, named=[((2, 2), f"{what} 的形状是 (2, 2)：这只是一对维度的小块；"
                     "每一对维度 (2m, 2m+1) 有自己的频率，"
                     f"要把 d_model/2 = {d_model // 2} 个小块放在对角线上，拼成 ({d_model}, {d_model})")])
        got = out.detach().double()
        truth = shift_matrix(k, d_model)
        if same(got, truth, atol=1e-5):
            continue
        name_the_match(got, [
            (shift_matrix(k, d_model, sign=-1), "这是往回挪 k 格的矩阵（PE[pos] @ M 得到 PE[pos − k]），也就是正确答案的转置："
             "要么 sin 的正负号放反了，要么按列向量 M @ PE[pos] 写了；本题用行向量 PE[pos] @ M，"
             "所以第 2m 行第 2m+1 列是 −sin(kω_m)，第 2m+1 行第 2m 列是 +sin(kω_m)"),
            (shift_matrix(k, d_model, angle_scale=1.0), "旋转的角度用了 k，忘了乘每一对维度自己的频率 ω_m = 1 / 10000^(2m/d_model)："
             "第 m 对维度转 k·ω_m"),
            (shift_matrix(k, d_model, exponent="i"), "频率的指数用了 m/d_model，应为 2m/d_model（m 是第几对维度）"),
            *[(torch.eye(d_model, dtype=torch.float64), "是单位矩阵：那样 PE[pos] @ M 还是 PE[pos]，没有挪动位置")][:k != 0]],
            prefix=f"{what}：", same=lambda a, b: same(a, b, atol=1e-5))
        r, c = divmod(int((got - truth).abs().argmax()), d_model)
        raise Mistake(f"{what} 不对：第 {r} 行第 {c} 列（从 0 数）应为 {truth[r, c].item():.4g}，你的是 {got[r, c].item():.4g}"
                      + ("（对角线上每个 2×2 小块之外都应是 0）。" if r // 2 != c // 2 else "。")
                      + "提示：sin(a + b) = sin a cos b + cos a sin b，cos(a + b) = cos a cos b − sin a sin b，"
                      "每一对维度 (2m, 2m+1) 只和自己这一对有关")


# ---------------------------------------------------------------- 2.3 (N layers: where each block's Q, K, V come from)
def reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks, *, mistake=None):
    """The decoder's output after N layers of attention blocks only (the blocks carry their residual connection,
    see :class:`ResidualBlock`; LayerNorm and FFN are left out, as in chapter 2).

    ``mistake`` names one typical wrong wiring (see :data:`STACK_MISTAKES`); None is the truth.
    """
    src, tgt, causal = masks["src_padding"], masks["tgt_padding"], masks["causal"]
    self_mask = {"no_causal": tgt, "no_tgt_padding": causal, "or": tgt | causal}.get(mistake, tgt & causal)
    if mistake == "first_layer_only":  # the chapter's three blocks, copied once
        enc_layers, dec_layers = enc_layers[:1], dec_layers[:1]
    if mistake == "reversed_layers":  # the last layer of each stack run first
        enc_layers, dec_layers = enc_layers[::-1], dec_layers[::-1]

    def run(block, q, kv, mask):
        out = block(q, kv, kv, mask)
        return out + q if mistake == "extra_residual" else out

    later = {"enc_mask_first_layer", "masks_first_layer"}  # from layer 2 on, the mask is left out
    h, enc_outs = enc_x, []
    for n, layer in enumerate(enc_layers):
        inp = enc_x if mistake == "enc_not_chained" else h
        h = run(layer, inp, inp, None if mistake == "enc_no_mask" or (n and mistake in later) else src)
        enc_outs.append(h)
    y = dec_x
    if mistake == "self_then_cross":  # every layer's block 2 first, then every layer's block 3
        for self_attn, _ in dec_layers:
            y = run(self_attn, y, y, self_mask)
        for _, cross_attn in dec_layers:
            y = run(cross_attn, y, enc_outs[-1], src)
        return y
    for n, (self_attn, cross_attn) in enumerate(dec_layers):
        memory = {"cross_same_layer": enc_outs[n], "cross_enc_x": enc_x}.get(mistake, enc_outs[-1])
        cross_mask = None if mistake == "cross_no_mask" or (n and mistake == "masks_first_layer") else src
        if n and mistake in ("causal_first_layer", "masks_first_layer"):
            self_mask = None if mistake == "masks_first_layer" else tgt
        inp = dec_x if mistake == "dec_not_chained" else y
        if mistake == "cross_first":
            c = run(cross_attn, inp, memory, cross_mask)
            y = run(self_attn, c, c, self_mask)
            continue
        s = run(self_attn, inp, inp, self_mask)
        last = n == len(dec_layers) - 1
        if (mistake == "cross_last_only" and not last) or (mistake == "self_output" and last):
            y = s  # block 3 of this layer left out
            continue
        y = run(cross_attn, inp if mistake == "cross_query_input" else s, memory, cross_mask)
    return y


STACK_MISTAKES = {
    "reversed_layers": "层的顺序反了：enc_layers[0]、dec_layers[0] 是最下面的第 1 层，要从它开始，一层接一层往上跑",
    "cross_last_only": "只有最后一层做了交叉注意力：解码器的每一层都是先掩码自注意力、再交叉注意力（块 2 再块 3）",
    "self_output": "返回的是最后一层掩码自注意力（块 2）的输出：最后一层也要再做交叉注意力（块 3），返回它的输出",
    "cross_same_layer": "第 n 层解码器的交叉注意力用了第 n 层编码器的输出；编码器先把 N 层全部跑完，"
                        "每一层解码器的交叉注意力都用编码器**最后一层**的输出作 K 和 V",
    "cross_enc_x": "交叉注意力的 K、V 用了编码器的输入 enc_x；要用编码器最后一层的输出（已经看过整句源句的表示）",
    "enc_not_chained": "编码器的每一层都拿 enc_x 作输入；从第 2 层起，编码器自注意力的 Q = K = V 是上一层编码器的输出",
    "dec_not_chained": "解码器的每一层都拿 dec_x 作输入；从第 2 层起，掩码自注意力的 Q = K = V 是上一层解码器的输出",
    "cross_query_input": "交叉注意力的 Query 用了这一层的输入；要用本层掩码自注意力（块 2）的输出",
    "cross_first": "一层解码器里先做了交叉注意力；顺序是先掩码自注意力（块 2），再交叉注意力（块 3）",
    "no_causal": "解码器的掩码自注意力漏了因果掩码：生成第 t 个词时不能偷看后面的词（tgt_padding & causal）",
    "no_tgt_padding": "解码器的掩码自注意力漏了目标句的 padding 掩码（tgt_padding & causal）",
    "or": "解码器的两个掩码用 |（或）合在了一起；两个都允许才能看，要用 &（与）",
    "cross_no_mask": "交叉注意力没有用源句的 padding 掩码 src_padding：解码器会看到源句里的 PAD",
    "enc_no_mask": "编码器自注意力没有用 padding 掩码 src_padding：PAD 会被当成真正的词",
    "first_layer_only": "只跑了第 1 层：enc_layers/dec_layers 里后面的层没有用上；编码器要一层接一层跑完 N 层，"
                        "解码器也一样，每一层都是掩码自注意力再交叉注意力",
    "self_then_cross": "先把所有层的掩码自注意力跑完，才做交叉注意力；每一层解码器里先掩码自注意力（块 2）、"
                       "再交叉注意力（块 3），然后才进入下一层",
    "extra_residual": "每个块的输出又加了一次它的输入：检查用的块里已经带着残差连接，直接用块的输出即可",
    "causal_first_layer": "从第 2 层起解码器的掩码自注意力漏了因果掩码：掩码每一层都一样，每一层都是 tgt_padding & causal",
    "enc_mask_first_layer": "从第 2 层起编码器自注意力漏了 padding 掩码：源句的 PAD 每一层都在，每一层都用 src_padding",
    "masks_first_layer": "只有第 1 层用了掩码：掩码每一层都一样，从第 2 层起也要照样传进每个块",
}

STACK_CASES = [  # (n_layers, B, S, L, d_model, source mask rows, target lengths); S != L throughout
    (2, 2, 5, 3, 8, [[1, 1, 1, 1, 1], [1, 1, 0, 1, 0]], [3, 2]),  # a PAD in the middle of sentence 2
    (3, 1, 4, 6, 4, [[1, 1, 1, 0]], [4]),
    (2, 3, 6, 4, 8, [[1] * 6, [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]], [4, 1, 3]),
]


class ResidualBlock(torch.nn.Module):
    """One attention block of 2.3: ``block(query, key, value, mask)`` returns ``query + attention(...)``.

    The residual connection keeps each layer's input visible in its output: an attention-only stack without it
    makes every position of the encoder's output nearly the same vector after two layers, and then no wiring
    mistake would show in the decoder's output.
    """

    def __init__(self, d_model: int, n_heads: int = 2, role: str = "encoder"):
        super().__init__()
        self.role = role
        self.lengths = None  # (L, S) of a cross-attention block: set by stack_case, so that swapped inputs get named
        self.masks = None  # the case's masks (a copy of the dict): set by stack_case, so that a wrong mask gets named
        self.attn = MultiHeadAttention(d_model, n_heads).eval()
        with torch.no_grad():  # sharper weights than an untrained layer's near-uniform ones
            self.attn.W_q.weight.mul_(SHARP)
            self.attn.W_k.weight.mul_(SHARP)

    def forward(self, query, key, value, mask=None):
        if self.lengths is not None and (query.shape[-2], key.shape[-2]) == self.lengths[::-1]:
            raise Mistake(f"{BLOCK_ROLES[self.role]}（这里 Query 有 {query.shape[-2]} 个位置、Key 有 {key.shape[-2]} 个："
                             "Query 和 Key/Value 放反了）")
        why = MASK_WHY.get((self.role, self.mask_name(mask)))
        if why:  # a typical wrong mask for this block: named before it crashes (or not) inside the layer
            raise Mistake(f"{BLOCK_ROLES[self.role]}：{why}")
        try:
            return query + self.attn(query, key, value, mask)
        except (ValueError, RuntimeError, TypeError):  # a wrong input or mask: say which block, not the answer
            raise Mistake(f"{BLOCK_ROLES[self.role]}：这个块的 Query、Key/Value 和掩码对不上。想一想它的 Query 和 Key "
                             "各来自哪一句、上一层的哪个输出，掩码管的是哪一句的 key") from None

    def mask_name(self, mask):
        """Which of the case's masks (or ``tgt_padding & causal``) ``mask`` is, by value; None if none or unknown."""
        if not isinstance(mask, torch.Tensor) or not self.masks:
            return None
        m = self.masks
        named = {**m, "tgt_padding & causal": m["tgt_padding"] & m["causal"]}
        return next((name for name, t in named.items() if mask.shape == t.shape and torch.equal(mask.bool(), t)), None)


BLOCK_ROLES = {"encoder": "编码器自注意力块的输入不对", "decoder": "解码器掩码自注意力块的输入不对",
               "cross": "交叉注意力块的输入不对"}
MASK_WHY = {  # (block, the mask it got) -> why that mask is wrong there
    ("encoder", "tgt_padding"): "它的 key 是源句的位置，要用源句的 padding 掩码，不是目标句的",
    ("encoder", "causal"): "编码器一开始就看到整句源句，不需要因果掩码；要挡的是源句的 PAD",
    ("encoder", "tgt_padding & causal"): "它的 key 是源句的位置：要用源句的 padding 掩码，也不需要因果掩码",
    ("decoder", "src_padding"): "解码器自注意力的 key 是目标句自己的位置：要用目标句的 padding 掩码，再和因果掩码用 & 合并",
    ("cross", "tgt_padding"): "交叉注意力的 key 是源句的位置：要用源句的 padding 掩码，不是目标句的",
    ("cross", "causal"): "交叉注意力的 key 是源句的位置，源句整句都已知，不需要因果掩码；要挡的是源句的 PAD",
    ("cross", "tgt_padding & causal"): "交叉注意力的 key 是源句的位置：要用源句的 padding 掩码，也不需要因果掩码",
}


SHARP = 3.0


def stack_case(n_layers, B, S, L, d_model, src_rows, tgt_lengths):
    """Random blocks, inputs and masks for one check of 2.3 (True = may attend)."""
    enc_layers = [ResidualBlock(d_model, role="encoder") for _ in range(n_layers)]
    dec_layers = [(ResidualBlock(d_model, role="decoder"), ResidualBlock(d_model, role="cross")) for _ in range(n_layers)]
    for _, cross in dec_layers:
        cross.lengths = (L, S)
    masks = {"src_padding": torch.tensor(src_rows, dtype=torch.bool)[:, None, None, :],  # (B, 1, 1, S)
             "tgt_padding": (torch.arange(L)[None, :] < torch.tensor(tgt_lengths)[:, None])[:, None, None, :],  # (B, 1, 1, L)
             "causal": torch.ones(L, L, dtype=torch.bool).tril()}  # (L, L)
    for block in [*enc_layers, *(b for pair in dec_layers for b in pair)]:
        block.masks = {name: t.clone() for name, t in masks.items()}
    return enc_layers, dec_layers, torch.randn(B, S, d_model), torch.randn(B, L, d_model), masks


@checker("ch02", "2.3", "N 层叠起来：每一层的三个块从哪里取输入")
def check_run_stack(fn):
    """``fn(enc_layers, dec_layers, enc_x, dec_x, masks) -> (B, L, d_model)``: the decoder's output after N layers,
    each layer only its attention blocks; ``dec_layers`` holds N (masked self-attention, cross-attention) pairs."""
    for n_layers, B, S, L, d_model, src_rows, tgt_lengths in STACK_CASES:
        enc_layers, dec_layers, enc_x, dec_x, masks = stack_case(n_layers, B, S, L, d_model, src_rows, tgt_lengths)
        what = f"run_stack（{n_layers} 层，enc_x {tuple(enc_x.shape)}，dec_x {tuple(dec_x.shape)}）"
        try:
            out = expect_tensor(call(fn, enc_layers, dec_layers, enc_x, dec_x, masks, what="run_stack"), what)
        except Mistake as m:  # two masks of different sentences combined in the student's own code
            if "must match the size" not in str(m):
                raise
            raise Mistake(f"{m}。提示：两个掩码合不到一起：一个管源句的 key，一个管目标句的位置。"
                          "只有解码器的掩码自注意力要合并掩码，合并的是目标句自己的两个（padding 和因果）") from None
        with torch.no_grad():
            truth = reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks)
        expect_shape(out, (B, L, d_model), what, named=[
            ((B, S, d_model), f"{what} 返回的形状是 {(B, S, d_model)}，这是编码器那边的形状；要返回解码器最后一层的输出 {(B, L, d_model)}")])
        if same(out, truth):
            continue
        with torch.no_grad():
            name_the_match(out, ((reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks, mistake=m), why)
                                 for m, why in STACK_MISTAKES.items()), prefix=f"{what}：", same=same)
        expect_close(out, truth, what, hint="检查每一层三个块的 Q、K、V 和掩码")
