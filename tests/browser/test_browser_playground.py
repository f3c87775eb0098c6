"""Chapter 13's playground in a real browser, offline: the trained model runs in the page.

Uses the session's server (tests/browser/conftest.py) (the strictly built site on 127.0.0.1) and its browser
setup (Debian chromium through playwright, every non-loopback request aborted and recorded).
On chapter 13 (tools/static/numerals-playground.js):

* before the reader starts it, nothing of the runtime or the model is loaded; typing only shows a
  hint; the button names the download's size and starts it, a progress line shows the download
  (never more received than its total, ending at the total), and the bytes it adds are what the
  button and the chapter say;
* on a compressing host (Content-Encoding: gzip), with and without DecompressionStream, the progress
  is as right (the page counts decoded bytes against the build's sizes, not Content-Length);
* numerals typed into the box (the label names 中文数字) get, in the aria-live region, the
  answers ``python -m mha.course.numerals`` gives;
* the page's logits and attention weights (every layer and head of the three kinds) are
  PyTorch's for the same tokens (max abs difference printed, <= 1e-4);
* another input, another attention kind or another decoding step changes the attention views;
  the views have text alternatives (the top key per query) and work with the keyboard;
* input outside the model's vocabulary gets a Chinese reason, no console error, and the previous
  number's steps and attention maps are gone;
* at phone width (390 px) the page does not scroll sideways with the views drawn.

Screenshots go to _build/screenshots/playground/, with report.json (bytes, differences).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import urlparse

import pytest
import torch

from site_pages import pages
from site_browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PAGE_OVERFLOW, PHONE, SHOTS, network_gate

import fetch_assets
import export_numerals_onnx as ex
import numerals_playground

from mha.course.numerals import load_pretrained, to_chinese
from mha.course.numerals.data import encode_source

SHOTS_DIR = SHOTS / "playground"
CHAPTER = next(p for p in pages() if p.name == "13_trained_heads")
TOLERANCE = 1e-4
ROOT_SEL = ".mha-numerals-playground"
ANSWER = f"{ROOT_SEL} .mha-np-answer[aria-live]"  # the answer's live region
STATE = f"() => document.querySelector('{ROOT_SEL}').dataset.state"
# The answer of this text is in the live region and the page is idle again.
ANSWERED = f"""t => {{ const r = document.querySelector('{ROOT_SEL}'), a = r.querySelector('.mha-np-answer[aria-live]');
  return a.dataset.input === t && ['done', 'invalid'].includes(r.dataset.state); }}"""
MAPS = f"() => [...document.querySelectorAll('{ROOT_SEL} .mha-np-map')].map(f => f.getAttribute('aria-label') + '|' + f.querySelector('svg').innerHTML).join('\\n')"
NUMBERS = [0, 7, 12, 20, 110, 2026, 30500, 10001000, 20000, 99990000, 60708090, 97979797, 1001, 12000, 3456789]
# Every writing style the reader accepts (chapter 13): 两/二 before 百千万, 一十, spoken short forms, 大写, 萬.
WRITINGS = {"两千零二十六": 2026, "二千零二十六": 2026, "两百": 200, "二万三千": 23000, "一十二": 12,
            "一万零一十": 10010, "一百一": 110, "三万五": 35000, "两千五": 2500, "贰仟零贰拾陆": 2026,
            "壹萬": 10000, "玖仟玖佰玖拾玖萬零玖": 99990009}
RUNTIME = ("onnxruntime-web/", "numerals/")  # what must not load before the reader starts
BUTTON = f"{ROOT_SEL} .mha-np-form button"
# Every progress line the page writes ("正在下载运行库和模型：1.2 MB / 4.2 MB"), kept in the page.
WATCH_PROGRESS = f"""() => {{ window.mhaProgress = []; const s = document.querySelector('{ROOT_SEL} .mha-np-status');
  new MutationObserver(() => window.mhaProgress.push(s.textContent)).observe(s, {{childList: true, characterData: true, subtree: true}}); }}"""
PROGRESS = re.compile(r"([\d.]+) MB / ([\d.]+) MB")


def progress_pairs(lines) -> list:
    """(received MB, total MB) of each progress line."""
    return [(float(m.group(1)), float(m.group(2))) for m in map(PROGRESS.search, lines) if m]


def _button_megabytes(text: str) -> float:
    return float(re.search(r"约 ([\d.]+) MB", text).group(1))


def _cli(lines) -> list:
    run = subprocess.run([sys.executable, "-m", "mha.course.numerals"], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, encoding="utf-8", check=False)
    return run.stdout.splitlines()


def _stated_megabytes() -> float:
    """The download size chapter 13's playground cell states ("一共约 15 MB")."""
    nb = json.loads(CHAPTER.source.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if numerals_playground.PLACEHOLDER_CLASS in "".join(c["source"]))
    return float(re.search(r"约 ([\d.]+) MB", "".join(cell["source"])).group(1))


