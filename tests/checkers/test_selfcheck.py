"""The self-checks in the pages (mha.course.selfcheck): well-formed, computed, agreeing with the checkers, in the notebooks.

* every chapter 1-10 has one, at least 15 exercises in all; every multiple-choice question has
  exactly one right option and every option a feedback that says right/wrong and why;
* the right answers agree with the notebook checkers of mha.course.exercises (the checker accepts the
  right option and rejects every wrong one), and with the lecture's formulas;
* the display data is deterministic and leaves the notebook's random state alone;
* each notebook shows the self-check next to its exercise (input removed on the site), with
  the stored output that mha.course.selfcheck renders now; every coding exercise says, next to its
  stub, that it is done in Colab or a local Jupyter;
* the Colab setup cell installs the jupyterquiz that requirements.txt pins.
"""
from __future__ import annotations

import ast
import dataclasses
import html
import json
import pathlib
import random
import re

import pytest
import torch

import mha
import mha.course.selfcheck as sc
from mha.course import exercises as ex
from mha.course.exercises import ch02, ch05, ch06, ch07, ch08, ch09, ch10
from mha.course.exercises import verdicts
from mha.course.exercises.records import RECORDS, predict_which

ROOT = pathlib.Path(__file__).resolve().parents[2]
import setup_cell

NOTE = "在 Colab 或本地 Jupyter 中完成"  # said once per chapter, before its first exercise
CHAPTERS = {int(p.name[:2]): p for p in sorted((ROOT / "book").glob("[01][0-9]_*.ipynb")) if int(p.name[:2]) <= 10}


def chapter_of(exercise_id: str) -> int:
    return int(exercise_id.split(".")[0])


def label(answer: dict) -> str:
    return html.unescape(answer.get("code") or answer["answer"])


def value_of(answer: dict):
    """The Python value behind a multiple-choice option's text, e.g. "(2, 7, 12)" -> (2, 7, 12)."""
    return ast.literal_eval(label(answer))


def options(question: dict) -> list:
    return [(a, a["correct"]) for a in question["answers"]]


def right(question: dict):
    return next(a for a in question["answers"] if a.get("correct"))


def passes(check, answer, capsys) -> bool:
    ok = check(answer, record=False)
    capsys.readouterr()  # the checker's one-line verdict
    return ok


# ---------------------------------------------------------------- coverage and form
def test_every_chapter_1_to_10_has_a_self_check_and_15_in_all():
    per_chapter = {n: [e for e in sc.EXERCISES if chapter_of(e) == n] for n in range(1, 11)}
    assert all(per_chapter.values()), {n: e for n, e in per_chapter.items() if not e}
    assert len(sc.EXERCISES) >= 15, sc.EXERCISES
    assert set(sc.EXERCISES) <= {eid for ch in range(1, 11) for eid in ex.results(f"ch{ch:02d}")}


@pytest.mark.parametrize("exercise_id", sc.EXERCISES)
def test_questions_are_well_formed(exercise_id):
    for q in sc.questions(exercise_id):
        assert q["question"] and q["type"] in ("multiple_choice", "numeric")
        if q["type"] == "multiple_choice":
            assert len(q["answers"]) >= 3
            assert sum(a["correct"] for a in q["answers"]) == 1, q["question"]
            labels = [label(a) for a in q["answers"]]
            assert len(set(labels)) == len(labels), labels
            for a in q["answers"]:
                assert a["feedback"].startswith(sc.RIGHT if a["correct"] else sc.WRONG), a
                assert len(a["feedback"]) > len(sc.WRONG) + 5, "every option explains itself"
        else:
            first, default = q["answers"][0], q["answers"][-1]
            assert first["type"] == "value" and first["correct"] and first["feedback"].startswith(sc.RIGHT)
            assert default["type"] == "default" and default["feedback"].startswith(sc.WRONG)
            wrong = [a for a in q["answers"] if a["type"] == "value" and not a["correct"]]
            assert wrong and all(a["feedback"].startswith(sc.WRONG) for a in wrong)
            assert "按回车" in q["question"]
        assert "$" not in json.dumps(q, ensure_ascii=False), "no TeX: jupyterquiz would hand it to MathJax"


def test_the_right_option_is_not_always_in_the_same_place():
    places = {[a["correct"] for a in q["answers"]].index(True)
              for e in sc.EXERCISES for q in sc.questions(e) if q["type"] == "multiple_choice"}
    assert len(places) >= 3, places


