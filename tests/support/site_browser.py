"""What every browser test shares: the pinned Chromium, the two viewports, page readiness, the network gate.

The fixtures built on it (the site served on 127.0.0.1, playwright) are in tests/browser/conftest.py.
"""
from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest

from site_pages import ROOT

CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "_build" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

# How far a page sticks out sideways. Measured against the layout viewport (clientWidth): with
# mobile emulation window.innerWidth grows to the content, so it would never see an overflow.
PAGE_OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


# Formulas are HTML written at build time: a page is ready once it and its fonts have loaded.
PAGE_READY = "() => document.readyState === 'complete' && document.fonts.status === 'loaded'"


def network_gate(outside: list, current: dict):
    """A playwright route handler cutting the network off: only the loopback site answers; any other
    request is aborted and recorded in ``outside`` as ``(current["page"], url)``."""
    def gate(route):
        if urlparse(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append((current["page"], route.request.url))
            route.abort()
    return gate



def sync_playwright_or_skip():
    """playwright's entry point, or skip/fail (MHA_REQUIRE_BROWSER=1) with the reason."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the python package `playwright` is not installed (pip install -r requirements.txt)"
    if problem is None and not os.access(CHROMIUM, os.X_OK):
        problem = f"no browser at {CHROMIUM} (Debian: apt-get install chromium)"
    if problem:
        message = f"browser tests need a browser: {problem}"
        if os.environ.get("MHA_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " -- MHA_REQUIRE_BROWSER=1, so this is a failure")
        pytest.skip(message)
    return sync_playwright


def phone_context(browser, outside: list, current: dict, timeout_ms: int = 30_000):
    """A 390 px phone (2x screen, touch, zh-CN, no service worker) cut off from the network
    (:func:`network_gate`), with ``timeout_ms`` as the default wait."""
    ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                              locale="zh-CN", service_workers="block")
    ctx.route("**/*", network_gate(outside, current))
    ctx.set_default_timeout(timeout_ms)
    return ctx
