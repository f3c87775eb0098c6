"""Checkers for chapter 13, the trained numeral Transformer.

* 13.1 pad a batch of numerals of different lengths and build its padding mask,
* 13.2 force the first digits (a prefix) into the KV cache, then let the model go on greedily,
* 13.3 a forward pre-hook on ``W_o`` that ablates (zeroes) one head.
"""
from __future__ import annotations

import functools

import torch

from mha.layer import MultiHeadAttention
from mha.masks import padding_mask
from ..numerals import evaluate, load_pretrained
from ..numerals.data import BOS, EOS, MAX_TARGET_LEN, SRC_ID, TGT_TOKENS, encode_source
from ..numerals.model import NumeralTransformer, ablate_heads, zero_head_hook
from .answers import as_parts, expect_close, expect_shape, expect_tensor
from .ch07 import head_removed
from .records import check_mask
from .running import call
from .verdicts import checker, exception_text, Mistake

__all__ = ["check_pad_numerals", "check_continue_prefix", "check_zero_head_hook"]


# ---------------------------------------------------------------- 13.1 padding a batch of numerals

PAD_CASES = [
    (["两千零二十六", "十二", "三万零五百"], 0),
    (["九千九百九十九万", "零"], 0),
    (["一万零一", "十", "一百万零一百", "五"], 16),  # a PAD id that is not 0: only the parameter is right
    (["两万"], 0),  # a single numeral: nothing to pad
]


