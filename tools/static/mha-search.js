// search.html?q=...: the results of Pagefind (tools/site_search.py builds the index at build
// time; its own pagefind.js loads only the chunks a query needs). tools/site_html.py adds this
// script to search.html only. Results go into the theme's #search-results as a list of links
// with a snippet; the status line is a live region, so screen readers hear how many were found.
(function () {
  "use strict";
  const MAX = 20;

  function root() {
    const content = document.documentElement.dataset.content_root || "./";
    return new URL(content, window.location.href);
  }

  function status(box, text) {
    let line = box.querySelector(".mha-search-status");
    if (!line) {
      line = document.createElement("p");
      line.className = "mha-search-status";
      line.setAttribute("role", "status");
      line.setAttribute("aria-live", "polite");
      box.prepend(line);
    }
    line.textContent = text;
  }

  function item(data) {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = data.url;
    a.textContent = (data.meta && data.meta.title) || data.url;
    const p = document.createElement("p");
    p.className = "context";
    p.innerHTML = data.excerpt; // Pagefind's excerpt: escaped page text with <mark> around the hits
    li.append(a, p);
    return li;
  }

  async function run() {
    const box = document.getElementById("search-results");
    if (!box) return;
    const query = (new URLSearchParams(window.location.search).get("q") || "").trim();
    const input = document.querySelector(".bd-search-container input[name=q]");
    if (input) input.value = query;
    if (!query) { box.dataset.state = "done"; return; }
    status(box, "正在搜索……");
    try {
      const base = root();
      const pagefind = await import(new URL("pagefind/pagefind.js", base).href);
      await pagefind.options({ baseUrl: base.pathname, excerptLength: 24 });
      const found = await pagefind.search(query);
      const data = await Promise.all(found.results.slice(0, MAX).map(r => r.data()));
      const list = document.createElement("ul");
      list.className = "search";
      data.forEach(d => list.append(item(d)));
      box.append(list);
      status(box, found.results.length
        ? `找到 ${found.results.length} 个页面含有“${query}”` + (found.results.length > MAX ? `（显示前 ${MAX} 个）` : "")
        : `没有页面含有“${query}”。换一个词，或少写几个字再试。`);
    } catch (err) {
      status(box, `搜索出错：${err}`);
      throw err;
    } finally {
      box.dataset.state = "done";
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
})();
