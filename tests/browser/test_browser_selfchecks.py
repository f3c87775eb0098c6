"""The self-checks on the built website, answered in a real browser at phone width.

Same setup as every browser test (tests/browser/conftest.py and tests/support/site_browser.py: the strictly built site served on
127.0.0.1, headless Debian chromium, every request to another host aborted and recorded).
On every chapter page with self-checks (mha.course.selfcheck), each question is answered with every
wrong option (or typical wrong number, and one more that matches none) and then with the right
one; the feedback text and its right/wrong state must be the ones mha.course.selfcheck defines. The
pages must log no console error, ask nothing from outside the site and not scroll sideways at
390 px, also after the feedback has appeared. Screenshots go to _build/screenshots/selfchecks/.
"""
from __future__ import annotations

import html
import re

import pytest

import mha.course.selfcheck as sc
from site_browser import CHROMIUM, CHROMIUM_ARGS, PAGE_OVERFLOW, PAGE_READY, PHONE, SHOTS, network_gate
from site_pages import pages

PAGES = pages()

QUESTIONS = [(e, i) for e in sc.EXERCISES for i in range(len(sc.questions(e)))]
NO_MATCH = "12345"  # a number no numeric question lists: the default feedback answers it


def page_of(exercise_id: str):
    chapter = f"{int(exercise_id.split('.')[0]):02d}_"
    (page,) = [p for p in PAGES if p.name.startswith(chapter)]
    return page


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment (tags dropped, entities decoded, spaces collapsed)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _attempts(question: dict) -> list:
    """(what to do, expected feedback text, expected right?) for one question: wrong ones first, right last."""
    answers = question["answers"]
    if question["type"] == "multiple_choice":
        wrong = [("click", i, text_of(a["feedback"]), False) for i, a in enumerate(answers) if not a["correct"]]
        (good,) = [("click", i, text_of(a["feedback"]), True) for i, a in enumerate(answers) if a["correct"]]
        return wrong + [good]
    default = next(a for a in answers if a["type"] == "default")
    attempts = [("type", _number(a["value"]), text_of(a["feedback"]), False)
                for a in answers if a["type"] == "value" and not a["correct"]]
    attempts.append(("type", NO_MATCH, text_of(default["feedback"]), False))
    for a in answers:
        if a["type"] == "range":  # close to the truth, within the tolerance the checker allows
            low, high = a["range"]
            truth = answers[0]["value"]
            attempts.append(("type", _number(round((truth + high) / 2, 6)), text_of(a["feedback"]), True))
    attempts.append(("type", _number(answers[0]["value"]), text_of(answers[0]["feedback"]), True))
    return attempts


