"""Structure every notebook must follow: setup cell, goals, summary, outputs stored, solutions hidden."""
import json
import re
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
import setup_cell

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_cell_is_the_setup_cell_from_config(path):
    first = load(path)["cells"][0]
    want = setup_cell.setup_cell()
    assert first["cell_type"] == "code"
    assert source(first) == want["source"], (
        f"{path.name}: first cell differs from the setup cell derived from _config.yml; run python tools/setup_cell.py")
    assert first["metadata"].get("cellView") == "form"
    assert first["metadata"].get("tags") == ["remove-cell"], "the setup cell is removed from the website"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_goals_summary_and_stored_outputs(path):
    nb = load(path)
    markdown = "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "## 学习目标" in markdown, f"{path.name}: no 学习目标 section"
    assert "## 小结" in markdown, f"{path.name}: no 小结 section"
    code = [c for c in nb["cells"][1:] if c["cell_type"] == "code" and source(c).strip()]
    unrun = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    assert not unrun, f"{path.name}: code cells never executed: {unrun}"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: stored error outputs"
    assert any("import mha" in source(c) or "from mha" in source(c) for c in code), f"{path.name} does not use mha"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reference_solutions_are_hidden_on_site_and_in_colab(path):
    for cell in load(path)["cells"]:
        if cell["cell_type"] == "code" and source(cell).startswith("# @title 参考答案"):
            assert "{ display-mode: \"form\" }" in source(cell).splitlines()[0]
            assert cell["metadata"].get("cellView") == "form", f"{path.name}: solution without cellView form"
            tags = cell["metadata"].get("tags", [])
            assert "hide-input" in tags or "hide-cell" in tags, f"{path.name}: solution without hide-cell (or hide-input)"
            assert "record=False" in source(cell), f"{path.name}: solution check must not count in the summary"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_installs_the_release_in_pyproject(path):
    """A saved copy of a notebook installs the release it was executed with, never a moving branch."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    refs = re.findall(r"git\+https://\S+?@([\w.-]+)\"", source(load(path)["cells"][0]))
    assert refs == [f"v{version}"], f"{path.name}: the setup cell installs {refs}, pyproject.toml's release is v{version}"


def test_setup_cell_installs_only_in_colab(monkeypatch):
    import subprocess
    import types

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    src = setup_cell.setup_cell()["source"]
    exec(compile(src, "setup-cell", "exec"), {})
    assert calls == [], "outside Colab the setup cell must do nothing"
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    exec(compile(src, "setup-cell", "exec"), {})
    assert len(calls) == 1
    cmd = calls[0]
    assert cmd[1:4] == ["-m", "pip", "install"] and "--no-deps" in cmd
    assert re.fullmatch(r"mha-course @ git\+https://github\.com/[\w.-]+/[\w.-]+@[\w.-]+", cmd[-1]), cmd[-1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_widget_state(path):
    """Live widgets need a kernel; their stored state would only bloat the page (`make execute` drops it)."""
    assert "widgets" not in load(path).get("metadata", {}), f"{path.name}: re-execute it with make execute NB=book/{path.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_live_explorers_have_a_static_picture_before_them(path):
    cells = load(path)["cells"]
    for i, cell in enumerate(cells):
        src = source(cell)
        live = "mha.course.widgets." in src and ("_explorer()" in src or "head_viewer()" in src)
        if cell["cell_type"] == "code" and live:
            tags = cell["metadata"].get("tags", [])
            assert "nbval-ignore-output" in tags and "remove-output" in tags, f"{path.name} cell {i}"
            static = cells[i - 1]
            assert "_static()" in source(static), f"{path.name} cell {i}: no static twin before the live explorer"
            assert any(o.get("data", {}).get("image/png") for o in static.get("outputs", [])), \
                f"{path.name} cell {i - 1}: the static explorer cell stored no picture"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_valid_nbformat_with_cell_ids(path):
    import warnings

    import nbformat

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MissingIDFieldWarning becomes a failure
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    ids = [cell.id for cell in nb.cells]
    assert len(ids) == len(set(ids)), f"{path.name}: duplicate cell ids"
