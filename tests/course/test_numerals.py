"""mha.course.numerals: the reading rules, the data split, the model, the shipped weights and the command line."""
import json
import os
import random
import subprocess
import sys

import pytest
import torch

import mha
from mha.course.numerals import (ACCURACY_THRESHOLD, DATA_DIR, NumeralConfig, NumeralError, NumeralTransformer, TrainConfig,
                          ablate_heads, exact_match, held_out_numbers, is_held_out, load_pretrained, load_snapshots,
                          make_batch, parse, shipped_info, to_chinese, train)
from mha.course.numerals.data import (BOS, EOS, MAX_SOURCE_LEN, PAD, SRC_TOKENS, TGT_TOKENS, decode_target, encode_source,
                               training_numbers)
from mha.course.numerals.analysis import (ablation_accuracies, correct_rows, digit_peak_breakdown, digit_peak_rate,
                                  evenness, head_means, mass_chance, mass_on, teacher_forced,
                                  teacher_forced_exact_match, zero_peak_kinds)
from mha.course.numerals.train import lr_at
from mha.course.numerals.words import DIGITS, digit_sources

# ---------------------------------------------------------------- reading rules

KNOWN = {
    0: "零", 1: "一", 2: "二", 10: "十", 11: "十一", 12: "十二", 20: "二十", 22: "二十二", 100: "一百", 101: "一百零一",
    110: "一百一十", 200: "二百", 1000: "一千", 1001: "一千零一", 1010: "一千零一十", 1100: "一千一百", 2000: "两千",
    2026: "两千零二十六", 2200: "两千二百", 10000: "一万", 10001: "一万零一", 10010: "一万零一十", 12000: "一万两千",
    20000: "两万", 22000: "两万两千", 30500: "三万零五百", 100000: "十万", 110000: "十一万", 150000: "十五万",
    1000100: "一百万零一百", 1010000: "一百零一万", 1100000: "一百一十万", 10001000: "一千万一千",
    20000000: "两千万", 99990000: "九千九百九十九万", 99999999: "九千九百九十九万九千九百九十九",
    22222222: "两千二百二十二万两千二百二十二",
}


@pytest.mark.parametrize("n", list(KNOWN))
def test_known_readings(n):
    assert to_chinese(n) == KNOWN[n]
    assert parse(KNOWN[n]) == n == parse(KNOWN[n], strict=True)


def test_readings_are_unique_and_parse_back():
    small = range(100_000)
    big = random.Random(0).sample(range(100_000, 100_000_000), 30_000)
    seen = {}
    for n in list(small) + big:
        words = to_chinese(n)
        assert words not in seen, (n, seen.get(words), words)
        seen[words] = n
        assert parse(words, strict=True) == n
    assert max(len(w) for w in seen) == MAX_SOURCE_LEN


@pytest.mark.parametrize("text, needle", [
    ("", "输入是空的"),
    ("二千", "两千"),
    ("一十二", "十二"),
    ("三万五百", "三万零五百"),
    ("两千零零一", "两个数字连在一起"),
    ("五零", "两个数字连在一起"),
    ("十十", "单位"),
    ("万", "以“万”开头"),
    ("一万万", "不止一个“万”"),
    ("2026", "第 1 个字 '2'"),
    ("两千零二十六x", "第 7 个字 'x'"),
    ("一亿", "'亿'"),
    # spoken short forms: the last digit counts one place down, and the message says so
    ("一百一", "是 110 的口语简写（最后一个数字落在下一位上）；本课程把它写全：'一百一十'"),
    ("三千五", "是 3500 的口语简写"),
    ("两万三", "是 23000 的口语简写"),
    ("一万一", "'一万一千'"),
    ("一万一千一", "'一万一千一百'"),
    ("三百零二万四", "是 3024000 的口语简写"),
])
def test_strict_parse_refuses_with_a_clear_message(text, needle):
    with pytest.raises(NumeralError, match=None) as info:
        parse(text, strict=True)
    assert needle in str(info.value), str(info.value)


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (100_000_000, ValueError), (1.5, TypeError), (True, TypeError)])
def test_to_chinese_validates(bad, error):
    with pytest.raises(error):
        to_chinese(bad)


def test_digit_sources_point_at_the_digit_characters():
    assert digit_sources(30500) == [0, None, 3, None, None]
    assert digit_sources(12) == [0, 1]  # the 十 names the 1
    for n in random.Random(1).sample(range(100_000_000), 3000):
        words = to_chinese(n)
        for d, i in zip(str(n), digit_sources(n)):
            if d == "0":
                assert i is None
            else:
                assert {"十": 1, "两": 2}.get(words[i], DIGITS.find(words[i])) == int(d), (n, words)