# ---------------------------------------------------------------- agreement with the checkers
def _choices(exercise_id: str, index: int = 0):
    q = [q for q in sc.questions(exercise_id)][index]
    return [(value_of(a), a["correct"]) for a in q["answers"]]


WARMUPS = {"1.1": ex.ch01.WARMUP, "1.2": ex.ch01.WARMUP_CROSS, "3.1": ex.ch03.WARMUP, "4.1": ex.ch04.WARMUP,
           "5.1": ex.ch05.WARMUP, "9.3": ex.ch09.WARMUP}


def _checker_of(exercise_id):
    return next(getattr(ex, n) for n in ex.__all__ if getattr(getattr(ex, n), "exercise_id", None) == exercise_id)


@pytest.mark.parametrize("exercise_id", sorted(WARMUPS))
def test_which_positions_choices_agree_with_the_checker(exercise_id, capsys, monkeypatch):
    """Each option of a "which positions change" self-check, put into the otherwise right answer, passes the
    checker of the case it asks (the exercise's own, or its warm-up's, built here and registered nowhere) iff it
    is the right option."""
    if exercise_id in WARMUPS:
        monkeypatch.setattr(verdicts, "_REGISTRY", verdicts.OrderedDict())
        monkeypatch.setitem(RECORDS, exercise_id, RECORDS[exercise_id])
        record, check = WARMUPS[exercise_id], predict_which(WARMUPS[exercise_id])
    else:
        record, check = RECORDS[exercise_id], _checker_of(exercise_id)
    rights = {key: [v for v, ok in _choices(exercise_id, i) if ok][0] for i, key in enumerate(record.keys)}
    assert passes(check, rights[""] if record.keys == ("",) else rights, capsys)
    for i, key in enumerate(record.keys):
        for value, correct in _choices(exercise_id, i):
            answer = value if record.keys == ("",) else {**rights, key: value}
            assert passes(check, answer, capsys) == correct, (key, value)


@pytest.mark.parametrize("exercise_id", sorted(WARMUPS))
def test_the_self_check_asks_a_sibling_case_not_the_exercise(exercise_id, capsys):
    """The quiz above a "which positions" exercise does not hand out its answer: each question's right option
    differs from the exercise's answer to that question, and the quiz's answers fail the exercise's checker."""
    record = RECORDS[exercise_id]
    truth = record.right()
    quiz = {key: [v for v, ok in _choices(exercise_id, i) if ok][0] for i, key in enumerate(WARMUPS[exercise_id].keys)}
    if set(quiz) == {""} != set(record.keys):  # 1.1: the quiz asks one all-shuffled case, the exercise two others
        quiz = {key: quiz[""] for key in record.keys}
    shared = [key for key in record.keys if key in quiz]  # 5.1's quiz asks no query, and a PAD's value besides
    if not shared:  # 3.1, 4.1: the quiz asks other questions; none of its answers, put into any graded key, passes
        for key, value in ((k, v) for k in record.keys for v in quiz.values()):
            assert value != truth[key] and not passes(_checker_of(exercise_id), {**truth, key: value}, capsys), (key, value)
    assert all(quiz[key] != truth[key] for key in shared), (quiz, truth)
    assert all(q["question"].startswith(sc.WARMUP) for q in sc.questions(exercise_id))
    if shared:
        answer = {**truth, **{key: quiz[key] for key in shared}}  # the graded answer with the quiz's answers put in
        assert not passes(_checker_of(exercise_id), answer[""] if record.keys == ("",) else answer, capsys)


def test_the_shuffle_warm_up_does_not_state_the_rule(capsys):
    """1.1's quiz shuffles Query, Key and Value together and explains one row only: no option's feedback states
    the rule r = p, and that rule read off the quiz and applied to both of the exercise's cases (Query only,
    Key/Value only) fails the checker, which names the Key/Value half."""
    (q,) = sc.questions("1.1")
    text = html.unescape(json.dumps(q, ensure_ascii=False))
    assert "r = p" not in text and "r[t] = p[t]" not in text and "r[0] = 2" in text, text
    p = ex.ch01.PERMUTATION
    assert not passes(ex.check_permuted_rows, {"queries": p, "keys": p}, capsys)
    ex.check_permuted_rows({"queries": p, "keys": p}, record=False)
    assert "以为输出跟着 key 的顺序走" in capsys.readouterr().out
    assert passes(ex.check_permuted_rows, {"queries": p, "keys": list(range(len(p)))}, capsys)


