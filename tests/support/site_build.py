"""Build the website once per test session, strictly, and share the result.

``tests/conftest.py`` exposes :func:`build_site` as the session fixture
``built_site``; the strict-build test (tests/site/test_site.py) asserts it produced
no warning and the browser tests (tests/browser/test_browser.py) drive the HTML it wrote.

The command is the README's ``make book`` command (``jupyter-book build .
--builder html -W -n --keep-going``) plus ``--all``: an incremental build would
skip unchanged pages and so hide their warnings.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
FLAGS = ["--builder", "html", "-W", "-n", "--keep-going", "--all"]
BUILD_TIMEOUT_S = 600
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Sphinx's "path:line: WARNING: ..." lines, and errors; plus Jupyter Book's own failures
_PROBLEM = re.compile(r"(WARNING|ERROR|CRITICAL|SEVERE):|^Exception|Traceback \(most recent call last\)")


@dataclasses.dataclass
class SiteBuild:
    returncode: int
    log: str
    problems: list
    seconds: float
    html: pathlib.Path


def jupyter_book() -> str:
    """The jupyter-book next to this python (the .venv's), else the one on PATH."""
    here = pathlib.Path(sys.executable).parent / "jupyter-book"
    found = str(here) if here.exists() else shutil.which("jupyter-book")
    if not found:
        raise RuntimeError("jupyter-book is not installed: run `make test` (it installs requirements.txt)")
    return found


def problems_in(log: str) -> list:
    """The warning/error lines of a build log (colour codes removed)."""
    return [line.strip() for line in _ANSI.sub("", log).splitlines() if _PROBLEM.search(line)]


def build_site(root: pathlib.Path = ROOT) -> SiteBuild:
    """Run the strict build of ``root`` into ``root/_build/html``."""
    start = time.perf_counter()
    env = dict(os.environ, NO_COLOR="1", PYTHONWARNINGS="ignore")
    try:  # a child that outlives the build (a node server) must not hang the test session
        out = subprocess.run([jupyter_book(), "build", ".", *FLAGS], cwd=root, capture_output=True,
                             text=True, env=env, timeout=BUILD_TIMEOUT_S)
        code, log = out.returncode, out.stdout + "\n" + out.stderr
    except subprocess.TimeoutExpired as exc:
        code = -1
        log = f"{exc.stdout or ''}\n{exc.stderr or ''}\nERROR: the build did not finish within {BUILD_TIMEOUT_S} s"
        log = log if isinstance(log, str) else log.decode(errors="replace")
    return SiteBuild(code, log, problems_in(log), time.perf_counter() - start, root / "_build" / "html")
