"""Fixtures of the browser tests: one server over the strictly built site and playwright, for the whole session."""
import pytest

import site_probe
from site_browser import sync_playwright_or_skip


@pytest.fixture(scope="session")
def server(built_site):
    """The built site on 127.0.0.1 (tests/support/site_probe.py), shared by every browser test module."""
    assert (built_site.html / "index.html").is_file(), "the site was not built"
    with site_probe.serve(built_site.html) as url:
        yield url


@pytest.fixture(scope="session")
def sync_playwright():
    """playwright's entry point, or a skip (a failure with MHA_REQUIRE_BROWSER=1) saying what is missing."""
    return sync_playwright_or_skip()
