"""Benchmark: how long every page of the built website takes to become readable on a slow mobile link.

The browser test (tests/browser/test_browser_speed.py) times three pages to keep `make test` short; this
script times them all, the way a reader in mainland China meets them: a 390 px phone, Chromium's
emulation of a 1.6 Mbps / 150 ms link, the cache off (a first visit), nothing outside 127.0.0.1.
It prints one row per page (time to readable text and formulas, bytes fetched by then) and
writes the table as JSON.

    make book && .venv/bin/python tools/site_speed.py            # _build/html, report in _build/site_speed.json

"Readable" is measured by ``site_probe.time_to_readable`` (shared with the tests): the later of the
first contentful paint, the render-blocking stylesheets and the KaTeX fonts.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # the probes the browser tests use

import site_probe  # noqa: E402
from site_pages import pages  # noqa: E402

CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
PHONE = {"width": 390, "height": 844}


def measure(html: pathlib.Path, names: list[str]) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with site_probe.serve(html) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-quic"])
        ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                                  locale="zh-CN", service_workers="block")
        ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                  else route.abort())
        ctx.set_default_timeout(120_000)
        for name in names:
            page = ctx.new_page()
            site_probe.slow_link(site_probe.fresh(page))
            t = site_probe.time_to_readable(page, f"{base}/{name}.html")
            t["bytes"] = site_probe.first_visit_bytes(page)["total"]
            rows.append({"page": name, **t})
            page.close()
        browser.close()
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=pathlib.Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "_build" / "site_speed.json")
    args = ap.parse_args(argv)
    if not (args.html / "index.html").is_file():
        sys.exit(f"no website at {args.html}: build it first (make book)")
    rows = measure(args.html, [p.docname for p in pages()] + ["search"])
    print(f"{'page':34} {'readable s':>10} {'bytes at load':>14} {'formulas':>9}")
    for r in rows:
        print(f"{r['page']:34} {r['readable_ms'] / 1000:10.1f} {r['bytes'] / 1e6:11.2f} MB {r['formulas']:9d}")
    worst = max(rows, key=lambda r: r["readable_ms"])
    print(f"slowest: {worst['page']} {worst['readable_ms'] / 1000:.1f} s; profile {site_probe.SLOW}")
    args.out.write_text(json.dumps({"profile": site_probe.SLOW, "rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
