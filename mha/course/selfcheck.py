"""Self-checks in the page: quiz questions whose right answers are computed with ``mha``.

Every exercise whose answer is a value (a shape, a count, a variance, a choice of inputs or
mask) has a few questions here, keyed by the exercise id ("1.1"). The right answer of each
question is computed by running the course package (a layer's output shape, a module's
parameter count, a mask from :mod:`mha.masks`) on the numbers the exercise asks about, which
come from the exercise's checker (:mod:`mha.course.exercises`). The wrong options are the typical
mistakes, each with a short explanation shown as feedback.

jupyterquiz (pinned in requirements.txt and in the Colab setup cell) turns the questions into
HTML and JavaScript that need no kernel: on the website the reader picks or types an answer
and sees at once whether it is right, and why. In a notebook cell::

    import mha.course.selfcheck
    mha.course.selfcheck.show("1.1")

The output is deterministic (a fixed container id, answers in a fixed order), so the stored
notebook outputs re-run identically under nbval.
"""
from __future__ import annotations

import copy
import functools
import html
import random
import re
from typing import Callable

import torch
from torch import nn

from .exercises import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10
from .exercises.records import RECORDS
from mha.layer import MultiHeadAttention
from mha.masks import causal_mask, padding_mask

__all__ = ["EXERCISES", "questions", "container_id", "bundles", "show", "RIGHT", "WRONG"]

RIGHT = "正确。"  # every feedback text starts with one of these two words
WRONG = "不对。"
MAX_WIDTH = 600  # px, jupyterquiz's own default; the page is narrower on a phone
# jupyterquiz's own interface words (its JavaScript has no language setting), said in Chinese
UI_WORDS = {
    "Type numeric answer here:": "输入数字：",
    "Type your answer here:": "输入答案：",
    "Incorrect -- try again.": WRONG + "再试一次。",
    "Correct!": RIGHT,
}


# ---------------------------------------------------------------- building blocks
def _html(text: str) -> str:
    """Plain text with `code` spans -> safe HTML (jupyterquiz puts it into innerHTML)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _shape(shape) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _ordered(key: str, answers: list) -> list:
    """A fixed order that does not always put the right answer first (seeded by the question)."""
    answers = list(answers)
    random.Random(key).shuffle(answers)
    return answers


def _choice(question: str, truth, right_why: str, wrongs: list, label: Callable = str, code=None) -> dict:
    """A multiple-choice question: ``truth`` (computed) and typical wrong ``(value, why)`` options.

    ``label(value)`` is the text of an option; with ``code=True`` it is shown as a code block.
    A wrong option that happens to equal the truth is an error in the question, not a choice.
    """
    assert all(value != truth for value, _ in wrongs), f"a wrong option equals the truth: {question}"
    options = [(truth, RIGHT + right_why, True)] + [(value, WRONG + why, False) for value, why in wrongs]
    answers = []
    for value, feedback, correct in _ordered(question, options):
        item = {"answer": "", "code": html.escape(label(value))} if code else {"answer": _html(label(value))}
        answers.append({**item, "correct": correct, "feedback": _html(feedback)})
    return {"question": _html(question), "type": "multiple_choice", "answers": answers}


def _number(question: str, truth: float, right_why: str, wrongs: list, hint: str,
            close: tuple | None = None) -> dict:
    """A numeric question (type the number, press Enter): the exact ``truth`` and typical wrong values.

    ``close = (rtol, why)`` also accepts answers within ``rtol`` of the truth, as the checker does.
    """
    def plain(x):  # 256.0 -> 256: what a reader types
        return int(x) if float(x).is_integer() else float(x)

    answers = [{"type": "value", "value": plain(truth), "correct": True, "feedback": _html(RIGHT + right_why)}]
    answers += [{"type": "value", "value": plain(value), "correct": False, "feedback": _html(WRONG + why)}
                for value, why in wrongs]
    if close is not None:
        rtol, why = close
        answers.append({"type": "range", "range": [truth * (1 - rtol), truth * (1 + rtol)], "correct": True,
                        "feedback": _html(RIGHT + why)})
    answers.append({"type": "default", "feedback": _html(WRONG + hint)})
    return {"question": _html(question + "（输入数字后按回车）"), "type": "numeric", "answers": answers}


def _shape_choice(question: str, truth: tuple, right_why: str, wrongs: list) -> dict:
    return _choice(question, tuple(truth), right_why, [(tuple(v), why) for v, why in wrongs], label=_shape)


def _seeded(fn):
    """Compute under a fixed seed without touching the notebook's random state, and without autograd."""
    @functools.wraps(fn)
    def run():
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(0)
            return fn()
    return run


