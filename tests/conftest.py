import os
import pathlib

import pytest
import torch

# tests/colab/ runs inside the Colab-like environment only (`nox -s colab`, see noxfile.py).
collect_ignore = [] if os.environ.get("MHA_COLAB_SESSION") else ["colab"]


# tests/<folder>/ -> the marker its tests get, so `make quick` (-m "not site and not browser and not slow")
# needs no list: tests/browser/ drives Chromium over the built site, tests/site/ builds the website.
FOLDER_MARKERS = {"browser": pytest.mark.browser, "site": pytest.mark.site}


def pytest_collection_modifyitems(items):
    """Markers from folders (unit, course, checkers, notebooks need none; slow ones are marked one by one)."""
    tests = pathlib.Path(__file__).resolve().parent
    for item in items:
        folder = item.path.resolve().relative_to(tests).parts[0]
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def built_site():
    """The website, built ONCE per test session with the strict command (tests/support/site_build.py).

    tests/site/test_site.py fails with the warning text if the build warned; the browser
    tests (tests/browser/) drive the HTML it wrote to _build/html.
    """
    from site_build import build_site

    return build_site()
