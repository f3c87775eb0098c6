"""Checkers for chapter 07, 步骤 6：最终 Linear W^O.

* 7.1 one head's path from input to output, W^V_i W^O_i, as one d_model x d_model matrix, and its largest rank;
* 7.2 predict which entries of the output change when one head's result at one token changes, with and without W^O;
* 7.3 given a cross-attention's inputs q_in, kv and the layer only: compute head i's result (project kv's Values,
  split, the weights of need_weights=True), then switch that head off by subtracting its contribution head_i W^O_i, keeping the bias.
"""
from __future__ import annotations

import functools

import torch
from torch import nn

from mha.layer import MultiHeadAttention
from mha.steps import merge_heads, split_heads
from .answers import as_int, expect_close, expect_shape, expect_tensor, name_the_match, same
from .records import dict_answer, expect_same_gradients
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_head_matrix", "check_changed_outputs", "check_remove_head"]


_matches = functools.partial(same, atol=1e-4)


# ---------------------------------------------------------------- 7.1 (one head's path as one matrix)
RANK_QUESTION = {"d_model": 512, "n_heads": 8}
RANK_WARMUP = {"d_model": 12, "n_heads": 3}  # the self-check's sibling case
MATRIX_CASES = [(8, 2), (12, 3), (6, 6)]  # (d_model, n_heads); d_k = 1 in the last


@torch.no_grad()
def head_matrix(layer, i: int) -> torch.Tensor:
    """(d_model, d_model): x -> head i's values -> its share of the output, read off by running the steps on the
    identity (biases left out): the rows of the identity go through W_v, only head i survives, then W_o."""
    d, h = layer.d_model, layer.n_heads
    values = split_heads(layer.W_v(torch.eye(d, dtype=layer.W_v.weight.dtype))[None] - layer.W_v.bias, h)  # (1, h, d, d_k): x W^V, split
    keep = torch.zeros(h, 1, 1, dtype=values.dtype)
    keep[i] = 1
    return merge_heads(values * keep)[0] @ layer.W_o.weight.T  # (d, d)


def _matrix_wrongs(layer, i: int):
    Wv, Wo, d_k = layer.W_v.weight.detach(), layer.W_o.weight.detach(), layer.d_k
    block, prev, robin = slice(i * d_k, (i + 1) * d_k), slice((i - 1) * d_k, i * d_k), slice(i, None, layer.n_heads)
    yield head_matrix(layer, i).T, "转置了：本课用行向量，x 乘在左边：x W^V_i W^O_i，矩阵是 W^V_i W^O_i"
    yield Wv[:, block] @ Wo[block, :], ("把 nn.Linear 的 weight 当成了 W：公式里的 W^V 是 W_v.weight.T，W^V_i 是它的第 "
                                        "[i·d_k, (i+1)·d_k) 列；W^O = W_o.weight.T，W^O_i 是它的同样几行")
    yield Wv[:, block] @ Wo[:, block].T, ("W_v.weight 取成了列：weight 是 (out, in)，它的列对应输入 x 的特征；"
                                          "头 i 的 d_k 个 value 是 W_v 的输出，在 W_v.weight 的行里")
    yield Wv[block].T @ Wo[block], ("W_o.weight 取成了行：weight 是 (out, in)，它的行对应输出；"
                                    "Concat 里头 i 的 d_k 维是 W_o 的输入，在 W_o.weight 的列里")
    if i > 0:
        yield Wv[prev].T @ Wo[:, prev].T, ("取成了上一个头：i 是代码下标，从 0 数（i = 0 是正文的头 1、W^O_1），"
                                           "代码下标 i 的头占 [i·d_k, (i+1)·d_k) 这一段")
    yield Wv[robin].T @ Wo[:, robin].T, "每隔 n_heads 取了一个：头不是交错放的，每个头占连续的 d_k 维 [i·d_k, (i+1)·d_k)"
    yield Wv.T @ Wo.T, "把所有头都乘进去了：W^V W^O 是 h 个头的矩阵之和，题目只要头 i 的那一个"
    yield head_matrix(layer, i) + layer.W_o.bias.detach(), "加上了 W_o 的偏置：题目不算偏置，M_i 只是两个矩阵的乘积 W^V_i W^O_i"


