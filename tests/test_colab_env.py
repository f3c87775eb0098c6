"""Every chapter runs to the end in a Colab-like environment.

The environment (tests/colab_env.py) has Colab's ipywidgets 7.7.1, IPython 7,
ipykernel 6, matplotlib 3.10 and ``mha`` installed with ``--no-deps`` from a
copy of this repository; each notebook runs with nbclient on a kernel of that
venv, in an empty working directory (Colab has no checkout of the repository).
"""
from __future__ import annotations

import concurrent.futures
import json
import pathlib
import re
import subprocess

import nbformat
import pytest

from colab_env import COLAB_PINS, ROOT, colab_python, run_in_colab

NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))


def _pin(name: str) -> str:
    return next(p.split("==")[1] for p in COLAB_PINS if p.startswith(name + "=="))


@pytest.fixture(scope="module")
def colab_py() -> pathlib.Path:
    return colab_python()


@pytest.fixture(scope="module")
def colab_runs(colab_py):
    """Run every notebook once (two at a time: the machine has two cores), keyed by file name."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        reports = pool.map(lambda nb: run_in_colab(nb, threads=1), NOTEBOOKS)
        return {nb.name: report for nb, report in zip(NOTEBOOKS, reports)}


def test_environment_has_colab_versions_and_mha_from_site_packages(colab_py):
    code = (
        "import json, sys, importlib.metadata as md, mha, ipywidgets, matplotlib, IPython, torch; "
        "print(json.dumps({'ipywidgets': ipywidgets.__version__, 'matplotlib': matplotlib.__version__, "
        "'ipython': IPython.__version__, 'torch': torch.__version__, 'mha_file': mha.__file__, "
        "'prefix': sys.prefix, 'mha_requires': md.requires('mha-course')}))"
    )
    out = subprocess.run([str(colab_py), "-c", code], capture_output=True, text=True, cwd="/", check=True)
    info = json.loads(out.stdout)
    assert info["ipywidgets"] == _pin("ipywidgets") == "7.7.1"
    assert info["matplotlib"].startswith("3.10.")
    assert info["ipython"].split(".")[0] == "7"
    assert info["torch"].split("+")[0] == _pin("torch")
    # mha comes from the venv's site-packages (a real install, as in Colab), not the checkout
    mha_file = pathlib.Path(info["mha_file"]).resolve()
    assert pathlib.Path(info["prefix"]).resolve() in mha_file.parents, mha_file
    assert (ROOT / "mha") not in mha_file.parents, mha_file
    # installed with --no-deps: its loose requirements did not upgrade Colab's own packages
    assert any(r.startswith("ipywidgets") for r in info["mha_requires"]), info["mha_requires"]


def test_kernel_is_the_colab_like_python(colab_py, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import sys, os, ipywidgets, matplotlib\n"
        "print(sys.executable)\nprint(ipywidgets.__version__)\nprint(matplotlib.get_backend())\nprint(os.listdir('.'))")]
    src, done = tmp_path / "probe.ipynb", tmp_path / "probe.out.ipynb"
    nbformat.write(nb, src)
    report = run_in_colab(src, save_to=done)
    assert report["ok"], report["error"]
    lines = "".join(o.get("text", "") for o in nbformat.read(done, 4).cells[0].outputs).split("\n")
    assert pathlib.Path(lines[0]).parent == colab_py.parent, lines
    assert lines[1] == "7.7.1"
    assert "inline" in lines[2].lower(), lines[2]
    assert lines[3] == "[]", "the notebook should run in an empty directory, like Colab's /content"


def test_a_failing_notebook_is_reported(colab_py, tmp_path):
    """The runner must be able to fail: an exception in a cell is a failed run."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import mha\nraise ValueError('boom from the probe')")]
    src = tmp_path / "bad.ipynb"
    nbformat.write(nb, src)
    report = run_in_colab(src)
    assert not report["ok"]
    assert "boom from the probe" in report["error"]


@pytest.mark.parametrize("notebook", [nb.name for nb in NOTEBOOKS])
def test_notebook_runs_in_colab_like_env(colab_runs, notebook):
    report = colab_runs[notebook]
    assert report["ok"], f"{notebook} failed in the Colab-like env:\n{report['error']}"
    missing = [s for s in report["stderr"] if re.search(r"missing from (current )?font", s)]
    assert not missing, (
        f"{notebook}: a figure uses characters the default font lacks (Colab has no CJK font; "
        f"keep figure text ASCII/mathtext):\n" + "".join(missing)[:2000])
