"""The interactive figures (mha.course.page_figures): every state the controls reach is precomputed, and right.

Each builder's stored rows are compared with the mha functions the live ipywidgets explorers
call; the spec's controls must reach exactly the precomputed states; the specs stay small;
the notebooks store fresh figures; the website plugin and the pinned vega scripts fit Altair.
The browser side is tests/browser/test_browser_explorers.py.
"""
from __future__ import annotations

import importlib
import itertools
import json
import math
import pathlib
import re
import subprocess
import sys

import altair as alt
import fetch_assets  # tools/ (pyproject: pythonpath)
import pytest
import torch

import mha.course.page_figures as pf
import mha.course.widgets
from mha.course.page_figures._figure import InteractiveFigure, rounded, wrap
from mha.course.page_figures.myst import FIGURE_CLASS, VegaLiteFigurePlugin, figure_html
from mha.course.page_figures.shapes import fill, shape_trace
from mha.course.widgets import EXAMPLE_SENTENCES, head_weights, mask_weights, score_stats, shape_steps
from mha.course.figure_data.scaling import N_KEYS, N_PAIRS
from mha.course.widgets.shapes import head_width_problem

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILDERS = {"scaling": pf.scaling_figure, "shapes": pf.shape_figure, "heads": pf.head_figure,
            "masks": pf.mask_figure, "trained": pf.trained_head_figure}
# Where each figure stands in the book (the cell ends with the figure; see the chapters).
CHAPTERS = {"scaling": "05_parallel_attention", "shapes": "08_full_layer", "heads": "09_worked_example",
            "masks": "10_masks", "trained": "13_trained_heads"}
MAX_SPEC_BYTES = 150_000  # one figure's spec on its page


@pytest.fixture(scope="module")
def figures() -> dict:
    return {name: build() for name, build in BUILDERS.items()}


def close(a, b, tol=1.01e-3) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


# ---------------------------------------------------------------- the numbers are mha's

