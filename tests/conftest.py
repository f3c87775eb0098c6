import os
import pathlib

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]

# tests/colab/ runs inside the Colab-like environment only (`nox -s colab`, see noxfile.py).
collect_ignore = [] if os.environ.get("MHA_COLAB_SESSION") else ["colab"]


def pytest_collection_modifyitems(items):
    """Markers by file, so `make quick` (-m "not site and not browser and not slow") needs no list:
    tests/test_browser*.py drive Chromium, tests/test_site*.py build the website."""
    for item in items:
        name = item.path.name
        if name.startswith("test_browser"):
            item.add_marker(pytest.mark.browser)
        elif name.startswith("test_site"):
            item.add_marker(pytest.mark.site)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def built_site():
    """The website, built ONCE per test session with the strict command (tests/site_build.py).

    tests/test_site.py fails with the warning text if the build warned; the browser
    tests (tests/test_browser.py) drive the HTML it wrote to _build/html.
    """
    from site_build import build_site

    return build_site()
