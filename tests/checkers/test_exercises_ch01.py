"""Tests for the chapter 01 checkers: correct answers in many styles pass, stubs are 'not done',
wrong answers get a verdict that names what happened (table-driven; the generic stub and garbage
answers are tried on every checker in tests/checkers/test_exercises_common.py)."""
import sys

import numpy as np
import torch

import mha
from mha.course.exercises import (check_changed_positions_cross, check_dependency_matrix, check_permuted_rows)
from exercise_support import (answers_for, mistakes_for, not_done_answers, raise_value_error, recorded,
                              right_answers, wrong_answers)


# ---------------------------------------------------------------- 1.1 shuffled tokens: only the Query, only the Key/Value
P, IDENTITY, INVERSE = [3, 0, 4, 1, 2], [0, 1, 2, 3, 4], [1, 3, 4, 0, 2]  # INVERSE: argsort of P


def _rows_by_experiment():
    """An honest answer: run the layer on x and on x[:, p] in the Query or in the Key/Value, match each new row
    with an old one."""
    layer = mha.MultiHeadAttention(4, 2).eval()
    x = torch.randn(1, 5, 4)
    xp = x[:, P]
    with torch.no_grad():
        y, yq, yk = layer(x, x, x), layer(xp, x, x), layer(x, xp, xp)
    match = lambda out: [int((y[0] - out[0, t]).abs().sum(-1).argmin()) for t in range(5)]  # noqa: E731
    return {"queries": match(yq), "keys": match(yk)}


def _answer(queries=P, keys=IDENTITY):
    return {"queries": queries, "keys": keys}


RIGHT_1_1 = answers_for(check_permuted_rows, [
    _answer(), _answer((3, 0, 4, 1, 2), tuple(range(5))), _answer(torch.tensor(P), torch.arange(5)),
    _answer(np.array(P), np.arange(5)), _answer([3.0, 0, 4, 1, 2], range(5)), _rows_by_experiment(),
    {"queries": torch.tensor(INVERSE).argsort(), "keys": torch.arange(5).numpy()}, {"keys": IDENTITY, "queries": P, "note": "extra keys are fine"},
])

NOT_DONE_1_1 = answers_for(check_permuted_rows, [
    {"queries": ..., "keys": ...}, _answer(P, ...), _answer(..., IDENTITY),
])

WRONG_1_1 = mistakes_for(check_permuted_rows, [
    # queries: the rows follow their queries
    (_answer(INVERSE), ['answer["queries"]', "方向反了", "p 的逆"]),
    (_answer(IDENTITY), ['answer["queries"]', "以为打乱 query 输出不变"]),
    (_answer(P[::-1]), "把 p 倒过来"),
    (_answer([4, 1, 5, 2, 3]), ['answer["queries"]', "从 1 开始数"]),  # p, counted from 1
    (_answer([2, 4, 5, 1, 3]), ["从 1 开始数", "p 的逆"]),  # the inverse, counted from 1
    (_answer([1, 2, 3, 4, 5]), ["从 1 开始数", "以为打乱 query 输出不变"]),  # identity, counted from 1
    # keys: a weighted sum does not care about the order of its terms; P, P is also the warm-up's rule copied
    (_answer(P, P), ['answer["keys"]', "以为输出跟着 key 的顺序走", "加权和与求和顺序无关", "权重跟着 key 一起换"]),
    (_answer(P, INVERSE), ['answer["keys"]', "以为输出跟着 key 的顺序走", "p 的逆"]),
    (_answer(P, [1, 2, 3, 4, 5]), ['answer["keys"]', "从 1 开始数"]),
    (_answer(P, [4, 1, 5, 2, 3]), ["从 1 开始数", "以为输出跟着 key 的顺序走"]),  # p as keys, from 1
    (_answer(P, range(1, 6)), ['answer["keys"]', "从 1 开始数"]),
    (_answer(INVERSE, INVERSE), "方向反了"),  # the first wrong part is named first
    # the form
    (_answer([3, 0, 4, 1]), ["要写 5 个", "每一行一个"]),
    (_answer(P, [0, 1, 2, 3, 4, 5]), ['answer["keys"]', "要写 5 个"]),
    (_answer([3, 0, 4, 1, 7]), "超出了范围"),
    (_answer(P, [0, 1, 2, 3, -1]), "超出了范围"),
    (_answer([3, 0, 4, 1, 1]), ["不是一个排列", "用了不止一次"]),  # a duplicate
    (_answer(P, [0, 0, 0, 0, 0]), ['answer["keys"]', "不是一个排列"]),
    (_answer([3, 0, 4, 2, 1]), ["不对。提示", "排列"]),
    (_answer(P, [1, 0, 2, 3, 4]), ['answer["keys"]', "不对。提示"]),
    (_answer({3, 0, 4, 1, 2}), "集合没有顺序"),
    (_answer(torch.tensor([True, False, True, False, True])), "布尔张量"),
    (_answer(None), "是 None"),
    (_answer("3, 0, 4, 1, 2"), "位置编号"),
    (_answer(P, 2.5), "位置编号"),
    (P, ["字典", '"queries"']),  # the old exercise's answer: one list
    ({"queries": P}, "缺少键"),
    ({"q": P, "k": IDENTITY}, "缺少键"),
    ((2, 7, 12), "字典"),
    (raise_value_error, "字典"),
])