def _pad_reference(words, vocab, pad_id):
    S = max(len(w) for w in words)
    ids = torch.full((len(words), S), pad_id, dtype=torch.long)  # (B, S)
    for b, w in enumerate(words):
        ids[b, : len(w)] = torch.tensor([vocab[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]  # (B, S), (B, 1, 1, S)


@checker("ch13", "13.1", "把长短不一的中文数字补齐成一批，并做 padding mask")
def check_pad_numerals(fn):
    """``fn(words list[str], vocab dict[str, int], pad_id int) -> (ids (B, S) long, mask (B, 1, 1, S) bool)``:
    S is the longest numeral of the batch; PAD goes on the right; True = real character."""
    real = [c for c in SRC_ID if c != "<pad>"]
    shuffled = torch.randperm(len(real), generator=torch.Generator().manual_seed(131)).tolist()
    vocabularies = [{c: SRC_ID[c] for c in real},  # the book's ids, then ids the student cannot know in advance
                    {c: 20 + shuffled[i] for i, c in enumerate(real)}]
    for (words, pad_id), vocab in [(case, v) for v in vocabularies for case in PAD_CASES]:
        out = call(fn, list(words), dict(vocab), pad_id, what="你的补齐函数", forbid=PAD_SHORTCUTS)
        ids, mask = (expect_tensor(t, n) for t, n in zip(as_parts(out, 2, "你的补齐函数应该返回两个值 (ids, mask)"), ("ids", "mask")))
        want_ids, want_mask = _pad_reference(words, vocab, pad_id)
        B, S = want_ids.shape
        if ids.dim() == 2 and ids.shape[0] == B and ids.shape[1] > S:
            raise Mistake(f"补得太长了：这一批最长的数字有 S = {S} 个字，你补到了 {ids.shape[1]}。"
                          "只补到这一批里最长的那个，多余的 PAD 只会浪费计算")
        expect_shape(ids, (B, S), "ids", hint="一行一个数字，补齐到这一批里最长的那个")
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise Mistake(f"ids 的 dtype 是 {ids.dtype}：Embedding 要整数 id，用 dtype=torch.long")
        if not torch.equal(ids.long(), want_ids):
            lengths = [len(w) for w in words]
            left = torch.stack([torch.cat([torch.full((S - n,), pad_id), want_ids[b, :n]]) for b, n in enumerate(lengths)])
            if torch.equal(ids.long(), left):
                raise Mistake("PAD 补在了左边：本课（和 mha.course.numerals）把 PAD 补在右边，真实的字从第 0 个位置开始，"
                              "位置编码才和单独一句时一样")
            if vocab != vocabularies[0] and torch.equal(ids.long(), _pad_reference(words, vocabularies[0], pad_id)[0]):
                raise Mistake("ids 用的是书里的 SRC_ID，没有用参数 vocab：检查换了一套词表（字 → id 不同），"
                              f"例如“{words[0][0]}”这次是 {vocab[words[0][0]]}；要写 vocab[c]")
            if pad_id != 0 and torch.equal(ids.long(), _pad_reference(words, vocab, 0)[0]):
                raise Mistake(f"PAD 的 id 写死成了 0；这一组的 pad_id 是 {pad_id}，要用参数 pad_id")
            bad = (ids.long() != want_ids).nonzero()[0].tolist()
            raise Mistake(f"ids 有位置不对，例如下标 {tuple(bad)}：输入 {words}、pad_id={pad_id}，应该是 {want_ids.tolist()}")
        if ids.dtype != torch.long:
            raise Mistake(f"ids 的数值对了，但 dtype 是 {ids.dtype}；Embedding 要 torch.long")
        hard_coded = [((ids != 0)[:, None, None, :], f"用了 `ids != 0`，把 PAD 的 id 写死成了 0；这一组的 pad_id 是 {pad_id}")]
        check_mask(mask, want_mask, "mask", hint="padding mask 的形状是 (B, 1, 1, S)", bad_hint="应该是 ids != pad_id",
                   shapes=[
            ((B, S), f"mask 的形状应该是 (B, 1, 1, S) = {(B, 1, 1, S)}，你返回的是 (B, S)。"
                     "它要和 scores 的 (B, h, L, S) 对齐：用 [:, None, None, :] 插入头和 query 两个轴"),
            *((shape, "mask 屏蔽的是 key（最后一个轴，列），不是 query：形状应该是 (B, 1, 1, S)") for shape in ((B, 1, S, 1), (B, S, 1)))],
            named=[
            (~want_mask, "你在 PAD 的位置放了 True，极性反了。本课约定 True = 可以看（真实的字），PAD 处为 False"),
            *(hard_coded if pad_id != 0 else [])])


PAD_SHORTCUTS = (encode_source, padding_mask)
HOOK_SHORTCUTS = (zero_head_hook, ablate_heads)
DECODE_SHORTCUTS = (("model.translate", NumeralTransformer.translate), ("model.greedy_ids", NumeralTransformer.greedy_ids),
                    evaluate.predict, evaluate.exact_match)


# ---------------------------------------------------------------- 13.2 greedy decoding with the KV cache


class RecordingModel(NumeralTransformer):
    """The shipped model, counting the calls of ``encode``, ``decode_step`` and ``decode``."""

    def reset(self):
        self.encodes, self.steps, self.full_decodes, self.finished = 0, [], 0, None
        self.forced, self.start = 0, 0  # decode steps whose output the prefix overrides; where this decode began

    def encode(self, *args, **kwargs):
        self.encodes += 1
        return super().encode(*args, **kwargs)

    def decode_step(self, token, memory, src_mask, caches=None, need_weights=False):
        step = {"token": token.detach().clone() if isinstance(token, torch.Tensor) else token,
                "cache": None if caches is None else [getattr(c, "length", None) for c in caches],
                "mask": src_mask is not None}
        if caches is None:  # a new decode (one numeral at a time starts several): no row has finished yet
            self.finished, self.start = None, len(self.steps)
        self.steps.append(step)
        out = super().decode_step(token, memory, src_mask, caches, need_weights)
        out = (self._after_eos(out[0]),) + tuple(out[1:])
        step["argmax"] = out[0].detach().argmax(-1)  # (B,): what greedy decoding would write next
        return out

    def _after_eos(self, logits):
        """A row that already wrote <eos> now writes a digit: an answer that keeps writing after its
        <eos> shows it (the right answer ignores what a finished row writes)."""
        if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
            return logits
        if self.finished is not None and self.finished.shape[0] == logits.shape[0] and self.finished.any():
            logits = logits.clone()
            logits[self.finished, TGT_TOKENS.index("7")] = logits.detach().max() + 10.0
        if len(self.steps) - self.start <= self.forced:  # still feeding the prefix: nothing is written yet
            return logits
        wrote = logits.detach().argmax(-1) == EOS
        self.finished = wrote if self.finished is None or self.finished.shape != wrote.shape else self.finished | wrote
        return logits

    def decode(self, tgt_in, memory, src_mask, need_weights=False):
        self.full_decodes += 1
        return super().decode(tgt_in, memory, src_mask, need_weights)


@functools.lru_cache(maxsize=1)
def _shipped_state():
    model = load_pretrained()
    return model.cfg, {k: v.clone() for k, v in model.state_dict().items()}


def _answers(out, B):
    if isinstance(out, torch.Tensor):
        raise Mistake("应该返回字符串列表（每个数一个，例如 ['2026', '30500']），却返回了张量；"
                      "把每一行的 id 换成数字字符，到 <eos> 为止")
    if not isinstance(out, (list, tuple)) or not all(isinstance(s, str) for s in out):
        raise Mistake(f"应该返回字符串列表，例如 ['2026', '30500']，却收到了 {type(out).__name__}：{out!r:.80}")
    if len(out) != B:
        raise Mistake(f"这一批有 B = {B} 个数字，你返回了 {len(out)} 个答案；每个数字一个答案")
    return list(out)


# ---------------------------------------------------------------- 13.2 a forced prefix, then greedy decoding

# (numerals, forced prefix): a wrong first digit, a right one, two digits, none at all (plain greedy decoding)
PREFIX_CASES = [
    (["两千零二十六", "三万零五百", "十二"], "3"),
    (["九千九百九十九万", "五", "一百万零一百"], "1"),
    (["两万", "八千八百八十二万零八百八十四", "十"], "20"),
    (["十二", "三百"], ""),
]


def _continue_reference(model, words, prefix):
    """Feed <bos> and the prefix, then greedy decoding; recomputes the whole target each step (no cache),
    so it shares no code with the student's path. Returns (answers, decode steps the cached loop needs)."""
    src, src_mask = encode_source(words)
    memory = model.encode(src, src_mask)
    B = len(words)
    tgt = torch.tensor([[BOS] + [TGT_TOKENS.index(c) for c in prefix]] * B)  # (B, 1 + P)
    done = torch.zeros(B, dtype=torch.bool)
    answers = [prefix] * B
    while not done.all() and tgt.shape[1] <= MAX_TARGET_LEN:
        nxt = model.decode(tgt, memory, src_mask)[:, -1].argmax(-1)  # (B,)
        for b in range(B):
            if not done[b]:
                if nxt[b] == EOS:
                    done[b] = True
                else:
                    answers[b] += TGT_TOKENS[nxt[b]]
        tgt = torch.cat([tgt, nxt[:, None]], dim=1)
    return answers, tgt.shape[1] - 1  # one decode_step per token fed: <bos>, the prefix, then the written ones


def _check_prefix_steps(model, words, prefix, needed):
    """encode once; <bos>, then the prefix, one token a step; afterwards each step feeds the last argmax."""
    steps = model.steps
    if model.full_decodes:
        raise Mistake(f"输入 {words} 时调用了 {model.full_decodes} 次 model.decode（整段重算）：用了 KV cache 就不该再整段解码，"
                      "每步只用 model.decode_step(token, memory, src_mask, caches) 喂最新的一个 token")
    if not steps:
        raise Mistake("没有调用 model.decode_step：解码要一步一步地来，每步喂一个 token")
    rows = {s["token"].shape[0] for s in steps if isinstance(s["token"], torch.Tensor) and s["token"].dim() == 2}
    if rows and rows != {len(words)}:
        raise Mistake(f"decode_step 每步喂了 {sorted(rows)} 行，这一批有 B = {len(words)} 个数字：整批一起解码，"
                      "每步喂 (B, 1) 的 token，不要一个数一个数地解码")
    if model.encodes != 1:
        raise Mistake(f"输入 {words} 时调用了 {model.encodes} 次 model.encode：源句子在解码时不变，"
                      "encode 一次，把 memory 留着每一步用")
    for i, s in enumerate(steps):
        token = s["token"]
        if not isinstance(token, torch.Tensor) or token.dim() != 2 or token.shape[1] != 1:
            shape = tuple(token.shape) if isinstance(token, torch.Tensor) else type(token).__name__
            raise Mistake(f"第 {i + 1} 次 decode_step 喂的是 {shape}：每步只喂一个 token，形状 (B, 1)"
                          "（开头的字符也要一步一个地喂，这样它们的 K、V 才一个一个进 cache）")
        if s["cache"] is None and i > 0 or s["cache"] is not None and any(n != i for n in s["cache"]):
            got = "传的 caches 是 None" if s["cache"] is None else f"拿到的 cache 里有 {s['cache']} 个 token，应该是 {i}"
            raise Mistake(f"第 {i + 1} 次 decode_step {got}：要把上一步 decode_step 返回的 caches 原样传回去（只有第一步传 None）")
        fed = token[:, 0]
        if i == 0:
            if not bool((fed == BOS).all()):
                raise Mistake(f"第一步喂进去的不是 <bos>（id {BOS}）：开头之前，解码器的第一个输入永远是 <bos>")
        elif i <= len(prefix):
            want = TGT_TOKENS.index(prefix[i - 1])
            if not bool((fed == want).all()):
                raise Mistake(f"第 {i + 1} 次 decode_step 应该喂开头的第 {i} 个字符 “{prefix[i - 1]}”（id {want}），"
                              f"你喂的是 id {fed.tolist()}：写开头的那几步不看 logits，照着 prefix 喂")
        else:  # rows that have not written <eos> yet must be fed what they wrote at the step before
            finished = {b for j in range(len(prefix), i) for b in range(len(fed)) if steps[j]["argmax"][b] == EOS}
            greedy = steps[i - 1]["argmax"]
            if any(fed[b] != greedy[b] for b in range(len(fed)) if b not in finished):
                raise Mistake(f"第 {i + 1} 次 decode_step 喂的不是上一步 logits 的 argmax：开头喂完之后，"
                              "每一步把上一步写出的 token 喂回去")
    if not all(s["mask"] for s in steps):
        raise Mistake("调用 decode_step 时没有传 src_mask：交叉注意力会看到补齐用的 PAD，短的数字会被读错")
    if len(steps) > needed:  # fewer: the answers are short, and the answer check names it
        raise Mistake(f"输入 {words}、开头 “{prefix}” 时调用了 {len(steps)} 次 decode_step，{needed} 次就够了："
                      "整批每个数都写出 <eos> 时就该停下")


@checker("ch13", "13.2", "替模型写好开头，用 KV cache 接着写")
def check_continue_prefix(fn):
    """``fn(model, src (B, S), src_mask (B, 1, 1, S), prefix str) -> list[str]``: the whole answer of each numeral,
    ``prefix`` (forced, the same for the batch) followed by what greedy decoding writes after it, up to ``<eos>``.

    Must call ``model.encode`` once and ``model.decode_step`` once per token fed (``<bos>``, each prefix
    character, then each written token), passing back the caches, and stop when every row wrote ``<eos>``."""
    cfg, state = _shipped_state()
    model = RecordingModel(cfg)
    model.load_state_dict(state)
    model.eval()
    model.reset()
    for words, prefix in PREFIX_CASES:
        src, src_mask = encode_source(words)
        with torch.no_grad():
            want, needed = _continue_reference(model, words, prefix)
            plain = model.translate(words)
        model.reset()
        model.forced = len(prefix)
        out = call(fn, model, src, src_mask, prefix, what="你的函数", forbid=DECODE_SHORTCUTS,
                   shortcut_hint="自己写解码循环：用 model.encode 和 model.decode_step")
        answers = _answers(out, len(words))
        _check_prefix_steps(model, words, prefix, needed)
        if answers == want:
            continue
        wrong = [i for i, (a, w) in enumerate(zip(answers, want)) if a != w]
        i = wrong[0]
        case = f"（例如 {words[i]} 开头写 “{prefix}”，应为 {want[i]}，你得到 {answers[i]!r}）"
        if prefix and all(prefix + answers[j] == want[j] for j in wrong):
            raise Mistake(f"答案里少了开头：返回的要是完整的数，prefix 加上模型接着写的部分{case}")
        if prefix and answers == plain:
            raise Mistake(f"答案和不写开头时一模一样：开头的字符没有进 cache，或者写出的答案没有用它{case}")
        if all(answers[j] == want[j] + "<eos>" for j in wrong):
            raise Mistake(f"把 <eos> 也写进了答案：遇到 <eos> 就停，它本身不是数字{case}")
        if all(answers[j].startswith(want[j]) for j in wrong):
            raise Mistake(f"没有在各自的 <eos> 处截断：一个数写出 <eos> 之后还在往它的答案里加字；一批里短的数字早就写完了，"
                          f"之后的输出要丢掉{case}")
        if all(want[j].startswith(answers[j]) for j in wrong):
            raise Mistake(f"答案少了位数：是不是循环停得太早，或者漏掉了最后一步的输出？{case}")
        raise Mistake(f"答案不对{case}：开头喂完之后，每步取 logits 在词表轴上的 argmax，作为写出的 token 和下一步的输入")


# ---------------------------------------------------------------- 13.3 ablating a head

HOOK_CASES = [(64, 4, 2), (64, 4, 0), (12, 3, 2), (8, 1, 0)]  # (d_model, n_heads, head)


@checker("ch13", "13.3", "写一个去掉某个头的 W_o 前置钩子")
def check_zero_head_hook(fn):
    """``fn(head, d_k) -> hook``, ``hook(module, inputs) -> (new_concat,)`` zeroing head ``head``'s d_k columns of
    the ``(concat (B, L, d_model),)`` that ``W_o`` receives, in a new tensor; also checked end to end on a layer."""
    gen = torch.Generator().manual_seed(13)
    for d_model, n_heads, head in HOOK_CASES:
        d_k = d_model // n_heads
        hook = call(fn, head, d_k, what="你的钩子工厂函数", forbid=HOOK_SHORTCUTS)
        if not callable(hook):
            raise Mistake(f"fn(head, d_k) 应该返回一个函数 hook(module, inputs)，却返回了 {type(hook).__name__}")
        concat = torch.randn(2, 3, d_model, generator=gen)
        linear = torch.nn.Linear(d_model, d_model)
        out = call(hook, linear, (concat,), what="你的钩子", forbid=HOOK_SHORTCUTS)
        new = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        new = expect_tensor(new, "钩子返回的 concat", nan_hint="去掉一个头是把它那 d_k 列换成 0")
        (want,) = zero_head_hook(head, d_k)(linear, (concat,))  # the package's own hook
        expect_shape(new, concat.shape, "钩子返回的 concat", hint="只把一些列置零，形状不变")
        if new.dtype != concat.dtype:
            raise Mistake(f"钩子返回的 concat 的 dtype 是 {new.dtype}，传进来的是 {concat.dtype}：W_o 的权重是 {concat.dtype}，"
                          "dtype 不同它就算不了；置零不要改 dtype（用 clone() 再赋 0，或乘一个同 dtype 的掩码）")
        if not torch.allclose(new, want):
            lo, hi = head * d_k, (head + 1) * d_k
            zero_cols = (new == 0).all(dim=0).all(dim=0)  # (d_model,)
            kept, cols = ~zero_cols, zero_cols.nonzero().flatten().tolist()
            if torch.equal(new, concat):
                raise Mistake(f"钩子返回的 concat 和传进来的一样，一列也没有置零：头 {head} 是最后一个轴上 [{lo}, {hi}) 这一段，"
                              f"切片写成 [..., {lo}:{hi}]（[:, …] 切的是第 1 个轴，token 的位置）")
            if n_heads > 1 and torch.allclose(new, concat - want):
                raise Mistake(f"反了：你只留下了头 {head}，把其余的头都置零了；要去掉的是头 {head} 的那 d_k 列")
            if torch.allclose(new[:, head], torch.zeros_like(new[:, head])) and not zero_cols.any():
                raise Mistake("置零的是 token（第 1 个轴）而不是头的列：concat 的形状是 (B, L, d_model)，"
                              "头 i 是最后一个轴上 [i*d_k, (i+1)*d_k) 这一段")
            if cols and cols != list(range(lo, hi)):
                which = f"{cols[0]} 到 {cols[-1]}" if cols == list(range(cols[0], cols[-1] + 1)) else \
                    "、".join(map(str, cols[:5])) + ("……" if len(cols) > 5 else "")
                raise Mistake(f"切片位置不对：头 {head} 占最后一个轴的第 {lo} 到 {hi - 1} 列（head * d_k 到 (head + 1) * d_k，"
                              f"共 d_k = {d_k} 列），你置零的是第 {which} 列")
            if zero_cols[lo:hi].all() and kept.any() and n_heads > 1:
                scale = (new[..., kept] / concat[..., kept]).mean().item()
                if abs(scale - 1) > 1e-3:
                    raise Mistake(f"其余的头被乘了 {scale:.3g}：去掉一个头时别的头保持原样，不要像 dropout 那样放大")
            raise Mistake(f"结果不对（d_model={d_model}, n_heads={n_heads}, head={head}）：应该只把最后一个轴上 "
                          f"[{lo}, {hi}) 这几列置零，其余不变")
        layer = MultiHeadAttention(d_model, n_heads, dropout=0.0)
        x = torch.randn(2, 3, d_model, generator=gen)
        handle = layer.W_o.register_forward_pre_hook(hook)
        try:
            got = layer(x, x, x)
        except Exception as e:  # the student's hook runs inside the layer
            raise Mistake(f"挂上钩子之后层的前向出错：{exception_text(e)}") from None
        finally:
            handle.remove()
        expect_close(got.detach(), head_removed(layer, x, x, head).detach(), "挂上钩子之后层的输出",
                     hint="钩子要返回改好的输入（一个 tuple 或张量）；返回 None 表示“不改”")