# ---------------------------------------------------------------- the questions, per exercise
_BANK: dict = {}


def _exercise(exercise_id: str):
    def register(fn):
        _BANK[exercise_id] = _seeded(fn)
        return fn
    return register


WARMUP = "热身（和练习相关的另一个问题，答案不能照搬）："  # the self-check asks a neighbouring case, never the exercise


def _from_which(ex) -> list:
    """One multiple-choice question per key of a "which positions change" record (:class:`records.Which`): its
    truth, and its typical wrong answers with the checker's own words: each answer once, the first mistake that
    gives it (as the checker names it), and only answers within the positions."""
    truth, lead = ex.right(), "" if ex is RECORDS.get(ex.id) else WARMUP

    def options(key, ask):
        answers = [truth[key]]
        for w, why in ask.wrongs:
            if list(w) not in answers and all(0 <= p < (ask.size or ex.size) for p in w):
                answers.append(list(w))
                yield list(w), why + "。"
    return [_choice(lead + ex.setting + ask.question, truth[key], ask.right_why, list(options(key, ask)))
            for key, ask in ex.asks.items()]


_exercise("1.1")(functools.partial(_from_which, ch01.WARMUP))
_exercise("1.2")(functools.partial(_from_which, ch01.WARMUP_CROSS))


def _block_label(choice) -> str:
    q, k, v, mask = choice
    sources = f"Q = K = V = {q}" if q == k == v else f"Q = {q}，K = V = {k}"
    return f"{sources}；掩码：{mask or '不用掩码'}"


def _stack_inputs() -> list:
    """The (query, key, value, mask) names each block of a one-layer stack gets from the checker's answer key
    :func:`ch02.reference_stack`, in the order encoder, decoder masked self-attention, cross-attention: blocks
    that record their inputs stand in for the layers, and each one's output gets the name the quiz uses."""
    _, _, enc_x, dec_x, masks = ch02.stack_case(1, 2, 5, 3, 4, [[1] * 5, [1, 1, 1, 0, 0]], [3, 2])
    tensors, seen = {"enc_x": enc_x, "dec_x": dec_x}, []

    def block(output: str):
        def run(query, key, value, mask):
            seen.append((query, key, value, mask))
            tensors[output] = torch.zeros(query.shape)
            return tensors[output]
        return run
    ch02.reference_stack([block("enc_out")], [(block("dec_h"), block("dec_out"))], enc_x, dec_x, masks)
    named_masks = {**masks, "tgt_padding & causal": masks["tgt_padding"] & masks["causal"]}

    def name(t, table):
        return None if t is None else next(n for n, ref in table.items() if ref is t or (
            table is named_masks and ref.shape == t.shape and torch.equal(ref, t)))
    return [(*(name(t, tensors) for t in inputs[:3]), name(inputs[3], named_masks)) for inputs in seen]


