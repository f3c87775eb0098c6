"""Every chapter runs to the end in the Colab-like environment (run inside `nox -s colab`).

The session's Python has Colab's ipywidgets 7.7.1, IPython 7, ipykernel 6 and matplotlib
3.10, and `mha` installed with `--no-deps` (see noxfile.py). Each notebook runs with
nbclient on a kernel of this same Python, in an empty working directory (Colab's /content
holds no checkout of the repository).
"""
from __future__ import annotations

import importlib.metadata as md
import json
import os
import pathlib
import re
import sys
import tempfile

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
PINS = dict(p.split("==") for p in os.environ["MHA_COLAB_PINS"].split())
KERNEL_NAME = "mha-colab"


@pytest.fixture(scope="session")
def kernel_name(tmp_path_factory) -> str:
    """A private kernelspec whose argv is exactly this Python (not whatever `python` is on PATH)."""
    spec = tmp_path_factory.mktemp("jupyter") / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab-like)", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(spec.parents[1])
    os.environ.pop("MPLBACKEND", None)  # the inline backend, as in Colab
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel 6's debugger chatter on stderr
    return KERNEL_NAME


def run(nb, kernel_name: str, timeout: int = 180):
    """Execute ``nb`` in place in an empty directory; return the error text ('' when it ran to the end)."""
    with tempfile.TemporaryDirectory(prefix="colab-content-") as workdir:
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": workdir}})
        try:
            client.execute()
        except CellExecutionError as exc:
            return str(exc)[-6000:]
    return ""


def stderr_of(nb) -> str:
    return "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stderr")


def test_environment_has_colab_versions_and_mha_from_site_packages():
    import IPython
    import ipywidgets
    import matplotlib
    import torch

    import mha

    assert ipywidgets.__version__ == PINS["ipywidgets"] == "7.7.1"
    assert matplotlib.__version__ == PINS["matplotlib"]
    assert IPython.__version__.split(".")[0] == "7"
    assert torch.__version__.split("+")[0] == PINS["torch"]
    mha_file = pathlib.Path(mha.__file__).resolve()
    assert pathlib.Path(sys.prefix).resolve() in mha_file.parents, mha_file  # a real install, as in Colab
    assert (ROOT / "mha") not in mha_file.parents, mha_file
    # installed with --no-deps: its loose requirements are declared but did not upgrade anything
    assert any(r.startswith("ipywidgets") for r in md.requires("mha-course"))


def test_kernel_is_this_python_in_an_empty_directory(kernel_name):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, os, ipywidgets, matplotlib\n"
        "print(sys.executable)\nprint(ipywidgets.__version__)\nprint(matplotlib.get_backend())\nprint(os.listdir('.'))")])
    assert run(nb, kernel_name) == ""
    lines = nb.cells[0].outputs[0]["text"].split("\n")
    assert pathlib.Path(lines[0]).parent == pathlib.Path(sys.executable).parent, lines
    assert lines[1] == "7.7.1"
    assert "inline" in lines[2].lower(), lines[2]
    assert lines[3] == "[]", "the notebook should run in an empty directory, like Colab's /content"


def test_a_failing_notebook_is_reported(kernel_name):
    """The runner must be able to fail: an exception in a cell is a failed run."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import mha\nraise ValueError('boom from the probe')")])
    assert "boom from the probe" in run(nb, kernel_name)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_colab_like_env(path, kernel_name):
    nb = nbformat.read(path, as_version=4)
    error = run(nb, kernel_name)
    assert not error, f"{path.name} failed in the Colab-like env:\n{error}"
    missing = re.findall(r".*(?:missing from (?:current )?font|Glyph \d+ .*missing).*", stderr_of(nb))
    assert not missing, f"{path.name}: a figure uses characters its font lacks (Colab has no CJK font):\n" + "\n".join(missing)[:2000]