# ---------------------------------------------------------------- data

def test_split_holds_out_numbers_not_patterns():
    test = held_out_numbers()
    assert len(test) == len(set(test)) == 2000 and test == held_out_numbers()
    assert all(is_held_out(n) for n in test)
    sample = training_numbers(random.Random(3), 20_000)
    assert not set(sample) & set(test) and not any(map(is_held_out, sample))
    assert not any(is_held_out(d * 10 ** k) for d in range(1, 10) for k in range(8))  # every "X千", "X万" is seen
    share = sum(map(is_held_out, range(5_000_000, 5_100_000))) / 100_000
    assert 0.08 < share < 0.11


def test_training_numbers_favour_long_numbers():
    lengths = [len(str(n)) for n in training_numbers(random.Random(0), 5000)]
    assert lengths.count(8) > lengths.count(4) > lengths.count(1) > 0


def test_batches_pad_on_the_right():
    batch = make_batch([2026, 30500, 12])
    assert batch.words == ("两千零二十六", "三万零五百", "十二")
    assert batch.src.shape == (3, 6) and batch.src.dtype == torch.long
    assert batch.src_mask.shape == (3, 1, 1, 6) and batch.src_mask.dtype == torch.bool
    assert batch.src_mask[:, 0, 0].sum(1).tolist() == [6, 5, 2]
    assert (batch.src[~batch.src_mask[:, 0, 0]] == PAD).all()
    assert batch.tgt_in[:, 0].eq(BOS).all() and decode_target(batch.tgt_out) == ["2026", "30500", "12"]
    assert [SRC_TOKENS[i] for i in batch.src[0]] == list("两千零二十六")
    assert batch.tgt_out[0].tolist() == [TGT_TOKENS.index(c) for c in "2026"] + [EOS, PAD]


@pytest.mark.parametrize("bad", [[], [""], ["两千x"], "", [3]])
def test_encode_source_validates(bad):
    with pytest.raises(ValueError):
        encode_source(bad)


def test_decode_target_marks_specials_before_eos():
    ids = torch.tensor([[TGT_TOKENS.index("1"), BOS, EOS, TGT_TOKENS.index("2")]])
    assert decode_target(ids) == ["1?"]


# ---------------------------------------------------------------- model

@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


def test_model_is_built_from_mha_layers():
    model = NumeralTransformer()
    attn = [model.attention(b, l) for b, l, h in model.heads() if h == 0]
    assert len(model.heads()) == 24 and len(attn) == 6
    assert all(type(a) is mha.MultiHeadAttention and a.n_heads == 4 and a.d_k == 16 for a in attn)
    assert sum(p.numel() for p in model.parameters()) == 171_213  # 170,381 + 13 x 64 for the 大写 characters
    assert sum(p.numel() for p in NumeralTransformer(NumeralConfig(n_heads=1)).parameters()) == 171_213
    with pytest.raises(ValueError):
        model.attention("decoder", 2)
    with pytest.raises(ValueError):
        model.attention("self", 0)
    with pytest.raises(ValueError):
        NumeralConfig(d_model=64, n_heads=5)


def test_shapes_and_maps():
    torch.manual_seed(0)
    model = NumeralTransformer().eval()
    batch = make_batch([12, 99990000, 30500])
    with torch.no_grad():
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        maps = model.attention_maps(batch.src, batch.src_mask, batch.tgt_in)
    B, S, T = 3, 8, 9
    assert logits.shape == (B, T, len(TGT_TOKENS))
    assert [w.shape for w in maps["encoder"]] == [(B, 4, S, S)] * 2
    assert [w.shape for w in maps["decoder"]] == [(B, 4, T, T)] * 2
    assert [w.shape for w in maps["cross"]] == [(B, 4, T, S)] * 2
    assert torch.allclose(maps["logits"], logits, atol=1e-5)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert all(w[:, :, future].eq(0).all() for w in maps["decoder"])  # causal
    pad = ~batch.src_mask[:, 0, 0]  # (B, S)
    for w in maps["encoder"] + maps["cross"]:
        assert w.masked_select(pad[:, None, None, :]).eq(0).all()  # nobody attends to PAD


