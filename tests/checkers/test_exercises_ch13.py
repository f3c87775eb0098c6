"""Chapter 13 checkers: references pass, stubs are "not done", named mistakes fail, shortcuts are refused,
garbage never raises."""
import pytest
import torch

from mha.course.exercises import (check_continue_prefix, check_pad_numerals, check_zero_head_hook)
from mha.course.numerals.data import BOS, EOS, TGT_TOKENS
from exercise_support import answers_for, every, mistakes_for, not_done_answers, right_answers, verdict, wrong_answers
from exercise_support import raise_value_error as crashes


# ---------------------------------------------------------------- 13.1 padding

def pad_ok(words, vocab, pad_id):
    S = max(len(w) for w in words)
    ids = torch.full((len(words), S), pad_id, dtype=torch.long)
    for b, w in enumerate(words):
        ids[b, : len(w)] = torch.tensor([vocab[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]


def pad_ok_lists(words, vocab, pad_id):
    S = max(map(len, words))
    rows = [[vocab[c] for c in w] + [pad_id] * (S - len(w)) for w in words]
    ids = torch.tensor(rows)
    mask = torch.tensor([[True] * len(w) + [False] * (S - len(w)) for w in words])
    return ids, mask.view(len(words), 1, 1, S)


def pad_with(change):
    def fn(words, vocab, pad_id):
        return change(*pad_ok(words, vocab, pad_id), words, vocab, pad_id)
    return fn


def pad_left(words, vocab, pad_id):
    S = max(len(w) for w in words)
    ids = torch.full((len(words), S), pad_id, dtype=torch.long)
    for b, w in enumerate(words):
        ids[b, S - len(w):] = torch.tensor([vocab[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]


def pad_fixed_15(words, vocab, pad_id):
    ids = torch.full((len(words), 15), pad_id, dtype=torch.long)
    for b, w in enumerate(words):
        ids[b, : len(w)] = torch.tensor([vocab[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]


def pad_zero_hardcoded(words, vocab, pad_id):
    return pad_ok(words, vocab, 0)


def pad_via_mha(words, vocab, pad_id):
    import mha
    ids, _ = pad_ok(words, vocab, pad_id)
    return ids, mha.padding_mask(ids, pad_id)


def pad_mutates(words, vocab, pad_id):
    words.sort(key=len)
    return pad_ok(words, vocab, pad_id)


def pad_with_book_vocab(words, vocab, pad_id):  # a student's: ignores the vocab handed in
    from mha.course.numerals.data import SRC_ID
    S = max(map(len, words))
    ids = torch.full((len(words), S), pad_id, dtype=torch.long)
    for b, w in enumerate(words):
        ids[b, :len(w)] = torch.tensor([SRC_ID[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]


PAD_WRONG = {
    "the book's vocab, not the one handed in": (pad_with_book_vocab, "vocab"),
    "left padding": (pad_left, "左边"),
    "fixed length": (pad_fixed_15, "太长"),
    "pad id 0 hard-coded": (pad_zero_hardcoded, "写死成了 0"),
    "mask (B, S)": (pad_with(lambda ids, m, *a: (ids, m[:, 0, 0])), "(B, 1, 1, S)"),
    "mask on queries": (pad_with(lambda ids, m, *a: (ids, m[:, 0, 0, :, None][:, None])), "key"),
    "inverted mask": (pad_with(lambda ids, m, *a: (ids, ~m)), "极性反了"),
    "mask from ids != 0": (pad_with(lambda ids, m, w, v, p: (ids, (ids != 0)[:, None, None, :])), "写死成了 0"),
    "float ids": (pad_with(lambda ids, m, *a: (ids.float(), m)), "torch.long"),
    "int32 ids": (pad_with(lambda ids, m, *a: (ids.int(), m)), "torch.long"),
    "int mask": (pad_with(lambda ids, m, *a: (ids, m.long())), "torch.bool"),
    "uses mha": (pad_via_mha, "不能调用现成的"),
    "one value": (lambda w, v, p: pad_ok(w, v, p)[0], "两个值"),
}


# ---------------------------------------------------------------- 13.2 greedy decoding

def continue_ok(model, src, src_mask, prefix):
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    feed = [BOS] + [TGT_TOKENS.index(c) for c in prefix]
    token = torch.full((B, 1), feed[0], dtype=torch.long)
    caches, answers, done = None, [prefix] * B, [False] * B
    for step in range(9):
        logits, caches = model.decode_step(token, memory, src_mask, caches)
        if step + 1 < len(feed):                                   # still writing the forced prefix
            token = torch.full((B, 1), feed[step + 1], dtype=torch.long)
            continue
        nxt = logits.argmax(-1)
        for b in range(B):
            if not done[b]:
                if nxt[b] == EOS:
                    done[b] = True
                else:
                    answers[b] += TGT_TOKENS[nxt[b]]
        if all(done):
            break
        token = nxt[:, None]
    return answers


def greedy_ok(model, src, src_mask):  # the old 13.2: no prefix
    return continue_ok(model, src, src_mask, "")


def greedy_variant(*, no_cache=False, no_mask=False, start=BOS, keep_eos=False, no_cut=False, steps=9, short=False):
    """Greedy decoding with one mistake; ``no_cut``: never stops, picks the best *digit* at every step."""
    def fn(model, src, src_mask):
        memory = model.encode(src, src_mask)
        B = src.shape[0]
        token = torch.full((B, 1), start, dtype=torch.long)
        caches, rows = None, []
        for _ in range(steps):
            logits, new = model.decode_step(token, memory, None if no_mask else src_mask, None if no_cache else caches)
            caches = new
            nxt = logits[:, 3:].argmax(-1) + 3 if no_cut else logits.argmax(-1)
            rows.append(nxt)
            token = nxt[:, None]
        ids = torch.stack(rows, 1).tolist()
        out = []
        for row in ids:
            text = ""
            for i in row:
                if i == EOS and not no_cut:
                    if keep_eos:
                        text += "<eos>"
                    break
                text += TGT_TOKENS[i] if i >= 3 else ""
            out.append(text[:-1] if short else text)
        return out
    return fn


def greedy_full_recompute(model, src, src_mask):
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    tgt = torch.full((B, 1), BOS, dtype=torch.long)
    for _ in range(9):
        logits = model.decode(tgt, memory, src_mask)
        tgt = torch.cat([tgt, logits[:, -1].argmax(-1, keepdim=True)], 1)
    out = []
    for row in tgt[:, 1:].tolist():
        text = ""
        for i in row:
            if i == EOS:
                break
            text += TGT_TOKENS[i]
        out.append(text)
    return out


GREEDY_WRONG = {
    "translate": (lambda model, src, mask: model.translate(["十"] * src.shape[0]), "不能调用现成的 model.translate"),
    "greedy_ids": (lambda model, src, mask: [str(x) for x in model.greedy_ids(src, mask).tolist()], "model.greedy_ids"),
    "full recompute": (greedy_full_recompute, "整段重算"),
    "no cache passed": (greedy_variant(no_cache=True), "caches 原样传回去"),
    "no src mask": (greedy_variant(no_mask=True), "src_mask"),
    "starts with pad": (greedy_variant(start=0), "<bos>"),
    "keeps <eos>": (greedy_variant(keep_eos=True), "<eos> 也写进了答案"),
    "no cut at eos": (greedy_variant(no_cut=True), "没有在各自的 <eos> 处截断"),
    "one digit short": (greedy_variant(short=True), "少了位数"),
    "returns tensor": (lambda model, src, mask: torch.zeros(src.shape[0], 3), "字符串列表"),
    "wrong count": (lambda model, src, mask: greedy_ok(model, src, mask)[:-1], "个答案"),
}


# ---------------------------------------------------------------- 13.2 as the book asks it now: a forced prefix

def continue_tensors(model, src, src_mask, prefix):  # a done mask, PAD fed to finished rows, prints allowed
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    forced = torch.tensor([BOS] + [TGT_TOKENS.index(c) for c in prefix])
    caches, out, done = None, [], torch.zeros(B, dtype=torch.bool)
    logits, caches = None, None
    for t in forced:
        logits, caches = model.decode_step(t.expand(B, 1), memory, src_mask, caches)
    while True:
        nxt = logits.argmax(-1).masked_fill(done, 0)
        out.append(nxt)
        done |= nxt == EOS
        if done.all() or len(out) + len(prefix) >= 9:
            break
        logits, caches = model.decode_step(nxt[:, None], memory, src_mask, caches)
    rows = torch.stack(out, 1).tolist()
    return [prefix + "".join(TGT_TOKENS[i] for i in row[:row.index(EOS)] if i > 2) for row in rows]


def continue_variant(*, skip_prefix=False, drop_prefix=False, no_cache=False, all_at_once=False, keep_eos=False,
                     never_stop=False, encode_each=False, prefix_from_logits=False):
    def fn(model, src, src_mask, prefix):
        B = src.shape[0]
        memory = model.encode(src, src_mask)
        feed = [BOS] + ([] if skip_prefix else [TGT_TOKENS.index(c) for c in prefix])
        caches, logits = None, None
        if all_at_once:
            logits, caches = model.decode_step(torch.tensor([feed] * B), memory, src_mask, None)
        else:
            for j, t in enumerate(feed):
                if prefix_from_logits and j > 0:
                    t = logits.argmax(-1)[:, None]
                tok = t if isinstance(t, torch.Tensor) else torch.full((B, 1), t, dtype=torch.long)
                logits, new = model.decode_step(tok, memory, src_mask, None if no_cache else caches)
                caches = new
        answers, done = ["" if drop_prefix else prefix] * B, [False] * B
        for _ in range(9 - len(feed) + 1):
            nxt = logits.argmax(-1)
            for b in range(B):
                if not done[b]:
                    if nxt[b] == EOS:
                        done[b] = True
                        answers[b] += "<eos>" if keep_eos else ""
                    else:
                        answers[b] += TGT_TOKENS[nxt[b]]
            if all(done) and not never_stop:
                break
            if encode_each:
                memory = model.encode(src, src_mask)
            logits, new = model.decode_step(nxt[:, None], memory, src_mask, None if no_cache else caches)
            caches = new
        return answers
    return fn


def continue_one_by_one(model, src, src_mask, prefix):  # right answers, but B = 1 decodes: no crash in the checker
    memory, out = model.encode(src, src_mask), []
    for b in range(src.shape[0]):
        token, caches, written = torch.tensor([[BOS]]), None, prefix
        for c in prefix:
            _, caches = model.decode_step(token, memory[b:b + 1], src_mask[b:b + 1], caches)
            token = torch.tensor([[TGT_TOKENS.index(c)]])
        for _ in range(20):
            logits, caches = model.decode_step(token, memory[b:b + 1], src_mask[b:b + 1], caches)
            if int(logits.argmax(-1)) == EOS:
                break
            written += TGT_TOKENS[int(logits.argmax(-1))]
            token = logits.argmax(-1)[:, None]
        out.append(written)
    return out


CONTINUE_WRONG = {
    "prefix not fed": (continue_variant(skip_prefix=True), "应该喂开头的第 1 个字符 “3”"),
    "prefix from logits": (continue_variant(prefix_from_logits=True), "应该喂开头的第 1 个字符"),
    "prefix left out of the answer": (continue_variant(drop_prefix=True), "答案里少了开头"),
    "caches not passed": (continue_variant(no_cache=True), "传的 caches 是 None"),
    "one numeral at a time": (continue_one_by_one, "不要一个数一个数地解码"),  # the chapter's B = 1 loop, per numeral
    "prefix in one call": (continue_variant(all_at_once=True), "decode_step takes one token per sequence"),
    "keeps <eos>": (continue_variant(keep_eos=True), "<eos> 也写进了答案"),
    "never stops": (continue_variant(never_stop=True), "次就够了"),
    "encode each step": (continue_variant(encode_each=True), "model.encode"),
    "translate": (lambda model, src, mask, prefix: model.translate(["十"] * src.shape[0]), "不能调用现成的 model.translate"),
    "old signature": (greedy_ok, "参数和题目给的不一样"),
}


# ---------------------------------------------------------------- 13.3 ablation hook

def hook_ok(head, d_k):
    def hook(module, inputs):
        (concat,) = inputs
        keep = torch.ones(concat.shape[-1])
        keep[head * d_k: (head + 1) * d_k] = 0
        return (concat * keep,)
    return hook


def hook_ok_clone(head, d_k):
    def hook(module, inputs):
        out = inputs[0].clone()
        out[..., head * d_k: (head + 1) * d_k] = 0
        return out  # a bare tensor is fine for PyTorch too
    return hook


def hook_with(change):
    def factory(head, d_k):
        def hook(module, inputs):
            return (change(inputs[0].clone(), head, d_k),)
        return hook
    return factory


def _zero(x, lo, hi):
    x[..., lo:hi] = 0
    return x


def _zero_positions(x, h, d):  # x[:, lo:hi] = 0: the token axis, empty for L = 3
    x[:, h * d:(h + 1) * d] = 0
    return x


def hook_inplace(head, d_k):
    def hook(module, inputs):
        inputs[0][..., head * d_k: (head + 1) * d_k] = 0
        return inputs
    return hook


def hook_via_mha(head, d_k):
    from mha.course.numerals.model import zero_head_hook
    return zero_head_hook(head, d_k)


def hook_calls_mha_inside(head, d_k):
    def hook(module, inputs):
        from mha.course.numerals.model import zero_head_hook
        return zero_head_hook(head, d_k)(module, inputs)
    return hook


HOOK_WRONG = {
    "only that head kept": (hook_with(lambda x, h, d: x - _zero(x.clone(), h * d, (h + 1) * d)), "反了"),
    "tokens zeroed": (hook_with(lambda x, h, d: torch.cat([x[:, :h], 0 * x[:, h:h + 1], x[:, h + 1:]], 1)
                                if h < x.shape[1] else _zero(x, 0, 1)), "token"),
    "off by one head": (hook_with(lambda x, h, d: _zero(x, (h + 1) * d % x.shape[-1], (h + 1) * d % x.shape[-1] + d)),
                        "切片位置不对"),
    "rescaled": (hook_with(lambda x, h, d: _zero(x, h * d, (h + 1) * d) * 2), "放大"),
    "slice end one short": (hook_with(lambda x, h, d: _zero(x, h * d, (h + 1) * d - 1)), "你置零的是第 32 到 46 列"),
    "one column [head]": (hook_with(lambda x, h, d: _zero(x, h, h + 1)), "你置零的是第 2 到 2 列"),
    "strided columns": (hook_with(lambda x, h, d: x.index_fill(-1, torch.arange(h, x.shape[-1], x.shape[-1] // d), 0)),
                        "你置零的是第 2、6、10、14、18……"),  # head::h, heads taken as interleaved
    "positions sliced": (hook_with(_zero_positions), "一列也没有置零"),
    "NaN for zero": (hook_with(lambda x, h, d: x.index_fill(-1, torch.arange(h * d, (h + 1) * d), float("nan"))), "换成 0"),
    "in place": (hook_inplace, "修改了输入"),
    "returns None": (lambda head, d_k: (lambda module, inputs: None), "返回了 None"),
    "uses mha factory": (hook_via_mha, "不能调用现成的"),
    "uses mha inside": (hook_calls_mha_inside, "不能调用现成的"),
    "not a factory": (lambda head, d_k: 42, "返回一个函数"),
}


# ---------------------------------------------------------------- garbage, for every checker

GARBAGE = [
    "a string",
    42,
    crashes,
    lambda *a: float("nan"),
    lambda *a: torch.full((4, 4), float("nan")),
    lambda *a: (torch.zeros(2, 2, dtype=torch.int8), "x"),
    lambda *a: ["x"] * 20,
    lambda *a: (torch.zeros(1), torch.zeros(1)),
    lambda *a: (lambda *b: (torch.zeros(3),)),
    lambda *a: (lambda *b: (_ for _ in ()).throw(RuntimeError("inside"))),
    lambda: None,  # wrong number of arguments
]


test_right_answers_pass = right_answers(
    answers_for(check_pad_numerals, [pad_ok, pad_ok_lists]),
    answers_for(check_continue_prefix, [continue_ok, continue_tensors]),
    answers_for(check_zero_head_hook, [hook_ok, hook_ok_clone]),
)
test_stubs_are_not_done = not_done_answers(answers_for(check_pad_numerals, [lambda *a: (..., ...)]))
test_wrong_answers_are_named = wrong_answers(
    mistakes_for(check_pad_numerals, PAD_WRONG.values()),
    mistakes_for(check_continue_prefix, CONTINUE_WRONG.values()),
    mistakes_for(check_zero_head_hook, HOOK_WRONG.values()),
    every([check_pad_numerals,  check_continue_prefix, check_zero_head_hook], GARBAGE),
)


def _zeroing_hook(dtype):
    def make(head, d_k):
        def hook(module, inputs):
            out = inputs[0].clone().to(dtype)
            out[..., head * d_k:(head + 1) * d_k] = 0
            return (out,)
        return hook
    return make


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64])
def test_13_3_names_a_dtype_mismatch(capsys, dtype):
    ok, line = verdict(capsys, check_zero_head_hook, _zeroing_hook(dtype))
    assert ok is False and "dtype" in line and str(dtype) in line, line


# ---------------------------------------------------------------- 13.2 residues (issue 27)
def continue_by_decode_target(model, src, src_mask, prefix):
    """Honest: the written ids collected, the strings built by the library's own decode_target."""
    from mha.course.numerals.data import MAX_TARGET_LEN, decode_target
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    feed = [BOS] + [TGT_TOKENS.index(c) for c in prefix]
    token, caches, written, done = torch.full((B, 1), feed[0]), None, [], torch.zeros(B, dtype=torch.bool)
    for step in range(MAX_TARGET_LEN):
        logits, caches = model.decode_step(token, memory, src_mask, caches)
        if step + 1 < len(feed):
            token = torch.full((B, 1), feed[step + 1])
            continue
        nxt = logits.argmax(-1)  # (B,)
        written.append(nxt)
        done |= nxt == EOS
        if done.all():
            break
        token = nxt[:, None]
    return [prefix + s for s in decode_target(torch.stack(written, 1))]


def continue_writing_after_eos(model, src, src_mask, prefix):
    """Wrong: a row that wrote <eos> keeps adding what the model writes afterwards (no done flag per row)."""
    from mha.course.numerals.data import MAX_TARGET_LEN
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    feed = [BOS] + [TGT_TOKENS.index(c) for c in prefix]
    token, caches, answers, seen = torch.full((B, 1), feed[0]), None, [prefix] * B, torch.zeros(B, dtype=torch.bool)
    for step in range(MAX_TARGET_LEN):
        logits, caches = model.decode_step(token, memory, src_mask, caches)
        if step + 1 < len(feed):
            token = torch.full((B, 1), feed[step + 1])
            continue
        nxt = logits.argmax(-1)
        answers = [a + (TGT_TOKENS[n] if n != EOS and TGT_TOKENS[n].isdigit() else "") for a, n in zip(answers, nxt.tolist())]
        seen |= nxt == EOS
        if seen.all():
            break
        token = nxt[:, None]
    return answers


test_residues_13_2_right = right_answers(answers_for(check_continue_prefix, [continue_by_decode_target]))
test_residues_13_2_wrong = wrong_answers(mistakes_for(check_continue_prefix, [(continue_writing_after_eos, "<eos>")]))