@pytest.fixture(scope="module")
def playground(sync_playwright, server):
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    outside, log, loaded = [], [], []
    current = {"page": CHAPTER.name}
    out = {"outside": outside, "errors": log}

    def typed(page, text):
        box = page.get_by_role("textbox", name=re.compile("中文数字"))
        box.fill("")
        box.press_sequentially(text)
        page.wait_for_function(ANSWERED, arg=text, timeout=60_000)
        return page.locator(ANSWER).inner_text()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=DESKTOP, locale="zh-CN", service_workers="block")
        ctx.route("**/*", network_gate(outside, current))
        ctx.set_default_timeout(30_000)
        page = ctx.new_page()
        page.on("console", lambda m: log.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: log.append(f"uncaught: {e}"))
        page.on("response", lambda r: loaded.append((urlparse(r.url).path, int(r.headers.get("content-length", 0)))))
        page.goto(f"{server}/{CHAPTER.html}", wait_until="load")
        page.wait_for_function(STATE + " === 'idle'")
        page.wait_for_timeout(500)
        out["before"] = list(loaded)
        out["idle_status"] = page.locator(f"{ROOT_SEL} .mha-np-status[role=status]").inner_text()
        out["label"] = page.locator(f"{ROOT_SEL} label").first.inner_text()

        out["button"] = page.locator(BUTTON).inner_text()
        box = page.get_by_role("textbox", name=re.compile("中文数字"))
        box.press_sequentially("两")  # typing first: a hint, no download
        page.wait_for_timeout(500)
        out["typed_state"] = page.evaluate(STATE)
        out["typed_status"] = page.locator(f"{ROOT_SEL} .mha-np-status[role=status]").inner_text()
        out["typed_loaded"] = list(loaded)
        page.evaluate(WATCH_PROGRESS)
        page.locator(BUTTON).click()  # the button starts it, and then reads the box
        page.wait_for_function(STATE + " !== 'idle'")
        out["started_state"] = page.evaluate(STATE)
        page.wait_for_function(f"t => document.querySelector('{ANSWER}').dataset.input === t", arg="两",
                               timeout=60_000)
        out["progress"] = page.evaluate("() => window.mhaProgress")
        out["after"] = list(loaded)

        words = [to_chinese(n) for n in NUMBERS] + list(WRITINGS)
        out["answers"], out["results"], out["maps"] = {}, {}, {}
        for w in words:
            out["answers"][w] = typed(page, w)
            out["results"][w] = page.evaluate(f"() => document.querySelector('{ROOT_SEL}').mhaResult")
            out["maps"][w] = page.evaluate(MAPS)
        page.locator(ROOT_SEL).screenshot(path=str(SHOTS_DIR / "desktop.png"))

        # another attention kind, another step (keyboard), a row of a map (keyboard)
        views = {"cross": page.evaluate(MAPS)}
        page.locator(ROOT_SEL).get_by_role("radio", name=re.compile("编码器自注意力")).check()
        views["encoder"] = page.evaluate(MAPS)
        page.locator(ROOT_SEL).get_by_role("radio", name=re.compile("交叉注意力")).check()
        steps = page.locator(f"{ROOT_SEL} .mha-np-step")
        steps.last.focus()
        page.keyboard.press("ArrowLeft")
        views["step_left"] = page.evaluate(MAPS)
        views["pressed"] = page.evaluate(f"() => [...document.querySelectorAll('{ROOT_SEL} .mha-np-step')]"
                                         ".map(b => b.getAttribute('aria-pressed'))")
        views["focused_step"] = page.evaluate("() => document.activeElement.getAttribute('aria-pressed')")
        page.locator(f"{ROOT_SEL} .mha-np-map").first.focus()
        page.keyboard.press("ArrowUp")
        views["detail"] = page.locator(f"{ROOT_SEL} .mha-np-detail").inner_text()
        views["map_row_up"] = page.evaluate(MAPS)
        views["map_attrs"] = page.evaluate(f"() => [...document.querySelectorAll('{ROOT_SEL} .mha-np-map')]"
                                           ".map(f => [f.tabIndex, f.getAttribute('aria-label')])")
        out["views"] = views

        out["invalid"] = {}
        for t in ("两千x", "2026", "零" * 20):
            out["invalid"][t] = typed(page, t)
            out.setdefault("left_after_invalid", []).append(page.evaluate(
                f"() => document.querySelectorAll('{ROOT_SEL} .mha-np-step, {ROOT_SEL} .mha-np-map').length"))
        out["after_invalid_state"] = page.evaluate(STATE)
        out["recovered"] = typed(page, "十二")

        page.set_viewport_size(PHONE)
        page.wait_for_timeout(300)
        out["phone_overflow_px"] = page.evaluate(PAGE_OVERFLOW)
        page.locator(ROOT_SEL).screenshot(path=str(SHOTS_DIR / "phone.png"))
        browser.close()
    before = sum(n for _, n in out["before"])
    added = sum(n for _, n in out["after"]) - before
    out["bytes"] = {"before": before, "added_by_starting": added}
    (SHOTS_DIR / "report.json").write_text(json.dumps(
        {k: out[k] for k in ("bytes", "outside", "errors", "answers", "invalid")}, ensure_ascii=False, indent=1),
        encoding="utf-8")
    return out


