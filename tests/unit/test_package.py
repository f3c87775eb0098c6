"""The package's two rooms: a torch-only core, the course beside it, each reached by its real path."""
import doctest
import importlib
import json
import pathlib
import re
import subprocess
import sys

import pytest

import mha

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE_MODULES = ["mha", "mha.layer", "mha.steps", "mha.masks", "mha.kv_cache", "mha.validate", "mha.interop",
                "mha.positional", "mha.gqa"]
HEAVY = ("matplotlib", "ipywidgets", "altair", "jupyterquiz", "IPython", "pandas")


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    return set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                              cwd=ROOT).stdout.split())


def test_the_core_imports_only_torch():
    with_torch = _loaded_after("import torch")
    with_core = _loaded_after("import mha; from mha import *; mha.MultiHeadAttention()")
    extra = {m for m in with_core - with_torch if m.split(".")[0] != "mha"}
    assert not extra, f"importing the core loads more than torch does: {sorted(extra)[:20]}"
    assert not {m for m in with_core if m.startswith("mha.course")}, "the core loaded the course package"
    assert not {m for m in with_core if m.split(".")[0] in HEAVY}


def test_what_the_chapters_import_today_resolves():
    """Every `from mha.X import a, b` and `import mha.X` in the stored chapters."""
    statements = set()
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"]).replace("\\\n", " ")
                source = re.sub(r"\(([^)]*)\)", lambda m: m.group(0).replace("\n", " "), source)
                statements |= set(re.findall(r"^\s*((?:from|import) mha\b[^#\n]*)", source, re.M))
    assert statements
    for statement in sorted(statements):
        names = {}
        exec(statement.strip(), names)  # noqa: S102 (the chapters' own import lines)


# every module name CHANGELOG.md's 0.2.0 rename table retires
OLD_MODULES = (
    "mha.exercises", "mha.selfcheck", "mha.viz", "mha.course.viz", "mha.interactive", "mha.course.interactive",
    "mha.course.explorations", "mha.widgets", "mha.numerals", "mha.toy_task", "mha.bench", "mha.display",
)


def test_no_import_aliases_remain():
    """Old names live in old releases (each notebook installs the release it was executed with, CHANGELOG.md)."""
    for old in OLD_MODULES:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_the_version_is_the_release_in_pyproject():
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert mha.__version__ == pyproject["project"]["version"]


def test_the_command_line_runs():
    result = subprocess.run([sys.executable, "-m", "mha.course.numerals", "五十"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.split()[-1] == "50", result


@pytest.mark.parametrize("name", CORE_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0


def test_the_core_has_examples():
    """The layer, the steps, the masks and the cache show how they are called."""
    attempted = {name: doctest.testmod(importlib.import_module(name), verbose=False).attempted for name in CORE_MODULES}
    assert all(attempted[n] > 0 for n in ("mha.layer", "mha.steps", "mha.masks", "mha.kv_cache", "mha.positional")), attempted
