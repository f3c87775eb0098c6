"""Checkers for chapter 02, Q、K、V 从哪里来.

2.1 moving k positions is a rotation: the matrix M with PE[pos + k] = PE[pos] @ M (a function);
    ``check_positional_encoding_from`` (positions start, ..., start + L - 1) and ``check_positional_encoding``
    (positions from 0) grade the earlier tasks
2.2 bug hunt: a build_x that takes the PE of the batch size instead of the length; find the shapes where it
    crashes and where it silently goes wrong (a dict); ``check_build_x`` grades the earlier task
2.3 N layers stacked: run the attention blocks of an N-layer encoder and decoder, each block fed from the right
    place (a function); ``check_block_inputs`` grades the earlier task (the three blocks of the first layer)
"""
from __future__ import annotations

import math

import numpy as np
import torch

from mha.positional import sinusoidal_positional_encoding
from ._core import Mistake, NotDone, call, checker, expect_gradients, expect_tensor, is_stub, part

__all__ = ["check_pe_shift_matrix", "check_pe_bug", "check_run_stack", "check_positional_encoding_from",
           "check_block_inputs", "check_positional_encoding", "check_build_x"]


# ---------------------------------------------------------------- 2.1
PE_CASES = [(4, 6), (10, 8), (7, 16), (5, 4), (3, 10)]


def _pe_variant(L: int, d_model: int, *, base=10000.0, swap=False, exponent="2i", halves=False,
                multiply=False, start=0) -> torch.Tensor:
    """Typical wrong cousins of the sinusoidal table (the defaults give the table itself), so a wrong answer can be named."""
    pos = torch.arange(start, start + L, dtype=torch.float64)[:, None]  # (L, 1)
    j = torch.arange(d_model, dtype=torch.float64)  # dimension index 0..d_model-1
    two_i = {"2i": 2 * (j // 2), "j": j, "i": j // 2}[exponent]
    scale = base ** (two_i / d_model)
    angle = pos * scale if multiply else pos / scale  # (L, d_model)
    if halves:  # sin in the first half, cos in the second half, frequencies 2i/d over the half
        half = d_model // 2
        k = torch.arange(half, dtype=torch.float64)
        a = pos / base ** (2 * k / d_model)  # (L, half)
        return torch.cat([torch.sin(a), torch.cos(a)], dim=-1)
    even = (j % 2 == 0)
    if swap:
        even = ~even
    return torch.where(even, torch.sin(angle), torch.cos(angle))  # (L, d_model)


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-4) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=1e-4)