def test_nothing_of_the_runtime_loads_before_the_reader_starts(playground):
    early = [path for path, _ in playground["before"] if any(r in path for r in RUNTIME)]
    assert not early, f"loaded before the reader started the model: {early}"
    assert "启动模型" in playground["idle_status"] and "MB" in playground["idle_status"]
    assert "启动模型" in playground["button"] and "MB" in playground["button"], playground["button"]


def test_typing_first_shows_a_hint_and_downloads_nothing(playground):
    assert playground["typed_state"] == "idle", playground["typed_state"]
    assert "先按" in playground["typed_status"] and "MB" in playground["typed_status"], playground["typed_status"]
    early = [path for path, _ in playground["typed_loaded"] if any(r in path for r in RUNTIME)]
    assert not early, f"typing loaded: {early}"


def test_the_button_names_the_size_starts_the_download_and_the_chapter_agrees(playground):
    assert playground["started_state"] in ("loading", "ready", "running", "done"), playground["started_state"]
    paths = [path for path, _ in playground["after"]]
    for asset in (fetch_assets.ORT_SCRIPT, fetch_assets.ORT_WASM + ".gz", f"numerals/{ex.ONNX_NAME}.gz"):
        assert sum(p.endswith("_static/" + asset) for p in paths) == 1, (asset, paths)
    assert not [p for p in paths if p.endswith((".wasm", ".onnx"))], "the plain big files were fetched as well"
    added = playground["bytes"]["added_by_starting"] / 1e6
    print(f"bytes: {playground['bytes']['before']:,} before starting, {added:.2f} MB added by starting the model; "
          f"button: {playground['button']!r}")
    assert abs(added - _button_megabytes(playground["button"])) < 0.06, (added, playground["button"])
    assert abs(added - _stated_megabytes()) < 0.3, (added, _stated_megabytes())


def test_progress_never_passes_its_total_and_ends_there(playground):
    pairs = progress_pairs(playground["progress"])
    assert pairs, playground["progress"]
    assert all(got <= total for got, total in pairs), pairs
    assert pairs[-1][0] == pairs[-1][1], pairs[-1]


def test_the_live_region_gives_the_clis_answers(playground):
    words = list(playground["answers"])
    cli = _cli(words)
    got = {w: a.split("→")[-1].strip() for w, a in playground["answers"].items()}
    assert got == dict(zip(words, cli))


def test_every_writing_style_is_read_right(playground):
    got = {w: playground["answers"][w].split("→")[-1].strip() for w in WRITINGS}
    assert got == {w: str(n) for w, n in WRITINGS.items()}


