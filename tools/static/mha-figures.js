/* Draw the interactive figures of this page with the site's own vega-embed.
 *
 * Each figure is a <div class="mha-vega-figure"> holding its Vega-Lite spec in a
 * <script type="application/json" class="mha-vega-spec"> (mha/course/page_figures/myst.py writes it;
 * the numbers were computed by `mha` when the notebook ran). tools/book_ext.py adds this
 * file only to pages that hold such a div, naming vega, vega-lite and vega-embed in its data-vega
 * attribute; this file fetches them, in that order, once the page has loaded (text, stylesheets,
 * formula fonts and pictures first, which matters on a slow link), then draws the figures.
 * Only vega-embed's documented API is used: vegaEmbed(element, spec, options) resolves to
 * {view, spec, finalize}. The result is kept on the div (div.mhaResult) for the browser tests.
 * The figure follows the theme's light/dark switch (<html data-theme>: vega-embed's "dark" theme,
 * white text); redrawn, it keeps
 * the reader's choices (the parameters' current values become their start values).
 */
(function () {
  "use strict";

  var me = document.currentScript;
  var STATIC = me.src.replace(/[^\/]*$/, "");  // the _static/ folder this file was served from
  var LIBRARIES = (me.dataset.vega || "").split(" ").filter(Boolean);

  function pageLoaded() {
    return new Promise(function (done) {
      if (document.readyState === "complete") done();
      else window.addEventListener("load", function () { done(); }, {once: true});
    });
  }

  // All three requested at once, run in this order (async = false): vega, vega-lite, vega-embed.
  function loadLibraries() {
    return Promise.all(LIBRARIES.map(function (path) {
      return new Promise(function (done, fail) {
        var script = document.createElement("script");
        script.src = STATIC + path;
        script.async = false;
        script.onload = function () { done(); };
        script.onerror = function () { fail(new Error("could not load " + path)); };
        document.head.appendChild(script);
      });
    }));
  }

  function theme() {
    return document.documentElement.dataset.theme === "dark" ? "dark" : undefined;
  }

  // vega-themes' "dark" colours axes and legends; text marks (the figures' captions) need the same.
  var DARK_TEXT = {text: {color: "#fff"}};

  function draw(figure) {
    var spec = JSON.parse(figure.querySelector("script.mha-vega-spec").textContent);
    var old = figure.mhaResult;
    if (old) {
      (spec.params || []).forEach(function (p) { p.value = old.view.signal(p.name); });
      old.finalize();
    }
    figure.dataset.state = "drawing";
    return vegaEmbed(figure.querySelector(".mha-vega-target"), spec,
                     {actions: false, renderer: "svg", theme: theme(), config: theme() ? DARK_TEXT : {}})
      .then(function (result) {
        figure.mhaResult = result;
        figure.dataset.state = "drawn";
        figure.dataset.theme = theme() || "light";
      })
      .catch(function (error) {
        figure.dataset.state = "failed";
        console.error("interactive figure failed:", error);
      });
  }

  function drawAll() {
    var figures = Array.prototype.slice.call(document.querySelectorAll(".mha-vega-figure"));
    return Promise.all(figures.map(draw));
  }

  function failAll(error) {
    document.querySelectorAll(".mha-vega-figure").forEach(function (f) { f.dataset.state = "failed"; });
    console.error("interactive figures failed:", error);
  }

  pageLoaded().then(loadLibraries).then(function () {
    var drawing = drawAll();
    var shown = theme();
    new MutationObserver(function () {
      if (theme() === shown) return;
      shown = theme();
      drawing = drawing.then(drawAll);
    }).observe(document.documentElement, {attributes: true, attributeFilter: ["data-theme"]});
  }, failAll);
})();
