"""Explorer scenarios: drive every explorer widget the way a reader's clicks do.

Each ``scenario_*`` builds a widget with ``mha.course.widgets.build_*``, sets control values
(``control.value = ...`` fires the observers) and asserts that the redraw happened and
that the printed text, the figure and the numbers changed accordingly. pytest runs them
here (tests/course/test_widgets.py, ipywidgets 8) and in the Colab-like environment
(tests/colab/, ipywidgets 7.7.1). ``python tests/support/widget_scenarios.py`` times one update
of each explorer (a benchmark: it prints figures, asserts nothing).
"""
from __future__ import annotations

import contextlib
import io
import sys
import time

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import nbformat  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import mha  # noqa: E402  (the installed mha: editable in .venv, a --no-deps copy in the Colab-like venv)
import mha.course.widgets as W  # noqa: E402


def quiet(build, *args, **kwargs):
    """Build an explorer without printing its first view."""
    with contextlib.redirect_stdout(io.StringIO()):
        return build(*args, **kwargs)


def drive(explorer, **values) -> str:
    """Set control values one by one (as clicks do) and return what the redraws printed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        for name, value in values.items():
            explorer.controls[name].value = value
    return buf.getvalue()


def titles(figure) -> list[str]:
    return [ax.get_title() for ax in figure.axes]


def figure_strings(figure) -> list[str]:
    return [t.get_text() for t in figure.findobj(matplotlib.text.Text)]


def scenario_shape_explorer():
    ex = quiet(W.build_shape_explorer)
    assert ex.redraws == 1, f"the first view is drawn on build, redraws = {ex.redraws}"
    assert [s for _, s in ex.last.data["steps"]] == [(2, 4, 512), (2, 4, 512), (2, 8, 4, 64), (2, 8, 4, 64),
                                                     (2, 4, 512), (2, 4, 512)], ex.last.data["steps"]
    printed = drive(ex, n_heads=3)
    assert ex.redraws == 2, f"setting n_heads did not redraw (redraws = {ex.redraws})"
    assert "512 不能被 3 整除" in printed and "d_k" in printed, f"no friendly message, printed: {printed!r}"
    assert "Traceback" not in printed and ex.last.figure is None
    printed = drive(ex, n_heads=4)
    assert "(2, 4, 4, 128)" in printed, printed
    assert "h=4" in titles(ex.last.figure)[0] and "d_k=128" in titles(ex.last.figure)[0], titles(ex.last.figure)
    printed = drive(ex, batch=3, seq_len=7, d_model=64)
    assert ex.redraws == 6, ex.redraws
    assert [s for _, s in ex.last.data["steps"]][2] == (3, 4, 7, 16), ex.last.data["steps"]
    assert "(3, 4, 7, 16)" in printed and "(3, 7, 64)" in printed, printed


def scenario_head_viewer():
    ex = quiet(W.build_head_viewer)
    assert ex.redraws == 1 and ex.last.data["head"] == 1
    assert ex.last.data["weights"].shape == (2, 4, 4), ex.last.data["weights"].shape
    assert titles(ex.last.figure)[:2] == ["第 1 个头（共 2 个）", "2 个头的平均"], titles(ex.last.figure)
    before = ex.last.data["weights"][0]
    printed = drive(ex, head=2)
    assert ex.redraws == 2 and ex.last.data["head"] == 2, ex.redraws
    assert "第 2 个头" in printed and titles(ex.last.figure)[0] == "第 2 个头（共 2 个）", titles(ex.last.figure)
    assert torch.equal(ex.last.data["weights"][0], before), "changing the head must not change the layer"
    drive(ex, sentence="the cat sat on the mat")
    assert ex.last.data["tokens"] == ["the", "cat", "sat", "on", "the", "mat"], ex.last.data["tokens"]
    assert ex.last.data["weights"].shape == (2, 6, 6), ex.last.data["weights"].shape
    labels = [t.get_text() for t in ex.last.figure.axes[0].get_xticklabels()]
    assert labels == ex.last.data["tokens"], labels


def scenario_mask_explorer():
    ex = quiet(W.build_mask_explorer)
    assert ex.redraws == 1 and ex.last.data["tokens"] == ["You", "are", "welcome", "PAD"], ex.last.data
    drive(ex, kind="causal", padded_len=6)
    grid = ex.last.data["grid"]
    assert grid.shape == (6, 6) and torch.equal(grid, torch.ones(6, 6, dtype=torch.bool).tril()), grid
    w = ex.last.data["weights"]
    assert torch.all(w.masked_select(~grid.expand_as(w)) == 0), "weights are not 0 where masked"
    printed = drive(ex, kind="padding")
    assert "padding 掩码" in printed, printed
    grid = ex.last.data["grid"]
    assert grid[:, 3:].sum() == 0 and grid[:, :3].all(), grid
    printed = drive(ex, length=7)
    assert "padded_len" in printed and ex.last.figure is None and "error" in ex.last.data, printed
    drive(ex, padded_len=8)
    assert ex.last.data["tokens"][-1] == "PAD" and len(ex.last.data["tokens"]) == 8, ex.last.data["tokens"]


def scenario_figure_glyphs():
    from mha.course.pictures.cjk import required_characters

    figures = [W.shape_view().figure, W.head_view().figure, W.mask_view().figure]
    known = set(required_characters()) | {"\u2212", "\n"}  # the tick minus sign is in DejaVu Sans
    for fig in figures:
        bad = [s for s in figure_strings(fig) if not s.isascii() and not set(s) <= known | _dejavu()]
        assert not bad, f"figure text outside the shipped font subset (Colab has no CJK font): {bad}"
        plt.close(fig)


def _dejavu():
    """Non-ASCII symbols the figures take from DejaVu Sans (Wᴼ, dₖ, √, · ...)."""
    return set("\u1d3c\u2096\u221a\u00b7\u00d7\u2192\u1d40\u2081\u2082\u2032")


def scenario_explorers_display():
    for show in (W.shape_explorer, W.head_viewer, W.mask_explorer):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            result = show()
        assert result is None, f"{show.__name__} should display, not return, got {result!r}"
        assert "VBox" in buf.getvalue(), f"{show.__name__} displayed nothing: {buf.getvalue()[:200]!r}"


SCENARIOS = [scenario_shape_explorer, scenario_head_viewer, scenario_mask_explorer,
             scenario_figure_glyphs, scenario_explorers_display]


# ---------------------------------------------------------------- in a real kernel: what lands in the Output widgets
KERNEL_CELLS = [
    "import mha.course.widgets as W\n"
    "boxes = [W.build_shape_explorer(), W.build_head_viewer(), W.build_mask_explorer()]\n"
    "for box in boxes:\n    display(box.widget)",
    "boxes[0].controls['n_heads'].value = 3",
    "boxes[1].controls['head'].value = 2",
    "boxes[2].controls['kind'].value = 'causal'",
]
KERNEL_EXPECT = ["512 不能被 3 整除", "第 2 个头：You→", "因果掩码："]


def kernel_notebook():
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in KERNEL_CELLS])


def output_widgets(nb) -> list[list[dict]]:
    """The outputs captured by each Output widget (in no particular order: model ids are random)."""
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"].get("outputs", []) for m in state.values() if m["model_name"] == "OutputModel"]


def assert_kernel_outputs(nb):
    outputs = output_widgets(nb)
    assert len(outputs) == 3, outputs
    texts = ["".join(o.get("text", "") for o in outs if o["output_type"] == "stream") for outs in outputs]
    for expected, n_figures in zip(KERNEL_EXPECT, [0, 1, 1]):
        matches = [i for i, text in enumerate(texts) if expected in text]
        assert len(matches) == 1, f"expected {expected!r} in exactly one Output widget, got {texts}"
        outs = outputs[matches[0]]
        images = [o for o in outs if "image/png" in o.get("data", {})]
        assert len(images) == n_figures, f"{expected!r}: expected {n_figures} figure(s), got {len(images)}"
    for cell in nb.cells[1:]:  # redraws go into the widget, never into the cell below
        assert cell.outputs == [], cell.outputs



def bench(repeats: int = 5) -> None:
    """Time one update of each explorer: computing the view + rendering its PNG (what the inline backend does)."""
    settings = [
        (W.build_shape_explorer, [{"n_heads": 4}, {"n_heads": 8}, {"d_model": 1024, "seq_len": 32, "batch": 8}]),
        (W.build_head_viewer, [{"head": 2}, {"head": 1}, {"sentence": "the cat sat on the mat"}]),
        (W.build_mask_explorer, [{"kind": "causal"}, {"padded_len": 10}, {"kind": "both"}]),
    ]
    for build, updates in settings:
        ex = quiet(build)
        times, cpu = [], []
        for _ in range(repeats):
            for values in updates:
                start, start_cpu = time.perf_counter(), time.process_time()
                drive(ex, **values)
                if ex.last.figure is not None:
                    ex.last.figure.savefig(io.BytesIO(), format="png", bbox_inches="tight")
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
        times.sort()
        cpu.sort()
        print(f"{build.__name__:<24} wall: min {times[0]:.3f} s, median {times[len(times) // 2]:.3f} s, "
              f"max {times[-1]:.3f} s; CPU time: median {cpu[len(cpu) // 2]:.3f} s, max {cpu[-1]:.3f} s "
              f"({len(times)} updates)")


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}, ipywidgets {ipywidgets.__version__}, "
          f"matplotlib {matplotlib.__version__}, torch {torch.__version__}, mha from {mha.__file__}")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    bench()