# ---------------------------------------------------------------- 1.2 cross-attention: change kv or q
RIGHT_1_2 = answers_for(check_changed_positions_cross, [
    {"change_kv": [0, 1, 2, 3], "change_q": [1]},
    {"change_kv": range(4), "change_q": (1,)},
    {"change_kv": torch.arange(4), "change_q": np.array([1])},
    {"change_kv": {3, 2, 1, 0}, "change_q": [1.0]},
])

NOT_DONE_1_2 = answers_for(check_changed_positions_cross, [{"change_kv": ..., "change_q": ...},
                                                           {"change_kv": [0, 1, 2, 3], "change_q": ...}])

WRONG_1_2 = mistakes_for(check_changed_positions_cross, [
    ({"change_kv": [2], "change_q": [1]}, "当成了输出的位置"),
    ({"change_kv": [0, 1, 2, 3, 4, 5], "change_q": [1]}, ["超出了范围", "跟着 Query"]),
    ({"change_kv": [0, 1, 2, 3], "change_q": [0, 1, 2, 3]}, "只影响它自己那一行"),
    ({"change_kv": [0, 1, 2, 3], "change_q": []}, "它的输出会变"),
    ({"change_kv": [0, 1], "change_q": [1]}, 'answer["change_kv"]'),
    ({"change_kv": [1, 2, 3, 4], "change_q": [2]}, "从 1 开始数"),
    ({"change_kv": [0, 1, 2, 3], "change_q": [2]}, ['answer["change_q"]', "从 1 开始数"]),
    ({"change_kv": None, "change_q": [1]}, "是 None"),
    ({"change_kv": [0, 1, 2, 3]}, "缺少键"),
    ({"linear": [2], "mha": [0, 1, 2, 3, 4, 5]}, "缺少键"),  # the old task's answer
    ([2], "字典"),
    (raise_value_error, "字典"),
])


# ---------------------------------------------------------------- 1.3
def changed_positions_solution(f, x, k):
    x2 = x.clone()
    x2[:, k] = x2[:, k] + 1.0
    with torch.no_grad():
        y, y2 = f(x), f(x2)
    moved = (y2 - y).abs().amax(dim=(0, 2)) > 1e-6
    return moved.nonzero().flatten().tolist()


def _random_change_tensor_result(f, x, k):
    x2 = x.clone()
    x2[:, k] = torch.randn_like(x2[:, k]) * 3
    with torch.no_grad():
        return ((f(x2) - f(x)).abs().sum(dim=(0, 2)) > 1e-5).nonzero().flatten()


def _loops(fun, inputs, pos):  # renamed arguments
    changed = inputs.clone()
    for b in range(inputs.shape[0]):
        changed[b, pos] += 1
    y, y2 = fun(inputs), fun(changed)
    result = []
    for j in range(inputs.shape[1]):
        if (y2[:, j] - y[:, j]).abs().max().item() > 1e-6:
            result.append(j)
    return result