@_exercise("2.3")
def _block_inputs():
    setting = ("可选的张量：enc_x（源句的 Embedding + PE）、dec_x（目标句的 Embedding + PE）、"
               "dec_h（块 2 的输出）、enc_out（编码器的输出）；掩码：src_padding、tgt_padding、causal。")
    enc, dec, cross = _stack_inputs()
    return [
        _choice("块 1，编码器的自注意力：Q、K、V 和掩码该选什么？" + setting, enc,
                "Q、K、V 都是源句的表示 enc_x；编码器一开始就看到整句话，只需挡住源句里的 PAD。",
                [(("enc_x", "enc_x", "enc_x", "src_padding & causal"),
                  "编码器不需要因果掩码：整句话一开始就都在，每个词都可以看所有不是 PAD 的词。"),
                 (("dec_x", "dec_x", "dec_x", "tgt_padding"), "这是解码器一侧的输入；编码器的自注意力用的是源句 enc_x。"),
                 (("enc_x", "enc_x", "enc_x", None), "没有掩码，源句里的 PAD 会被当成真正的词参与注意力。")],
                label=_block_label),
        _choice("块 2，解码器的掩码自注意力：Q、K、V 和掩码该选什么？（可选的张量和掩码同上）", dec,
                "Q、K、V 都是目标句 dec_x；既要挡住 PAD，又不能偷看后面的词，两个掩码用 & 合在一起。",
                [(("dec_x", "dec_x", "dec_x", "causal"), "漏了 padding 掩码：目标句里的 PAD 也要挡住。"),
                 (("dec_x", "dec_x", "dec_x", "tgt_padding"), "漏了因果掩码：生成第 t 个词时不能看到它后面的词。"),
                 (("dec_h", "dec_h", "dec_h", "tgt_padding & causal"), "dec_h 正是这个块的输出，算它之前还没有 dec_h。")],
                label=_block_label),
        _choice("块 3，交叉注意力：Q、K、V 和掩码该选什么？（可选的张量和掩码同上）", cross,
                "解码器用块 2 的输出 dec_h 提问，编码器的输出 enc_out 提供 key 和 value；只需挡住源句的 PAD。",
                [(("dec_x", "enc_out", "enc_out", "src_padding"),
                  "K、V 对了，但 Query 要用上一块的输出 dec_h，而不是解码器最初的输入 dec_x。"),
                 (("enc_out", "dec_h", "dec_h", "src_padding"), "方向反了：解码器提问（Q），编码器的输出回答（K、V）。"),
                 (("dec_h", "enc_out", "enc_out", "src_padding & causal"),
                  "交叉注意力的 key 是源句的位置，源句整句都已知，不需要因果掩码。")],
                label=_block_label),
    ]


_exercise("3.1")(functools.partial(_from_which, ch03.WARMUP))


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@_exercise("3.2")
def _parameter_count():
    d, h = 512, 8
    layer = MultiHeadAttention(d, h)
    total, one = _count(layer), _count(layer.W_q)
    more_heads = _count(MultiHeadAttention(d, 2 * h))
    change = {1: "不变", 2: "翻倍", 0.5: "减半"}
    d_k = d // h
    return [
        _number(f"`mha.MultiHeadAttention({d}, {h})`（带偏置）一共有多少个参数？", total,
                f"四个 nn.Linear({d}, {d})：每个 {d}×{d} + {d} = {one} 个参数，一共 4 × {one} = {total}。",
                [(4 * d * d, f"只数了四个权重矩阵，忘了每个 Linear 还有 {d} 个偏置。"),
                 (one, "这只是一个 Linear；层里有 W_q、W_k、W_v、W_o 四个。"),
                 (3 * one, "少了最终的 W_o：层里一共四个 Linear。"),
                 (4 * h * (d_k * d_k + d_k), f"把每个头当成了各自一块 {d_k}×{d_k} 的小矩阵；其实每个 Linear 都是完整的 "
                                            f"{d}×{d}，分头只是把输出切开。")],
                "提示：每个 nn.Linear(d, d) 有 d×d 个权重和 d 个偏置；数一数层里有几个 Linear。"),
        _choice(f"把头数从 {h} 改成 {2 * h}（d_model 仍是 {d}），参数个数会怎样？", change[more_heads / total],
                f"分头只是把 {d} 维切成更多份，四个 Linear 仍然都是 {d}×{d}：参数个数和头数无关。",
                [("翻倍", f"头多了，但每个头更窄（d_k 从 {d_k} 变成 {d_k // 2}），总宽度仍是 {d}。"),
                 ("减半", "每个头变窄了，但头也多了一倍；四个 Linear 的大小都没变。")]),
    ]


for _module in (ch04, ch05):
    _exercise(_module.WARMUP.id)(functools.partial(_from_which, _module.WARMUP))


def measured_variance(d_k: int, n: int = 20_000, scale: bool = False) -> float:
    """The sample variance of ``q · k`` (divided by ``sqrt(d_k)`` when ``scale``) over ``n`` random pairs."""
    q, k = torch.randn(n, d_k, dtype=torch.float64), torch.randn(n, d_k, dtype=torch.float64)
    dots = (q * k).sum(-1) / (d_k ** 0.5 if scale else 1.0)
    return float(dots.var())


