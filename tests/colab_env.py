"""A "Colab-like" Python environment for tests, built once and reused.

Students open the chapters in Google Colab, whose runtime differs from our pinned
.venv: older ipywidgets (7.7.1), older IPython/ipykernel, matplotlib 3.10 and no
CJK fonts. Colab keeps its own torch; every chapter's first cell installs the
course package ``mha`` with ``pip install --no-deps`` (tools/setup_cell.py).

:func:`colab_python` builds (or reuses) a virtual environment with those pins in
``.venv-colab/`` (git-ignored; ``MHA_COLAB_VENV`` overrides the place), installs
``mha`` into it exactly as Colab does -- a regular, non-editable install of this
repository with ``--no-deps`` -- and returns its ``python``.

Repeated runs are fast: a stamp file keyed on the pins (and the Python version)
says whether the venv is current, and a second stamp keyed on the contents of
``mha/`` and ``pyproject.toml`` says whether ``mha`` must be reinstalled.

This module imports only the standard library at top level, so that the
Colab-like python itself can run it: ``python tests/colab_env.py run NB.ipynb``
executes one notebook with nbclient on a kernel of that same python, in an
empty working directory (as in Colab, where the repository is not checked out).

Other tests use it like this::

    from colab_env import colab_python
    subprocess.run([str(colab_python()), "-c", "import ipywidgets; ..."], check=True)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

# What a Colab runtime has (the parts our notebooks touch). torch comes from the
# local wheel (pip's find-links) -- Colab has its own torch; we test with ours.
COLAB_PINS = [
    "torch==2.13.0",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "ipywidgets==7.7.1",
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    # not in Colab's user-facing set, but needed to run notebooks here:
    "nbclient==0.11.0",
    "nbformat==5.11.1",
]
KERNEL_NAME = "mha-colab"


def venv_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MHA_COLAB_VENV", ROOT / ".venv-colab"))


def _python_in(venv: pathlib.Path) -> pathlib.Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def pins_key() -> str:
    """What the venv must match: the pins and the Python that created it."""
    text = json.dumps({"pins": COLAB_PINS, "python": sys.version_info[:2]}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def mha_key() -> str:
    """A hash of what Colab would install from the repository (mha/ and pyproject.toml)."""
    h = hashlib.sha256()
    files = sorted(p for p in (ROOT / "mha").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in [ROOT / "pyproject.toml", *files]:
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def _lock(path: pathlib.Path):
    """An exclusive lock, so two test processes never build the venv at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd, **kw):
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise RuntimeError(f"command failed ({out.returncode}): {' '.join(map(str, cmd))}\n"
                           f"{out.stdout[-4000:]}\n{out.stderr[-4000:]}")
    return out


def _build_venv(venv: pathlib.Path, log) -> None:
    log(f"building the Colab-like venv in {venv} ({', '.join(COLAB_PINS)}) ...")
    shutil.rmtree(venv, ignore_errors=True)
    _run([sys.executable, "-m", "venv", venv])
    py = _python_in(venv)
    _run([py, "-m", "pip", "install", "-q", *COLAB_PINS])


def _install_mha(py: pathlib.Path, log) -> None:
    """Install mha as Colab does: a regular (non-editable) install with --no-deps."""
    log("installing mha into the Colab-like venv (pip install --no-deps) ...")
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "repo"
        src.mkdir()
        # The files a git checkout of the repository offers to the build backend.
        shutil.copytree(ROOT / "mha", src / "mha", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, src / name)
        _run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", src])


def colab_python(log=None) -> pathlib.Path:
    """Build or reuse the Colab-like venv and return the path of its ``python``."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    venv = venv_dir()
    py = _python_in(venv)
    stamp, mha_stamp = venv / ".colab-pins-stamp", venv / ".mha-stamp"
    with _lock(venv.with_name(venv.name + ".lock")):
        if not (py.exists() and stamp.is_file() and stamp.read_text() == pins_key()):
            _build_venv(venv, log)
            stamp.write_text(pins_key())
            mha_stamp.unlink(missing_ok=True)
        key = mha_key()
        if not (mha_stamp.is_file() and mha_stamp.read_text() == key):
            _install_mha(py, log)
            mha_stamp.write_text(key)
    return py


def run_in_colab(notebook, save_to=None, timeout: float = 600, threads: int | None = None) -> dict:
    """Run ``notebook`` on a Colab-like kernel (from this process); return the runner's report.

    ``threads``: cap torch/BLAS threads of the kernel (when several notebooks run side by side).
    """
    py = colab_python()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MPLBACKEND")}
    env["PATH"] = f"{py.parent}{os.pathsep}{env.get('PATH', '')}"
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    cmd = [str(py), str(pathlib.Path(__file__).resolve()), "run", str(notebook)]
    if save_to:
        cmd.append(str(save_to))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"notebook": str(notebook), "ok": False, "error": f"timed out after {timeout} s", "stderr": [], "seconds": timeout}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"notebook": str(notebook), "ok": False, "stderr": [], "seconds": 0.0,
                "error": f"runner failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"}


# --------------------------------------------------------------------------------------
# Running one notebook (executed BY the Colab-like python: `python colab_env.py run NB`)
# --------------------------------------------------------------------------------------

def _kernel_env_dir(python: str) -> str:
    """A private kernelspec whose argv is exactly this python (not whatever 'python' is on PATH)."""
    kdir = pathlib.Path(tempfile.mkdtemp(prefix="mha-colab-kernels-"))
    spec = kdir / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [python, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab-like)",
        "language": "python",
    }))
    return str(kdir)


def run_notebook(path: str, timeout: int = 120, save_to: str | None = None) -> dict:
    """Execute one notebook top to bottom; return a JSON-able report (never raises).

    ``save_to``: also write the executed notebook there (to inspect its outputs).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    os.environ["JUPYTER_PATH"] = _kernel_env_dir(sys.executable)
    os.environ.pop("MPLBACKEND", None)  # Colab's inline backend, as a real kernel picks it
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel 6's debugger chatter on stderr
    nb = nbformat.read(path, as_version=4)
    workdir = tempfile.mkdtemp(prefix="colab-content-")  # like /content: no repository files
    report = {"notebook": path, "ok": False, "error": "", "seconds": 0.0, "stderr": [], "cells": len(nb.cells)}
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME,
                            resources={"metadata": {"path": workdir}})
    try:
        client.execute()
        report["ok"] = True
    except CellExecutionError as exc:
        report["error"] = str(exc)[-6000:]
    except Exception as exc:  # kernel died, timeout, ...
        report["error"] = f"{type(exc).__name__}: {exc}"[-6000:]
    report["seconds"] = round(time.perf_counter() - start, 2)
    if save_to:
        nbformat.write(nb, save_to)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                report["stderr"].append(out.get("text", ""))
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(os.environ["JUPYTER_PATH"], ignore_errors=True)
    return report


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "run":
        print(json.dumps(run_notebook(sys.argv[2], save_to=sys.argv[3] if len(sys.argv) == 4 else None)))
    elif len(sys.argv) == 2 and sys.argv[1] == "build":
        print(colab_python())
    else:
        sys.exit("usage: colab_env.py build | colab_env.py run NOTEBOOK.ipynb [EXECUTED.ipynb]")