def _float64_inside(f, x, k):
    x2 = x.clone()
    x2[:, k] += 1
    delta = f(x2).detach().double() - f(x).detach().double()
    return np.flatnonzero(delta.abs().amax(dim=(0, 2)).numpy() > 1e-6)


def _not_equal(f, x, k):
    x2 = torch.cat([x[:, :k], x[:, k:k + 1] + 1, x[:, k + 1:]], dim=1)
    with torch.no_grad():
        return torch.where((f(x2) != f(x)).any(dim=2).any(dim=0))[0].tolist()


def _einsum_norm(f, x, k):
    x2 = x + torch.nn.functional.one_hot(torch.tensor(k), x.shape[1]).to(x.dtype)[None, :, None]
    with torch.no_grad():
        d = f(x2) - f(x)
    return [j for j, n in enumerate(torch.einsum("bld,bld->l", d, d).sqrt().tolist()) if n > 1e-6]


def _changed(f, x, x2, reduce):
    with torch.no_grad():
        return reduce(f(x2) - f(x)).nonzero().flatten().tolist()


def _plus_one(x, k):
    x2 = x.clone()
    x2[:, k] += 1.0
    return x2


def _compares_inputs(f, x, k):
    return (((_plus_one(x, k) - x).abs().amax(dim=(0, 2))) > 0).nonzero().flatten().tolist()


def _mutates_input(f, x, k):
    y = f(x).detach().clone()
    x2 = x  # alias, not a copy
    x2[:, k] += 1.0
    return ((f(x2) - y).abs().amax(dim=(0, 2)) > 1e-6).nonzero().flatten().tolist()


def _aliased_both(f, x, k):
    x2 = _plus_one(x, k)
    with torch.no_grad():
        return ((f(x2) - f(x2)).abs().amax(dim=(0, 2)) > 1e-6).nonzero().flatten().tolist()


def _set_to_one(f, x, k):
    x2 = x.clone()
    x2[:, k] = 1.0
    return _changed(f, x, x2, lambda d: d.abs().amax(dim=(0, 2)) > 1e-6)


def _first_sentence_only(f, x, k):
    x2 = x.clone()
    x2[0, k] += 1.0
    return _changed(f, x, x2, lambda d: d.abs().amax(dim=(0, 2)) > 1e-6)


def _signed(reduce):
    return lambda f, x, k: _changed(f, x, _plus_one(x, k), reduce)


# ---------------------------------------------------------------- 1.3 the dependency matrix (every k at once)
def _experiment(bump=lambda t: t + 1.0, rows=slice(None), feature=slice(None), reduce=None, threshold=1e-6):
    """The dependency matrix by the chapter's experiment, one column per input position k; the keyword
    arguments make the typical wrong experiments."""
    reduce = reduce or (lambda d: d.abs().amax(dim=(0, 2)) > threshold)

    def dependency(f, x):
        L = x.shape[1]
        D = torch.zeros(L, L, dtype=torch.bool)
        for k in range(L):
            x2 = x.clone()
            x2[rows, k, feature] = bump(x2[rows, k, feature])
            with torch.no_grad():
                D[:, k] = reduce(f(x2) - f(x))
        return D
    return dependency


def _jacobian(f, x):  # another honest way: where the Jacobian is not zero
    J = torch.autograd.functional.jacobian(f, x)  # (B, L, d, B, L, d)
    return J.abs().amax(dim=(0, 2, 3, 5)) > 1e-6


def _by_old_function(f, x):  # the chapter-1 experiment as a function, once per k; rows as a list of 0/1
    columns = [changed_positions_solution(f, x, k) for k in range(x.shape[1])]
    return [[int(j in columns[k]) for k in range(x.shape[1])] for j in range(x.shape[1])]


