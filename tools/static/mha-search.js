// search.html?q=...: the results of Pagefind (tools/site_search.py builds the index at build
// time; its own pagefind.js loads only the chunks a query needs). tools/site_html.py adds this
// script to search.html only. Results go into the theme's #search-results as a list of links
// with a snippet; the status line is a live region, so screen readers hear how many were found.
//
// Learners' words: the book writes the Chinese terms (多头注意力, 缩放, 掩码) and Q、K、V; a learner
// types the English name of the layer, "query key value", 根号 for the √ of the scaling, or a
// question around the term (为什么除以根号, 英文 query key value). So a query is first rewritten with
// SAME (learner's words -> the book's words); Pagefind finds the pages holding every word; when that
// finds fewer than 3 pages, the question words (FILLER) go, and then pages holding any of the words
// count, most words first. Pages whose title holds a word of the query come first.
(function () {
  "use strict";
  const MAX = 20;
  const ENOUGH = 3;
  const SAME = [
    [/multi[\s_-]*head(?:ed)?[\s_-]*(?:self[\s_-]*)?attention/gi, " 多头注意力 "],
    [/self[\s_-]*attention/gi, " 自注意力 "],
    [/cross[\s_-]*attention/gi, " 交叉注意力 "],
    [/scaled[\s_-]*dot[\s_-]*product(?:[\s_-]*attention)?/gi, " 缩放点积 "],
    [/dot[\s_-]*product/gi, " 点积 "],
    [/positional[\s_-]*(?:encoding|embedding)s?/gi, " 位置编码 "],
    [/(?:causal|look[\s_-]*ahead)[\s_-]*mask(?:ing)?/gi, " 因果掩码 "],
    [/padding[\s_-]*mask(?:ing)?/gi, " padding 掩码 "],
    [/\bmask(?:s|ing)?\b|遮罩|掩膜|遮挡/gi, " 掩码 "],
    [/kv[\s_-]*cache/gi, " KV 缓存 "],
    [/split(?:ting)?[\s_-]*(?:into[\s_-]*)?heads?/gi, " 分头 "],
    [/\bconcat(?:enat(?:e|ion))?\b/gi, " Concat "],
    [/连接起来|合并/g, " 拼接 "],
    [/\bq(?:uery)?[\s,，、/]*k(?:ey)?[\s,，、/]*(?:and\s+)?v(?:alue)?\b|\bqkv\b|查询[\s、，,]*键[\s、，,]*值/gi, " Q、K、V "],
    [/根号|平方根|开根号?|开方|\bsqrt\b|√/gi, " 缩放 "],
    [/为何|为啥/g, " 为什么 "],
  ];
  const FILLER = /英文|中文|英语|什么是|是什么|什么|为什么|怎么样|怎么|怎样|如何|意思|含义|一下|请问|到底|区别|作用|[是的了吗呢啊吧]/g;

  function rewrite(query) {
    return SAME.reduce((q, [from, to]) => q.replace(from, to), query).replace(/\s+/g, " ").trim();
  }

  function words(query) {
    return query.split(" ").map(w => w.trim()).filter(w => w.length > 0);
  }

  // Pagefind's results for the query as typed (rewritten) and without its question words, merged:
  // the stricter query's pages first; when both find fewer than ENOUGH pages, each word alone
  // (pages found by more of the words first).
  async function find(pagefind, query) {
    const strict = rewrite(query);
    const loose = rewrite(strict.replace(FILLER, " "));
    const seen = new Map();
    const add = (results, tier) => results.forEach((r, i) => {
      const had = seen.get(r.id);
      if (!had) seen.set(r.id, {result: r, tier, hits: 1, rank: i});
      else if (had.tier === tier) had.hits += 1;
    });
    add((await pagefind.search(strict)).results, 0);
    if (loose && loose !== strict) add((await pagefind.search(loose)).results, 1);
    if (seen.size < ENOUGH && words(loose).length > 1) {
      for (const w of words(loose)) add((await pagefind.search(w)).results, 2);
    }
    const ordered = [...seen.values()].sort((a, b) => a.tier - b.tier || b.hits - a.hits || a.rank - b.rank);
    return {ordered, terms: words(loose || strict)};
  }

  // A page whose title holds a word of the query (Q、K、V, 分头, 多头注意力) comes first, in order.
  // Then, for a Chinese term of 3 or more characters, the pages with a section headed by it, then
  // the pages that write it, then the rest (Pagefind cuts 自注意力 into 自 + 注意力 and ranked a
  // page that never says 自注意力 first).
  const PHRASE = /^[\u3400-\u9fff]{3,}$/;
  function titleFirst(data, terms) {
    const long = terms.filter(t => t.length >= 2).map(t => t.toLowerCase());
    const phrases = terms.filter(t => PHRASE.test(t));
    const hits = d => long.filter(t => ((d.meta && d.meta.title) || "").toLowerCase().includes(t)).length;
    const heads = d => (d.sub_results || []).map(r => r.title || "").join("\n");
    const said = d => phrases.filter(t => (d.content || "").includes(t)).length +
                      phrases.filter(t => heads(d).includes(t)).length;
    return data.map((d, i) => [hits(d), said(d), i, d])
      .sort((a, b) => b[0] - a[0] || b[1] - a[1] || a[2] - b[2]).map(x => x[3]);
  }

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
    // Pagefind's excerpt: escaped page text with <mark> around the hits (less the ". " it puts after a heading)
    p.innerHTML = data.excerpt.replace(/^[.\s]+/, "");
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
      const found = await find(pagefind, query);
      // the book has a few tens of pages: every result's data is small, and the title order needs it
      const data = titleFirst(await Promise.all(found.ordered.map(r => r.result.data())), found.terms).slice(0, MAX);
      const list = document.createElement("ul");
      list.className = "search";
      data.forEach(d => list.append(item(d)));
      box.append(list);
      const count = found.ordered.length;
      status(box, count
        ? `找到 ${count} 个相关页面` + (count > MAX ? `（显示前 ${MAX} 个）` : "")
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