SPLIT_RULE = ("//", "只算 Q′ 的下标", "分头只搬数", "只有 token", "逐 token", "i·d_k")  # 4.1's graded rules, as worded


def test_the_split_warm_up_does_not_state_the_rule():
    """4.1's quiz asks neighbouring questions (a W_q column, a bias entry, the other sentence): its right options'
    words hold none of the wording in which the exercise's right answers give their rules (head n // d_k, a row
    reaches one number of Q′, only the changed token), and no text of the quiz divides an index into a head."""
    graded = [ask.right_why for ask in RECORDS["4.1"].asks.values()]
    assert all(any(w in why for w in SPLIT_RULE) for why in graded), graded  # the words are the exercise's own
    for q in sc.questions("4.1"):
        said = html.unescape(right(q)["feedback"])
        assert not [w for w in SPLIT_RULE if w in said], said
        assert "//" not in html.unescape(json.dumps(q, ensure_ascii=False)), q


def test_the_causal_warm_up_does_not_state_the_rule(capsys):
    """5.1's quiz asks a sentence with a PAD and no causal mask: no text of it (question, right or wrong option)
    says the exercise's causal rule the way the exercise's own verdicts say it, and each right option, asked of
    the causal exercise, fails its checker."""
    rule = ["key 0..t", "及以后", "自己和前面", "后面的 query", "因果掩码下"]  # how 5.1's right_why and verdicts say it
    graded = json.dumps([dataclasses.asdict(a) for a in RECORDS["5.1"].asks.values()], ensure_ascii=False)
    assert all(words in graded for words in rule), [w for w in rule if w not in graded]
    quiz = sc.questions("5.1")
    rights = [html.unescape(right(q)["feedback"]) for q in quiz]
    assert len(rights) == 3 and not [w for w in rule for text in rights if w in text], rights
    assert not [w for w in rule if w in html.unescape(json.dumps(quiz, ensure_ascii=False))]
    truth = RECORDS["5.1"].right()
    for key, q in zip(ch05.WARMUP.keys, quiz):  # the graded answer with one key replaced by the quiz's right option
        if key in truth:
            assert not passes(ex.check_rows_that_move, {**truth, key: value_of(right(q))}, capsys), key


CROSS_RULE = ("加权求和", "全都会变", "只用到 query j", "只有位置")  # 1.2's graded rules, as its right answers word them


def test_the_cross_warm_up_does_not_state_the_rule(capsys):
    """1.2's quiz adds a mask to the cross-attention: it asks none of the exercise's keys; neither graded rule, applied
    to the quiz's own sizes (a Key/Value token reaches every output, a Query token only its own), gives any of its
    right answers; no text of it holds the words in which the exercise's right answers give those rules; and each
    right answer, put into either graded key, fails the checker."""
    graded, quiz = RECORDS["1.2"], ex.ch01.WARMUP_CROSS
    said = [ask.right_why for ask in graded.asks.values()]
    assert all(any(w in why for w in CROSS_RULE) for why in said), said  # the words are the exercise's own
    assert set(graded.keys).isdisjoint(quiz.keys), quiz.keys
    questions = sc.questions("1.2")
    rights = [value_of(right(q)) for q in questions]
    L, S = quiz.size, ex.ch01.WARMUP_CROSS_AT[1]
    by_rule = [list(range(L))] + [[k] for k in range(min(L, S))]  # every output; the replaced token's own
    assert not [r for r in rights if r in by_rule], rights
    text = html.unescape(json.dumps(questions, ensure_ascii=False))
    assert not [w for w in CROSS_RULE if w in text], text
    truth = graded.right()
    for key, value in ((k, v) for k in graded.keys for v in rights):
        assert not passes(ex.check_changed_positions_cross, {**truth, key: value}, capsys), (key, value)


def test_the_gradient_warm_up_does_not_state_the_rule():
    """3.1's quiz asks the same experiment's neighbours (W_q's bias, W_k, the other sentence): no text of it says the
    rule that answers 3.1 (weight rows and columns, the token of Q'), neither the checker's own words nor their gist."""
    graded = RECORDS["3.1"]
    words = [ask.right_why for ask in graded.asks.values()] + ["(out, in)", "只用第", "每一列", "逐 token", "weight 的第"]
    assert set(graded.keys).isdisjoint(ex.ch03.WARMUP.keys)
    for q in sc.questions("3.1"):
        text = html.unescape(json.dumps(q, ensure_ascii=False))
        assert "weight.grad" not in text.replace("W_k.weight.grad", ""), text  # W_q's weight is 3.1's, not the quiz's
        for a in q["answers"]:
            assert not any(w in html.unescape(a["feedback"]) for w in words), a["feedback"]