@checker("ch02", "2.1", "实现正弦位置编码", listed=False)
def check_positional_encoding(fn):
    """``fn(L, d_model) -> (L, d_model)`` tensor: PE[pos, 2i] = sin(pos/10000^(2i/d)), PE[pos, 2i+1] = cos(...).

    Calling the course's own ``mha.positional`` (or anything else of the package) is named as a shortcut.
    """
    for L, d_model in PE_CASES:
        out = expect_tensor(call(fn, L, d_model, what="positional_encoding", forbid=(sinusoidal_positional_encoding,),
                                 shortcut_hint="请用 torch.arange、乘方和 torch.sin / torch.cos 自己算出这张表"),
                            f"positional_encoding({L}, {d_model})")
        if not out.is_floating_point():
            raise Mistake(f"positional_encoding({L}, {d_model}) 的 dtype 是 {out.dtype}；sin/cos 的值是小数，要用浮点张量")
        shape = tuple(out.shape)
        if shape == (d_model, L) and L != d_model:
            raise Mistake(f"形状应该是 (L, d_model) = {(L, d_model)}，实际是 {shape}：行和列放反了，每一行是一个位置")
        if shape == (1, L, d_model):
            raise Mistake(f"形状应该是 (L, d_model) = {(L, d_model)}，实际是 {shape}：多了一个 batch 维；"
                          "位置编码对每句话都一样，加到 (B, L, d_model) 的嵌入上时会自动广播")
        if shape != (L, d_model):
            raise Mistake(f"positional_encoding({L}, {d_model}) 的形状应该是 {(L, d_model)}，实际是 {shape}")
        got = out.detach().double()
        truth = sinusoidal_positional_encoding(L, d_model, dtype=torch.float64)  # the course's own table
        if _close(got, truth):
            continue
        named = [
            (dict(swap=True), "sin 和 cos 放反了：偶数维（0, 2, 4, ...）用 sin，奇数维（1, 3, 5, ...）用 cos"),
            (dict(exponent="j"), "指数用了维度编号 j 而不是 2i：一对相邻维度 2i 和 2i+1 共用同一个频率 10000^(2i/d_model)"),
            (dict(exponent="i"), "指数用了 i/d_model 而不是 2i/d_model：i 是第几对，指数里要乘 2"),
            (dict(halves=True), "把 sin 放在前一半、cos 放在后一半（拼接），而课程的公式是交错排列：偶数维 sin、奇数维 cos"),
            (dict(multiply=True), "pos 乘上了 10000^(2i/d_model)，应该是除以它（频率随维度变小，波长变长）"),
            (dict(start=1), "位置从 1 开始数了：第一个 token 的位置是 pos = 0，所以第 0 行应是 [0, 1, 0, 1, ...]"),
        ]
        named += [(dict(base=b), f"底数写成了 {b:g}，公式里是 10000") for b in (1000.0, 100.0, 10.0, 100000.0, math.e)]
        for kwargs, message in named:
            if _close(got, _pe_variant(L, d_model, **kwargs), atol=1e-2):  # loose: huge angles lose float32 digits
                raise Mistake(message)
        first = torch.tensor([0.0, 1.0] * (d_model // 2), dtype=torch.float64)
        hint = ("第 0 行（pos = 0）应该是 [0, 1, 0, 1, ...]" if not _close(got[0], first)
                else "第 0 行对了；检查频率 1 / 10000^(2i/d_model)")
        diff = (got - truth).abs().max().item()
        raise Mistake(f"positional_encoding({L}, {d_model}) 的形状对了，但数值不对（最大误差 {diff:.3g}）。提示：{hint}")


# ---------------------------------------------------------------- 2.1 (positions start, ..., start + L - 1)
PE_FROM_CASES = [(0, 4, 6), (5, 1, 8), (3, 4, 4), (10, 3, 16), (1, 2, 10)]  # (start, L, d_model)


@checker("ch02", "2.1", "从第 start 个位置开始的位置编码", listed=False)
def check_positional_encoding_from(fn):
    """``fn(start, L, d_model) -> (L, d_model)``: the rows ``start, ..., start + L - 1`` of the sinusoidal table."""
    for start, L, d_model in PE_FROM_CASES:
        what = f"positional_encoding_from({start}, {L}, {d_model})"
        out = expect_tensor(call(fn, start, L, d_model, what="positional_encoding_from",
                                 forbid=(sinusoidal_positional_encoding,),
                                 shortcut_hint="请用 torch.arange、乘方和 torch.sin / torch.cos 自己算出这几行"), what)
        if not out.is_floating_point():
            raise Mistake(f"{what} 的 dtype 是 {out.dtype}；sin/cos 的值是小数，要用浮点张量")
        if tuple(out.shape) == (start + L, d_model) and start:
            raise Mistake(f"{what} 返回了从位置 0 到 {start + L - 1} 的整张表 {tuple(out.shape)}；只要最后 L = {L} 行"
                          f"（位置 {start} 到 {start + L - 1}）")
        if tuple(out.shape) != (L, d_model):
            raise Mistake(f"{what} 的形状应该是 {(L, d_model)}，实际是 {tuple(out.shape)}：一行一个位置")
        got = out.detach().double()
        truth = _pe_variant(L, d_model, start=start)
        if _close(got, truth):
            continue
        if start and _close(got, _pe_variant(L, d_model)):
            raise Mistake(f"{what}：位置从 0 开始数了，应该从 start = {start} 开始。用 KV cache 解码时，第 t 步喂进去的"
                          f"新 token 在位置 t，它要加第 t 行的位置编码，而不是第 0 行")
        if _close(got, _pe_variant(L, d_model, start=start + 1)):
            raise Mistake(f"{what}：位置多加了 1，第一行应该是位置 start = {start}")
        if _close(got, _pe_variant(L, d_model, start=start, swap=True), atol=1e-2):
            raise Mistake(f"{what}：sin 和 cos 放反了：偶数维 sin，奇数维 cos")
        diff = (got - truth).abs().max().item()
        raise Mistake(f"{what} 的形状对了，但数值不对（最大误差 {diff:.3g}）：第 r 行是位置 pos = start + r 的编码")


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


def _batch_shape(value, what: str) -> tuple:
    from ._core import as_shape
    shape = as_shape(value, what)
    if len(shape) != 2 or min(shape) < 1 or max(shape) > 64:
        raise Mistake(f"{what} 应该是 token_ids 的形状 (B, L)，两个 1 到 64 之间的整数，却是 {shape}")
    return shape


@checker("ch02", "2.2", "找 bug：位置编码用了 batch 的大小")
def check_pe_bug(answer):
    """``answer = {"crashes": (B, L), "silently_wrong": (B, L), "fixed": build_x}``: a batch shape on which
    :func:`build_x_buggy` raises, one on which it runs but returns a wrong x, and the fixed function."""
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, dict):
        raise Mistake(f'答案应该是字典 {{"crashes": (B, L), "silently_wrong": (B, L), "fixed": 函数}}，却收到了 {type(answer).__name__}')
    missing = [k for k in ("crashes", "silently_wrong", "fixed") if k not in answer]
    if missing:
        raise Mistake(f"字典里缺少键 {missing}")
    crash_shape = _batch_shape(part(answer["crashes"], 'answer["crashes"]'), 'answer["crashes"]')
    raised, _ = _run_buggy(*crash_shape)
    if not raised:
        B, L = crash_shape
        why = "B == L 时两张表一样大，结果碰巧是对的" if B == L else "B = 1 时 (1, d_model) 的表会广播到每个位置"
        raise Mistake(f'answer["crashes"] = {crash_shape}：build_x_buggy 在这个形状上没有报错（{why}）；'
                      "(B, d_model) 的表加到 (B, L, d_model) 上，什么时候广播不了？")
    wrong_shape = _batch_shape(part(answer["silently_wrong"], 'answer["silently_wrong"]'), 'answer["silently_wrong"]')
    raised, wrong = _run_buggy(*wrong_shape)
    if raised:
        raise Mistake(f'answer["silently_wrong"] = {wrong_shape}：build_x_buggy 在这个形状上报错了；要找的是不报错、却悄悄算错的形状')
    if not wrong:
        raise Mistake(f'answer["silently_wrong"] = {wrong_shape}：在这个形状上 build_x_buggy 的结果是对的（B == L 时表的大小碰巧对上）；'
                      "还有哪种 B 能让 (B, d_model) 的表广播到 (B, L, d_model) 上？")
    try:
        check_build_x.__wrapped__(part(answer["fixed"], 'answer["fixed"]'))  # the fixed function: the earlier checks
    except Mistake as m:
        raise Mistake(f'两个形状都找对了；修好的函数 answer["fixed"] 还不对：{m}') from None


# ---------------------------------------------------------------- 2.2
def _build_x_reference(token_ids: torch.Tensor, embedding: torch.nn.Embedding) -> torch.Tensor:
    L, d_model = token_ids.shape[1], embedding.embedding_dim
    return embedding(token_ids) + sinusoidal_positional_encoding(L, d_model)  # (B, L, d_model)


@checker("ch02", "2.2", "从 token id 得到 x：Embedding + 位置编码", listed=False)
def check_build_x(fn):
    """``fn(token_ids (B, L) long, embedding nn.Embedding(V, d_model)) -> x (B, L, d_model)``,
    ``x = embedding(token_ids) + PE`` with the sinusoidal PE of chapter 2."""
    for B, L, vocab, d_model in [(1, 4, 10, 6), (3, 5, 12, 8), (2, 7, 9, 4)]:
        embedding = torch.nn.Embedding(vocab, d_model)
        token_ids = torch.randint(0, vocab, (B, L))
        token_ids[0, 0] = vocab - 1  # a large id, so "PE indexed by token id" cannot hide
        what = f"build_x(token_ids {tuple(token_ids.shape)}, Embedding({vocab}, {d_model}))"
        out = expect_tensor(call(fn, token_ids, embedding, what="build_x"), what)  # changing an input is named
        if not out.is_floating_point():
            raise Mistake(f"{what} 的 dtype 是 {out.dtype}；词嵌入加位置编码是小数，应该是浮点张量")
        with torch.no_grad():
            emb = embedding(token_ids)  # (B, L, d_model)
            want = _build_x_reference(token_ids, embedding)
        pe = sinusoidal_positional_encoding(L, d_model)  # (L, d_model)
        shape = tuple(out.shape)
        if shape == (B, L, 2 * d_model):
            raise Mistake(f"{what} 的形状是 {shape}，应为 {(B, L, d_model)}：你把位置编码拼接（cat）到了嵌入后面；"
                          "位置编码要逐元素加到嵌入上，宽度不变")
        if shape == (L, d_model) and B == 1:
            raise Mistake(f"{what} 的形状是 {shape}，应为 {(B, L, d_model)}：batch 维不见了（别用 squeeze）")
        if shape != (B, L, d_model):
            raise Mistake(f"{what} 的形状应该是 {(B, L, d_model)}，实际是 {shape}")
        got = out.detach().to(torch.float32)
        if torch.allclose(got, want, atol=1e-5):
            expect_gradients(out, {"embedding.weight": embedding.weight}, what)  # the embedding must stay trainable
            continue
        if torch.allclose(got, emb, atol=1e-5):
            raise Mistake(f"{what}：只有词嵌入，忘了加位置编码；没有位置编码，注意力分不清词的先后顺序")
        if torch.allclose(got, pe.expand(B, L, d_model), atol=1e-5):
            raise Mistake(f"{what}：只有位置编码，忘了词嵌入 embedding(token_ids)；这样每句话的 x 都一样")
        if torch.allclose(got, emb * pe, atol=1e-5):
            raise Mistake(f"{what}：把嵌入和位置编码相乘了；应该相加 x = embedding(token_ids) + PE")
        if torch.allclose(got, emb * math.sqrt(d_model) + pe, atol=1e-4):
            raise Mistake(f"{what}：嵌入乘了 √d_model。原论文确实这样做，但本课的 x 就是嵌入加位置编码，不缩放")
        pe_by_id = sinusoidal_positional_encoding(vocab, d_model)[token_ids]  # (B, L, d_model)
        if torch.allclose(got, emb + pe_by_id, atol=1e-5):
            raise Mistake(f"{what}：按 token id 取了位置编码；位置编码按位置 0, 1, ..., L-1 取，与词是什么无关")
        if torch.allclose(got, emb + _pe_variant(L, d_model, swap=True).float(), atol=1e-5):
            raise Mistake(f"{what}：位置编码里 sin 和 cos 放反了：偶数维 sin，奇数维 cos")
        diff = (got - want).abs().max().item()
        raise Mistake(f"{what} 的形状对了，但数值不对（最大误差 {diff:.3g}）。提示：x = embedding(token_ids) + PE，"
                      "PE 的形状是 (L, d_model)，会沿 batch 维自动广播")


# ---------------------------------------------------------------- 2.3
BLOCKS = ("encoder_self", "decoder_masked_self", "decoder_cross")


def block_case(B: int, S: int, L: int, d_model: int, src_lengths, tgt_lengths):
    """Random, pairwise different tensors for one check, and the masks the student may pick from."""
    tensors = {"enc_x": torch.randn(B, S, d_model), "dec_x": torch.randn(B, L, d_model),
               "dec_h": torch.randn(B, L, d_model), "enc_out": torch.randn(B, S, d_model)}
    src_padding = (torch.arange(S)[None, :] < torch.tensor(src_lengths)[:, None])[:, None, None, :]  # (B, 1, 1, S)
    tgt_padding = (torch.arange(L)[None, :] < torch.tensor(tgt_lengths)[:, None])[:, None, None, :]  # (B, 1, 1, L)
    causal = torch.ones(L, L, dtype=torch.bool).tril()  # (L, L)
    masks = {"src_padding": src_padding, "tgt_padding": tgt_padding, "causal": causal}
    return tensors, masks


def _which(t: torch.Tensor, tensors: dict, block: str, name: str) -> str | None:
    """Which of the given tensors ``t`` is (same shape, dtype and values), or None."""
    for source, ref in tensors.items():
        if t.shape == ref.shape and t.dtype == ref.dtype and torch.equal(t, ref):
            return source
    for source, ref in tensors.items():
        if t.shape == ref.shape and t.is_floating_point() and torch.equal(t.detach().double(), ref.double()):
            raise Mistake(f"{block}：{name} 的数值就是 {source}，但 dtype 变成了 {t.dtype}（原来是 {ref.dtype}）；"
                          f"直接返回 {source} 本身即可，层的权重是 {ref.dtype}")
    return None


def _as_full_mask(mask, B, Lq, Sk, block) -> torch.Tensor | None:
    """The student's mask broadcast to (B, Lq, Sk) bool, or None for 'no mask'."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        raise Mistake(f"{block}：掩码应该是张量（或 None），却是 {type(mask).__name__}")
    if mask.dtype != torch.bool:
        mask = mask != 0
    m = mask
    if m.dim() == 4:
        if m.shape[1] != 1:
            raise Mistake(f"{block}：掩码的形状 {tuple(mask.shape)} 第 1 维应该是 1（所有头共用一个掩码）")
        m = m[:, 0]
    try:
        return torch.broadcast_to(m, (B, Lq, Sk))
    except RuntimeError:
        raise Mistake(f"{block}：掩码的形状 {tuple(mask.shape)} 无法广播到 (B, 1, L_q, S_k) = {(B, 1, Lq, Sk)}；"
                      f"这个块的 query 有 {Lq} 个、key 有 {Sk} 个") from None


def reference_block(block, enc_x, dec_x, dec_h, enc_out, masks):
    if block == "encoder_self":
        return enc_x, enc_x, enc_x, masks["src_padding"]
    if block == "decoder_masked_self":
        return dec_x, dec_x, dec_x, masks["tgt_padding"] & masks["causal"]
    return dec_h, enc_out, enc_out, masks["src_padding"]


def _source_mistake(block: str, src: dict) -> str:
    """Why these (query, key, value) sources are wrong for ``block``."""
    q, k, v = src["query"], src["key"], src["value"]
    decoder_side = {"dec_x", "dec_h"}
    if block == "encoder_self" and set(src.values()) <= decoder_side:
        return ("这是编码器的自注意力：Q、K、V 都来自编码器的输入 Inputs（Embedding + 位置编码）enc_x；"
                "讲义在这里把它写成了“解码器”，那是笔误")
    if block == "decoder_cross":
        if q == "dec_x" and k == v == "enc_out":
            return ("K、V 对了，但 Query 要用解码器上一个块（带掩码的自注意力）的输出 dec_h，而不是解码器的输入 dec_x："
                    "交叉注意力接在块 2 后面，拿块 2 已经“看过前文”的表示去查编码器")
        if q == "enc_out" and k in decoder_side:
            return "Q 和 K/V 的来源放反了：交叉注意力里，解码器提问（Q = dec_h），编码器的输出提供 K 和 V"
        if set(src.values()) <= decoder_side:
            return "这样就成了解码器的自注意力；交叉注意力的 K 和 V 来自编码器的输出 enc_out"
        if k == "enc_x":
            return "K 和 V 应来自编码器的输出 enc_out（已经看过整句的表示），而不是编码器的输入 enc_x"
    if block == "decoder_masked_self":
        if "enc_out" in src.values() or "enc_x" in src.values():
            return ("解码器的第一个块是自注意力：Q、K、V 全都来自解码器这边的 dec_x；"
                    "用到编码器输出的是第二个块（交叉注意力）")
        if "dec_h" in src.values():
            return "dec_h 正是这个块（解码器的掩码自注意力）的输出，算它之前还没有 dec_h；这个块的 Q、K、V 都是 dec_x"
    if k != v:
        return "K 和 V 应该来自同一个张量：每个 key 对应一个 value，两者成对出现"
    return "输入选错了"


def _mask_mistake(block: str, got_m, want_m, masks, B, Lq, Sk) -> str | None:
    """Why the student's (broadcast) mask is wrong for ``block``, or None when it is right."""
    if got_m is not None and torch.equal(got_m, want_m):
        return None
    if got_m is not None and torch.equal(got_m, ~want_m):
        return f"{block}：掩码的真假反了：本课约定 True（1）= 可以看，False（0）= 被屏蔽"
    if block == "encoder_self":
        if got_m is None:
            return "encoder_self：忘了 padding 掩码，PAD 会被当成真正的词参与注意力"
        if torch.equal(got_m, want_m & torch.ones(Sk, Sk, dtype=torch.bool).tril()):
            return "encoder_self：编码器不需要因果掩码，整句话一开始就都在，每个词都可以看所有（非 PAD 的）词"
        return "encoder_self：掩码不对，编码器自注意力只屏蔽源序列里的 PAD（用 src_padding）"
    if block == "decoder_masked_self":
        pad = _as_full_mask(masks["tgt_padding"], B, Lq, Sk, block)
        causal = _as_full_mask(masks["causal"], B, Lq, Sk, block)
        if got_m is None:
            return "decoder_masked_self：没有掩码；这个块既要因果掩码（不能偷看后面的词），也要 padding 掩码"
        if torch.equal(got_m, causal):
            return "decoder_masked_self：只有因果掩码，漏了 padding 掩码（tgt_padding）；要用 & 把两个掩码合起来"
        if torch.equal(got_m, pad):
            return "decoder_masked_self：只有 padding 掩码，漏了因果掩码：生成第 t 个词时不能偷看后面的词"
        if torch.equal(got_m, pad | causal):
            return "decoder_masked_self：用 | （或）合并了两个掩码；两个都允许才能看，应该用 &（与）"
        return "decoder_masked_self：掩码不对，应该是 tgt_padding & causal"
    if got_m is None:
        return "decoder_cross：忘了掩码；编码器那边的 PAD 不应被解码器看到（用 src_padding）"
    return ("decoder_cross：掩码不对；交叉注意力的 key 是编码器的位置，只需要源序列的 padding 掩码 "
            "src_padding，不需要因果掩码")


@checker("ch02", "2.3", "为三个多头注意力块选输入和掩码", listed=False)
def check_block_inputs(fn):
    """``fn(block, enc_x, dec_x, dec_h, enc_out, masks) -> (query, key, value, mask)`` for the three blocks.

    ``enc_x``: encoder input after Embedding + PE, (B, S, d_model); ``dec_x``: decoder input after
    Embedding + PE, (B, L, d_model); ``dec_h``: output of the decoder's masked self-attention block,
    (B, L, d_model), the query of cross-attention; ``enc_out``: encoder output, (B, S, d_model);
    ``masks``: dict with ``src_padding`` (B, 1, 1, S), ``tgt_padding`` (B, 1, 1, L) and ``causal`` (L, L),
    all True = may attend. None of the inputs may be changed in place (the guard of :func:`call`).
    """
    from mha.layer import MultiHeadAttention

    cases = [(2, 5, 3, 8, [5, 3], [3, 2]), (1, 4, 6, 6, [3], [4]), (3, 6, 4, 4, [6, 2, 4], [4, 1, 3])]
    for B, S, L, d_model, src_lengths, tgt_lengths in cases:
        tensors, masks = block_case(B, S, L, d_model, src_lengths, tgt_lengths)
        for block in BLOCKS:
            call_what = f'block_inputs("{block}", ...)'
            out = call(fn, block, tensors["enc_x"], tensors["dec_x"], tensors["dec_h"], tensors["enc_out"], masks,
                       what=call_what)
            if not isinstance(out, (tuple, list)) or len(out) != 4:
                raise Mistake(f"{call_what} 应该返回 4 项 (query, key, value, mask)，"
                              f"却返回了 {type(out).__name__}" + (f"（{len(out)} 项）" if isinstance(out, (tuple, list)) else ""))
            q, k, v, mask = out
            src = {}
            for name, t in (("query", q), ("key", k), ("value", v)):
                t = part(t, f"{block}：{name}")
                if not isinstance(t, torch.Tensor):
                    raise Mistake(f"{block}：{name} 应该是张量，却是 {type(t).__name__}")
                src[name] = _which(t, tensors, block, name)
                if src[name] is None:
                    raise Mistake(f"{block}：{name} 不是 enc_x、dec_x、dec_h、enc_out 中的任何一个；"
                                  "三个块的 Q、K、V 都是直接选用现成的张量，不用再做计算（投影在层内部做）")
            if mask is Ellipsis:
                raise NotDone()
            rq, rk, rv, rmask = reference_block(block, **tensors, masks=masks)
            want = {name: _which(t, tensors, block, name) for name, t in (("query", rq), ("key", rk), ("value", rv))}
            if src != want:
                got_s = f"Q={src['query']}, K={src['key']}, V={src['value']}"
                want_s = f"Q={want['query']}, K={want['key']}, V={want['value']}"
                raise Mistake(f"{block}：你选的是 {got_s}，应该是 {want_s}。{_source_mistake(block, src)}")
            Lq, Sk = q.shape[1], k.shape[1]
            if block == "decoder_cross" and isinstance(mask, torch.Tensor) and mask.dim() >= 1 and mask.shape[-1] == L != S:
                raise Mistake(f"decoder_cross：用了解码器这边的掩码（最后一维长 L = {L}）；交叉注意力的 key 是编码器的 "
                              f"S = {S} 个位置，要用 src_padding")
            got_m = _as_full_mask(mask, B, Lq, Sk, block)
            want_m = _as_full_mask(rmask, B, Lq, Sk, block)
            message = _mask_mistake(block, got_m, want_m, masks, B, Lq, Sk)
            if message is not None:
                raise Mistake(message)
            layer = MultiHeadAttention(d_model, 2).eval()
            try:
                with torch.no_grad():
                    y = layer(q, k, v, mask)
            except Exception as e:  # e.g. a float mask holding values other than 0/1
                raise Mistake(f"{block}：把你的 (query, key, value, mask) 交给 MultiHeadAttention 时出错："
                              f"{type(e).__name__}: {e}") from None
            if tuple(y.shape) != (B, Lq, d_model):
                raise Mistake(f"{block}：输出形状应该是 {(B, Lq, d_model)}，实际是 {tuple(y.shape)}")


# ---------------------------------------------------------------- 2.1 (moving k positions is a rotation: PE[pos + k] = PE[pos] @ M)
SHIFT_CASES = [(1, 4), (3, 6), (0, 8), (5, 16), (-2, 6), (12, 10)]  # (k, d_model)
FIT = ("*lstsq*", "*pinv*", "*solve*", "*inv*")  # fitting M from the table instead of writing it down


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
        out = expect_tensor(out, what)
        if not out.is_floating_point():
            raise Mistake(f"{what} 的 dtype 是 {out.dtype}；cos、sin 是小数，要用浮点张量")
        if tuple(out.shape) == (2, 2):
            raise Mistake(f"{what} 的形状是 (2, 2)：这只是一对维度的小块；每一对维度 (2i, 2i+1) 有自己的频率，"
                          f"要把 d_model/2 = {d_model // 2} 个小块放在对角线上，拼成 ({d_model}, {d_model})")
        if tuple(out.shape) != (d_model, d_model):
            raise Mistake(f"{what} 的形状应该是 ({d_model}, {d_model})，实际是 {tuple(out.shape)}")
        got = out.detach().double()
        truth = shift_matrix(k, d_model)
        if _close(got, truth, atol=1e-5):
            continue
        if _close(got, shift_matrix(k, d_model, sign=-1), atol=1e-5):
            raise Mistake(f"{what}：这是往回挪 k 格的矩阵（PE[pos] @ M 得到 PE[pos − k]），也就是正确答案的转置："
                          "要么 sin 的正负号放反了，要么按列向量 M @ PE[pos] 写了；本题用行向量 PE[pos] @ M，"
                          "所以第 2i 行第 2i+1 列是 −sin(kω_i)，第 2i+1 行第 2i 列是 +sin(kω_i)")
        if _close(got, shift_matrix(k, d_model, angle_scale=1.0), atol=1e-5):
            raise Mistake(f"{what}：旋转的角度用了 k，忘了乘每一对维度自己的频率 ω_i = 1 / 10000^(2i/d_model)："
                          "第 i 对维度转 k·ω_i")
        if _close(got, shift_matrix(k, d_model, exponent="i"), atol=1e-5):
            raise Mistake(f"{what}：频率的指数用了 i/d_model，应为 2i/d_model（i 是第几对维度）")
        if _close(got, torch.eye(d_model, dtype=torch.float64)) and k:
            raise Mistake(f"{what} 是单位矩阵：那样 PE[pos] @ M 还是 PE[pos]，没有挪动位置")
        r, c = divmod(int((got - truth).abs().argmax()), d_model)
        raise Mistake(f"{what} 不对：第 {r} 行第 {c} 列（从 0 数）应为 {truth[r, c].item():.4g}，你的是 {got[r, c].item():.4g}"
                      + ("（对角线上每个 2×2 小块之外都应是 0）。" if r // 2 != c // 2 else "。")
                      + "提示：sin(a + b) = sin a cos b + cos a sin b，cos(a + b) = cos a cos b − sin a sin b，"
                      "每一对维度 (2i, 2i+1) 只和自己这一对有关")


# ---------------------------------------------------------------- 2.3 (N layers: where each block's Q, K, V come from)
def reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks, *, mistake=None):
    """The decoder's output after N layers of attention blocks only (the blocks carry their residual connection,
    see :class:`ResidualBlock`; LayerNorm and FFN are left out, as in chapter 2).

    ``mistake`` names one typical wrong wiring (see :data:`STACK_MISTAKES`); None is the truth.
    """
    src, tgt, causal = masks["src_padding"], masks["tgt_padding"], masks["causal"]
    self_mask = {"no_causal": tgt, "no_tgt_padding": causal, "or": tgt | causal}.get(mistake, tgt & causal)

    def run(block, q, kv, mask):
        out = block(q, kv, kv, mask)
        return out + q if mistake == "extra_residual" else out

    h, enc_outs = enc_x, []
    for layer in enc_layers:
        inp = enc_x if mistake == "enc_not_chained" else h
        h = run(layer, inp, inp, None if mistake == "enc_no_mask" else src)
        enc_outs.append(h)
    y = dec_x
    for n, (self_attn, cross_attn) in enumerate(dec_layers):
        memory = {"cross_same_layer": enc_outs[n], "cross_enc_x": enc_x}.get(mistake, enc_outs[-1])
        cross_mask = None if mistake == "cross_no_mask" else src
        inp = dec_x if mistake == "dec_not_chained" else y
        if mistake == "cross_first":
            c = run(cross_attn, inp, memory, cross_mask)
            y = run(self_attn, c, c, self_mask)
            continue
        s = run(self_attn, inp, inp, self_mask)
        y = run(cross_attn, inp if mistake == "cross_query_input" else s, memory, cross_mask)
    return y


STACK_MISTAKES = {
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
    "extra_residual": "每个块的输出又加了一次它的输入：检查用的块里已经带着残差连接，直接用块的输出即可",
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
        from mha.layer import MultiHeadAttention

        self.attn = MultiHeadAttention(d_model, n_heads).eval()
        with torch.no_grad():  # sharper weights than an untrained layer's near-uniform ones
            self.attn.W_q.weight.mul_(SHARP)
            self.attn.W_k.weight.mul_(SHARP)

    def forward(self, query, key, value, mask=None):
        try:
            return query + self.attn(query, key, value, mask)
        except (ValueError, RuntimeError, TypeError) as e:  # a wrong input or mask: say which block and what it takes
            raise type(e)(f"{BLOCK_ROLES[self.role]}（{e}）") from None


BLOCK_ROLES = {
    "encoder": "编码器自注意力块的输入不对：Q = K = V 是编码器这一侧上一层的输出（第 1 层是 enc_x），掩码是 src_padding",
    "decoder": "解码器掩码自注意力块的输入不对：Q = K = V 是解码器这一侧上一层的输出（第 1 层是 dec_x），"
               "掩码是 tgt_padding & causal",
    "cross": "交叉注意力块的输入不对：Query 是本层掩码自注意力的输出，Key = Value 是编码器最后一层的输出，掩码是 src_padding",
}


SHARP = 3.0


def stack_case(n_layers, B, S, L, d_model, src_rows, tgt_lengths):
    """Random blocks, inputs and masks for one check of 2.3 (True = may attend)."""
    enc_layers = [ResidualBlock(d_model, role="encoder") for _ in range(n_layers)]
    dec_layers = [(ResidualBlock(d_model, role="decoder"), ResidualBlock(d_model, role="cross")) for _ in range(n_layers)]
    masks = {"src_padding": torch.tensor(src_rows, dtype=torch.bool)[:, None, None, :],  # (B, 1, 1, S)
             "tgt_padding": (torch.arange(L)[None, :] < torch.tensor(tgt_lengths)[:, None])[:, None, None, :],  # (B, 1, 1, L)
             "causal": torch.ones(L, L, dtype=torch.bool).tril()}  # (L, L)
    return enc_layers, dec_layers, torch.randn(B, S, d_model), torch.randn(B, L, d_model), masks


@checker("ch02", "2.3", "N 层叠起来：每一层的三个块从哪里取输入")
def check_run_stack(fn):
    """``fn(enc_layers, dec_layers, enc_x, dec_x, masks) -> (B, L, d_model)``: the decoder's output after N layers,
    each layer only its attention blocks; ``dec_layers`` holds N (masked self-attention, cross-attention) pairs."""
    for n_layers, B, S, L, d_model, src_rows, tgt_lengths in STACK_CASES:
        enc_layers, dec_layers, enc_x, dec_x, masks = stack_case(n_layers, B, S, L, d_model, src_rows, tgt_lengths)
        what = f"run_stack（{n_layers} 层，enc_x {tuple(enc_x.shape)}，dec_x {tuple(dec_x.shape)}）"
        out = expect_tensor(call(fn, enc_layers, dec_layers, enc_x, dec_x, masks, what="run_stack"), what)
        with torch.no_grad():
            truth = reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks)
        if tuple(out.shape) == (B, S, d_model):
            raise Mistake(f"{what} 返回的形状是 {(B, S, d_model)}，这是编码器那边的形状；要返回解码器最后一层的输出 {(B, L, d_model)}")
        if tuple(out.shape) != (B, L, d_model):
            raise Mistake(f"{what} 的形状应该是 {(B, L, d_model)}，实际是 {tuple(out.shape)}")
        got = out.detach().double()
        if torch.allclose(got, truth.double(), atol=1e-5, rtol=1e-4):
            continue
        with torch.no_grad():
            for mistake, message in STACK_MISTAKES.items():
                wrong = reference_stack(enc_layers, dec_layers, enc_x, dec_x, masks, mistake=mistake)
                if torch.allclose(got, wrong.double(), atol=1e-5, rtol=1e-4):
                    raise Mistake(f"{what}：{message}")
        diff = (got - truth.double()).abs().max().item()
        raise Mistake(f"{what} 的形状对了，但数值不对（最大误差 {diff:.3g}）：检查每一层三个块的 Q、K、V 和掩码")