def test_decode_step_with_cache_matches_teacher_forcing(shipped):
    batch = make_batch([2026, 60708090, 0])
    with torch.no_grad():
        full = shipped(batch.src, batch.src_mask, batch.tgt_in)  # (B, T, V)
        memory = shipped.encode(batch.src, batch.src_mask)
        caches = None
        for t in range(batch.tgt_in.shape[1]):
            step, caches = shipped.decode_step(batch.tgt_in[:, t:t + 1], memory, batch.src_mask, caches)
            assert all(c.length == t + 1 for c in caches)
            torch.testing.assert_close(step, full[:, t], atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(B, 1\)"):
        shipped.decode_step(batch.tgt_in, memory, batch.src_mask)


def test_ablate_heads_zeroes_one_head_and_restores(shipped):
    batch = make_batch([2026, 30500])
    with torch.no_grad():
        before = shipped(batch.src, batch.src_mask, batch.tgt_in)
        with ablate_heads(shipped, ("cross", 1, 0)):
            ablated = shipped(batch.src, batch.src_mask, batch.tgt_in)
        after = shipped(batch.src, batch.src_mask, batch.tgt_in)
    assert torch.equal(before, after) and not torch.allclose(before, ablated)
    attn = shipped.attention("cross", 1)
    x = torch.randn(1, 3, 64)
    with torch.no_grad(), ablate_heads(shipped, [("cross", 1, 2)]):
        _, w = attn(x, x, x, need_weights=True)
        got = attn(x, x, x)
        heads = w @ attn.W_v(x).view(1, 3, 4, 16).transpose(1, 2)  # (1, h, L, d_k)
        heads[:, 2] = 0
        want = torch.nn.functional.linear(heads.transpose(1, 2).reshape(1, 3, 64), attn.W_o.weight, attn.W_o.bias)
    torch.testing.assert_close(got, want)
    for bad in [("cross", 1, 4), ("cross", 2, 0), ("mlp", 0, 0)]:
        with pytest.raises(ValueError):
            with ablate_heads(shipped, bad):
                pass
    assert not attn.W_o._forward_pre_hooks  # no hook left behind, even after an error


# ---------------------------------------------------------------- shipped weights

def test_shipped_files_are_small_and_float16():
    info = json.loads((DATA_DIR / "numerals.json").read_text(encoding="utf-8"))
    files = [DATA_DIR / info[k]["file"] for k in info] + [DATA_DIR / info["4heads"]["snapshot_file"]]
    assert sum(f.stat().st_size for f in files) < 3_000_000
    state = torch.load(files[0], weights_only=True)
    assert all(v.dtype == torch.float16 for v in state.values())


@pytest.mark.parametrize("kind, floor", [("4heads", ACCURACY_THRESHOLD), ("1head", 0.98)])
def test_shipped_models_convert_held_out_numbers(kind, floor):
    model = load_pretrained(kind)
    test = held_out_numbers()
    acc = exact_match(model, test)
    assert acc >= floor
    assert abs(acc - shipped_info(kind)["held_out_exact_match"]) <= 0.001
    assert abs(teacher_forced_exact_match(model, test) - acc) <= 0.001  # greedy == all steps right under teacher forcing


def test_snapshots_load_and_improve():
    snaps = load_snapshots()
    assert list(snaps) == shipped_info()["train"]["snapshot_steps"] == [0, 300, 1000]
    test = held_out_numbers()[:300]
    accs = [teacher_forced_exact_match(m, test) for m in snaps.values()]
    assert accs[0] == 0.0 and accs[0] < accs[1] < accs[2] < 0.95


def test_head_statistics_of_the_shipped_model(shipped):
    """The roles chapter 13 reports for the shipped 4-head model, each against its chance baseline."""
    model = shipped.double()
    try:
        batch, maps = teacher_forced(model, held_out_numbers()[:600])
        assert correct_rows(maps["logits"], batch).float().mean() > 0.99
        stats = digit_peak_breakdown(maps["cross"][1], batch)
        assert int(digit_peak_rate(maps["cross"][1], batch).argmax()) == 2  # head 3 of the last layer aligns
        assert stats["all"]["hit"][2] > 0.9 > 8 * stats["all"]["chance"]
        assert stats["after 零"]["hit"][2] > 0.95 and stats["个"]["hit"][2] < stats["百"]["hit"][2]
        chance = mass_chance(batch, "万", "cross")
        assert 3 * chance < mass_on(maps["cross"][1], batch, "万", "cross")[1] < 0.7  # looks at 万, but not only
        assert zero_peak_kinds(maps["cross"][1], batch)["零"][2] < 0.05  # writing a 0 it does not look at 零
        even = evenness(maps["decoder"][0], batch)
        assert even[1] > 0.9 and even[3] > 0.95
        numbers = held_out_numbers()[:200]
        keys = [("decoder", 0, 1), ("cross", 1, 1)]
        zero = ablation_accuracies(model, numbers, heads=keys)
        per_position = ablation_accuracies(model, numbers, heads=keys, mode="position_mean",
                                           means=head_means(model, training_numbers(random.Random(7), 500)))
        assert zero[("decoder", 0, 1)] < 0.2 < 0.7 < per_position[("decoder", 0, 1)]  # zeroing exaggerates
        assert zero[("cross", 1, 1)] < 0.5 < 0.85 < per_position[("cross", 1, 1)]
    finally:
        shipped.float()


def test_mass_on_takes_the_kind_even_when_S_equals_T():
    batch = make_batch([2026])  # 两千零二十六: S = 6 characters, T = 4 digits + <eos> = 5
    S, T = batch.src.shape[1], batch.tgt_in.shape[1]
    square = torch.zeros(1, 1, S, S)
    square[0, 0, :, 2] = 1.0  # every row on 零
    square[0, 0, T:, 2] = 0.0  # rows past T are not real cross-attention rows, but are real encoder rows
    assert mass_on(square, batch, "零", "encoder").item() == pytest.approx(T / S)
    assert mass_on(square[:, :, :T], batch, "零", "cross").item() == 1.0
    assert mass_chance(batch, "零", "cross") == pytest.approx(1 / S)
    with pytest.raises(ValueError, match="kind"):
        mass_on(square, batch, "零", "decoder")


def test_mean_ablation_puts_the_mean_in_place_of_a_head(shipped):
    model = shipped.double()
    try:
        numbers = held_out_numbers()[:100]
        means = head_means(model, numbers)
        mean, per_position = means[("cross", 1, 0)]
        assert mean.shape == (model.cfg.d_model // model.cfg.n_heads,) and per_position.shape[1] == mean.shape[0]
        batch = make_batch(numbers)
        d_k = mean.shape[0]
        for mode, want in (("mean", lambda L: mean.expand(L, d_k)), ("position_mean", lambda L: per_position[:L])):
            captured = []
            with ablate_heads(model, ("cross", 1, 0), means=means, mode=mode):  # hooks run in order: ablation first
                handle = model.attention("cross", 1).W_o.register_forward_pre_hook(lambda m, i: captured.append(i[0]))
                model(batch.src, batch.src_mask, batch.tgt_in)
                handle.remove()
            concat = captured[0]  # (B, T, d_model)
            assert torch.equal(concat[:, :, :d_k], want(concat.shape[1]).expand_as(concat[:, :, :d_k]))
            assert not torch.equal(concat[:, :, d_k:2 * d_k], mean.new_zeros(1).expand_as(concat[:, :, d_k:2 * d_k]))
        zero = ablation_accuracies(model, numbers, heads=[("cross", 1, 0)])
        mean_acc = ablation_accuracies(model, numbers, heads=[("cross", 1, 0)], mode="mean", means=means)
        assert set(zero) == set(mean_acc) == {("cross", 1, 0)}
        with pytest.raises(ValueError, match="means"):
            with ablate_heads(model, ("cross", 1, 0), mode="mean"):
                pass
        with pytest.raises(ValueError, match="mode"):
            with ablate_heads(model, ("cross", 1, 0), mode="half"):
                pass
    finally:
        shipped.float()


def test_digit_peak_breakdown_counts_contexts_and_chance():
    batch = make_batch([30500, 2026])  # 三万零五百: 3 is 三, 5 is 五 (after 零); 两千零二十六: 2 after 零
    S = batch.src.shape[1]
    cross = torch.zeros(2, 1, batch.tgt_in.shape[1], S)
    cross[..., 0] = 1.0  # every step looks at the first character
    stats = digit_peak_breakdown(cross, batch)
    assert stats["all"]["count"] == 2 + 3 and stats["after 零"]["count"] == 2
    assert stats["all"]["hit"].item() == pytest.approx(2 / 5)  # 三 and 两 are first characters
    assert stats["after 零"]["hit"].item() == 0.0 and stats["万"]["count"] == 1
    assert stats["all"]["chance"] == pytest.approx((2 / 5 + 3 / 6) / 5)  # mean 1 / S over the 5 digits


# ---------------------------------------------------------------- training pieces (the full run: test_numerals_training.py)

def test_learning_rate_schedule():
    cfg = TrainConfig()
    assert lr_at(0, cfg) == cfg.lr / cfg.warmup and lr_at(cfg.warmup - 1, cfg) == cfg.lr
    assert abs(lr_at((cfg.steps + cfg.warmup) // 2, cfg) - cfg.lr / 2) < 1e-4
    lrs = [lr_at(s, cfg) for s in range(cfg.warmup, cfg.steps)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:])) and lrs[-1] < 1e-8


def test_train_is_deterministic_for_a_seed():
    cfg = TrainConfig(steps=15, warmup=5, snapshot_steps=())
    (a, ha), (b, hb), (c, _) = (train(train_cfg=cfg, seed=s, progress=False) for s in (4, 4, 5))
    assert ha.loss == hb.loss
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values()))


