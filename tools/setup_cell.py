"""The Colab setup cell that opens every notebook, derived from ``_config.yml``.

The repository URL lives in one place, ``repository.url`` in ``_config.yml``.
Run ``python tools/setup_cell.py`` after changing it: every notebook's first
cell is rewritten to match. ``tests/test_notebooks_meta.py`` fails when a
notebook's first cell disagrees with what this module renders.
"""
from __future__ import annotations

import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DIST_NAME = "mha-course"
# Installed next to mha in Colab, pinned as in requirements.txt (--no-deps: it needs only IPython,
# which Colab has): the self-checks of mha.selfcheck are drawn by jupyterquiz.
ALSO_INSTALL = ("jupyterquiz",)
TITLE = "# @title 环境准备：在 Colab 中安装课程包 mha（本地运行时什么也不做） { display-mode: \"form\" }"


def read_repository() -> tuple[str, str]:
    """Return ``(url, branch)`` from ``_config.yml``'s ``repository`` section."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")) or {}
    repository = config.get("repository") or {}
    url, branch = repository.get("url"), repository.get("branch")
    if not url or not branch:
        raise ValueError("_config.yml must set repository.url and repository.branch")
    return str(url), str(branch)


def pinned(name: str) -> str:
    """``name==version`` as pinned in requirements.txt (the one place versions are written)."""
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.split("==")[0].strip().lower() == name.lower() and "==" in line:
            return line.strip()
    raise ValueError(f"requirements.txt does not pin {name}")


def setup_cell_source(url: str, branch: str) -> str:
    """The exact source of the setup cell for a repository ``url`` and ``branch``."""
    extras = "".join(f"\"{pinned(name)}\", " for name in ALSO_INSTALL)
    return "\n".join([
        TITLE,
        "import subprocess, sys",
        "if \"google.colab\" in sys.modules:  # only in Colab: install mha, keep Colab's own torch",
        f"    REPO = \"git+{url}@{branch}\"",
        f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"--no-deps\", {extras}f\"{DIST_NAME} @ {{REPO}}\"], check=True)",
    ])


def setup_cell() -> dict:
    """The setup cell as an nbformat code-cell dict.

    Hidden in Colab's form view (``cellView: form``) and removed from the
    website (``remove-cell``: a reader of the site never needs it).
    """
    url, branch = read_repository()
    return {
        "cell_type": "code",
        "id": "colab-setup",
        "execution_count": None,
        "metadata": {"cellView": "form", "tags": ["remove-cell"]},
        "outputs": [],
        "source": setup_cell_source(url, branch),
    }


def rewrite(path: pathlib.Path) -> bool:
    """Make ``path``'s first cell the setup cell; return True if the file changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    want = setup_cell()
    cells = nb["cells"]
    first = cells[0] if cells else None
    if first is not None and first["cell_type"] == "code" and "".join(first["source"]).startswith("# @title 环境准备"):
        same_meta = all(first["metadata"].get(k) == v for k, v in want["metadata"].items())
        if "".join(first["source"]) == want["source"] and same_meta and first.get("id") == want["id"]:
            return False
        want["execution_count"] = first.get("execution_count")
        cells[0] = want
    else:
        cells.insert(0, want)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return True


if __name__ == "__main__":
    changed = [p for p in sorted((ROOT / "book").glob("*.ipynb")) if rewrite(p)]
    print("rewrote:", *[p.name for p in changed] or ["nothing"])
    sys.exit(0)
