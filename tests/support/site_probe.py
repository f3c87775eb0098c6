"""Measurements of a page in the browser, shared by the browser tests (playwright, Chromium).

- :func:`serve` (tools/local_server.py): a folder (the built site, a test page) on 127.0.0.1, for as long as a ``with`` block runs
  (``compress=True``: as a compressing host serves it, every body but a ``.gz`` file gzip-encoded);
- :func:`fresh`: a first visit (Chromium's cache off for that page, through CDP);
- :func:`first_visit_bytes`: what the page fetched (uncompressed bytes, by kind);
- :func:`slow_link`: Chromium's network emulation of a slow mobile link (1.6 Mbps down,
  750 kbps up, 150 ms round trip), the profile the issue about readers in mainland China names;
- :func:`time_to_readable`: when the text and the formulas (KaTeX HTML and its fonts) can be read;
- :func:`axe`: axe-core's WCAG 2.1 A/AA violations (axe-core from node_modules, the pinned
  npm package, injected into the page; never served by the site);
- :func:`search`: a query on search.html (Pagefind), the result links in order.
"""
from __future__ import annotations

import pathlib
from urllib.parse import quote

from local_server import serve  # noqa: F401  (the tests use site_probe.serve)

ROOT = pathlib.Path(__file__).resolve().parents[2]
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SLOW = {"offline": False, "latency": 150, "downloadThroughput": 1.6e6 / 8, "uploadThroughput": 0.75e6 / 8}
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
SEVERE = ("critical", "serious")


def fresh(page):
    """A CDP session on ``page`` with the cache off: every load is a first visit."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    return cdp


def slow_link(cdp) -> None:
    cdp.send("Network.emulateNetworkConditions", SLOW)


BYTES = r"""() => {
  const entries = [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')];
  const kinds = {};
  let total = 0;
  for (const e of entries) {
    const size = e.decodedBodySize || 0;
    const ext = (new URL(e.name).pathname.match(/\.([a-z0-9]+)$/i) || [, 'html'])[1].toLowerCase();
    kinds[ext] = (kinds[ext] || 0) + size;
    total += size;
  }
  const largest = entries.map(e => [e.decodedBodySize || 0, new URL(e.name).pathname]).sort((a, b) => b[0] - a[0]).slice(0, 5);
  const fontawesome = entries.map(e => new URL(e.name).pathname).filter(p => /fontawesome/i.test(p));
  return {total, kinds, largest, fontawesome, requests: entries.length};
}"""


def first_visit_bytes(page) -> dict:
    """Uncompressed bytes the page fetched so far (the site is served without compression)."""
    return page.evaluate(BYTES)


READABLE = r"""() => {
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const res = performance.getEntriesByType('resource');
  const end = re => Math.max(0, ...res.filter(e => re.test(new URL(e.name).pathname)).map(e => e.responseEnd));
  return {fcp_ms: fcp ? fcp.startTime : null, css_ms: end(/\.css$/), katex_fonts_ms: end(/katex\/fonts\//),
          load_ms: performance.getEntriesByType('navigation')[0].loadEventEnd,
          formulas: document.querySelectorAll('.math .katex').length};
}"""


def time_to_readable(page, url: str) -> dict:
    """Open ``url`` (cache off, link throttled beforehand) and time when it can be read, in ms from
    the start of navigation: the later of its first contentful paint (the text, after the
    render-blocking stylesheets) and the arrival of the KaTeX fonts its formulas are drawn in
    (the formulas themselves are in the HTML). The figures' scripts may still be loading then."""
    page.goto(url, wait_until="load")
    r = page.evaluate(READABLE)
    r["readable_ms"] = round(max(r["fcp_ms"] or 0, r["katex_fonts_ms"], r["css_ms"]))
    return r


def axe(page) -> list:
    """axe-core's WCAG 2.1 A/AA violations on the page: [{id, impact, help, nodes: [target, ...]}]."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    found = page.evaluate("tags => axe.run({exclude: [['.katex-html']]}, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})"
                          ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, "
                          "nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + (n.failureSummary || '').slice(0, 160))})))",
                          AXE_TAGS)
    return found


def severe(violations: list) -> list:
    return [v for v in violations if v["impact"] in SEVERE]


def search(page, server: str, query: str) -> list:
    """The result links (hrefs relative to the site, in rank order) of search.html?q=query."""
    page.goto(f"{server}/search.html?q={quote(query)}", wait_until="load")
    page.wait_for_function("() => document.getElementById('search-results').dataset.state === 'done'", timeout=30_000)
    hrefs = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(a => a.getAttribute('href'))")
    snippets = page.eval_on_selector_all("#search-results ul.search li p.context", "els => els.map(p => p.textContent)")
    return [{"href": h.lstrip("/"), "snippet": s} for h, s in zip(hrefs, snippets)]
