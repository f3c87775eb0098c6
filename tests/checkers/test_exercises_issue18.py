"""The answers of issue 18, tried as a student would: two honest answers that must pass, and one real
mistake per category that must fail with a verdict naming it."""
import math

import pytest
import torch
from torch import nn

import mha
import mha.course.exercises as ex
from mha.course.numerals.data import BOS, EOS, decode_target
from exercise_support import verdict, verdict_allowing_prints


# ---------------------------------------------------------------- 8.2 load_from_torch
def load(ours, reference, *, via=None):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        w = reference.in_proj_weight[i * d:(i + 1) * d]
        getattr(ours, name).weight.copy_(w if via is None else via(w))
        if reference.in_proj_bias is not None:
            getattr(ours, name).bias.copy_(reference.in_proj_bias[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)
    if reference.out_proj.bias is not None:
        ours.W_o.bias.copy_(reference.out_proj.bias)


def load_printing(ours, reference):
    print(ours)  # debugging: the layer's extra_repr is no shortcut
    load(ours, reference)


def load_new_linear(ours, reference):
    load(ours, reference)
    new = nn.Linear(ours.W_q.in_features, ours.W_q.out_features, dtype=ours.W_q.weight.dtype)
    new.load_state_dict(ours.W_q.state_dict())
    ours.W_q = new


def load_shared_module(ours, reference):
    load(ours, reference)
    ours.W_o = reference.out_proj


def load_via_float32(ours, reference):
    load(ours, reference, via=lambda w: w.float())


# ---------------------------------------------------------------- 8.3 a layer with K and V swapped
class Layer(nn.Module):
    swap = False

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None):
        if self.swap:
            K, V = V, K
        B, L, _ = Q.shape
        split = lambda x: x.view(B, x.shape[1], self.h, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.W_q(Q)), split(self.W_k(K)), split(self.W_v(V))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            mask = mask != 0
            scores = scores.masked_fill(~(mask[:, None] if mask.dim() == 3 else mask), -1e9)
        out = torch.softmax(scores, -1) @ v
        return self.W_o(out.transpose(1, 2).reshape(B, L, -1))


class SwappedKV(Layer):
    swap = True


# ---------------------------------------------------------------- 13.2 greedy decoding
def greedy(model, src, src_mask, *, encode_each_step=False, re_decode=False, stop=True, max_len=9):
    memory = model.encode(src, src_mask)
    B = src.shape[0]
    token = torch.full((B, 1), BOS, dtype=torch.long)
    done, caches, out, prefix = torch.zeros(B, dtype=torch.bool), None, [], token
    for step in range(max_len):
        if encode_each_step:
            memory = model.encode(src, src_mask)
        if re_decode and step > 0:
            logits = model.decode(prefix, memory, src_mask)[:, -1]
        else:
            logits, caches = model.decode_step(token, memory, src_mask, caches)
        nxt = logits.argmax(-1).masked_fill(done, 0)
        out.append(nxt)
        done |= nxt == EOS
        if stop and done.all():
            break
        token = nxt[:, None]
        prefix = torch.cat([prefix, token], 1)
    return decode_target(torch.stack(out, 1))


# ---------------------------------------------------------------- 1.3 changed positions
def changed(f, x, k, *, threshold=1e-6, feature=None, bump=lambda t: t + 1):
    x2 = x.clone()
    if feature is None:
        x2[:, k] = bump(x2[:, k])
    else:
        x2[:, k, feature] = bump(x2[:, k, feature])
    with torch.no_grad():
        moved = (f(x2) - f(x)).abs().amax(dim=(0, 2)) > threshold
    return moved.nonzero().flatten().tolist()


def _attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    print(mha.fmt(scores.flatten()[:2], 2))  # the book's own fmt while debugging
    return torch.softmax(scores, -1) @ v


@pytest.mark.parametrize("checker, answer", [(ex.check_load_from_torch, load_printing), (ex.check_attention, _attention)],
                         ids=["8.2 print(ours)", "5.3 mha.fmt"])
def test_honest_answers_pass(capsys, checker, answer):
    ok, line = verdict_allowing_prints(capsys, checker, answer)
    assert ok is True, line


MISTAKES = [
    ("8.3 K/V swapped", ex.check_my_multihead_attention, SwappedKV, "K 和 V 用反了"),
    ("8.2 new Linear", ex.check_load_from_torch, load_new_linear, "新的 nn.Linear"),
    ("8.2 shared module", ex.check_load_from_torch, load_shared_module, "共用一个对象"),
    ("8.2 float32 copy", ex.check_load_from_torch, load_via_float32, "float32"),
    ("13.2 re-decode", ex.check_greedy_decode, lambda m, s, k: greedy(m, s, k, re_decode=True), "整段重算"),
    ("13.2 encode each step", ex.check_greedy_decode, lambda m, s, k: greedy(m, s, k, encode_each_step=True), "model.encode"),
    ("13.2 no stop at <eos>", ex.check_greedy_decode, lambda m, s, k: greedy(m, s, k, stop=False), "<eos>"),
    ("1.3 threshold 1e-3", ex.check_changed_positions_fn, lambda f, x, k: changed(f, x, k, threshold=1e-3), "1e-6"),
    ("1.3 one feature", ex.check_changed_positions_fn, lambda f, x, k: changed(f, x, k, feature=0), "特征"),
    ("1.3 times 2", ex.check_changed_positions_fn, lambda f, x, k: changed(f, x, k, bump=lambda t: t * 2), "加 1"),
    ("9.1 from the first PAD", ex.check_padding_mask,
     lambda ids, p: ((ids == p).long().cumsum(-1) == 0)[:, None, None, :], "第一个 PAD"),
    ("13.1 ignores vocab", ex.check_pad_numerals, None, "vocab"),
    ("3.3 aten.linear", ex.check_project_matmul, lambda x, lin: torch.ops.aten.linear(x, lin.weight, lin.bias),
     "torch.ops.aten.linear"),
    ("5.3 softmax of an int tensor", ex.check_attention,
     lambda q, k, v, mask=None: torch.softmax((q @ k.transpose(-2, -1)).long(), -1) @ v, "运行时抛出了"),
    ("10.2 pad @ causal", ex.check_combine_masks, lambda pad, causal: pad @ causal, "运行时抛出了"),
]


def _pad_with_book_vocab(words, vocab, pad_id):
    from mha.course.numerals.data import SRC_ID
    S = max(map(len, words))
    ids = torch.full((len(words), S), pad_id, dtype=torch.long)
    for b, w in enumerate(words):
        ids[b, :len(w)] = torch.tensor([SRC_ID[c] for c in w])
    return ids, (ids != pad_id)[:, None, None, :]


@pytest.mark.parametrize("name, checker, answer, words", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_mistake_fails_with_a_verdict_that_names_it(capsys, name, checker, answer, words):
    answer = _pad_with_book_vocab if answer is None else answer
    ok, line = verdict(capsys, checker, answer)
    assert ok is False and words in line, line


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
    ok, line = verdict(capsys, ex.check_zero_head_hook, _zeroing_hook(dtype))
    assert ok is False and "dtype" in line and str(dtype) in line, line
