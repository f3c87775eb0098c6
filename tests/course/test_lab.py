"""`make lab` (the README's command for readers without Colab) starts JupyterLab and serves the book.

The test runs the Makefile target itself -- the same recipe a reader runs -- headless: no
browser, a free port on 127.0.0.1, a random token, a private runtime directory (``make -o``
keeps make from re-installing the environment: the test uses the one it runs in). It waits
until the server answers, then asks its REST API for the notebooks in book/ and for the
ipywidgets extension, and stops the server.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed-stamp"
WIDGETS = "@jupyter-widgets/jupyterlab-manager"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not (ROOT / ".venv" / "bin" / "jupyter-lab").exists() or shutil.which("make") is None:
        pytest.skip("make lab needs make and the pinned .venv (make book or make test creates it)")
    port, token = _free_port(), secrets.token_hex(16)
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    flags = f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={token}"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime), BROWSER="false")
    log = open(runtime / "lab.log", "wb")
    proc = subprocess.Popen(["make", "--no-print-directory", "-o", STAMP, "lab", f"LAB_FLAGS={flags}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"make lab exited with {proc.returncode}:\n{(runtime / 'lab.log').read_text()[-3000:]}")
            try:
                if _get(f"{base}/api/status", token)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within 90 s:\n{(runtime / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, token
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # make and the jupyter it started: the group this test created
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_make_lab_serves_jupyterlab(lab):
    base, token = lab
    status, body = _get(f"{base}/lab", token)
    assert status == 200 and b"JupyterLab" in body


def test_make_lab_needs_the_token(lab):
    base, _ = lab
    assert _get(f"{base}/api/contents", "wrong-token")[0] == 403


def test_make_lab_lists_the_notebooks_of_book(lab):
    base, token = lab
    status, body = _get(f"{base}/api/contents", token)
    assert status == 200
    listed = {item["name"] for item in json.loads(body)["content"]}
    chapters = {p.name for p in (ROOT / "book").glob("*.ipynb")}
    assert chapters and chapters <= listed, sorted(chapters - listed)
    first = sorted(chapters)[0]
    status, body = _get(f"{base}/api/contents/{first}?content=1", token)
    assert status == 200 and json.loads(body)["type"] == "notebook"


def _page_config(html: bytes) -> dict:
    """The JSON JupyterLab embeds in /lab for its front end (what the browser will load)."""
    match = re.search(rb'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no jupyter-config-data in /lab"
    return json.loads(match.group(1))


def test_make_lab_loads_the_widgets_extension(lab):
    base, token = lab
    status, body = _get(f"{base}/lab", token)
    assert status == 200
    extensions = {ext["name"]: ext for ext in _page_config(body)["federated_extensions"]}
    assert WIDGETS in extensions, sorted(extensions)
    status, script = _get(f"{base}/lab/extensions/{WIDGETS}/{extensions[WIDGETS]['load']}", token)
    assert status == 200 and script, "the widget manager's JavaScript is not served"


def test_make_lab_has_a_python_kernel(lab):
    base, token = lab
    status, body = _get(f"{base}/api/kernelspecs", token)
    specs = json.loads(body)
    assert status == 200 and specs["default"] in specs["kernelspecs"]
    assert specs["kernelspecs"][specs["default"]]["spec"]["language"] == "python"