def test_variances_are_the_theory():
    raw_q, scaled_q = sc.questions("5.2")
    raw, scaled = right(raw_q)["value"], right(scaled_q)["value"]
    assert (raw, scaled) == (ch05.VARIANCE_D_K, 1)
    for q in (raw_q, scaled_q):  # the quiz accepts what the chapter's tolerance accepts, and no more
        (low, high), truth = [a["range"] for a in q["answers"] if a["type"] == "range"][0], right(q)["value"]
        assert (low, high) == pytest.approx((truth * (1 - ch05.VARIANCE_RTOL), truth * (1 + ch05.VARIANCE_RTOL)))


def value_of_heads(answer: dict) -> tuple:
    """The (i, t, m) of an option "heads[b, i, t, m]"."""
    return tuple(int(n) for n in re.findall(r"\d+", label(answer)))


def _interleaved_source(t, j, L, h, d_k):
    """Where concat[b, t, j] of heads.permute(0, 2, 3, 1).reshape(B, L, h * d_k) comes from: a row is (d_k, h)."""
    return j % h, t, j // h


def test_concat_source_choice_is_what_the_interleaved_merge_gives():
    """6.1's warm-up asks the permute(0, 2, 3, 1) merge: the right option is the number found at concat[b, t, j]
    when every number of heads says where it sits, and no wrong option is."""
    L, h, d_k, t, j = ch06.SOURCE_WARMUP
    numbered = torch.arange(2 * h * L * d_k).view(2, h, L, d_k)
    found = numbered.permute(0, 2, 3, 1).reshape(2, L, h * d_k)[1, t, j]  # sentence b = 1
    (q,) = sc.questions("6.1")
    assert q["question"].startswith(sc.WARMUP) and "permute(0, 2, 3, 1)" in html.unescape(q["question"])
    for a in q["answers"]:
        assert re.fullmatch(r"heads\[b, \d+, \d+, \d+\]", label(a)), label(a)
        i, t2, m = value_of_heads(a)
        assert (numbered[1, i, t2, m] == found) == a["correct"], label(a)
    assert value_of_heads(right(q)) == _interleaved_source(t, j, L, h, d_k)


CONCAT_RULE = ("连续", "j // d_k", "j % d_k", "i·d_k", "token 不动")  # 6.1's graded rule, as the checker words it