@_exercise("5.2")
def _variance():
    d = ch05.VARIANCE_D_K
    rtol = ch05.VARIANCE_RTOL
    raw, scaled = float(d), d / (d ** 0.5) ** 2  # Var(Σ q_j k_j) = d_k; Var(X / c) = Var(X) / c²
    for theory, scale in ((raw, False), (scaled, True)):  # the formula, confirmed by a measurement
        assert abs(measured_variance(d, scale=scale) / theory - 1) < rtol
    setting = f"q 和 k 是 d_k = {d} 维的向量，每个分量相互独立、均值 0、方差 1。"
    root = round(d ** 0.5)
    return [
        _number(setting + "Var(q · k) 是多少？", raw,
                f"q·k 是 {d} 个独立乘积 q_j k_j 之和，每项方差为 1，方差相加得 {d}"
                f"（生成本页时随机取了 20,000 对向量实测，和 {d} 相差不到 {rtol:.0%}）。",
                [(root, f"{root} 是标准差 √{d}；方差是 {d}。"),
                 (1, f"方差不是 1：{d} 个独立项相加，方差也跟着相加。")],
                f"提示：q·k = Σ q_j k_j，一共 {d} 项，每项方差为 1。",
                close=(rtol, f"和理论值相差不到 {rtol:.0%}，算对；准确值是 d_k = {d}。")),
        _number("q、k 同上。Var(q · k / √d_k) 是多少？", scaled,
                f"除以 √{d} = {root}，方差要除以 {root}² = {d}，回到 1：这正是缩放的目的。",
                [(root, "除以 √d_k 时，方差要除以 (√d_k)² = d_k，而不是除以 √d_k。"),
                 (d, "方差没有变小？除以 √d_k 正是为了把方差拉回 1。"),
                 (1 / d, f"方差被除了两次 {d}；除以 √d_k 只让方差除以一次 d_k。")],
                f"提示：Var(X / c) = Var(X) / c²，这里 c = √{d} = {root}。",
                close=(rtol, f"和理论值相差不到 {rtol:.0%}，算对；准确值是 1。")),
    ]