def test_train_runs_with_progress_bar_and_snapshots(capsys):
    model, history = train(train_cfg=TrainConfig(steps=6, warmup=2, snapshot_steps=(0, 6)), seed=1, progress=True)
    out = capsys.readouterr().out
    assert "6/6" in out and "训练" in out, out
    assert len(history.loss) == len(history.lr) == 6 and sorted(history.snapshots) == [0, 6]
    assert not model.training and torch.is_grad_enabled()
    with torch.no_grad():  # train() must work when the caller turned gradients off
        train(train_cfg=TrainConfig(steps=1, warmup=1, snapshot_steps=()), progress=False)


# ---------------------------------------------------------------- command line

def _cli(args=(), stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "mha.course.numerals", *args], input=stdin, capture_output=True,
                          text=True, encoding="utf-8", timeout=120, env=env)


def test_cli_speaks_utf8_under_an_ascii_locale():
    ascii_env = dict(os.environ, LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONIOENCODING="ascii")
    run = _cli(["--strict"], stdin="十二\n二千\n", env=ascii_env)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout.splitlines()[0] == "12" and "两千" in run.stdout.splitlines()[1]
    bad_bytes = subprocess.run([sys.executable, "-m", "mha.course.numerals"], input=b"\xff\xfe\n", capture_output=True,
                               timeout=120, env=ascii_env)
    assert bad_bytes.returncode == 1 and b"Traceback" not in bad_bytes.stderr, bad_bytes.stderr
    assert bad_bytes.stdout.decode("utf-8").startswith("错误：")


