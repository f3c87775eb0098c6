"""The Colab setup cell that opens every notebook, derived from ``_config.yml`` and ``pyproject.toml``.

The cell installs exactly the release the notebook was executed with: the tag
``v<version>`` of the repository (``repository.url`` in ``_config.yml``, the one
place it is written), ``<version>`` being ``[project] version`` in ``pyproject.toml``.
A reader's saved copy of a notebook therefore keeps installing the release it came
from, however the package moves on (CHANGELOG.md says what moved).
``make execute`` runs this module before executing: every notebook's first cell is
rewritten to match. ``tests/notebooks/test_notebooks_meta.py`` fails when a notebook's first
cell disagrees with what this module renders.
"""
from __future__ import annotations

import json
import pathlib
import sys
import tomllib

import yaml
from packaging.requirements import InvalidRequirement, Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
DIST_NAME = "mha-course"
# Installed next to mha in Colab, pinned as in requirements.txt (--no-deps: it needs only IPython,
# which Colab has): the self-checks of mha.course.selfcheck are drawn by jupyterquiz.
ALSO_INSTALL = ("jupyterquiz",)
TITLE = "# @title 环境准备：在 Colab 中安装课程包 mha（本地运行时什么也不做） { display-mode: \"form\" }"


def read_repository() -> str:
    """The repository URL, ``repository.url`` in ``_config.yml``."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8")) or {}
    url = (config.get("repository") or {}).get("url")
    if not url:
        raise ValueError("_config.yml must set repository.url")
    return str(url)


def release() -> str:
    """The release the notebooks are executed with: ``[project] version`` in pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def release_tag(version: str | None = None) -> str:
    """The git tag of a release (the maintainer tags it, see CONTRIBUTING.md; the release workflow publishes it)."""
    return f"v{version or release()}"


def pinned(name: str) -> str:
    """``name==version`` as pinned in requirements.txt (the one place versions are written)."""
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        try:
            requirement = Requirement(line.split("#")[0].strip())
        except InvalidRequirement:
            continue
        pins = [spec.version for spec in requirement.specifier if spec.operator == "=="]
        if requirement.name.lower() == name.lower() and pins:
            return f"{requirement.name}=={pins[0]}"
    raise ValueError(f"requirements.txt does not pin {name}")


def setup_cell_source(url: str, tag: str) -> str:
    """The exact source of the setup cell for a repository ``url`` and release ``tag``."""
    extras = "".join(f"\"{pinned(name)}\", " for name in ALSO_INSTALL)
    return "\n".join([
        TITLE,
        "import subprocess, sys",
        "if \"google.colab\" in sys.modules:  # only in Colab: install this notebook's release of mha, keep Colab's torch",
        f"    REPO = \"git+{url}@{tag}\"",
        f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"--no-deps\", {extras}f\"{DIST_NAME} @ {{REPO}}\"], check=True)",
    ])


def setup_cell() -> dict:
    """The setup cell as an nbformat code-cell dict.

    Hidden in Colab's form view (``cellView: form``) and removed from the
    website (``remove-cell``: a reader of the site never needs it).
    """
    url = read_repository()
    return {
        "cell_type": "code",
        "id": "colab-setup",
        "execution_count": None,
        "metadata": {"cellView": "form", "tags": ["remove-cell"]},
        "outputs": [],
        "source": setup_cell_source(url, release_tag()),
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