@checker("ch07", "7.1", "一个头从输入到输出：W^V_i W^O_i 和它的秩")
def check_head_matrix(answer):
    """``answer = {"matrix": fn(layer, i) -> (d_model, d_model), "max_rank": int}``: ``fn`` returns W^V_i W^O_i of an
    ``mha.MultiHeadAttention`` (head i's values, then its block of W^O; biases left out); ``max_rank`` is the
    largest rank this matrix can have in the lecture's layer (d_model 512, 8 heads)."""
    dict_answer(answer, ("matrix", "max_rank"), '{"matrix": 函数, "max_rank": 整数}')
    for d, h in MATRIX_CASES:
        layer = MultiHeadAttention(d, h, dropout=0.0).eval()
        for i in sorted({0, h - 1}, reverse=True):  # the last head first: i - 1 (counted from 1) is a head there
            where = f"d_model={d}、n_heads={h}、i={i} 时"
            try:
                got = call(answer["matrix"], layer, i, what='answer["matrix"]')
                got = expect_tensor(got, f"{where}的返回值", floating=True)
            except Mistake as m:
                if "运行时抛出了" in str(m) and ("shape" in str(m) or "size" in str(m)):
                    raise Mistake(f"{where}，{m}。提示：检查传进来的 layer 不是正文 512 维的层；形状和权重都要从参数 layer 读"
                                  "（layer.W_v、layer.W_o、layer.d_k），不要用本章的全局变量") from None
                raise
            expect_shape(got, (d, d), f"{where}的返回值", hint="(d_model, d_k) 乘 (d_k, d_model)")
            want = head_matrix(layer, i)
            if not _matches(got, want):
                name_the_match(got, _matrix_wrongs(layer, i), prefix=f"{where}，", same=_matches)
                expect_close(got, want, f"{where}的矩阵", hint="拿单位矩阵验证：torch.eye(d_model) 的每一行当作一个 x，"
                             "经过 W_v（不加偏置）、只留下头 i、再经过 W_o（不加偏置），得到的正是 M_i")
    d, h = RANK_QUESTION["d_model"], RANK_QUESTION["n_heads"]
    rank = as_int(answer["max_rank"], 'answer["max_rank"]')
    truth = int(torch.linalg.matrix_rank(head_matrix(MultiHeadAttention(d, h).double().eval(), 0)))
    why = {d: f"{d} 是满秩：可 M = W^V_i W^O_i 中间只经过 d_k = {d // h} 维，乘积的秩不会超过这个宽度",
           h: f"{h} 是头数；一个头的矩阵的秩受它自己的宽度 d_k 限制", (d // h) ** 2: "秩是线性无关的行（列）数，不超过 d_k，不是 d_k²"}
    if rank != truth:
        raise Mistake(f'answer["max_rank"] = {rank}：' + why.get(rank, "不对。提示：(d_model × d_k) 乘 (d_k × d_model)，"
                                                                       "中间最窄的地方有多宽？"))


# ---------------------------------------------------------------- 7.2 (predict: which entries of the output change)
CHANGE_CASES = [(4, 8, 4, 3, 1), (3, 8, 2, 1, 0), (2, 12, 4, 0, 3)]  # (L, d_model, n_heads, t, i); the first: 0 < i < h - 1,
# t < h and t not in {i - 1, i, i + 1}, so that head t's block (t and i swapped) is no off-by-one of head i's


@torch.no_grad()
def changed_outputs(t: int, i: int, L: int, d_model: int, n_heads: int, with_w_o: bool) -> torch.Tensor:
    """(L, d_model) bool: the output entries that move when ``heads[0, i, t]`` alone changes, measured."""
    heads = torch.randn(1, n_heads, L, d_model // n_heads)
    moved = heads.clone()
    moved[0, i, t] += 1 + torch.rand(d_model // n_heads)
    W_o = nn.Linear(d_model, d_model)
    run = (lambda hd: W_o(merge_heads(hd))) if with_w_o else merge_heads
    return ((run(moved) - run(heads)).abs() > 1e-6)[0]


def _changed_wrongs(t, i, L, d, h, with_w_o):
    d_k, rows, cols = d // h, torch.arange(L)[:, None], torch.arange(d)[None, :]
    row_t, block = rows == t, (cols >= i * d_k) & (cols < (i + 1) * d_k)
    if with_w_o:
        yield row_t & block, "有了 W^O，输出的每一维都读了 Concat 的全部 d_model 维（每一维都混着所有头）：这一行的全部列都变"
        yield torch.ones(L, d, dtype=torch.bool), ("W^O 对每个 token 单独作用（同一个矩阵乘每一行），注意力已经算完，"
                                                    "一个 token 的改动不会带到别的行")
    else:
        yield row_t.expand(L, d), "没有 W^O 时只有 Concat：代码下标为 i 的头只占 [i·d_k, (i+1)·d_k) 这几列，别的列不动"
        yield block.expand(L, d), "Concat 不搬 token：只有下标 t 的那一行变"
        for start, width, why in (((i + 1) * d_k, d_k, "头的列从 1 数了"), ((i - 1) * d_k, d_k, "把 i 当成了从 1 数的头号"),
                                  (i * h, h, f"把 d_k 当成了 n_heads：每个头宽 d_k = d_model // n_heads = {d_k}")):
            yield row_t & (cols >= start) & (cols < start + width), f"{why}；代码下标为 i 的头占 [i·d_k, (i+1)·d_k) 列"
        if t != i:
            yield row_t & (cols >= t * d_k) & (cols < (t + 1) * d_k), ("把 t 和 i 弄混了：你标的是头 t 的那几列；"
                                                                     "token t 决定哪一行，头 i 决定哪几列 [i·d_k, (i+1)·d_k)")
        yield row_t & (cols % h == i), ("把 Concat 当成了轮流放各个头的列（i::n_heads）：头不是隔 h 列交错放的，"
                                        "每个头占连续的 d_k 列 [i·d_k, (i+1)·d_k)")
    flat = torch.zeros(L * d, dtype=torch.bool)  # heads[0, i, t] where the memory order of (h, L, d_k) puts it
    flat[(i * L + t) * d_k:(i * L + t + 1) * d_k] = True
    unmoved = flat.view(L, d)
    yield (unmoved.any(1, keepdim=True).expand(L, d) if with_w_o else unmoved), (
        "这是按 heads 的内存顺序 (h, L, d_k) 直接读成 (L, d_model) 的结果（第 6 章没有 transpose 的 merge_heads_buggy）："
        "merge_heads 先 transpose(1, 2) 把 token 轴放回头轴前面，所以第 t 行装的正是各个头在 token t 上的结果")


@checker("ch07", "7.2", "预测：改动一个头在一个 token 上的结果，输出哪些数会变")
def check_changed_outputs(fn):
    """``fn(t, i, L, d_model, n_heads, with_w_o) -> (L, d_model) bool``: which entries of one sentence's output
    change when ``heads[:, i, t]`` (head i's result at token t, after attention) changes; the output is
    ``W_o(merge_heads(heads))`` when ``with_w_o`` else ``merge_heads(heads)``. Nothing is forbidden."""
    for L, d, h, t, i in CHANGE_CASES:
        for with_w_o in (False, True):
            where = f"changed({t}, {i}, L={L}, d_model={d}, n_heads={h}, with_w_o={with_w_o})"
            out = expect_tensor(call(fn, t, i, L, d, h, with_w_o, what="你的函数"), where)
            expect_shape(out, (L, d), where, hint="输出的一句话：(L, d_model)，每个数一个 True/False")
            got, want = out.ne(0), changed_outputs(t, i, L, d, h, with_w_o)
            if torch.equal(got, want):
                continue
            name_the_match(got, _changed_wrongs(t, i, L, d, h, with_w_o), prefix=f"{where}：")
            if torch.equal(got, ~want):
                raise Mistake(f"{where}：极性反了：True 表示这个数会变")
            raise Mistake(f"{where} 不对：" + ("先想注意力算完之后还有哪一步会把不同的 token 或不同的头混在一起" if with_w_o else
                                              "没有 W^O 时 Concat 只搬数：头 i 在 token t 上的 d_k 个数放在输出的哪一行、哪几列？"))


# ---------------------------------------------------------------- 7.3 (switch one head off, starting from the inputs and the layer)
# (B, L, S, d_model, n_heads) of a cross-attention layer(q_in, kv, kv); L == S first, so that Values projected from
# q_in run and get named; a layer with large biases, so that leaving one out (W_v's, W_o's) shows
REMOVE_CASES = [(2, 3, 3, 6, 3), (1, 2, 5, 8, 2), (2, 4, 2, 12, 4)]


def biased_layer(d_model: int, n_heads: int, seed: int) -> MultiHeadAttention:
    """A seeded layer whose four biases are large (normal), so that leaving one out shows."""
    torch.manual_seed(seed)
    layer = MultiHeadAttention(d_model, n_heads, dropout=0.0).eval()
    with torch.no_grad():
        for W in (layer.W_q, layer.W_k, layer.W_v, layer.W_o):
            W.bias.normal_()
    return layer


def _heads_from(layer, q_in, kv, values):
    """Every head's result when the Values are ``values`` (B, S, d_model): weights (B, h, L, S) @ split values."""
    q, k = split_heads(layer.W_q(q_in), layer.n_heads), split_heads(layer.W_k(kv), layer.n_heads)
    weights = torch.softmax(q @ k.transpose(-2, -1) / layer.d_k ** 0.5, dim=-1)  # (B, h, L, S)
    return weights @ split_heads(values, layer.n_heads)  # (B, h, L, d_k)


def head_removed(layer, q_in, kv, i):
    """The output when head i's result is replaced by zeros: W_o(concat with head i zeroed)."""
    heads = _heads_from(layer, q_in, kv, layer.W_v(kv))
    keep = torch.ones(layer.n_heads, 1, 1)
    keep[i] = 0
    return layer.W_o(merge_heads(heads * keep))  # (B, L, d_model)


@checker("ch07", "7.3", "关掉一个头：从交叉注意力的输入和层出发")
def check_remove_head(fn):
    """``fn(q_in (B, L, d_model), kv (B, S, d_model), layer mha.MultiHeadAttention, i) -> (B, L, d_model)``: the
    output of the cross-attention ``layer(q_in, kv, kv)`` when head i's result is replaced by zeros
    = out − head_i W^O_i (the bias stays); head_i has to be computed (project kv's Values, split, the weights of
    ``need_weights=True``). Nothing is forbidden; gradients reach q_in and kv."""
    for seed, (B, L, S, d_model, h) in enumerate(REMOVE_CASES):
        layer = biased_layer(d_model, h, seed)
        d_k = d_model // h
        q_in, kv = torch.randn(B, L, d_model), torch.randn(B, S, d_model)
        for i in sorted({0, h // 2, h - 1}):
            where = f"L={L}、S={S}、d_model={d_model}、n_heads={h}、i={i}"
            q_arg, kv_arg = q_in.clone().requires_grad_(), kv.clone().requires_grad_()
            got = expect_tensor(call(fn, q_arg, kv_arg, layer, i), f"{where} 时的返回值", floating=True)
            expect_shape(got, (B, L, d_model), f"{where} 时的返回值",
                         hint="关掉一个头，输出的形状不变：(B, L, d_model)，长度跟着 Query 走")
            with torch.no_grad():
                want = head_removed(layer, q_in, kv, i)
                out = layer(q_in, kv, kv)
                W_O, bias = layer.W_o.weight.T, layer.W_o.bias  # W^O of the formula   (d_model, d_model)
                head_i = _heads_from(layer, q_in, kv, layer.W_v(kv))[:, i]  # (B, L, d_k)
                minus = lambda head, M: out - head @ M  # noqa: E731
                rows = lambda j: W_O[j * d_k:(j + 1) * d_k]  # noqa: E731   W^O_j   (d_k, d_model)
                wrong_values = [
                    (kv, "头 i 的结果是拿没投影的 kv 当 Value 算的：Value 要先过 W_v，"
                         "head_i = 权重 × split_heads(W_v(kv)) 的第 i 个头"),
                    (kv @ layer.W_v.weight.T, "投影 Value 时漏了 W_v 的偏置：W_v(kv) = kv W^V + b^V"),
                    (layer.W_k(kv), "头 i 的结果用的是 W_k 投影出的 Key，不是 Value"),
                    *(((layer.W_v(q_in), "Value 是从 q_in 投影的：交叉注意力里 Key 和 Value 都来自 kv 那一句"),) if L == S else ()),
                ]
                wrong_heads = [(_heads_from(layer, q_in, kv, values)[:, i], message) for values, message in wrong_values]
                wrong_heads.append((out[..., i * d_k:(i + 1) * d_k], "把输出 out 的第 i 段当成了头 i 的结果：W^O 已经把各头混在一起，"
                                                                     "头 i 的结果要用它的注意力权重乘它的 Value 算出来"))
            if not _matches(got, want):
                name_the_match(got, [
                    (want - bias, "偏置也被减掉了：b^O 不属于任何一个头，关掉一个头时它要留下"),
                    (out + head_i @ rows(i), "符号反了：关掉头 i 要从输出里减去 head_i W^O_i，你加上了它"),
                    *((c, f"返回的是头 {i} 自己的贡献 head_i W^O_i：题目要的是关掉它之后的输出 out − head_i W^O_i")
                      for c in (head_i @ rows(i), head_i @ rows(i) + bias)),
                    (out, f"输出没有变：要减去头 {i} 的贡献 head_i W^O_i"),
                    *((head_removed(layer, q_in, kv, j % h), f"你关掉的是头 {j % h}，不是头 {i}：i 是从 0 数的代码下标，"
                       f"heads[:, i] 就是头 i，不用{'加' if j > i else '减'} 1") for j in (i + 1, i - 1)),
                    (head_removed(layer, q_in, q_in, i), "算成了 q_in 自己的自注意力：交叉注意力里 Key 和 Value 都来自 kv，"
                                                             "要调用 layer(q_in, kv, kv)"),
                    (minus(head_i, layer.W_o.weight[i * d_k:(i + 1) * d_k]),
                     "用的是 W_o.weight 的第 [i·d_k, (i+1)·d_k) 行：nn.Linear 存的是转置，W^O = W_o.weight.T，"
                     "W^O_i 是 W^O 的这几行，也就是 W_o.weight 的这几列"),
                    *((minus(head_i, rows(j)), f"头 i 的结果乘的是 W^O 的第 {j} 块（代码下标）：头 i 读的是 W^O 的第 i 块，"
                                               "即 W^O = W_o.weight.T 的第 [i·d_k, (i+1)·d_k) 行") for j in range(h) if j != i),
                    *((minus(head, rows(i)), message) for head, message in wrong_heads)],
                    prefix=f"{where} 时", same=_matches)
                raise Mistake(f"{where} 时结果不对：先算出头 i 的结果 head_i（layer(q_in, kv, kv, need_weights=True) 给出每个头的权重，"
                              "乘上 split_heads(W_v(kv)) 的第 i 个头），输出 = Σ_j head_j W^O_j + b^O，关掉头 i 就是减去 head_i W^O_i")
            q_ref, kv_ref = (t.clone().requires_grad_() for t in (q_in, kv))
            expect_same_gradients(got, head_removed(layer, q_ref, kv_ref, i), {"q_in": q_arg, "kv": kv_arg}, [q_ref, kv_ref],
                                  f"{where} 时的返回值", hint="前向里有没有 .detach()、torch.no_grad()，或者把中间结果复制成了常数？")