# The two predictions of 1.3 (L = 4), typed in: row j = output position, column k = input position.
CAUSAL = [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]  # position j sees 0..j
ROLL = [[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]    # output j holds input j - 1 (mod 4)
PREDICTIONS = {"causal": CAUSAL, "roll": ROLL}


def _measured_predictions():
    """An honest way to the predictions: the student's own function on real functions, L = 4."""
    attn, x = mha.MultiHeadAttention(4, 2).eval(), torch.randn(2, 4, 4)
    return {"causal": _experiment()(lambda t: attn(t, t, t, mha.causal_mask(4)), x),
            "roll": _experiment()(lambda t: torch.roll(t, 1, dims=1), x).int()}


def _dict_1_3(matrix, predict=None):
    return {"predict": PREDICTIONS if predict is None else predict, "matrix": matrix}


def _predicted(causal=CAUSAL, roll=ROLL):
    return _dict_1_3(_experiment(), {"causal": causal, "roll": roll})


T = lambda rows: torch.tensor(rows).T.tolist()  # noqa: E731  the transposed matrix, as a list

RIGHT_1_3_MATRIX = answers_for(check_dependency_matrix, [_dict_1_3(fn) for fn in [
    _experiment(), _jacobian, _by_old_function, lambda f, x: _experiment()(f, x).numpy(),
    lambda f, x: _experiment()(f, x).float(),
]] + [
    _dict_1_3(_experiment(), _measured_predictions()),
    _predicted(torch.tensor(CAUSAL, dtype=torch.bool), np.array(ROLL)),
    _predicted([[bool(v) for v in row] for row in CAUSAL], torch.tensor(ROLL).float()),
    _predicted(mha.causal_mask(4), tuple(tuple(r) for r in ROLL)),
    _predicted(np.tril(np.ones((4, 4), dtype=bool)), [np.array(r) for r in ROLL]),
])


def _stub_dependency(f, x):
    raise NotImplementedError


def _copied_cells(f, x):  # ch01's experiment cells in a loop over k, verbatim: token k replaced by random numbers
    B, L, d_model = x.shape
    D = torch.zeros(L, L, dtype=torch.bool)
    for changed in range(L):
        x2 = x.clone()
        x2[:, changed] = torch.randn(B, d_model)
        with torch.no_grad():
            delta = (f(x2) - f(x)).abs()
        D[:, changed] = delta.amax(dim=(0, 2)) > 1e-6
    return D


def _mutating(f, x):
    L = x.shape[1]
    y = f(x).detach().clone()
    D = torch.zeros(L, L, dtype=torch.bool)
    for k in range(L):
        x[:, k] += 1.0  # changes the caller's x
        D[:, k] = (f(x) - y).detach().abs().amax(dim=(0, 2)) > 1e-6
    return D


WRONG_1_3_MATRIX = mistakes_for(check_dependency_matrix, [(_dict_1_3(fn), words) for fn, words in [
    (lambda f, x: _experiment()(f, x).T, "行和列放反了"),
    (_copied_cells, ["换成了别的数", "只留下负数部分", "加 1"]),
    (_experiment(bump=lambda t: torch.randn_like(t) * 3), "换成了别的数"),
    (_experiment(bump=lambda t: torch.ones_like(t)), "设成了 1"),
    (_experiment(bump=lambda t: 2 * t), "乘了 2"),
    (_experiment(feature=0), "一个特征维"),
    (_experiment(threshold=1e-3), "1e-6"),
    (_experiment(rows=0), "只改了第一句话"),
    (_experiment(reduce=lambda d: d[0].abs().amax(dim=1) > 1e-6), "只比较了第一句的输出"),
    (_experiment(reduce=lambda d: d[..., 0].abs().amax(dim=0) > 1e-6), "只比较了输出的一个特征维"),
    (_experiment(reduce=lambda d: d.sum(dim=(0, 2)).abs() > 1e-6), "正负号"),
    (_experiment(reduce=lambda d: d.amax(dim=(0, 2)) > 1e-6), "没有取绝对值"),
    (_experiment(reduce=lambda d: torch.zeros(d.shape[1], dtype=torch.bool)), "没改到"),
    (_mutating, "原地改动了传进来的参数 x"),
    (lambda f, x: _experiment()(f, x)[:, 0], "只做了一个 k"),
    (lambda f, x: changed_positions_solution(f, x, 0), "只做了一个 k"),
    (lambda f, x: [changed_positions_solution(f, x, k) for k in range(x.shape[1])], "长短不一"),
    (lambda f, x: _experiment()(f, x).float() * 3, "0 和 1 以外"),
    (lambda f, x: f(x) @ torch.ones(3), "RuntimeError"),
    (lambda f, x: None, "忘了写 return"),
    (lambda f: None, "TypeError"),
]])

ROWS_COLS = "行是输出位置 j，列是输入位置 k"
WRONG_1_3_PREDICTIONS = mistakes_for(check_dependency_matrix, [
    (_predicted(causal=T(CAUSAL)), ["上三角", ROWS_COLS, "下三角"]),
    (_predicted(causal=torch.ones(4, 4)), ["全是 True", "没有掩码"]),
    (_predicted(causal=[[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]), ["少了对角线", "包括它自己"]),
    (_predicted(causal=~torch.tensor(CAUSAL, dtype=torch.bool)), ["k > j", "挡住", ROWS_COLS]),
    (_predicted(causal=torch.eye(4, dtype=torch.int64)), ["只有对角线", "nn.Linear"]),
    (_predicted(causal=np.tril(np.ones((4, 4)), 1)), ["多标了一格", "从 1 数"]),
    (_predicted(causal=ROLL), ["torch.roll(x, 1, dims=1) 的依赖矩阵", "不是"]),
    (_predicted(causal=ROLL, roll=CAUSAL), "两个预测放反了"),
    (_predicted(roll=T(ROLL)), ["方向反了", "D[j, j + 1]", "输出位置 j 放的是输入位置 j − 1 的 token", "第 k 列"]),
    (_predicted(roll=torch.eye(4)), ["只有对角线", "j − 1"]),
    (_predicted(roll=[[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]), ["绕回", "D[0, 3]"]),
    (_predicted(roll=[[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]), ["方向反了", "绕回"]),
    (_predicted(roll=[[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]]), ["挪了两格", "从 1 数"]),
    (_predicted(roll=np.ones((4, 4), dtype=bool)), ["全是 True", "不混合位置"]),
    (_predicted(roll=torch.zeros(4, 4)), ["全是 False", "k + 1"]),
    (_predicted(roll=CAUSAL), ["因果掩码", "不是 torch.roll"]),
    (_predicted(roll=[[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]), ["第 0 行第 2 列", "不会变"]),
    # wrong size or type
    (_predicted(causal=[[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]),
     ["4×4", "L = 4", "5 行"]),
    (_predicted(roll=torch.ones(5, 5)), ["(4, 4)", "(5, 5)"]),
    (_predicted(causal=[1, 0, 0, 0]), ["一维", "只写了一行"]),
    (_predicted(causal=[[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]), ["长短不一", "用到了哪些位置"]),
    (_predicted(causal="下三角"), ["4×4", "str"]),
    (_predicted(roll=[[0, 0, 0, 2], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]), ["里有 2", "1/0"]),
    (_predicted(causal=torch.tensor(CAUSAL) * 0.5), "0 和 1 以外"),
    (_predicted(roll=None), "None"),
    (_dict_1_3(_experiment(), {"causal": CAUSAL}), ["缺少键", "roll"]),
    (_dict_1_3(_experiment(), [CAUSAL, ROLL]), ['answer["predict"]', "字典", "list"]),
    (_experiment(), ["字典", '"matrix"', "函数"]),  # the old form: the function alone
    ({"matrix": _experiment()}, ["缺少键", "predict"]),
    (_dict_1_3(raise_value_error), "ValueError"),
    (_dict_1_3(lambda f, x: sys.exit(3)), "sys.exit()"),
    (_dict_1_3(42), "callable"),
])

NOT_DONE_1_3 = answers_for(check_dependency_matrix, [
    {"predict": {"causal": ..., "roll": ...}, "matrix": _experiment()},
    _predicted(roll=...),
    {"predict": ..., "matrix": _experiment()},
    _dict_1_3(...),
    _dict_1_3(_stub_dependency),
    {"predict": {"causal": CAUSAL, "roll": ...}, "matrix": _stub_dependency},
])


test_right_answers_pass = right_answers(RIGHT_1_1, RIGHT_1_2, RIGHT_1_3_MATRIX)
test_stubs_are_not_done = not_done_answers(NOT_DONE_1_1, NOT_DONE_1_2, NOT_DONE_1_3)
test_wrong_answers_are_named = wrong_answers(WRONG_1_1, WRONG_1_2, WRONG_1_3_MATRIX, WRONG_1_3_PREDICTIONS)