def test_the_pages_logits_and_weights_are_pytorchs(playground):
    model = load_pretrained(ex.KIND)
    worst = {k: 0.0 for k in ex.OUTPUTS}
    for text, r in playground["results"].items():
        src, mask = encode_source([text])
        assert r["src"] == src[0].tolist()
        with torch.no_grad():
            maps = model.attention_maps(src, mask, torch.tensor([r["tgt_in"]]))
        want = {"logits": maps["logits"][0], **{k: torch.stack(maps[k])[:, 0] for k in ("encoder", "decoder", "cross")}}
        for k in ex.OUTPUTS:
            got = torch.tensor(r[k])
            assert got.shape == want[k].shape, (text, k, got.shape, want[k].shape)
            worst[k] = max(worst[k], float((got - want[k]).abs().max()))
    print(f"browser vs PyTorch on {len(playground['results'])} inputs, max abs difference:", worst)
    assert max(worst.values()) <= TOLERANCE, worst


def test_the_views_change_with_the_input_the_kind_and_the_step(playground):
    maps = list(playground["maps"].values())
    assert len(set(maps)) == len(maps), "two different inputs drew the same attention views"
    v = playground["views"]
    assert v["encoder"] != v["cross"] and v["step_left"] != v["cross"] and v["map_row_up"] != v["step_left"]
    assert v["pressed"][-2] == "true" and v["pressed"].count("true") == 1 and v["focused_step"] == "true"


def test_accessible_label_live_region_and_text_alternatives(playground):
    assert "中文数字" in playground["label"]
    attrs, cfg = playground["views"]["map_attrs"], load_pretrained(ex.KIND).cfg
    assert len(attrs) == cfg.n_decoder_layers * cfg.n_heads and all(tab == 0 and "最关注" in label for tab, label in attrs)
    assert "最关注" in playground["views"]["detail"]


def test_invalid_input_gets_a_chinese_reason_and_no_console_error(playground):
    inv = playground["invalid"]
    assert "“x”" in inv["两千x"] and "不在模型的词表里" in inv["两千x"]
    assert "“2”" in inv["2026"]
    assert "太长" in inv["零" * 20]
    assert playground["recovered"].endswith("12")
    assert playground["left_after_invalid"] == [0, 0, 0], "steps or maps of the previous number stayed under the error"
    assert not playground["errors"], playground["errors"]
    assert not playground["outside"], playground["outside"]


def test_phone_width_has_no_sideways_scrolling(playground):
    assert playground["phone_overflow_px"] <= 1, playground["phone_overflow_px"]


def test_only_chapter_13_loads_the_playground(built_site):
    with_script = sorted(p.name for p in pages()
                         if numerals_playground.SCRIPT in (built_site.html / p.html).read_text(encoding="utf-8"))
    assert with_script == [CHAPTER.name]


@pytest.mark.parametrize("inflate", [True, False], ids=["gz-files", "no-DecompressionStream"])
def test_progress_is_right_on_a_compressing_host(sync_playwright, built_site, inflate):
    """A host that gzips every response (Content-Length is the compressed size): the progress still
    counts against the right total, and the model answers."""
    import site_probe

    with site_probe.serve(built_site.html, compress=True) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=PHONE, locale="zh-CN", service_workers="block")
        ctx.route("**/*", network_gate([], {"page": "gzip"}))
        if not inflate:
            ctx.add_init_script("delete window.DecompressionStream;")
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/{CHAPTER.html}", wait_until="load")
        page.wait_for_function(STATE + " === 'idle'")
        page.evaluate(WATCH_PROGRESS)
        page.get_by_role("textbox", name=re.compile("中文数字")).fill("十二")
        page.locator(BUTTON).click()
        page.wait_for_function(ANSWERED, arg="十二", timeout=60_000)
        answer = page.locator(ANSWER).inner_text()
        lines = page.evaluate("() => window.mhaProgress")
        browser.close()
    pairs = progress_pairs(lines)
    assert not errors and answer.endswith("12"), (errors, answer)
    assert pairs and all(got <= total for got, total in pairs), pairs
    assert pairs[-1][0] == pairs[-1][1], pairs[-1]
    # without DecompressionStream the plain files come, decoded by the browser: 15 MB, not their gzip size
    assert (pairs[-1][1] < 5) if inflate else (pairs[-1][1] > 14), pairs[-1]
