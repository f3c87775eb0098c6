"""The Colab-like environment, as a nox session (`make test` runs it; `nox -s colab` alone).

Colab installs the course with `pip install --no-deps` next to its own packages. This
session makes a virtual environment with the versions Colab ships of the packages our
notebooks touch, installs `mha` the same way (a regular install, no dependencies) and runs
tests/colab/ inside it: every chapter top to bottom in a kernel of that Python, in an empty
working directory, and the explorer scenarios under ipywidgets 7.7.
"""
import pathlib
import sys

import nox

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "tools"))
from setup_cell import ALSO_INSTALL, pinned  # noqa: E402  (what Colab's setup cell installs next to mha)

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"  # the second run only re-installs mha (seconds)

# What a Colab runtime has (the parts our notebooks touch). torch comes from this machine's
# local wheel (Colab has its own torch; the course keeps whatever torch it finds).
COLAB_PINS = [
    "torch==2.13.0",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "ipywidgets==7.7.1",
    "tqdm==4.67.1",  # Colab ships tqdm (chapter 13's training progress bar)
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    "altair==5.5.0",  # the interactive figures (mha.course.page_figures): Colab draws Altair 5's own html output
]
# Not part of Colab's own set, needed here to run and test the notebooks.
RUNNER_PINS = ["nbclient==0.11.0", "nbformat==5.11.1", "pytest==9.2.0", "pytest-xdist==3.8.0"]


@nox.session
def colab(session: nox.Session) -> None:
    session.install(*COLAB_PINS, *RUNNER_PINS)
    # like Colab's setup cell: mha and the pinned jupyterquiz, without dependencies
    session.install("--no-deps", "--force-reinstall", *[pinned(name) for name in ALSO_INSTALL], ".")
    tests = str(session.invoked_from) + "/tests/colab"
    session.chdir(session.create_tmp())  # not the checkout: `import mha` must find the installed copy
    session.run("pytest", "-p", "no:cacheprovider", "-n", "2", tests, *session.posargs,
                env={"MHA_COLAB_SESSION": "1", "MHA_COLAB_PINS": " ".join(COLAB_PINS)})
