/* Chapter 13's playground: the chapter's trained numeral Transformer, run in the reader's browser.
 *
 * The page holds <div class="mha-numerals-playground"></div> (one markdown cell of
 * book/13_trained_heads.ipynb); tools/numerals_playground.py adds this file, its CSS and
 * window.mhaNumeralsPlayground (where the files are, relative to _static/) to that page only.
 *
 * Nothing of the runtime loads until the reader presses the button, which names the download's size
 * (typing first only shows a hint). Then the page downloads ONNX Runtime's WebAssembly build (from
 * npm, served by the site) and the ONNX graph that tools/export_numerals_onnx.py exported from the
 * shipped weights through the mha model, with the tables (vocabularies, special ids, labels, colour
 * map) it read from the Python modules. Both big files come gzip-compressed (.gz, inflated here
 * with DecompressionStream; a browser without it fetches the plain files); the progress counts the
 * bytes received against the sizes the build wrote into window.mhaNumeralsPlayground.files, never
 * against Content-Length (a compressing host states the compressed size, the body arrives decoded).
 *
 * This file does no model math: it checks the characters against the model's vocabulary,
 * turns them into ids, runs the graph once per decoding step (<bos> d1 ... dk in, the argmax of the
 * last position's logits out, until <eos>), and draws the attention weights the graph returns.
 * The result of the last run is kept on the div (div.mhaResult) for the browser tests.
 */
