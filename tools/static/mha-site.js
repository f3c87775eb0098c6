// Every page (tools/book_ext.py adds it, deferred). Nothing here is needed to read a page:
// it makes the self-checks (jupyterquiz output, drawn by its own script inside the notebook
// outputs) and wide formulas usable with a keyboard and a screen reader.
//
// - a numeric self-check box is named by its question (aria-labelledby);
// - a multiple-choice self-check is a radio group whose arrow keys would answer (the browser
//   checks the next radio and jupyterquiz reads that as a click): arrows only move the focus
//   here, Space or Enter answers; the focused choice shows a ring (mha-site.css);
// - the feedback line is a live region, so the verdict is read out when it appears;
// - a display formula wider than its column can be scrolled from the keyboard (tabindex);
// - the phone's chapter list and page contents (the theme's two sidebar dialogs, opened by the
//   article header's buttons once tools/site_html.py drops the theme's hidden pair): each dialog is
//   named, takes the focus on its current link (or its first) when it opens, and gives it back to
//   its button when Escape or a tap outside closes it; a link tapped inside closes it too (a link to
//   a section of this page would otherwise leave the panel over the text).
(function () {
  "use strict";

  function labelInputs(root) {
    root.querySelectorAll(".Quiz input.Input-text:not([aria-labelledby]):not([aria-label])").forEach(input => {
      const question = input.closest(".Quiz").querySelector('[id^="quizQn"]');
      if (question && question.id) input.setAttribute("aria-labelledby", question.id);
      else input.setAttribute("aria-label", "答案");
    });
    root.querySelectorAll(".Quiz .Feedback:not([aria-live])").forEach(fb => {
      fb.setAttribute("role", "status");
      fb.setAttribute("aria-live", "polite");
    });
    root.querySelectorAll('.Quiz .Answer:not([role])').forEach(group => {
      if (!group.querySelector(".MCButton")) return;
      group.setAttribute("role", "radiogroup");
      const question = group.closest(".Quiz").querySelector('[id^="quizQn"]');
      if (question && question.id) group.setAttribute("aria-labelledby", question.id);
    });
  }

  const KEYS = {ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1};

  function onKey(event) {
    const radio = event.target;
    if (!(radio instanceof HTMLInputElement) || radio.type !== "radio" || !radio.closest(".MCButton")) return;
    const radios = [...radio.closest(".Answer").querySelectorAll(".MCButton input[type=radio]")];
    if (event.key in KEYS) {
      event.preventDefault(); // the browser would check (and so answer) the next choice
      const next = radios[(radios.indexOf(radio) + KEYS[event.key] + radios.length) % radios.length];
      next.focus();
    } else if (event.key === "Enter") {
      event.preventDefault();
      radio.closest(".MCButton").click();
    }
  }

  function markScrollable(box) {
    if (box.scrollWidth > box.clientWidth + 1) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "group");
      box.setAttribute("aria-label", "公式（可左右滚动）");
    } else {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }

  // widths change as fonts arrive and the window turns: each box is re-measured when its size changes
  function scrollableFormulas(root) {
    const boxes = root.querySelectorAll("div.math > .katex-display");
    boxes.forEach(markScrollable);
    if ("ResizeObserver" in window) {
      const observer = new ResizeObserver(entries => entries.forEach(e => markScrollable(e.target)));
      boxes.forEach(box => { observer.observe(box); observer.observe(box.firstElementChild || box); });
    }
    if (document.fonts) document.fonts.ready.then(() => boxes.forEach(markScrollable));
  }

  const PANELS = [
    ["primary", "pst-primary-sidebar-modal", "章节目录"],
    ["secondary", "pst-secondary-sidebar-modal", "本页目录"],
  ];

  function sidebarPanels() {
    PANELS.forEach(([side, id, name]) => {
      const dialog = document.getElementById(id);
      const button = document.querySelector(`.bd-header-article .${side}-toggle`);
      if (!dialog || !button) return;
      dialog.setAttribute("aria-label", name);
      new MutationObserver(() => {
        if (dialog.open) {
          const links = [...dialog.querySelectorAll("a[href]")];
          const here = dialog.querySelector("a.current, li.current > a, a[aria-current]") || links[0];
          if (here) here.focus({preventScroll: false});
        } else if (document.activeElement === document.body || !document.activeElement || dialog.contains(document.activeElement)) {
          button.focus({preventScroll: true});
        }
      }).observe(dialog, {attributes: true, attributeFilter: ["open"]});
      dialog.addEventListener("click", event => {
        const link = event.target.closest && event.target.closest("a[href]");
        if (link && dialog.open) dialog.close();
      });
    });
  }

  function start() {
    sidebarPanels();
    labelInputs(document);
    scrollableFormulas(document);
    document.addEventListener("keydown", onKey, true);
    new MutationObserver(records => {
      if (records.some(r => r.addedNodes.length)) labelInputs(document);
    }).observe(document.body, {childList: true, subtree: true});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
