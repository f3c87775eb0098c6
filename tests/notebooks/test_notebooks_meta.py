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


# A reference-solution cell starts with exactly this line (Colab folds the code of a form cell).
SOLUTION_TITLE = '# @title 参考答案（先自己做，再展开） {display-mode: "form"}'
# Tags under which Jupyter Book shows neither the code nor the output until the reader asks.
FOLDS_OUTPUT = {"hide-cell", "hide-output", "remove-cell", "remove-output"}


def is_solution(cell):
    """A reference solution: it carries the title line, or it runs a checker outside the student's record
    (`check_...(..., record=False)`) or defines a `..._solution` answer, which only reference cells do."""
    if cell["cell_type"] != "code":
        return False
    src = source(cell)
    return (src.startswith("# @title 参考答案")
            or bool(re.search(r"\bcheck_\w+\(.*record=False", src))
            or bool(re.search(r"^(def )?\w+_solution\b", src, re.M)))


def solutions(path):
    return [(i, c) for i, c in enumerate(load(path)["cells"]) if is_solution(c)]


def test_solution_cells_are_recognised():
    """The recogniser finds the marked cells and leaves check cells and student cells alone."""
    cell = lambda src: {"cell_type": "code", "source": [src], "metadata": {}}
    assert is_solution(cell(SOLUTION_TITLE + "\nx = 1"))
    assert is_solution(cell("answer_solution = (2, 7)\ncheck_shape(answer_solution, record=False)"))
    assert not is_solution(cell("check_shape(answer_1_1)\n"))
    assert not is_solution(cell('# @title 检查 { display-mode: "form" }\nassert x.shape == (2, 4)'))
    assert sum(len(solutions(p)) for p in NOTEBOOKS) >= 36


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reference_solutions_are_hidden_on_site_and_in_colab(path):
    """No answer is visible before the reader asks: the site folds code and output (hide-cell), Colab folds
    the code (form title) and the stored output holds at most the checker's pass verdict."""
    for i, cell in solutions(path):
        where = f"{path.name} cell {i}"
        assert source(cell).splitlines()[0] == SOLUTION_TITLE, f"{where}: first line must be {SOLUTION_TITLE!r}"
        assert cell["metadata"].get("cellView") == "form", f"{where}: solution without cellView form"
        tags = set(cell["metadata"].get("tags", []))
        assert tags & FOLDS_OUTPUT, f"{where}: tags {sorted(tags)} show the output on the page; tag it hide-cell"
        assert "record=False" in source(cell), f"{where}: solution check must not count in the summary"
        shown = []
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else (
                "".join(out.get("data", {}).get("text/plain", "")) or str(sorted(out.get("data", {}))))
            shown += [line for line in text.splitlines() if line.strip() and not line.startswith("✅")]
        assert not shown, f"{where}: stored output gives the answer away in Colab: {shown[:3]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_installs_the_release_in_pyproject(path):
    """A saved copy of a notebook installs the release it was executed with, never a moving branch."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    refs = re.findall(r"git\+https://\S+?@([\w.-]+)\"", source(load(path)["cells"][0]))
    assert refs == [f"v{version}"], f"{path.name}: the setup cell installs {refs}, pyproject.toml's release is v{version}"


def test_the_release_the_notebooks_install_holds_this_package():
    """Once the release is tagged here, the package must be what the tag holds: a notebook executed now installs that
    tag in Colab, so changing mha/ (or its dependencies) after a release needs a new version (CONTRIBUTING.md)."""
    import subprocess

    tag = setup_cell.release_tag()
    git = lambda *args: subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)  # noqa: E731
    if git("rev-parse", "-q", "--verify", f"refs/tags/{tag}").returncode != 0:
        pytest.skip(f"{tag} is not tagged in this checkout (not released yet, or cloned without tags)")
    changed = git("diff", "--name-only", tag, "--", "mha", "pyproject.toml").stdout.split()
    assert not changed, (f"the notebooks install {tag}, but the package differs from it in {changed[:5]}: "
                         "raise the version in pyproject.toml and follow CONTRIBUTING.md's release steps")


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


LECTURE_NUMBER = re.compile(r"讲义\s*(?:0\d\d|[一二12])")  # file numbers or "讲义二": names a reader has never seen


@pytest.mark.parametrize("path", NOTEBOOKS + sorted((ROOT / "book").glob("*.md")), ids=lambda p: p.name)
def test_the_lecture_is_cited_by_title_not_by_file_number(path):
    """intro.md introduces 《多头自注意力》 and 《原理图（下）》; pages cite them by those names."""
    if path.suffix == ".ipynb":
        text = "\n".join(source(c) for c in load(path)["cells"] if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    assert not LECTURE_NUMBER.findall(text), f"{path.name}: cite 《多头自注意力》 or 《原理图（下）》, not {LECTURE_NUMBER.findall(text)[:3]}"


def test_the_intro_names_both_lecture_texts():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for title in ("《多头自注意力》", "《原理图（下）》"):
        assert intro.count(title) >= 2, f"intro.md must introduce {title} (its content) and use the name"