def test_cli_converts_arguments():
    run = _cli(["两千零二十六", "三万零五百", "十二", "九千九百九十九万"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["2026", "30500", "12", "99990000"]


def test_cli_converts_every_common_writing():
    writings = {"二千零二十六": "2026", "两百": "200", "二万三千": "23000", "一十二": "12", "一百一": "110",
                "三万五": "35000", "一万二": "12000", "两千五": "2500", "贰仟零贰拾陆": "2026", "壹萬": "10000",
                "一万一十": "10010", "壹拾贰": "12"}
    run = _cli(list(writings))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == list(writings.values())
    explained = _cli(["--explain", "二千", "两千"]).stdout.splitlines()
    assert explained[0].startswith("2000\t") and "两千" in explained[0] and explained[1] == "2000\t标准读法"
    refused = _cli(["五零", "壹百"])
    assert refused.returncode == 1
    assert [line.split("：")[0] for line in refused.stdout.splitlines()] == ["错误", "错误"]
    assert "两个数字连在一起" in refused.stdout and "混在一起" in refused.stdout


def test_cli_reads_lines_and_reports_bad_ones_in_place():
    run = _cli(["--strict"], stdin="两千零二十六\n\n二千\n十二\nabc\n九千九百九十九万\n")
    lines = run.stdout.splitlines()
    assert run.returncode == 1
    assert len(lines) == 6
    assert lines[0] == "2026" and lines[3] == "12" and lines[5] == "99990000"
    assert lines[1].startswith("错误：空行")
    assert lines[2].startswith("错误：") and "两千" in lines[2]
    assert lines[4].startswith("错误：") and "第 1 个字 'a'" in lines[4]


def test_cli_says_when_the_model_is_wrong():
    """The model's digits are printed as they are; when the rules read another number, the line says so."""
    from mha.course.numerals.__main__ import convert

    class OffByOne:  # a model that gets the second number wrong
        def translate(self, texts):
            return ["2026", "12346"][:len(texts)]

    outputs, ok = convert(["两千零二十六", "一万二千三百四十五"], OffByOne())
    assert ok and outputs == ["2026", "12346\t模型写错了：按读法规则是 12345"], outputs
    outputs, _ = convert(["二千零二十六", "一万两千三百四十五"], OffByOne(), explain=True)
    assert outputs[0].startswith("2026\t“两”和“二”") and "模型写错了" not in outputs[0], outputs
    assert outputs[1] == "12346\t标准读法；模型写错了：按读法规则是 12345", outputs
