"""Benchmark: how long every page of the built website takes to become readable on a slow mobile link.

The browser test (tests/browser/test_browser_speed.py) times three pages to keep `make test` short; this
script times them all, the way a reader in mainland China meets them: a 390 px phone, Chromium's
emulation of a 1.6 Mbps / 150 ms link, the cache off (a first visit), nothing outside 127.0.0.1.
It prints one row per page (time to readable text and formulas, bytes fetched by then) and
writes the table as JSON.

    make book && .venv/bin/python tools/site_speed.py            # _build/html, report in _build/site_speed.json

"Readable" is measured by ``site_probe.time_to_readable`` (shared with the tests): the later of the
first contentful paint, the render-blocking stylesheets and the KaTeX fonts.

``--playground`` times chapter 13's live model instead, on the same link: from pressing the button
(a number already typed, the page and its figures loaded) to its first answer, once from a plain host and once from a host that
gzips every response (``site_probe.serve(compress=True)``), with the bytes that came over the link.
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


PLAYGROUND = "book/13_trained_heads"
ROOT_SEL = ".mha-numerals-playground"


def first_answer(html: pathlib.Path, compress: bool, text: str = "两千零二十六") -> dict:
    """Seconds from pressing the playground's button to its first answer on the slow link, and bytes."""
    import time

    from playwright.sync_api import sync_playwright

    with site_probe.serve(html, compress=compress) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-quic"])
        ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                                  locale="zh-CN", service_workers="block")
        ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
        ctx.set_default_timeout(300_000)
        page = ctx.new_page()
        cdp = site_probe.fresh(page)
        site_probe.slow_link(cdp)
        wire = {"bytes": 0}
        cdp.on("Network.loadingFinished", lambda e: wire.__setitem__("bytes", wire["bytes"] + e["encodedDataLength"]))
        # the reader scrolls to the box after the page (and its figures' scripts, fetched after load) arrived
        page.goto(f"{base}/{PLAYGROUND}.html", wait_until="networkidle")
        before = wire["bytes"]
        button = page.locator(f"{ROOT_SEL} .mha-np-form button")
        label = button.inner_text()
        page.locator(f"{ROOT_SEL} input[type=text]").fill(text)
        start = time.perf_counter()
        button.click()
        page.wait_for_function(f"t => document.querySelector('{ROOT_SEL} .mha-np-answer').dataset.input === t "
                               f"&& document.querySelector('{ROOT_SEL}').dataset.state === 'done'", arg=text)
        seconds = time.perf_counter() - start
        answer = page.locator(f"{ROOT_SEL} .mha-np-answer").inner_text()
        browser.close()
    return {"host": "gzip" if compress else "plain", "seconds": round(seconds, 1), "button": label,
            "wire_MB": round((wire["bytes"] - before) / 1e6, 2), "answer": answer}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=pathlib.Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "_build" / "site_speed.json")
    ap.add_argument("--playground", action="store_true", help="time chapter 13's live model to its first answer")
    args = ap.parse_args(argv)
    if not (args.html / "index.html").is_file():
        sys.exit(f"no website at {args.html}: build it first (make book)")
    if args.playground:
        rows = [first_answer(args.html, compress) for compress in (False, True)]
        for r in rows:
            print(f"{r['host']:6} host: first answer {r['seconds']:.1f} s after the button, {r['wire_MB']:.2f} MB over the "
                  f"link ({r['button']}; {r['answer']})")
        print(f"profile {site_probe.SLOW}")
        out = args.out.with_name("playground_speed.json")
        out.write_text(json.dumps({"profile": site_probe.SLOW, "rows": rows}, ensure_ascii=False, indent=1), encoding="utf-8")
        return
    rows = measure(args.html, [p.docname for p in pages()] + ["search"])
    print(f"{'page':34} {'readable s':>10} {'bytes at load':>14} {'formulas':>9}")
    for r in rows:
        print(f"{r['page']:34} {r['readable_ms'] / 1000:10.1f} {r['bytes'] / 1e6:11.2f} MB {r['formulas']:9d}")
    worst = max(rows, key=lambda r: r["readable_ms"])
    print(f"slowest: {worst['page']} {worst['readable_ms'] / 1000:.1f} s; profile {site_probe.SLOW}")
    args.out.write_text(json.dumps({"profile": site_probe.SLOW, "rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