@pytest.fixture(scope="module")
def answered(sync_playwright, server):
    shots = SHOTS / "selfchecks"
    shots.mkdir(parents=True, exist_ok=True)
    outside, pages, results = [], {}, {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                                  locale="zh-CN", service_workers="block")
        ctx.set_default_timeout(30_000)
        current = {"page": None}
        ctx.route("**/*", network_gate(outside, current))
        for page_info in sorted({page_of(e) for e in sc.EXERCISES}, key=lambda p: p.name):
            current["page"] = page_info.name
            log = []
            page = ctx.new_page()
            page.on("console", lambda m: log.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: log.append(f"uncaught: {e}"))
            page.on("response", lambda r: log.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
            page.goto(f"{server}/{page_info.html}", wait_until="load")
            page.wait_for_function(PAGE_READY, timeout=20_000)
            mine = [e for e in sc.EXERCISES if page_of(e) == page_info]
            found, labels = {}, {}
            for exercise_id in mine:
                container = page.locator(f"#{sc.container_id(exercise_id)}")
                found[exercise_id] = container.locator(".Quiz").count()
                labels[exercise_id] = container.locator("label.InpLabel").all_inner_texts()
                for index, question in enumerate(sc.questions(exercise_id)):
                    wrapper = container.locator(".Quiz").nth(index)
                    seen = []
                    for action, what, expected, correct in _attempts(question):
                        if action == "click":
                            wrapper.locator("label.MCButton").nth(what).click()
                        else:
                            box = wrapper.locator("input.Input-text")
                            box.click()
                            box.press_sequentially(what)
                            box.press("Enter")
                        feedback = wrapper.locator(".Feedback")
                        seen.append({"answer": what, "expected": expected, "correct": correct,
                                     "text": " ".join(feedback.inner_text().split()),
                                     "class": feedback.get_attribute("class") or ""})
                    results[(exercise_id, index)] = seen
                container.screenshot(path=str(shots / f"{exercise_id}.png"))
            pages[page_info.name] = {
                "errors": log, "found": found, "labels": labels,
                "overflow_px": page.evaluate(f"() => {PAGE_OVERFLOW}"),
            }
            page.close()
        browser.close()
    return {"outside": outside, "pages": pages, "results": results}


def test_every_self_check_is_on_its_page(answered):
    for exercise_id in sc.EXERCISES:
        found = answered["pages"][page_of(exercise_id).name]["found"][exercise_id]
        assert found == len(sc.questions(exercise_id)), f"{exercise_id}: {found} questions rendered"


@pytest.mark.parametrize("exercise_id, index", QUESTIONS, ids=[f"{e}-q{i + 1}" for e, i in QUESTIONS])
def test_wrong_then_right_answers_get_their_feedback(answered, exercise_id, index):
    seen = answered["results"][(exercise_id, index)]
    assert any(not s["correct"] for s in seen) and seen[-1]["correct"]
    for s in seen:
        assert s["text"] == s["expected"], f"answer {s['answer']!r}: feedback {s['text']!r}"
        state = "correct" if s["correct"] else "incorrect"
        assert state in s["class"].split(), f"answer {s['answer']!r}: feedback shown as {s['class']!r}"
        assert s["text"].startswith(sc.RIGHT if s["correct"] else sc.WRONG)


def test_answer_boxes_are_labelled_in_chinese(answered):
    labels = {e: answered["pages"][page_of(e).name]["labels"][e] for e in sc.EXERCISES}
    numeric = {e: sum(q["type"] == "numeric" for q in sc.questions(e)) for e in sc.EXERCISES}
    assert {e: len(v) for e, v in labels.items()} == numeric
    assert {text.strip() for v in labels.values() for text in v} == {sc.UI_WORDS["Type numeric answer here:"]}


def test_self_check_pages_log_no_console_errors(answered):
    errors = {name: r["errors"] for name, r in answered["pages"].items() if r["errors"]}
    assert not errors, errors


def test_self_check_pages_request_nothing_outside_the_site(answered):
    assert not answered["outside"], answered["outside"]


def test_self_check_pages_do_not_scroll_sideways_on_a_phone(answered):
    wide = {name: r["overflow_px"] for name, r in answered["pages"].items() if r["overflow_px"] > 1}
    assert not wide, f"wider than a {PHONE['width']} px phone after answering: {wide}"


def _first(kind: str) -> str:
    return next(e for e in sc.EXERCISES if any(q["type"] == kind for q in sc.questions(e)))


KEYBOARD = r"""async ([mcId, numId]) => {
  const mc = document.getElementById(mcId).querySelector('.Quiz .Answer');
  const radios = [...mc.querySelectorAll('.MCButton input[type=radio]')];
  const feedback = mc.closest('.Quiz').querySelector('.Feedback');
  const out = {group_role: mc.getAttribute('role'), live: feedback.getAttribute('aria-live')};
  radios[0].focus();
  out.ring = getComputedStyle(radios[0].closest('.MCButton')).outlineStyle;
  for (const key of ['ArrowDown', 'ArrowRight']) {
    document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
  }
  out.focused = radios.indexOf(document.activeElement);
  out.answered_after_arrows = feedback.textContent.trim();
  const box = document.getElementById(numId).querySelector('input.Input-text');
  const label = document.getElementById(box.getAttribute('aria-labelledby') || '');
  out.input_label = label ? label.textContent.trim() : box.getAttribute('aria-label');
  return out;
}"""


@pytest.fixture(scope="module")
def keyboard(sync_playwright, server):
    mc, num = _first("multiple_choice"), _first("numeric")
    outside, current = [], {"page": "keyboard"}
    results = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=PHONE, locale="zh-CN", service_workers="block")
        ctx.route("**/*", network_gate(outside, current))
        page = ctx.new_page()
        page.goto(f"{server}/{page_of(mc).html}", wait_until="load")
        page.wait_for_function(PAGE_READY)
        if page_of(num) != page_of(mc):
            page.goto(f"{server}/{page_of(num).html}", wait_until="load")
            page.wait_for_function(PAGE_READY)
            mc = next(e for e in sc.EXERCISES if page_of(e) == page_of(num)
                      and any(q["type"] == "multiple_choice" for q in sc.questions(e)))
        results = page.evaluate(KEYBOARD, [sc.container_id(mc), sc.container_id(num)])
        # a real key press: the focus ring shows and Space answers
        page.keyboard.press("Space")
        results["answered_after_space"] = page.locator(f"#{sc.container_id(mc)} .Quiz .Feedback").first.inner_text().strip()
        browser.close()
    results["outside"] = outside
    return results


def test_multiple_choice_arrow_keys_move_without_answering(keyboard):
    assert keyboard["group_role"] == "radiogroup"
    assert keyboard["focused"] == 2 and keyboard["answered_after_arrows"] == "", keyboard
    assert keyboard["answered_after_space"], "Space on the focused choice should answer"


def test_self_check_focus_is_visible_and_feedback_is_announced(keyboard):
    assert keyboard["ring"] not in ("none", ""), keyboard["ring"]
    assert keyboard["live"] == "polite"


def test_numeric_box_is_named_by_its_question(keyboard):
    assert keyboard["input_label"] and len(keyboard["input_label"]) > 5, keyboard
    assert not keyboard["outside"]