def test_the_concat_warm_up_does_not_state_the_rule(capsys):
    """6.1's quiz asks another merge: its right option is neither merge's answer of the exercise at the quiz's
    (t, j); its rule, given as either of the exercise's functions, fails the checker (and the checker then passes
    the right pair); no text of the quiz holds the words in which the checker states the right merge's rule."""
    L, h, d_k, t, j = ch06.SOURCE_WARMUP
    (q,) = sc.questions("6.1")
    got = value_of_heads(right(q))
    for merge in (mha.merge_heads, ch06.merge_heads_buggy):
        assert got != ch06.source_map(merge, L, h, d_k)[(t, j)], merge
    right_fn = lambda t, j, L, h, d: (j // d, t, j % d)  # noqa: E731
    buggy_fn = lambda t, j, L, h, d: ((t * h * d + j) // (L * d), (t * h * d + j) // d % L, (t * h * d + j) % d)  # noqa: E731
    assert passes(ex.check_concat_source, {"right": right_fn, "buggy": buggy_fn}, capsys)
    assert not passes(ex.check_concat_source, {"right": _interleaved_source, "buggy": buggy_fn}, capsys)
    assert not passes(ex.check_concat_source, {"right": right_fn, "buggy": _interleaved_source}, capsys)
    checker_words = json.dumps([why for _, _, why in ch06.SOURCE_WRONGS], ensure_ascii=False)
    ex.check_concat_source({"right": lambda *a: (0, 0, 0), "buggy": buggy_fn}, record=False)
    checker_words += capsys.readouterr().out  # the checker's hint for a wrong "right"
    assert all(w in checker_words for w in CONCAT_RULE), [w for w in CONCAT_RULE if w not in checker_words]
    text = html.unescape(json.dumps(q, ensure_ascii=False))
    assert not [w for w in CONCAT_RULE if w in text], text


def test_padding_mask_choice_agrees_with_the_checker(capsys):
    (q,) = sc.questions("9.1")
    ids, pad_id = ch09.PADDING_CASES[0]
    B, S = torch.tensor(ids).shape
    make = {(B, 1, 1, S, "bool"): lambda t, p: (t != p)[:, None, None, :],
            (B, S, "bool"): lambda t, p: t != p,
            (B, 1, 1, S, "int64"): lambda t, p: (t != p)[:, None, None, :].long(),
            (B, 1, S, 1, "bool"): lambda t, p: (t != p)[:, None, :, None]}
    for a in q["answers"]:
        shape, dtype = re.fullmatch(r"形状 (\(.*\))，dtype (\w+)", label(a)).groups()
        fn = make[(*ast.literal_eval(shape), dtype)]
        assert passes(ex.check_padding_mask, fn, capsys) == a["correct"], label(a)


def test_window_mask_choice_agrees_with_the_checker(capsys):
    """Each option of 10.1's self-check, made into a window function, passes the checker iff it is the right one."""
    (q,) = sc.questions("10.1")
    L, w = 5, 2

    def band(lo, hi):
        def fn(n, width):
            d = torch.arange(n)[None, :] - torch.arange(n)[:, None]
            return (d >= lo(n, width)) & (d <= hi(n, width))
        return fn
    makers = [band(lambda n, k: -(k - 1), lambda n, k: 0), band(lambda n, k: -(n - 1), lambda n, k: 0),
              band(lambda n, k: -k, lambda n, k: 0), band(lambda n, k: -(k - 1), lambda n, k: k - 1)]
    for a in q["answers"]:
        shown = torch.tensor([[int(v) for v in row.split()] for row in label(a).splitlines()])
        (fn,) = [m for m in makers if torch.equal(m(L, w).long(), shown)]
        assert passes(ex.check_window_mask, fn, capsys) == a["correct"], label(a)


def test_decoder_row_choice_agrees_with_the_checker(capsys):
    """10.2's self-check: the right row is the checker's answer key; each wrong row is a mistake the checker names."""
    (q,) = sc.questions("10.2")
    ids, pad_id = ch10.DECODER_CASES[0]
    L = len(ids[0])
    tril = torch.ones(L, L, dtype=torch.bool).tril()
    rows = {str(a["code"]): a["correct"] for a in q["answers"]}
    key = torch.tensor(ids[0]) != pad_id
    truth = (key[None, :] & tril)[3].int().tolist()
    assert rows[str(truth)] is True and sum(rows.values()) == 1
    length = key.int().cumprod(0).bool()
    assert rows[str((length[None, :] & tril)[3].int().tolist())] is False  # cut at the first PAD
    assert rows[str(tril[3].int().tolist())] is False                      # causal only
    def both(ours):  # 10.2 also returns nn.MultiheadAttention's (B·h, L, L) form
        return lambda t, p, h: (ours(t, p), ~ours(t, p).expand(t.shape[0], h, -1, -1).flatten(0, 1))
    assert passes(ex.check_decoder_mask, both(lambda t, p: (t != p)[:, None, None, :]
                  & torch.ones(t.shape[1], t.shape[1], dtype=torch.bool).tril()), capsys)
    assert not passes(ex.check_decoder_mask, both(lambda t, p: t.ne(p).int().cumprod(-1).bool()[:, None, None, :]
                      & torch.ones(t.shape[1], t.shape[1], dtype=torch.bool).tril()), capsys)


def _truths(exercise_id):
    return [value_of(right(q)) if q["type"] == "multiple_choice" else right(q)["value"] for q in sc.questions(exercise_id)]


def test_which_position_answers_are_what_the_experiments_give():
    assert _truths("1.1") == [[2, 0, 3, 1]]  # the rows follow their tokens: r = p
    assert _truths("3.1") == [list(range(8)), [], []]  # a whole row: every bias entry; W_k unused; other sentence 0
    assert _truths("4.1") == [[0, 1, 2, 3], [0, 1, 2, 3, 4], []]  # a W_q column: every head; a bias: every token; sentence 1
    assert _truths("5.1") == [list(range(5)), [], list(range(5))]  # no causal mask, key 4 a PAD: value 2, value 4, key 3
    assert _truths("1.2") == [[], [2, 3, 4]]  # L = 5, masked: a hidden PAD reaches no output; kv 2 under "0 to j": j >= 2
    assert _truths("9.3") == [[4, 5], [4, 5]]  # two PADs share the word vector: both their query rows, nothing else


def test_zeroed_weight_choice_is_what_an_experiment_gives():
    """8.1's warm-up (W_k's weight zeroed, under a causal mask): the right option is what a layer of other sizes shows."""
    names = {ex.ch08.PROPERTIES[k]: k for k in ex.ch08.PROPERTIES}
    torch.manual_seed(3)
    layer = mha.MultiHeadAttention(6, 3).eval()
    with torch.no_grad():
        for linear in (layer.W_q, layer.W_k, layer.W_v, layer.W_o):
            linear.bias.normal_()
        layer.W_k.weight.zero_()
        x = torch.randn(2, 4, 6)
        out, w = layer(x, x, x, mha.causal_mask(4), need_weights=True)
    holds = {"rows_equal": torch.allclose(out, out[:, :1].expand_as(out), atol=1e-5),
             "uniform": torch.allclose(w, torch.full_like(w, 1 / 4), atol=1e-5),
             "bias_only": torch.allclose(out, layer.W_o.bias.expand_as(out), atol=1e-5)}
    assert torch.allclose(w[0, 0, 2, :3], torch.full((3,), 1 / 3))  # the t + 1 visible keys share the weight
    for a in sc.questions("8.1")[0]["answers"]:
        said = {names[t] for t in label(a).split("、") if t in names}
        assert (said == {k for k, v in holds.items() if v}) == a["correct"], label(a)


def test_mask_alignment_choice_is_what_broadcasting_reads():
    """10.3's warm-up: hiding only the option's element of keep hides scores[b, i, t, s] iff it is the right option."""
    (q,) = sc.questions("10.3")
    b, i, t, s = (int(n) for n in re.search(r"scores\[(\d+), (\d+), (\d+), (\d+)\]", q["question"]).groups())
    n = ex.ch10.ALIGN_WARMUP
    for a in q["answers"]:
        keep = torch.ones(n, dtype=torch.bool)
        keep[int(re.fullmatch(r"keep\[(\d)\]", label(a)).group(1))] = False
        hidden = torch.zeros(n, n, n, n).masked_fill(~keep, 1.0)[b, i, t, s] == 1
        assert bool(hidden) == a["correct"], label(a)


def test_cache_step_choice_is_what_the_buggy_mask_keeps():
    """10.4's warm-up: tril() keeps columns s <= r of row r; the right-aligned mask (s <= S - L + r) is a wrong option."""
    (q,) = sc.questions("10.4")
    L, S = ex.ch10.BUGGY_WARMUP
    rows = {str(a["code"]): a["correct"] for a in q["answers"]}
    assert rows[str(list(range(L)))] is True and sum(rows.values()) == 1  # the last new query r = L - 1
    assert rows[str(list(range(S)))] is False


def _axis(question: str, value: int) -> int:
    """Which axis of scores[b, i, t, ...] the quiz's right option names, from the indices its question uses."""
    at = [int(n) for n in re.search(r"scores\[([^\]]*)\]", question).group(1).split(", ") if n.isdigit()]
    assert len(set(at)) == len(at), at
    return at.index(value)


def _rank_is_not_graded(capsys):
    rank = right(sc.questions("7.1")[0])["value"]
    assert rank != ch07.RANK_QUESTION["d_model"] // ch07.RANK_QUESTION["n_heads"]
    assert not passes(ex.check_head_matrix, {"matrix": ch07.head_matrix, "max_rank": rank}, capsys)


def _properties_are_not_graded(capsys):
    names = {ch08.PROPERTIES[k]: k for k in ch08.PROPERTIES}
    said = [names[t] for t in label(right(sc.questions("8.1")[0])).split("、") if t in names]
    truths = {n: sorted(ch08.ablation_truth(n)) for n in ch08.LINEARS}
    assert passes(ex.check_zeroed_weight, truths, capsys)
    for n in ch08.LINEARS:
        assert not passes(ex.check_zeroed_weight, {**truths, n: said}, capsys), n


def _axis_is_not_graded(capsys):
    (q,) = sc.questions("10.3")
    axis = _axis(q["question"], int(re.search(r"\d+", label(right(q))).group()))
    graded = {next(k for k in range(3) if all(r == key[k] for key, r in ch10.rows_used(name).items()))
              for name in ("m", "m[:, None]")} | {0}  # the right spelling reads row b
    assert axis not in graded, (axis, graded)


def _buggy_keys_are_not_graded(capsys):
    sees = ast.literal_eval(label(right(sc.questions("10.4")[0])))
    mask = lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)  # noqa: E731
    assert passes(ex.check_cache_step_mask, {"buggy_sees": [0], "mask": mask}, capsys)
    assert not passes(ex.check_cache_step_mask, {"buggy_sees": sees, "mask": mask}, capsys)


NOT_GRADED = {"7.1": _rank_is_not_graded, "8.1": _properties_are_not_graded, "10.3": _axis_is_not_graded,
              "10.4": _buggy_keys_are_not_graded}


@pytest.mark.parametrize("exercise_id", sorted(NOT_GRADED))
def test_a_prediction_self_check_does_not_hand_out_a_graded_answer(exercise_id, capsys):
    """The quiz above a prediction exercise asks a warm-up: its right option is no graded answer (or part) of the
    exercise below it."""
    assert all(q["question"].startswith(sc.WARMUP) for q in sc.questions(exercise_id))
    NOT_GRADED[exercise_id](capsys)


def test_counts_match_the_formula():
    d = 512
    count, change = sc.questions("3.2")
    assert right(count)["value"] == 4 * (d * d + d)
    assert label(right(change)) == "不变"
    assert _truths("7.1") == [12]  # the warm-up's layer: the heads' sum W^V W^O of two random 12 x 12 matrices


def test_rank_choice_is_what_random_layers_give():
    """7.1's warm-up: the sum of a layer's head matrices is W_v.weight.T @ W_o.weight.T, and its rank in random layers
    (other seeds than the page's) is the quiz's right value, which no wrong value is."""
    (q,) = sc.questions("7.1")
    d, h = ch07.RANK_WARMUP["d_model"], ch07.RANK_WARMUP["n_heads"]
    values = {a["value"]: a["correct"] for a in q["answers"] if a["type"] == "value"}
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        layer = mha.MultiHeadAttention(d, h).double().eval()
        total = sum(ch07.head_matrix(layer, i) for i in range(h))
        with torch.no_grad():
            assert torch.allclose(total, layer.W_v.weight.T @ layer.W_o.weight.T)
        rank = int(torch.linalg.matrix_rank(total))
        assert {v for v, ok in values.items() if ok} == {rank}, (seed, rank, values)


RANK_RULE = ("d_k", "中间", "最窄")  # 7.1's graded rule (the rank is at most the width d_k), as the checker words it


def test_the_rank_warm_up_does_not_state_the_rule(capsys):
    """7.1's quiz asks the sum of the heads: its right value is not what the graded rule (one head's width d_k) gives
    for the quiz's layer, and put into the exercise it fails; no text of the quiz holds the words in which the
    checker states that rule."""
    d, h = ch07.RANK_WARMUP["d_model"], ch07.RANK_WARMUP["n_heads"]
    (q,) = sc.questions("7.1")
    rank = right(q)["value"]
    assert rank != d // h
    assert not passes(ex.check_head_matrix, {"matrix": ch07.head_matrix, "max_rank": rank}, capsys)
    said = ""
    for wrong in (ch07.RANK_QUESTION["d_model"], 1):  # a named mistake and the checker's hint
        ex.check_head_matrix({"matrix": ch07.head_matrix, "max_rank": wrong}, record=False)
        said += capsys.readouterr().out
    assert all(w in said for w in RANK_RULE), [w for w in RANK_RULE if w not in said]
    text = html.unescape(json.dumps(q, ensure_ascii=False))
    assert not [w for w in RANK_RULE if w in text], text


def test_the_claims_in_the_feedback_are_computed():
    """5.2 says a measurement agrees with the formula."""
    with torch.random.fork_rng():
        torch.manual_seed(1)
        assert abs(sc.measured_variance(256) / 256 - 1) < 0.05
        assert abs(sc.measured_variance(256, scale=True) - 1) < 0.05


# ---------------------------------------------------------------- display data
def test_bundles_are_deterministic_and_leave_random_state_alone():
    random.seed(123)
    torch.manual_seed(123)
    state, torch_state = random.getstate(), torch.get_rng_state()
    first = sc.bundles("5.2")
    assert random.getstate() == state and torch.equal(torch.get_rng_state(), torch_state)
    assert sc.bundles("5.2") == first


@pytest.mark.parametrize("exercise_id", sc.EXERCISES)
def test_bundle_is_a_closed_container_and_its_script(exercise_id):
    page, script = sc.bundles(exercise_id)
    cid = sc.container_id(exercise_id)
    assert cid.isidentifier()
    assert re.match(rf'<div id="{cid}"[^>]*></div><style>', page["text/html"])
    assert page["text/html"].count("<div") == page["text/html"].count("</div>") == 1
    js = script["application/javascript"]
    assert f"show_questions(questions{cid}, {cid})" in js
    assert f"var questions{cid}=" + json.dumps(sc.questions(exercise_id)) in js
    assert "网页自测" in page["text/plain"]
    for english, chinese in sc.UI_WORDS.items():  # jupyterquiz's interface words, said in Chinese
        assert english not in js and f'"{chinese}"' in js, english


def test_a_jupyterquiz_that_changed_its_words_is_named():
    with pytest.raises(RuntimeError, match="Type numeric answer here"):
        sc._in_chinese('lab.innerHTML = "Type your answer here:"; "Incorrect -- try again."; "Correct!"')


# ---------------------------------------------------------------- the notebooks
def _src(cell) -> str:
    return "".join(cell["source"])


def _exercise_blocks(cells):
    """{exercise id: the cells from its "### 练习" heading up to the next heading}."""
    blocks, current = {}, None
    for cell in cells:
        if cell["cell_type"] == "markdown" and _src(cell).startswith("#"):
            m = re.match(r"### 练习 (\d+\.\d+)", _src(cell))
            current = m.group(1) if m else None
            if current:
                blocks[current] = []
        if current:
            blocks[current].append(cell)
    return blocks


@pytest.mark.parametrize("chapter", sorted(CHAPTERS), ids=lambda n: CHAPTERS[n].name)
def test_notebook_shows_its_self_checks_next_to_the_exercises(chapter):
    path = CHAPTERS[chapter]
    blocks = _exercise_blocks(json.loads(path.read_text(encoding="utf-8"))["cells"])
    mine = [e for e in sc.EXERCISES if chapter_of(e) == chapter]
    assert mine, f"{path.name}: no self-check"
    for exercise_id, block in blocks.items():
        quiz = [c for c in block if c["cell_type"] == "code" and "mha.course.selfcheck.show" in _src(c)]
        if exercise_id not in mine:
            assert not quiz, f"{path.name} {exercise_id}: a self-check cell for an exercise without questions"
            continue
        assert len(quiz) == 1 and block[1] is quiz[0], f"{path.name} {exercise_id}: the self-check comes right after the prompt"
        cell = quiz[0]
        assert f'mha.course.selfcheck.show("{exercise_id}")' in _src(cell)
        assert "remove-input" in cell["metadata"].get("tags", []) and cell["metadata"].get("cellView") == "form"
        stored = [{k: "".join(v) for k, v in o["data"].items()} for o in cell["outputs"] if o["output_type"] == "display_data"]
        assert stored == sc.bundles(exercise_id), (
            f"{path.name} {exercise_id}: stored self-check output is stale; re-execute the notebook")
    assert set(mine) <= set(blocks), f"{path.name}: self-checks for missing exercises {set(mine) - set(blocks)}"


@pytest.mark.parametrize("chapter", sorted(CHAPTERS), ids=lambda n: CHAPTERS[n].name)
def test_a_chapter_says_once_where_to_do_its_exercises(chapter):
    """One note before the first exercise says where self-checks and coding exercises are done; the
    exercises themselves do not repeat it."""
    path = CHAPTERS[chapter]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _src(c).startswith("### 练习"))
    notes = [i for i, c in enumerate(cells) if NOTE in _src(c)]
    assert notes == [first - 1], f"{path.name}: the note comes once, right before the first exercise"
    assert "make lab" in _src(cells[first - 1]) and "网页上自测" in _src(cells[first - 1])
    assert not any("**网页上自测**" in _src(c) for c in cells), f"{path.name}: the self-check boilerplate is repeated"


def test_chapter_1_says_what_the_checkers_are():
    cells = json.loads(CHAPTERS[1].read_text(encoding="utf-8"))["cells"]
    assert sum("学习的帮手，不是考试" in _src(c) for c in cells) == 1


# ---------------------------------------------------------------- installation
def test_setup_cell_and_requirements_pin_the_same_jupyterquiz():
    import importlib.metadata as md

    pin = setup_cell.pinned("jupyterquiz")
    assert re.fullmatch(r"jupyterquiz==[\d.]+", pin)
    assert f'"--no-deps", "{pin}", ' in setup_cell.setup_cell()["source"]
    assert md.version("jupyterquiz") == pin.split("==")[1]
    deps = md.requires("mha-course") or []
    assert any(d.replace(" ", "").lower().startswith("jupyterquiz") for d in deps)