@_exercise("6.1")
def _concat_source():
    L, h, d_k, t, j = ch06.SOURCE_WARMUP  # the exercise asks merge_heads and the merge without transpose
    truth = ch06.source_map(ch06.merge_interleaved, L, h, d_k)[(t, j)]
    i, m = truth[0], truth[2]
    show = lambda v: f"heads[b, {v[0]}, {v[1]}, {v[2]}]"  # noqa: E731
    return [_choice(
        f"{WARMUP}`heads` 的形状是 {_shape((2, h, L, d_k))}（B, h, L, d_k）。换一种拼法："
        f"`concat = heads.permute(0, 2, 3, 1).reshape(2, {L}, {h * d_k})`，permute 把轴排成 (B, L, d_k, h)。"
        f"`concat[b, {t}, {j}]` 是 heads 里的哪一个数？（下标都从 0 数）", truth,
        f"permute 之后一行是 {d_k}×{h} 的小表（d_k 在前，h 在后），reshape 按行读它：最后一根轴 h 变得最快，"
        f"{h} 个头轮流出现。第 {j} 列 = {m}×{h} + {i}，所以是头 {i} 的第 {m} 维；reshape 只合并最后两根轴，"
        f"排在它们前面的 token 轴 L 原样留下，所以 token 还是 {t}。",
        [((m, t, i), f"头和维放反了：一行先按 d_k 分成 {d_k} 组，每组里 {h} 个头轮流；组号是维 m，组内的位置是头 i。"),
         ((j % d_k, t, j // d_k), f"把 h 和 d_k 弄混了：permute 之后最后一根轴是 h（长 {h}），不是 d_k（长 {d_k}）。"),
         ((i + 1, t, m + 1), "头 i 和维 m 从 1 数了：代码下标都从 0 数，i = 0 就是第 1 个头。")],
        label=show)]


@_exercise("7.1")
def _head_matrix_rank():
    d, h = ch07.RANK_WARMUP["d_model"], ch07.RANK_WARMUP["n_heads"]  # the exercise asks one head of the lecture's layer
    layer = MultiHeadAttention(d, h).double().eval()
    total = sum(ch07.head_matrix(layer, i) for i in range(h))  # (d, d): M_0 + ... + M_{h-1}
    truth = int(torch.linalg.matrix_rank(total))
    heads = " + ".join(f"M_{i}" for i in range(h))
    return [_number(
        f"{WARMUP}一个 d_model = {d}、{h} 个头的层（随机初始化）。把 {h} 个头的矩阵加起来：{heads}，"
        f"它正是整层的 W^V W^O（不算偏置），一个 {d}×{d} 的矩阵。在随机初始化的层里，它的秩是多少？", truth,
        f"W^V 和 W^O 都是 {d}×{d} 的方阵，随机初始化的方阵几乎总是可逆的，两个可逆矩阵的乘积也可逆：秩是 {d}，满秩"
        f"（生成本页时用 torch.linalg.matrix_rank 量了一个随机层：{truth}）。这里数据从头到尾都有 {d} 维可走；"
        "一个乘积的秩，受它途经的每一处宽度限制。",
        [(h, f"{h} 是头数，不是秩：秩是线性无关的行数。"),
         (d * d, f"{d * d} 是矩阵的元素个数；秩不会超过行数 {d}。"),
         (h * d, f"秩不会超过行数 {d}：{h} 个矩阵加起来还是 {d}×{d} 的矩阵，只有 {d} 行。")],
        f"提示：{heads} = W^V W^O，两个 {d}×{d} 的矩阵相乘；随机的方阵可逆吗？")]


@_exercise("8.1")
def _zeroed_weight():
    names = lambda v: "、".join(ch08.PROPERTIES[k] for k in sorted(v)) or "三条都不成立"  # noqa: E731
    truth = ch08.ablation_truth("W_k", causal=True)  # the exercise asks the four Linears without a mask
    return [_choice(
        WARMUP + "自注意力层（Q = K = V = x，偏置都不为 0）加上因果掩码，只把 `W_k.weight` 换成全 0，偏置保留。"
        "下面哪一组性质成立？", truth,
        "每个 key 都变成同一个 b^K，query t 能看到的 t + 1 个 key 分数相同，权重都是 1/(t + 1)，不是 1/S；"
        "各行平均的 value 个数不同，输出行也不全一样；V′ 没受影响，输出不只是 W_o 的偏置。",
        [(frozenset({"rows_equal", "uniform"}), "因果掩码挡住了后面的 key：query t 只有 t + 1 个权重不为 0，不可能每个都是 1/S；"
                                               "各行平均的是不同的几个 value，输出行也不全一样。"),
         (frozenset({"uniform"}), "query t 的 t + 1 个权重相等，但都是 1/(t + 1)：“均匀”说的是每个权重都等于 1/S，被挡住的是 0。"),
         (frozenset({"rows_equal"}), "query t 平均的是前 t + 1 个 value，每一行平均的个数不同，输出行不一样。")],
        label=names)]


@_exercise("9.1")
def _padding_mask_kind():
    ids, pad_id = ch09.PADDING_CASES[0]
    token_ids = torch.tensor(ids)
    B, S = token_ids.shape
    mask = padding_mask(token_ids, pad_id)
    truth = (tuple(mask.shape), str(mask.dtype).replace("torch.", ""))
    return [_choice(
        f"`token_ids` 的形状是 {_shape((B, S))}，pad_id = {pad_id}。练习要的 padding mask 是什么样子？", truth,
        "头的轴和 query 的轴都写成 1，它就能广播到 scores 的 (B, h, L, S)；bool 可以直接用在 masked_fill(~mask, …) 里。",
        [(((B, S), "bool"), "(B, S) 和 (B, h, L, S) 右对齐广播时，B 会被对到 L 上：B 恰好等于 L 时不报错，却悄悄算错。"),
         (((B, 1, 1, S), "int64"), "0/1 整数不行：对整数张量，~ 是按位取反（~1 == -2），masked_fill(~mask, …) 会出错。"),
         (((B, 1, S, 1), "bool"), "PAD 挡住的是 key，key 在最后一维：应该是 (B, 1, 1, S)。")],
        label=lambda v: f"形状 {_shape(v[0])}，dtype {v[1]}")]


_exercise("9.3")(functools.partial(_from_which, ch09.WARMUP))


def _matrix(rows) -> str:
    return "\n".join(" ".join(str(int(v)) for v in row) for row in rows)


@_exercise("10.1")
def _window_choice():
    L, w = 5, 2
    truth = _matrix(ch10.window_mask(L, w).int().tolist())
    d = torch.arange(L)[None, :] - torch.arange(L)[:, None]  # key - query
    band = lambda lo, hi: _matrix(((d >= lo) & (d <= hi)).int().tolist())  # noqa: E731
    return [_choice(
        f"L = {L}，窗口 w = {w} 的带窗口因果掩码是哪一个？（行是 query i，列是 key j，1 = 可以看）", truth,
        f"每个 query 只看它自己和它前面的 {w - 1} 个 key：i − w < j ≤ i，对角线和它左边的 {w - 1} 条斜线。",
        [(band(-(L - 1), 0), "这是普通的因果掩码：没有用窗口，最后一个 query 还能看到最前面的 key。"),
         (band(-w, 0), f"窗口多了一个：每行有 w + 1 = {w + 1} 个 1（最前面几行除外）；含自己在内应该正好 w 个。"),
         (band(-(w - 1), w - 1), "窗口向两边展开了：query 还能看到它后面的 key，也就是未来。")],
        code=True)]


@_exercise("10.2")
def _decoder_row():
    ids, pad_id = ch10.DECODER_CASES[0]
    row_ids = ids[0]  # one sentence with a PAD in the middle
    L = len(row_ids)
    t = 3  # the query at position 3 (counted from 0 in code), the 4th token
    mask = causal_mask(L) & (torch.tensor(row_ids) != pad_id)[None, :]  # (L, L)
    truth = mask[t].int().tolist()
    first_pad = row_ids.index(pad_id)
    return [_choice(
        f"解码器的一句话 dec_ids = {row_ids}，pad_id = {pad_id}（PAD 在句子中间）。合并后的掩码（padding 且因果）里，"
        f"下标 {t} 的 query（第 {t + 1} 个 token）那一行是哪一个？（1 = 可以看）", str(truth),
        f"它能看 0 到 {t} 号 key，只有 PAD 所在的 {first_pad} 号列被挡住；后面的真实 token 照样可以看。",
        [(str([1 if j < first_pad else 0 for j in range(L)]), "PAD 后面的真实 token 没有被挡住：掩码逐个 token 判断是不是 PAD，不是按长度截断。"),
         (str([1 if j <= t else 0 for j in range(L)]), "这只用了因果掩码，PAD 那一列也要挡住。"),
         (str([0 if v else 1 for v in truth]), "极性反了：1 表示可以看。")],
        code=True)]


@_exercise("10.3")
def _mask_alignment():
    n = ch10.ALIGN_WARMUP  # a (S,) mask: the exercise asks (B, S) and (B, 1, S)
    at = (0, 1, 2, 3)  # (b, i, t, s): four different numbers, so each option names one axis
    index = torch.arange(n)
    truth = int(index.expand(n, n, n, n)[at])  # the element of keep that broadcasting puts at scores[b, i, t, s]
    show = lambda r: f"keep[{r}]"  # noqa: E731
    b, i, t, s = at
    return [_choice(
        f"{WARMUP}一句话的 padding 掩码 keep 是 (S,) 的 bool，scores 是 (B, h, L, S)，B = h = L = S = {n}。"
        f"`scores.masked_fill(~keep, ...)` 不会报错。`scores[{b}, {i}, {t}, {s}]` 由 keep 的哪一个数决定？（下标从 0 数）", truth,
        "右对齐：(S,) 补成 (1, 1, 1, S)，它唯一的轴对到 scores 的最后一根轴，也就是 key 的轴 S。",
        [(b, "广播从右往左对齐，不是从左往右：(S,) 的轴对到 scores 的最后一根轴，不是 batch。"),
         (i, "(S,) 前面补的三根轴都是 1，它唯一的轴对到最后一根轴 S，不是头的轴。"),
         (t, "(S,) 只有一根轴，对到的是最后一根轴（key），不是倒数第 2 根（query）。")], label=show)]


@_exercise("10.4")
def _cache_step_sees():
    L, S = ch10.BUGGY_WARMUP  # the exercise asks L = 1, S = ch10.BUGGY_S
    r = L - 1
    buggy = torch.ones(L, S).tril().bool()[r].nonzero().flatten().tolist()
    right = ch10.causal_mask(L, S)[r].nonzero().flatten().tolist()
    return [_choice(
        f"{WARMUP}KV cache 的一步：cache 里已有 {S - L} 个 token，新来 {L} 个 query，key 一共 S = {S} 个。"
        f"同学用 `torch.ones({L}, {S}).tril().bool()` 当掩码，最后一个新 token（第 r = {r} 行，在位置 {S - L + r}）"
        f"能看到哪些 key？（位置从 0 编号）", str(buggy),
        f"tril() 从左上角对齐：第 {r} 行只保留列号 ≤ {r} 的列。这个新 token 本该看到全部 {S} 个 key。",
        [(str(right), "这是正确掩码下的结果；同学的 tril() 没有偏移，从左上角对齐。"),
         (str([r]), "tril() 保留的是列号 ≤ 行号的所有位置，不只是对角线上那一个。"),
         (str(list(range(S - L + r))), f"tril() 不知道 cache 里有 {S - L} 个 token，它只看行号和列号。")],
        code=True)]


EXERCISES = tuple(_BANK)


# ---------------------------------------------------------------- the public functions
@functools.lru_cache(maxsize=None)
def _questions(exercise_id: str) -> tuple:
    if exercise_id not in _BANK:
        raise KeyError(f"no self-check for exercise {exercise_id!r}; there are: {', '.join(EXERCISES)}")
    return tuple(_BANK[exercise_id]())


def questions(exercise_id: str) -> list:
    """jupyterquiz's question dicts for one exercise (a fresh copy)."""
    return copy.deepcopy(list(_questions(exercise_id)))


def container_id(exercise_id: str) -> str:
    """The HTML id of the quiz container (also a JavaScript identifier, as jupyterquiz needs)."""
    return "selfcheck_" + exercise_id.replace(".", "_")


def bundles(exercise_id: str) -> list:
    """The display data of one self-check: an HTML bundle (container, styles) and a JavaScript bundle.

    jupyterquiz's ``display_quiz`` is run with its output captured; its random container id is
    replaced by :func:`container_id` and its container ``<div>`` is closed (it leaves it open,
    which on the website would swallow the rest of the page).
    """
    import jupyterquiz
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    if not InteractiveShell.initialized():  # plain Python (tests): a shell to capture into
        InteractiveShell.instance()
    state = random.getstate()  # jupyterquiz draws its id from `random`: leave the notebook's state alone
    try:
        with capture_output(stdout=False, stderr=False) as captured:
            jupyterquiz.display_quiz(questions(exercise_id), shuffle_answers=False, max_width=MAX_WIDTH)
    finally:
        random.setstate(state)
    page, script = (dict(o.data) for o in captured.outputs)
    drawn = re.match(r'<div id="([A-Za-z]+)"[^>]*>', page["text/html"])
    if drawn is None or "application/javascript" not in script:
        raise RuntimeError("jupyterquiz's output changed: expected a container <div> and a script")
    mine = container_id(exercise_id)
    tag = drawn.group(0)
    page["text/html"] = tag.replace(drawn.group(1), mine) + "</div>" + page["text/html"][len(tag):].replace(
        drawn.group(1), mine)
    page["text/plain"] = f"网页自测：练习 {exercise_id}（{len(questions(exercise_id))} 道题，在网页上或运行这一格后作答）"
    script["application/javascript"] = _in_chinese(script["application/javascript"].replace(drawn.group(1), mine))
    script.pop("text/plain", None)  # where scripts do not run, the page bundle's text already says what this is
    return [page, script]


def _in_chinese(script: str) -> str:
    """jupyterquiz's script with its interface words (:data:`UI_WORDS`) in Chinese."""
    for english, chinese in UI_WORDS.items():
        quoted = f'"{english}"'
        if quoted not in script:
            raise RuntimeError(f"jupyterquiz's script no longer says {quoted}: update mha.course.selfcheck.UI_WORDS")
        script = script.replace(quoted, f'"{chinese}"')
    return script


def show(exercise_id: str) -> None:
    """Display the self-check of one exercise in the notebook (works without a kernel on the website)."""
    from IPython.display import display

    for bundle in bundles(exercise_id):
        display(bundle, raw=True)