def test_the_figures_load_no_widget_code():
    """Importing the figures and computing their states loads the figure data, never the widgets' views."""
    code = ("import sys, mha.course.page_figures as pf; pf.head_states(); pf.mask_states(); "
            "print('\\n'.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                cwd=ROOT).stdout.split())
    assert {"mha.course.figure_data.heads", "mha.course.figure_data.masks"} <= loaded
    widget_code = {m for m in loaded if m.startswith("mha.course.widgets")
                   or m.split(".")[0] in ("ipywidgets", "matplotlib")}
    assert not widget_code, f"the figures loaded widget code: {sorted(widget_code)[:10]}"


@pytest.mark.parametrize("topic, name", [("heads", "head_weights"), ("heads", "EXAMPLE_SENTENCES"),
                                         ("masks", "mask_weights"), ("masks", "MASK_KINDS"),
                                         ("scaling", "score_stats"), ("scaling", "D_K_CHOICES"),
                                         ("shapes", "shape_steps"), ("shapes", "head_width_problem")])
def test_the_widgets_reexport_the_figure_data(topic, name):
    """One home for each number: mha.course.widgets hands out the very objects of mha.course.figure_data."""
    module = importlib.import_module(f"mha.course.figure_data.{topic}")
    assert getattr(mha.course.widgets, name) is getattr(module, name)


def test_scaling_states_match_score_stats(figures):
    fig = figures["scaling"]
    for d_k, scaled in [(1, False), (64, False), (64, True), (512, False), (512, True)]:
        row, stats = fig.state(d_k=d_k, scaled=scaled), score_stats(d_k, scaled)
        assert abs(row["std"] - stats["std"]) < 1e-3 and abs(row["entropy"] - stats["entropy"]) < 1e-3
        assert close(row["weight"], stats["row"].tolist()) and len(row["weight"]) == N_KEYS
        assert abs(sum(row["weight"]) - 1) < 0.01
        assert 0.99 * N_PAIRS <= sum(row["count"]) <= N_PAIRS  # the histogram holds (almost) every pair
        assert f"{stats['std']:.2f}" in row["caption"]
    # the claim of the chapter: unscaled spread ~ sqrt(d_k), scaled ~ 1
    assert abs(fig.state(d_k=512, scaled=False)["std"] / math.sqrt(512) - 1) < 0.05
    assert abs(fig.state(d_k=512, scaled=True)["std"] - 1) < 0.05


@pytest.mark.parametrize("batch,seq_len,d_model,n_heads",
                         [(2, 4, 512, 8), (1, 1, 8, 1), (8, 32, 1024, 16), (3, 7, 96, 12), (5, 2, 48, 3)])
def test_shape_states_match_the_real_layer(figures, batch, seq_len, d_model, n_heads):
    row = figures["shapes"].state(d_model=d_model, n_heads=n_heads)
    shown = [fill(s, batch, seq_len) for s in row["shapes"]]
    real = shape_steps(batch, seq_len, d_model, n_heads)  # real tensors through a real layer
    assert shown[:6] == [str(s) for _, s in real["steps"]]
    assert shown[6] == str(real["weights"]) and row["d_k"] == real["d_k"]
    assert row["first"] == list(range(0, d_model, d_model // n_heads))  # head i starts at i * d_k
    assert row["last"] == [f + d_model // n_heads - 1 for f in row["first"]]


def test_shape_states_explain_the_impossible_ones(figures):
    for d_model, n_heads in [(512, 3), (8, 16), (96, 7)]:
        row = figures["shapes"].state(d_model=d_model, n_heads=n_heads)
        assert row["shapes"] == [] and row["d_k"] is None
        assert re.sub(r"\s", "", row["problem"]) == re.sub(r"\s", "", "⚠️ " + head_width_problem(d_model, n_heads))


def test_shape_trace_uses_meta_tensors_and_sentinels():
    shapes = shape_trace(512, 8, batch=2, seq_len=4)
    assert shapes[2] == (2, 8, 4, 64) and shapes[6] == (2, 8, 4, 4)
    assert fill("(B, 8, L, L)", 2, 4) == "(2, 8, 4, 4)"


def test_head_states_match_head_weights(figures):
    fig = figures["heads"]
    for sentence in EXAMPLE_SENTENCES:
        tokens, weights = head_weights(sentence)  # (h, L, L)
        for i in range(weights.shape[0]):
            row = fig.state(sentence=sentence, head=f"头 {i + 1}")
            assert close(row["w"], weights[i].flatten().tolist()) and row["n"] == len(tokens)
        mean = fig.state(sentence=sentence, head=pf.heads.MEAN)["w"]
        assert close(mean, weights.mean(dim=0).flatten().tolist())
        assert len(set(row["labels"])) == len(tokens), "axis labels must be distinct"
    pad = fig.state(sentence="You are welcome PAD", head="头 1")
    assert pad["w"][3::4] == [0.0, 0.0, 0.0, 0.0], "the PAD column is masked"


def test_mask_states_match_mask_weights(figures):
    fig = figures["masks"]
    for kind, length, padded in [("both", 3, 4), ("padding", 2, 5), ("causal", 8, 10), ("both", 1, 1)]:
        row, result = fig.state(kind=kind, length=length, padded_len=padded), mask_weights(kind, length, padded)
        assert close(row["w"], result["weights"][0].flatten().tolist())
        assert row["m"] == "".join("1" if x else "0" for x in result["grid"].flatten().tolist())
        assert row["hidden"] == int((~result["grid"]).sum()) and row["problem"] is None
        hidden = [w for w, m in zip(row["w"], row["m"]) if m == "0"]
        assert all(w == 0 for w in hidden), "a masked weight is not 0"
    assert fig.state(kind="both", length=3, padded_len=4)["m"] == "1000" "1100" "1110" "1110"
    bad = fig.state(kind="causal", length=5, padded_len=3)
    with pytest.raises(ValueError) as err:
        mask_weights("causal", 5, 3)
    assert bad["w"] == [] and re.sub(r"\s", "", bad["problem"]) == re.sub(r"\s", "", f"⚠️ {err.value}")


def test_trained_head_states_match_the_models_attention_maps(figures):
    from mha.course.numerals import load_pretrained, to_chinese
    from mha.course.numerals.analysis import teacher_forced

    fig, model = figures["trained"], load_pretrained().double()
    for number in (60708090, 2026):
        _, maps = teacher_forced(model, [number])
        for kind, layer, head in [("encoder", 1, 1), ("decoder", 1, 2), ("cross", 2, 1), ("cross", 1, 4)]:
            row = fig.state(number=number, kind=kind, layer=layer, head=head)
            assert close(row["w"], maps[kind][layer - 1][0, head - 1].flatten().tolist())
            assert len(row["w"]) == len(row["rows"]) * row["nc"] and len(row["cols"]) == row["nc"]
        chars = fig.state(number=number, kind="encoder", layer=1, head=1)["cols"]
        assert [c.split(" (")[0] for c in chars] == list(to_chinese(number))
        causal = fig.state(number=number, kind="decoder", layer=1, head=1)
        n = causal["nc"]
        assert all(causal["w"][q * n + k] == 0 for q in range(n) for k in range(q + 1, n)), "the decoder looks ahead"


# ---------------------------------------------------------------- every control reaches a stored state

@pytest.mark.parametrize("name", BUILDERS)
def test_every_setting_of_the_controls_has_exactly_one_state(figures, name):
    fig = figures[name]
    fields = [k for k in fig.controls if k in fig.rows[0]]
    for values in itertools.product(*(fig.controls[k] for k in fields)):
        fig.state(**dict(zip(fields, values)))  # raises unless exactly one row matches
    combos = math.prod(len(fig.controls[k]) for k in fields)
    assert len(fig.rows) == combos, "rows no control can reach"
    assert fig.states == math.prod(len(v) for v in fig.controls.values())


def _reachable(bind: dict) -> list:
    if bind["input"] in ("select", "radio"):
        return bind["options"]
    if bind["input"] == "checkbox":
        return [False, True]
    if bind["input"] == "range":
        return list(range(bind["min"], bind["max"] + 1, bind["step"]))
    raise AssertionError(f"unexpected input {bind}")


@pytest.mark.parametrize("name", BUILDERS)
def test_the_page_controls_are_the_precomputed_ones(figures, name):
    fig = figures[name]
    params = {p["name"]: p for p in fig.spec["params"]}
    assert list(params) == list(fig.controls)
    for key, p in params.items():
        assert _reachable(p["bind"]) == fig.controls[key], key
        assert p["value"] in fig.controls[key], f"{key}: the start value is not a state"
        assert p["bind"].get("name", "").strip(), f"{key}: the control has no label"


@pytest.mark.parametrize("name", BUILDERS)
def test_specs_are_small_deterministic_and_rounded(figures, name):
    fig = figures[name]
    assert fig.nbytes < MAX_SPEC_BYTES, f"{name}: {fig.nbytes} bytes"
    assert BUILDERS[name]().to_json() == fig.to_json(), "building twice must give the same spec"
    numbers = re.findall(r"-?\d+\.\d+", json.dumps(fig.rows))
    assert all(len(n.split(".")[1]) <= 3 for n in numbers), "store at most 3 decimals"


def test_building_the_figures_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    pf.head_figure()
    pf.mask_figure()
    assert torch.equal(torch.rand(3), expected)


# ---------------------------------------------------------------- what a cell shows

@pytest.mark.parametrize("name", BUILDERS)
def test_mimebundle_has_altairs_html_the_site_spec_and_the_alt_text(figures, name):
    fig = figures[name]
    bundle = fig._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "vegaEmbed" in bundle["text/html"] or "vega-embed" in bundle["text/html"]  # Altair's own renderer
    assert json.loads(bundle[pf.MIME_TYPE]) == fig.spec and "\n" not in bundle[pf.MIME_TYPE]
    assert fig.spec["description"] == fig.alt_text and len(fig.alt_text) > 40
    assert bundle["text/plain"] == fig.alt_text
    assert "<InteractiveFigure" in repr(fig)


def test_a_figure_needs_alt_text():
    chart = alt.Chart(alt.InlineData(values=[{"a": 1}])).mark_point()
    with pytest.raises(ValueError, match="alt text"):
        InteractiveFigure(chart, "  ")
    with pytest.raises(ValueError, match="交互图"):
        InteractiveFigure(chart, "a description that does not say it is interactive")


def test_rounding_and_wrapping():
    assert rounded([0.12345, -0.00001, 2]) == [0.123, 0.0, 2.0]
    assert str(rounded(-0.0001)) == "0.0"
    with pytest.raises(ValueError):
        rounded(float("nan"))
    text = wrap("⚠️ 512 不能被 3 整除，每个头的宽度 d_k = d_model / n_heads 必须是整数；n_heads 可以选 1, 2, 4", 24)
    for line in text.split("\n"):
        assert sum(2 if "\u4e00" <= c <= "\u9fff" or c in "，；" else 1 for c in line) <= 24
    assert "d_model" in text and "n_heads" in text.replace("\n", " ")  # Latin words are never cut


# ---------------------------------------------------------------- the website plugin

def test_figure_html_escapes_the_spec_and_carries_the_description():
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.4.1.json", "description": 'a "quoted" <b>',
            "data": {"values": [{"t": "</script><script>alert(1)</script>"}]}, "mark": "point"}
    html = figure_html(json.dumps(spec))
    assert html.count("</script>") == 1, "the spec must not close its <script> element"
    assert f'class="{FIGURE_CLASS}"' in html and 'aria-label="a &quot;quoted&quot; &lt;b&gt;"' in html
    inner = html.split('class="mha-vega-spec">', 1)[1].rsplit("</script>", 1)[0]
    assert json.loads(inner) == spec
    with pytest.raises(ValueError, match="description"):
        figure_html({**spec, "description": ""})


def test_plugin_renders_only_its_mimetype_first_on_html():
    from myst_nb.core.render import MimeData, get_mime_priority, load_mime_renders

    assert VegaLiteFigurePlugin in load_mime_renders(), "reinstall mha: pip install --no-deps -e ."
    assert get_mime_priority("html", [])[0] == pf.MIME_TYPE
    spec = pf.head_figure().to_json()
    data = MimeData(pf.MIME_TYPE, spec, output_metadata={}, cell_metadata={})
    nodes = VegaLiteFigurePlugin.handle_mime(None, data, False)
    assert len(nodes) == 1 and FIGURE_CLASS in nodes[0].astext()
    assert VegaLiteFigurePlugin.handle_mime(None, data, True) is None  # never inline
    other = MimeData("text/html", "<p>x</p>", output_metadata={}, cell_metadata={})
    assert VegaLiteFigurePlugin.handle_mime(None, other, False) is None


def test_pinned_vega_scripts_are_the_versions_altair_targets():
    assert fetch_assets.asset("vega-lite").version == alt.SCHEMA_VERSION.lstrip("v")
    assert fetch_assets.asset("vega").version.split(".")[0] == alt.VEGA_VERSION
    assert fetch_assets.asset("vega-embed").version.split(".")[0] == alt.VEGAEMBED_VERSION
    assert all(a.integrity.startswith("sha512-") for a in fetch_assets.direct())  # npm ci checks them
    assert [s.split("/")[0] for s in fetch_assets.VEGA_SCRIPTS] == ["vega", "vega-lite", "vega-embed"]


# ---------------------------------------------------------------- the stored notebooks

def _stored_specs(chapter: str) -> list:
    nb = json.loads((ROOT / "book" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    found = []
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        for out in cell.get("outputs", []):
            text = out.get("data", {}).get(pf.MIME_TYPE)
            if text is not None:
                tags = cell["metadata"].get("tags", [])
                # the figure's cell and the check cell after it (the asserts live there, hidden on the site)
                after = "".join(cells[i + 1]["source"]) if i + 1 < len(cells) else ""
                found.append((json.loads("".join(text)), tags, "".join(cell["source"]) + "\n" + after))
    return found


def _same(a, b, path="spec"):
    """Equal structure and text; numbers within 2e-3 (the last stored decimal may differ between CPUs)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) <= 2e-3, (path, a, b)
    else:
        assert a == b, (path, a, b)


def _chapter_dtype(chapter: str):
    """The default dtype the chapter's kernel runs in (chapters 9 and 10 switch to float64 early on)."""
    text = (ROOT / "book" / f"{chapter}.ipynb").read_text(encoding="utf-8")
    return torch.float64 if "set_default_dtype(torch.float64)" in text else torch.float32


@pytest.mark.parametrize("name", BUILDERS)
def test_the_chapter_stores_the_current_figure(name):
    stored = _stored_specs(CHAPTERS[name])
    assert len(stored) == 1, f"{CHAPTERS[name]}: expected one interactive figure, found {len(stored)}"
    spec, tags, source = stored[0]
    assert "nbval-ignore-output" in tags and "remove-output" not in tags
    assert f"mha.course.page_figures.{BUILDERS[name].__name__}(" in source
    before = torch.get_default_dtype()
    torch.set_default_dtype(_chapter_dtype(CHAPTERS[name]))
    try:
        current = BUILDERS[name]().spec
    finally:
        torch.set_default_dtype(before)
    _same(spec, current)