(function () {
  "use strict";

  var CONFIG = window.mhaNumeralsPlayground || {};
  var STATIC = new URL(".", document.currentScript.src);  // this file sits in _static/
  var SVG = "http://www.w3.org/2000/svg";
  var CELL = 16;  // px per attention cell (labels are 11 px)

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function megabytes(bytes) { return (bytes / 1e6).toFixed(1) + " MB"; }

  var INFLATE = typeof DecompressionStream === "function";
  var DOWNLOAD = INFLATE ? CONFIG.download : null;  // bytes the button names (the .gz files' case)

  // ------------------------------------------------------------------ loading (only when started)

  function inflate(buffer) {
    var bytes = new Uint8Array(buffer);
    if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return Promise.resolve(buffer);  // the host already decoded it
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer();
  }

  /* The bytes of one of the two big files (key "wasm" or "model"): the .gz copy when this browser can
   * inflate it. onBytes(received, size) as the body arrives: size is the build's size of the file
   * asked for; only a host that decodes the .gz for us (Content-Encoding: gzip on it) delivers more,
   * the plain file's bytes, and then that is the size. */
  function fetchFile(key, onBytes) {
    var sizes = (CONFIG.files || {})[key] || [0, 0];
    var url = new URL(CONFIG[key] + (INFLATE ? ".gz" : ""), STATIC).href;
    var total = INFLATE ? sizes[1] : sizes[0];
    return fetch(url).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status + " " + url);
      onBytes(0, total);
      var done = response.body && response.body.getReader ? (function () {
        var reader = response.body.getReader(), chunks = [], got = 0;
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) {
              var out = new Uint8Array(got), at = 0;
              chunks.forEach(function (c) { out.set(c, at); at += c.length; });
              return out.buffer;
            }
            chunks.push(r.value);
            got += r.value.length;
            if (got > total) total = sizes[0];
            onBytes(got, total);
            return pump();
          });
        }
        return pump();
      })() : response.arrayBuffer();
      return done.then(function (buffer) {
        onBytes(buffer.byteLength, Math.max(total, buffer.byteLength));
        return INFLATE ? inflate(buffer) : buffer;
      });
    });
  }

  function loadScript(url) {
    return new Promise(function (resolve, reject) {
      var s = el("script", {src: url});
      s.onload = resolve;
      s.onerror = function () { reject(new Error("could not load " + url)); };
      document.head.appendChild(s);
    });
  }

  var loading = null;  // one download for every playground on the page

  function loadModel(progress) {
    if (loading) return loading;
    var tablesUrl = new URL(CONFIG.tables, STATIC);
    var files = {};  // key -> [got, total]
    function report(key) {
      return function (got, total) {
        files[key] = [got, total];
        var g = 0, t = 0;
        Object.keys(files).forEach(function (k) { g += files[k][0]; t += files[k][1]; });
        progress(g, t);
      };
    }
    loading = fetch(tablesUrl).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status + " " + tablesUrl);
      return r.json();
    }).then(function (tables) {
      var wasmUrl = new URL(CONFIG.wasm, STATIC).href;
      return Promise.all([
        loadScript(new URL(CONFIG.runtime, STATIC).href),
        fetchFile("wasm", report("wasm")),
        fetchFile("model", report("model")),
      ]).then(function (loaded) {
        var ort = window.ort;
        ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer needed (the site is not cross-origin isolated)
        ort.env.wasm.wasmPaths = new URL(".", wasmUrl).href;  // where ort.wasm.min.js finds its loader
        ort.env.wasm.wasmBinary = loaded[1];
        return ort.InferenceSession.create(new Uint8Array(loaded[2]), {executionProviders: ["wasm"]});
      }).then(function (session) { return {session: session, tables: tables, ort: window.ort}; });
    });
    return loading;
  }

  // ------------------------------------------------------------------ the model's vocabulary check

  /* A Chinese reason why `text` cannot go into the model, or null. Only the vocabulary and the
   * length are checked here (the tables come from mha.course.numerals.data); the course's reading rules
   * live in mha.course.numerals.parse, which this page does not have. */
  function problem(text, tables) {
    var vocab = tables.src_tokens.filter(function (_, i) { return i !== tables.pad; });
    var chars = Array.from(text);
    if (!chars.length) return "请输入一个中文数字，例如 两千零二十六。";
    for (var i = 0; i < chars.length; i++) {
      if (vocab.indexOf(chars[i]) < 0) {
        return "“" + chars[i] + "”（第 " + (i + 1) + " 个字）不在模型的词表里，所以这不是模型能读的中文数字。" +
               "模型认识的字只有：" + vocab.join("");
      }
    }
    if (chars.length > tables.max_source_len) {
      return "太长了：" + chars.length + " 个字；本课的数字（0 到 99,999,999）最多 " + tables.max_source_len + " 个字。";
    }
    return null;
  }

  // ------------------------------------------------------------------ running the graph

  function ids(tokens, ort) {
    return new ort.Tensor("int64", BigInt64Array.from(tokens.map(function (t) { return BigInt(t); })), [1, tokens.length]);
  }

  /* The outputs as nested arrays: logits [T][V]; encoder/decoder/cross [layer][head][query][key]. */
  function unpack(out, names) {
    var res = {};
    names.forEach(function (name) {
      var t = out[name], dims = t.dims.slice(), data = Array.from(t.data);
      if (name === "logits") dims = dims.slice(1);            // (1, T, V) -> (T, V)
      else dims = [dims[0]].concat(dims.slice(2));            // (n, 1, h, L, S) -> (n, h, L, S)
      function nest(offset, d) {
        if (d === dims.length - 1) return data.slice(offset, offset + dims[d]);
        var size = dims.slice(d + 1).reduce(function (a, b) { return a * b; }, 1), rows = [];
        for (var i = 0; i < dims[d]; i++) rows.push(nest(offset + i * size, d + 1));
        return rows;
      }
      res[name] = nest(0, 0);
    });
    return res;
  }

  function argmax(row) {
    var best = 0;
    for (var i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
  }

  /* Greedy decoding: one run per step; onStep(result so far) after each written token. */
  function translate(model, text, onStep) {
    var t = model.tables, ort = model.ort;
    var src = Array.from(text).map(function (c) { return t.src_tokens.indexOf(c); });
    var tgt = [t.bos];
    function step() {
      var feeds = {};
      feeds[t.inputs[0]] = ids(src, ort);
      feeds[t.inputs[1]] = ids(tgt, ort);
      return model.session.run(feeds).then(function (out) {
        var res = unpack(out, t.outputs);
        var next = argmax(res.logits[res.logits.length - 1]);
        var result = {text: text, src: src.slice(), tgt_in: tgt.slice(), written: tgt.slice(1).concat([next]),
                      logits: res.logits, encoder: res.encoder, decoder: res.decoder, cross: res.cross};
        var done = next === t.eos || tgt.length >= t.max_target_len;
        result.done = done;
        onStep(result);
        if (done) return result;
        tgt.push(next);
        return step();
      });
    }
    return step();
  }

  function digitsOf(result, tables) {
    var out = [];
    for (var i = 0; i < result.written.length; i++) {
      var id = result.written[i];
      if (id === tables.eos) break;
      out.push(tables.tgt_tokens[id].length === 1 ? tables.tgt_tokens[id] : "?");  // a special token where a digit belongs
    }
    return out.join("");
  }

  // ------------------------------------------------------------------ drawing

  function colour(tables, w) {
    var c = tables.colormap.colors;
    return c[Math.max(0, Math.min(c.length - 1, Math.round(w * (c.length - 1))))];
  }

  function fixed(w) { return w.toFixed(2); }

  /* Rows and columns of one block, as the chapter's figures label them. */
  function axes(block, result, tables) {
    var chars = Array.from(result.text);
    var read = result.tgt_in.map(function (i) { return tables.tgt_tokens[i]; });
    var write = result.written.map(function (i) { return tables.tgt_tokens[i]; });
    if (block === "encoder") return {rows: chars, cols: chars, rowName: "字", colName: "字"};
    if (block === "decoder") return {rows: read, cols: read, rowName: "读入", colName: "读入"};
    return {rows: write, cols: chars, rowName: "写出", colName: "字"};
  }

  /* "写出“2”→“两” 0.91；……": the key each query attends to most, the map's text alternative. */
  function topKeys(m, ax) {
    return m.map(function (row, i) {
      var j = argmax(row);
      return ax.rowName + "“" + ax.rows[i] + "”最关注“" + ax.cols[j] + "”（" + fixed(row[j]) + "）";
    });
  }

  function heatmap(m, ax, tables, highlight) {
    var L = m.length, S = m[0].length;
    var left = 36, top = 22, width = left + S * CELL + 2, height = top + L * CELL + 2;
    var s = svg("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, "aria-hidden": "true"});
    ax.cols.forEach(function (c, j) {
      s.appendChild(svg("text", {x: left + j * CELL + CELL / 2, y: top - 6, "text-anchor": "middle",
                                 "class": c.length > 1 ? "mha-np-small" : ""}, c.length > 1 ? c.replace(/[<>]/g, "") : c));
    });
    ax.rows.forEach(function (r, i) {
      s.appendChild(svg("text", {x: left - 4, y: top + i * CELL + CELL * 0.72, "text-anchor": "end",
                                 "class": r.length > 1 ? "mha-np-small" : ""}, r.length > 1 ? r.replace(/[<>]/g, "") : r));
      m[i].forEach(function (w, j) {
        var cell = svg("rect", {x: left + j * CELL, y: top + i * CELL, width: CELL, height: CELL, fill: colour(tables, w)});
        cell.appendChild(svg("title", {}, ax.rows[i] + " → " + ax.cols[j] + "：" + fixed(w)));
        s.appendChild(cell);
      });
    });
    if (highlight !== null && highlight < L) {
      s.appendChild(svg("rect", {x: left - 1, y: top + highlight * CELL - 1, width: S * CELL + 2, height: CELL + 2,
                                 "class": "mha-np-row"}));
    }
    return s;
  }

  /* The colour scale, as the chapter's colour bars: weight 0 to 1. */
  function legend(tables) {
    var box = el("p", {"class": "mha-np-legend", "aria-hidden": "true"});
    var stops = tables.colormap.colors.map(function (c, i, all) { return c + " " + (100 * i / (all.length - 1)) + "%"; });
    box.appendChild(el("span", {}, "权重 0"));
    box.appendChild(el("span", {"class": "mha-np-scale", style: "background: linear-gradient(to right, " + stops.join(", ") + ")"}));
    box.appendChild(el("span", {}, "1"));
    return box;
  }

  // ------------------------------------------------------------------ one playground

  var COUNT = 0;

  function Playground(root) {
    var n = ++COUNT, self = this;
    this.root = root;
    this.block = "cross";
    this.row = null;       // the highlighted query row (decoder, cross: the decoding step)
    this.result = null;
    this.pending = null;   // text waiting for the model
    this.running = false;
    root.dataset.state = "idle";
    root.textContent = "";

    var form = el("div", {"class": "mha-np-form"});
    var inputId = "mha-np-input-" + n;
    form.appendChild(el("label", {"for": inputId}, "输入一个中文数字（例如 两千零二十六）"));
    this.input = el("input", {id: inputId, type: "text", lang: "zh", autocomplete: "off", spellcheck: "false",
                              "aria-describedby": "mha-np-status-" + n});
    form.appendChild(this.input);
    this.button = el("button", {type: "button"},
                     "下载并启动模型" + (DOWNLOAD ? "（约 " + megabytes(DOWNLOAD) + "）" : ""));
    form.appendChild(this.button);
    root.appendChild(form);

    this.status = el("p", {id: "mha-np-status-" + n, "class": "mha-np-status", role: "status"},
                     "模型还没有下载：按“下载并启动模型”，页面才下载运行库和模型" +
                     (DOWNLOAD ? "（一共约 " + megabytes(DOWNLOAD) + "）" : "") + "。");
    root.appendChild(this.status);
    this.progress = el("progress", {"class": "mha-np-progress", max: "1", value: "0", hidden: ""});
    root.appendChild(this.progress);
    this.answer = el("p", {"class": "mha-np-answer", "aria-live": "polite", "aria-atomic": "true"});
    root.appendChild(this.answer);
    this.steps = el("div", {"class": "mha-np-steps", role: "group", "aria-label": "解码的每一步"});
    root.appendChild(this.steps);
    this.tabs = el("div", {"class": "mha-np-tabs", role: "radiogroup", "aria-label": "显示哪一种注意力"});
    root.appendChild(this.tabs);
    this.maps = el("div", {"class": "mha-np-maps"});
    root.appendChild(this.maps);
    this.detail = el("p", {"class": "mha-np-detail", "aria-live": "polite"});
    root.appendChild(this.detail);

    this.button.addEventListener("click", function () { self.start(); });
    this.input.addEventListener("input", function () { self.request(self.input.value); });
  }

  Playground.prototype.start = function () {
    var self = this;
    if (this.model || this.root.dataset.state === "loading") return this.ready;
    this.root.dataset.state = "loading";
    this.button.disabled = true;
    this.progress.hidden = false;
    this.status.textContent = "正在下载运行库和模型……";
    this.ready = loadModel(function (got, total) {
      if (total) { self.progress.max = total; self.progress.value = Math.min(got, total); }
      self.status.textContent = "正在下载运行库和模型：" + megabytes(got) + (total ? " / " + megabytes(total) : "");
    }).then(function (model) {
      self.model = model;
      self.progress.hidden = true;
      self.button.hidden = true;
      self.root.dataset.state = "ready";
      self.status.textContent = "模型已就绪（" + model.tables.config.n_heads + " 个头，编码器 " +
        model.tables.config.n_encoder_layers + " 层、解码器 " + model.tables.config.n_decoder_layers +
        " 层），在你的浏览器里运行。";
      self.drawTabs();
      if (self.pending === null) self.pending = self.input.value;
      self.next();
    }, function (error) {
      loading = null;
      self.root.dataset.state = "failed";
      self.button.disabled = false;
      self.progress.hidden = true;
      self.status.textContent = "模型没能加载（" + error.message + "）。刷新页面再试一次。";
    });
    return this.ready;
  };

  Playground.prototype.request = function (text) {
    this.pending = text;
    if (!this.model) {
      // typing does not start a download of several MB: the button does (and then reads the box)
      if (this.root.dataset.state === "idle") {
        this.status.textContent = "先按“" + this.button.textContent + "”：模型下载好以后，页面就读你输入的数字。";
        this.root.dataset.hint = "shown";
      }
      return;
    }
    this.next();
  };

  /* No answer, steps or attention maps of an earlier input stay on screen (under an error). */
  Playground.prototype.clear = function () {
    this.result = null;
    this.root.mhaResult = null;
    this.row = null;
    this.encoderRow = undefined;
    this.steps.textContent = "";
    this.maps.textContent = "";
    this.detail.textContent = "";
    delete this.answer.dataset.digits;
  };

  Playground.prototype.next = function () {
    if (this.running || this.pending === null || !this.model) return;
    var text = this.pending.trim(), self = this, tables = this.model.tables;
    this.pending = null;
    if (!text && !this.result && this.root.dataset.state === "ready") return;  // started with an empty box
    var why = problem(text, tables);
    if (why) {
      this.clear();
      this.root.dataset.state = "invalid";
      this.answer.dataset.input = text;
      this.answer.textContent = "无法转换：" + why;
      this.next();
      return;
    }
    this.running = true;
    this.root.dataset.state = "running";
    this.detail.textContent = "";
    translate(this.model, text, function (partial) {
      self.result = partial;
      self.row = partial.written.length - 1;  // this step's row
      self.drawSteps();
      self.drawMaps();
    }).then(function (result) {
      self.running = false;
      self.result = result;
      self.root.mhaResult = result;
      var digits = digitsOf(result, tables);
      self.answer.dataset.input = text;
      self.answer.dataset.digits = digits;
      self.answer.textContent = text + " → " + digits;
      self.root.dataset.state = "done";
      self.next();
    }, function (error) {
      self.running = false;
      self.root.dataset.state = "failed";
      self.answer.textContent = "模型运行出错（" + error.message + "）。";
    });
  };

  Playground.prototype.drawTabs = function () {
    var self = this, name = "mha-np-block-" + COUNT + "-" + Math.random().toString(36).slice(2);
    this.tabs.textContent = "";
    this.model.tables.blocks.forEach(function (b) {
      var label = el("label", {});
      var radio = el("input", {type: "radio", name: name, value: b.name});
      radio.checked = b.name === self.block;
      radio.addEventListener("change", function () { self.block = b.name; self.drawMaps(); });
      label.appendChild(radio);
      label.appendChild(document.createTextNode(" " + b.title));
      self.tabs.appendChild(label);
    });
  };

  Playground.prototype.drawSteps = function () {
    var self = this, r = this.result, t = this.model.tables;
    this.steps.textContent = "";
    r.written.forEach(function (id, k) {
      var read = t.tgt_tokens[r.tgt_in[k]], wrote = t.tgt_tokens[id];
      var b = el("button", {type: "button", "class": "mha-np-step", "aria-pressed": String(k === self.row),
                            "aria-label": "第 " + (k + 1) + " 步：读入 " + read + "，写出 " + wrote}, wrote);
      b.addEventListener("click", function () { self.row = k; self.drawSteps(); self.drawMaps(); });
      b.addEventListener("keydown", function (e) {
        var d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
        if (!d) return;
        e.preventDefault();
        self.row = Math.max(0, Math.min(r.written.length - 1, k + d));
        self.drawSteps();
        self.drawMaps();
        self.steps.children[self.row].focus();
      });
      self.steps.appendChild(b);
    });
  };

  Playground.prototype.drawMaps = function () {
    var self = this, r = this.result, t = this.model.tables;
    if (!r) return;
    var block = t.blocks.filter(function (b) { return b.name === self.block; })[0];
    var ax = axes(block.name, r, t);
    var row = block.name === "encoder" ? this.encoderRow : this.row;
    var focused = document.activeElement && this.maps.contains(document.activeElement) ?
      document.activeElement.dataset.index : null;
    this.maps.textContent = "";
    this.maps.appendChild(el("p", {"class": "mha-np-caption"}, block.title +
      (block.name === "encoder" ? "" : "（框出的是第 " + (this.row + 1) + " 步：写出“" +
        t.tgt_tokens[r.written[this.row]] + "”的那一行）")));
    var grid = el("div", {"class": "mha-np-grid"});
    r[block.name].forEach(function (layer, l) {
      layer.forEach(function (m, h) {
        var title = block.layers[l] + " " + t.heads[h];
        var alt = topKeys(m, ax);
        var fig = el("figure", {"class": "mha-np-map", tabindex: "0", "data-index": l + "-" + h,
                                "aria-label": title + "。每个查询最关注的键：" + alt.join("；") +
                                  "。上下方向键逐行查看。"});
        fig.appendChild(el("figcaption", {}, title));
        fig.appendChild(heatmap(m, ax, t, row === undefined ? null : row));
        fig.addEventListener("keydown", function (e) {
          var d = e.key === "ArrowDown" ? 1 : e.key === "ArrowUp" ? -1 : 0;
          if (!d) return;
          e.preventDefault();
          var now = block.name === "encoder" ? self.encoderRow : self.row;
          now = now === undefined || now === null ? (d > 0 ? -1 : m.length) : now;
          now = Math.max(0, Math.min(m.length - 1, now + d));
          if (block.name === "encoder") self.encoderRow = now;
          else { self.row = now; self.drawSteps(); }
          self.drawMaps();
          self.detail.textContent = title + "：" + alt[now];
        });
        grid.appendChild(fig);
      });
    });
    this.maps.appendChild(grid);
    this.maps.appendChild(legend(t));
    if (focused) {
      var again = grid.querySelector('[data-index="' + focused + '"]');
      if (again) again.focus();
    }
  };

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll(".mha-numerals-playground"), function (root) {
      root.mhaPlayground = new Playground(root);
    });
  });
})();
