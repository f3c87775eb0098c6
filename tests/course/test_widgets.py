"""The interactive explorers of mha.course.widgets: their plain logic, their widgets driven by code
(tests/support/widget_scenarios.py, also run under Colab's ipywidgets in tests/colab/) and in a real kernel."""
import math

import ipywidgets
import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

import mha.course.widgets as W
from mha.course.figure_data.scaling import N_QUERIES
from mha.course.pictures.flow import flow_shapes

from widget_scenarios import SCENARIOS, assert_kernel_outputs, kernel_notebook


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def figure_strings(fig):
    return [t.get_text() for t in fig.findobj(matplotlib.text.Text)]


def assert_glyphs_drawn(fig):
    """Every glyph of the figure is found: DejaVu Sans or the shipped CJK subset (Colab has no CJK font)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not missing, missing
    assert any(not s.isascii() for s in figure_strings(fig)), "the figure has no Chinese label"


# ---------------------------------------------------------------- shape explorer: logic

@pytest.mark.parametrize("B, L, d_model, h", [(2, 4, 512, 8), (1, 1, 8, 1), (3, 7, 64, 4), (8, 32, 1024, 16)])
def test_shape_steps_are_the_real_shapes(B, L, d_model, h):
    report = W.shape_steps(B, L, d_model, h)
    d_k = d_model // h
    assert [shape for _, shape in report["steps"]] == [
        (B, L, d_model), (B, L, d_model), (B, h, L, d_k), (B, h, L, d_k), (B, L, d_model), (B, L, d_model)]
    assert report["weights"] == (B, h, L, L)
    assert report["d_k"] == d_k
    # the flow figure states the same shapes
    assert flow_shapes(B, L, d_model, h)[2][1] == str((B, h, L, d_k))


def test_head_width_problem_is_friendly_chinese():
    text = W.head_width_problem(512, 3)
    assert text.startswith("512 不能被 3 整除")
    assert "d_k" in text and "必须是整数" in text
    assert "1, 2, 4, 8, 16, ..." in text  # the n_heads that work (slider goes to 16)
    assert "504 或 528" in text  # multiples of 3 that the d_model slider (step 8) can reach
    assert "98 或 105" in W.head_width_problem(100, 7)
    assert "1, 2, 4, 5, 10, ..." in W.head_width_problem(100, 7)
    assert W.head_width_problem(512, 8) is None
    assert W.head_width_problem(6, 4) == (
        "6 不能被 4 整除（6 / 4 ≈ 1.50），每个头的宽度 d_k = d_model / n_heads 必须是整数；"
        "n_heads 可以选 1, 2, 3, 6；或者把 d_model 改成 4 的倍数，比如 4 或 8。")


def test_impossible_shape_is_text_not_traceback():
    with pytest.raises(ValueError, match="512 不能被 3 整除"):
        W.shape_steps(2, 4, 512, 3)
    view = W.shape_view(2, 4, 512, 3)  # the widget's function never raises for this
    assert view.figure is None
    assert view.text == "⚠️ " + W.head_width_problem(512, 3)
    with pytest.raises(ValueError, match="batch 必须是正整数"):
        W.shape_steps(0, 4, 512, 8)


def test_shape_view_lists_six_steps_and_draws_the_flow():
    view = W.shape_view(2, 4, 512, 8)
    assert isinstance(view.figure, Figure)
    assert "d_k = 512 / 8 = 64" in view.text
    assert view.text.count("(2, 4, 512)") == 4 and view.text.count("(2, 8, 4, 64)") == 2
    assert "B=2, L=4, d_model=512, h=8, d_k=64" in view.figure.axes[0].get_title()


def test_explorers_leave_the_global_random_state_alone():
    torch.manual_seed(123)
    expected = torch.randn(3)
    torch.manual_seed(123)
    W.shape_steps(2, 4, 64, 4)
    W.head_weights("I love deep learning")
    W.mask_weights()
    W.score_stats(8)
    assert torch.equal(torch.randn(3), expected)


# ---------------------------------------------------------------- head viewer: logic

@pytest.mark.parametrize("sentence", W.EXAMPLE_SENTENCES)
@pytest.mark.parametrize("n_heads", [1, 2, 3, 6])
def test_head_weights_one_heatmap_per_head(sentence, n_heads):
    tokens, w = W.head_weights(sentence, d_model=6, n_heads=n_heads)
    L = len(sentence.split())
    assert tokens == sentence.split()
    assert w.shape == (n_heads, L, L)
    assert torch.allclose(w.sum(dim=-1), torch.ones(n_heads, L), atol=1e-5)
    if n_heads > 1:
        assert not torch.allclose(w[0], w[1], atol=1e-2), "the heads should show different patterns"
    tokens2, w2 = W.head_weights(sentence, d_model=6, n_heads=n_heads)
    assert torch.equal(w, w2), "fixed seed: the same sentence always gives the same weights"


def test_head_weights_mask_the_pad_key():
    tokens, w = W.head_weights("You are welcome PAD")
    assert tokens[-1] == "PAD"
    assert torch.all(w[:, :, -1] == 0)
    assert torch.all(w[:, :, :-1] > 0)


def test_head_view_shows_the_head_and_the_mean():
    view = W.head_view("attention is all you need", head=2)
    titles = [ax.get_title() for ax in view.figure.axes if ax.get_title()]
    assert titles == ["第 2 个头（共 2 个）", "2 个头的平均"]
    assert [t.get_text() for t in view.figure.axes[0].get_xticklabels()] == "attention is all you need".split()
    assert "\n第 2 个头：attention→" in view.text and "\n平均：" in view.text
    w = view.data["weights"]
    shown = view.figure.axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(shown.data, dtype=w.dtype), w[1])
    with pytest.raises(ValueError, match="head 必须在 1 到 2 之间"):
        W.head_view(head=3)


# ---------------------------------------------------------------- sqrt(d_k): logic

@pytest.mark.parametrize("d_k", W.D_K_CHOICES)
def test_score_std_grows_like_sqrt_dk_unless_scaled(d_k):
    raw = W.score_stats(d_k, scaled=False)
    scaled = W.score_stats(d_k, scaled=True)
    assert raw["std"] == pytest.approx(math.sqrt(d_k), rel=0.1)
    assert scaled["std"] == pytest.approx(1.0, rel=0.1)
    assert scaled["mean_max_weight"] < 0.35 and scaled["mean_entropy"] > 2.0  # stays spread out
    for stats in (raw, scaled):
        assert torch.allclose(stats["weights"].sum(dim=-1), torch.ones(N_QUERIES), atol=1e-5)


def test_softmax_gets_peaked_without_scaling():
    maxima = [W.score_stats(d_k, scaled=False)["mean_max_weight"] for d_k in W.D_K_CHOICES]
    assert maxima == sorted(maxima), f"max weight should grow with d_k: {maxima}"
    big = W.score_stats(512, scaled=False)
    assert big["mean_max_weight"] > 0.9 and big["mean_entropy"] < 0.3
    assert big["entropy"] < W.score_stats(512, scaled=True)["entropy"]


def test_score_stats_refuse_a_bad_d_k():
    with pytest.raises(ValueError, match="d_k 必须是正整数"):
        W.score_stats(0)


# ---------------------------------------------------------------- mask explorer: logic

@pytest.mark.parametrize("kind", W.MASK_KINDS)
@pytest.mark.parametrize("length, padded_len", [(3, 4), (1, 1), (4, 9), (8, 10)])
def test_mask_weights_are_zero_where_masked(kind, length, padded_len):
    r = W.mask_weights(kind, length, padded_len)
    S = padded_len
    real = torch.arange(S) < length
    want = {"padding": real[None, :].expand(S, S),
            "causal": torch.ones(S, S, dtype=torch.bool).tril(),
            "both": real[None, :] & torch.ones(S, S, dtype=torch.bool).tril()}[kind]
    assert torch.equal(r["grid"], want)
    assert r["mask"].shape == {"padding": (1, 1, 1, S), "causal": (S, S), "both": (1, 1, S, S)}[kind]
    w = r["weights"]
    assert w.shape == (2, S, S)
    assert torch.all(w.masked_select(~want.expand_as(w)) == 0)
    assert torch.allclose(w.sum(dim=-1), torch.ones(2, S), atol=1e-5)
    assert r["tokens"] == W.masks.MASK_WORDS[:length] + ["PAD"] * (S - length)


def test_mask_view_explains_and_refuses_gently():
    view = W.mask_view("both", 3, 4)
    assert "You are welcome PAD" in view.text and "既不看 PAD，也不看未来" in view.text
    assert "被遮住的 7 个位置：2 个头的权重全部 = 0" in view.text
    assert [ax.get_title() for ax in view.figure.axes[:2]] == ["padding + 因果掩码（1 = 可以看）", "第 1 个头的注意力权重"]
    bad = W.mask_view("padding", 5, 4)
    assert bad.figure is None and "padded_len 调到至少 5" in bad.text
    with pytest.raises(ValueError, match="kind 只能是"):
        W.mask_weights("future")


# ---------------------------------------------------------------- static pictures for the website

@pytest.mark.parametrize("static, expected", [
    (W.shape_explorer_static, "d_k = 512 / 8 = 64"),
    (W.head_viewer_static, "第 2 个头："),
    (W.mask_explorer_static, "You are welcome PAD"),
])
def test_static_figures(static, expected, capsys):
    fig = static()
    assert isinstance(fig, Figure)
    assert_glyphs_drawn(fig)
    printed = capsys.readouterr().out
    assert expected in printed
    fig2 = static()
    assert capsys.readouterr().out == printed, "the static cell's text must be stable for nbval"
    assert [ax.get_title() for ax in fig.axes] == [ax.get_title() for ax in fig2.axes]


@pytest.mark.parametrize("view", [
    lambda: W.shape_view(8, 32, 1024, 16), lambda: W.head_view("the cat sat on the mat", 2),
    lambda: W.mask_view("causal", 8, 10)])
def test_every_figure_draws_its_chinese_labels(view):
    assert_glyphs_drawn(view().figure)


# ---------------------------------------------------------------- widgets driven by code (this venv: ipywidgets 8)

def test_shape_explorer_widget(capsys):
    ex = W.build_shape_explorer()
    assert isinstance(ex.widget, ipywidgets.VBox) and isinstance(ex.output, ipywidgets.Output)
    assert ex.redraws == 1 and "(2, 8, 4, 64)" in capsys.readouterr().out
    ex.controls["n_heads"].value = 3
    out = capsys.readouterr().out
    assert ex.redraws == 2 and "512 不能被 3 整除" in out and "Traceback" not in out
    assert ex.last.figure is None
    ex.controls["d_model"].value = 528
    out = capsys.readouterr().out
    assert "(2, 3, 4, 176)" in out and "Figure" in out  # the figure went to display()
    assert "d_model=528, h=3, d_k=176" in ex.last.figure.axes[0].get_title()
    assert not plt.get_fignums(), "the explorer must close its figures after displaying them"


def test_head_viewer_widget(capsys):
    ex = W.build_head_viewer()
    assert list(ex.controls["head"].options) == [("头 1", 1), ("头 2", 2)]
    ex.controls["head"].value = 2
    assert ex.redraws == 2 and ex.last.data["head"] == 2
    assert ex.last.figure.axes[0].get_title() == "第 2 个头（共 2 个）"
    assert "每个 query 最关注的 key" in (out := capsys.readouterr().out) and "第 2 个头：" in out
    ex.controls["sentence"].value = "I love deep learning"
    assert ex.last.data["tokens"] == ["I", "love", "deep", "learning"]
    assert "PAD" not in capsys.readouterr().out


def test_mask_explorer_widget(capsys):
    ex = W.build_mask_explorer()
    ex.controls["kind"].value = "padding"
    ex.controls["padded_len"].value = 6
    assert ex.redraws == 3
    grid = ex.last.data["grid"]
    assert grid.shape == (6, 6) and not grid[:, 3:].any() and grid[:, :3].all()
    ex.controls["length"].value = 7
    out = capsys.readouterr().out
    assert ex.last.figure is None and "padded_len 调到至少 7" in out


def test_explorer_functions_display_the_widget(capsys):
    for show in (W.shape_explorer, W.head_viewer, W.mask_explorer):
        assert show() is None
        assert "VBox(" in capsys.readouterr().out  # outside a kernel display() prints the repr


# ---------------------------------------------------------------- driven like a reader's clicks (also run under Colab's ipywidgets)

@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_scenario(scenario):
    scenario()


# ---------------------------------------------------------------- in a real kernel: what lands in the Output widget

def test_widgets_in_a_real_kernel(tmp_path):
    from nbclient import NotebookClient

    nb = kernel_notebook()
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert_kernel_outputs(nb)
