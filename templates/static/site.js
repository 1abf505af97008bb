/* archviz explorer: code excerpts, search, keyboard navigation. Local, no network: data comes from script files. */
(function () {
  "use strict";
  var doc = document, html = doc.documentElement;
  var root = html.getAttribute("data-root") || "";

  // ---- code excerpts: built into the page at build time; scroll each to its marked line
  function renderExcerpts() {
    var boxes = doc.querySelectorAll(".excerpt[data-code]");
    for (var b = 0; b < boxes.length; b++) {
      var mark = boxes[b].querySelector("tr.mark");
      if (mark) boxes[b].scrollTop = Math.max(0, mark.offsetTop - boxes[b].clientHeight / 3);
    }
    if (location.hash) {
      var t = doc.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (t) {
        var d = t.closest("details");
        if (d) d.open = true;
        t.scrollIntoView({block: "center"});
      }
    }
  }

  // ---- search over every node of every model (search.js)
  var S = window.ARCHVIZ_SEARCH || {models: [], nodes: []};
  var input = doc.getElementById("q"), results = doc.getElementById("results");
  var hits = [], sel = -1;

  // "0-2,4" or "3,5,…,41" (archviz.format.ranges: the two numbers before an ellipsis set its step)
  function inRanges(spec, n) {
    var parts = spec.split(",");
    for (var i = 0; i < parts.length; i++) {
      if (parts[i] === "\u2026") {
        var b = +parts[i - 1], step = b - +parts[i - 2];
        if (step > 0 && n > b && n <= +parts[i + 1] && (n - b) % step === 0) return true;
        continue;
      }
      var ab = parts[i].split("-");
      if (ab.length === 1 ? +ab[0] === n : n >= +ab[0] && n <= +ab[1]) return true;
    }
    return false;
  }
  function isNum(q) { return /^\d+$/.test(q); }
  function segEq(p, q) {
    if (p.charAt(0) === "{") return isNum(q) && inRanges(p.slice(1, -1), +q);
    return p === q;
  }
  function segPart(p, q, mode) {
    if (p.charAt(0) === "{") return q === "" || (isNum(q) && inRanges(p.slice(1, -1), +q));
    if (mode === "suffix") return p.slice(p.length - q.length) === q;
    if (mode === "prefix") return p.slice(0, q.length) === q;
    return p.indexOf(q) >= 0;
  }
  // Does some module path the pattern stands for (layers.{0-3}.attn.wo_b) contain q?
  function pathMatch(pattern, q) {
    if (pattern.toLowerCase().indexOf(q) >= 0) return true;
    var ps = pattern.toLowerCase().split("."), qs = q.split(".");
    if (qs.length === 1) return ps.some(function (p) { return segPart(p, q, "any"); });
    for (var s = 0; s + qs.length <= ps.length; s++) {
      var ok = true;
      for (var i = 0; i < qs.length && ok; i++) {
        if (i === 0) ok = segPart(ps[s], qs[0], "suffix");
        else if (i === qs.length - 1) ok = segPart(ps[s + i], qs[i], "prefix");
        else ok = segEq(ps[s + i], qs[i]);
      }
      if (ok) return true;
    }
    return false;
  }
  // Is q one of the module paths the pattern stands for (layers.{0-3}.attn.wo_b, q = layers.2.attn.wo_b)? 2: yes;
  // 1: q is the start of one (whole segments, the last one maybe cut short); 0: neither.
  function pathGrade(pattern, q) {
    var ps = pattern.toLowerCase().split("."), qs = q.split(".");
    if (qs.length > ps.length) return 0;
    for (var i = 0; i < qs.length - 1; i++) if (!segEq(ps[i], qs[i])) return 0;
    var last = qs.length - 1;
    if (segEq(ps[last], qs[last])) return qs.length === ps.length ? 2 : 1;
    return ps[last].charAt(0) !== "{" && ps[last].slice(0, qs[last].length) === qs[last] ? 1 : 0;
  }
  // Every name a node answers to: its module path patterns and the checkpoint tensor names of its modules.
  function names(node) { return node[8] ? node[5].concat(node[8]) : node[5]; }
  // Ranks, best first: an exact module path or checkpoint name (the most specific node holding it first), a path
  // prefix, the title (exact, prefix, anywhere), the class, a path or checkpoint name containing the text.
  function score(node, tokens) {
    var title = String(node[1]).toLowerCase(), cls = String(node[2]).toLowerCase(), total = 0, all = names(node);
    for (var i = 0; i < tokens.length; i++) {
      var t = tokens[i], s = 0;
      if (t.indexOf(".") > 0) {
        for (var j = 0; j < all.length && s < 20; j++) {
          var g = pathGrade(all[j], t);
          if (g === 2) s = 20 + Math.min(+node[6] || 0, 99) / 100 - (node[7] ? 0.5 : 0);
          else if (g === 1) s = Math.max(s, 10);
        }
      }
      if (s) { total += s; continue; }
      if (title === t) s = 8;
      else if (title.indexOf(t) === 0) s = 5;
      else if (title.indexOf(t) >= 0) s = 3;
      if (cls.indexOf(t) >= 0) s = Math.max(s, cls === t ? 4 : 2);
      if (!s) {
        for (var j = 0; j < all.length; j++) {
          if (pathMatch(all[j], t)) { s = 1; break; }
        }
      }
      if (!s) return 0;
      total += s;
    }
    return total + (tokens.length > 1 && title === tokens.join(" ") ? 8 : 0);  // the whole title, word for word
  }
  function fmt(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function search(q) {
    var tokens = q.toLowerCase().split(/\s+/).filter(Boolean);
    if (!tokens.length) return [];
    var out = [];
    for (var i = 0; i < S.nodes.length; i++) {
      var s = score(S.nodes[i], tokens);
      if (s) out.push([s, S.nodes[i]]);
    }
    out.sort(function (a, b) { return b[0] - a[0] || b[1][4] - a[1][4] || (a[1][1] < b[1][1] ? -1 : 1); });
    return out.slice(0, 50).map(function (x) { return x[1]; });
  }
  function show() {
    results.textContent = "";
    if (!input.value.trim()) { results.hidden = true; return; }
    if (!hits.length) {
      var li = doc.createElement("li");
      li.className = "empty";
      li.textContent = "No module matches.";
      results.appendChild(li);
    }
    hits.forEach(function (n, i) {
      var li = doc.createElement("li"), a = doc.createElement("a"), t = doc.createElement("span"),
          meta = doc.createElement("span");
      if (i === sel) li.className = "sel";
      a.href = root + n[3];
      t.className = "t";
      t.textContent = n[1];
      meta.className = "meta";
      var model = S.models[n[0]] ? S.models[n[0]][1] : "";
      var path = n[5][0] || "", more = n[5].length > 1 ? " +" + (n[5].length - 1) : "";
      meta.textContent = [model, n[2], (n[9] ? n[9] + " = " : "") + fmt(n[4]), path + more]
        .filter(function (x) { return x; }).join(" · ");
      a.appendChild(t);
      a.appendChild(meta);
      li.appendChild(a);
      results.appendChild(li);
    });
    results.hidden = false;
  }
  if (input && results) {
    input.addEventListener("input", function () { hits = search(input.value); sel = hits.length ? 0 : -1; show(); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "ArrowDown") { sel = Math.min(hits.length - 1, sel + 1); show(); e.preventDefault(); }
      else if (e.key === "ArrowUp") { sel = Math.max(0, sel - 1); show(); e.preventDefault(); }
      else if (e.key === "Enter") { if (hits[sel < 0 ? 0 : sel]) location.href = root + hits[sel < 0 ? 0 : sel][3]; }
      else if (e.key === "Escape") { input.value = ""; hits = []; show(); input.blur(); }
    });
    doc.addEventListener("click", function (e) { if (!e.target.closest(".search")) results.hidden = true; });
  }

  // ---- keyboard navigation
  var list = doc.querySelector("ol.nav-list"), cur = -1;
  function items() { return list ? list.querySelectorAll(":scope > li") : []; }
  function select(i) {
    var its = items();
    if (!its.length) return;
    cur = Math.max(0, Math.min(its.length - 1, i));
    for (var k = 0; k < its.length; k++) its[k].classList.toggle("sel", k === cur);
    var a = its[cur].querySelector("a");
    if (a) a.focus({preventScroll: true});
    its[cur].scrollIntoView({block: "nearest"});
  }
  var help = doc.getElementById("help"), helpBtn = doc.getElementById("help-toggle");
  if (helpBtn && help) helpBtn.addEventListener("click", function () { help.hidden = !help.hidden; });
  doc.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
    var k = e.key;
    if (k === "/") { if (input) { input.focus(); input.select(); e.preventDefault(); } }
    else if (k === "j" || (k === "ArrowDown" && list)) { select(cur + 1); e.preventDefault(); }
    else if (k === "k" || (k === "ArrowUp" && list)) { select(cur - 1); e.preventDefault(); }
    else if ((k === "Enter" || k === "l" || k === "o") && cur >= 0) {
      var a = items()[cur] && items()[cur].querySelector("a");
      if (a) { location.href = a.href; e.preventDefault(); }
    }
    else if (k === "u") { var up = html.getAttribute("data-up"); if (up) location.href = up; }
    else if (k === "g") { var m = doc.querySelector("header.top a.model"); if (m) location.href = m.href; }
    else if (k === "?") { if (help) help.hidden = !help.hidden; }
  });

  // A dataflow box links to what it expands to (a function's ops, a step's entry): open the <details> it is in
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1)), t = id && doc.getElementById(id);
    for (; t; t = t.parentElement) if (t.tagName === "DETAILS") t.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  renderExcerpts();
})();

/* archviz gallery: the index table sorted by a click on a heading and filtered as one types; the compare page's pair
   switched from the figures in the page. The table reads as it is without this script. */
(function () {
  "use strict";
  var doc = document;
  function sortValue(td, numeric) {
    if (!numeric) return (td.textContent || "").trim().toLowerCase();
    var v = td.getAttribute("data-sort");
    return v === null || v === "" ? null : parseFloat(v);
  }
  function sortBy(table, col, th) {
    var numeric = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    var ths = table.tHead.rows[0].cells;
    for (var i = 0; i < ths.length; i++) ths[i].removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir);
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var sign = dir === "ascending" ? 1 : -1;
    rows.sort(function (a, b) {
      var x = sortValue(a.cells[col], numeric), y = sortValue(b.cells[col], numeric);
      if (x === null && y === null) return 0;
      if (x === null) return 1;  // blanks last, whichever the direction
      if (y === null) return -1;
      return x < y ? -sign : x > y ? sign : 0;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  var tables = doc.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var ths = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function (th, col) {
      var b = doc.createElement("button");
      b.type = "button";
      b.className = "sort";
      while (th.firstChild) b.appendChild(th.firstChild);
      th.appendChild(b);
      b.addEventListener("click", function () { sortBy(table, col, th); });
    });
  });
  var q = doc.getElementById("gallery-q"), table = doc.getElementById("gallery");
  if (q && table) {
    q.parentNode.hidden = false;
    var shown = doc.getElementById("gallery-shown");
    q.addEventListener("input", function () {
      var words = q.value.toLowerCase().split(/\s+/).filter(Boolean), n = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var text = r.textContent.toLowerCase();
        var ok = words.every(function (w) { return text.indexOf(w) >= 0; });
        r.hidden = !ok;
        if (ok) n++;
      });
      if (shown) shown.textContent = words.length ? n + " shown" : "";
    });
  }
  var data = doc.getElementById("gallery-data"), cmp = doc.getElementById("compare");
  if (data && cmp) {
    var D = JSON.parse(data.textContent), sa = doc.getElementById("cmp-a"), sb = doc.getElementById("cmp-b");
    var ratio = function (x, y) {
      if (x === null || y === null) return "\u2014";
      if (!x) return y ? "\u221e" : "\u2014";
      return (y / x).toPrecision(3).replace(/\.?0+$/, "").replace(/\.?0+e/, "e") + "\u00d7";
    };
    var fill = function () {
      var a = D[sa.value], b = D[sb.value];
      if (!a || !b) return;
      [["a", a], ["b", b]].forEach(function (s) {
        doc.getElementById("cmp-" + s[0] + "-name").textContent = s[1].name;
        var link = doc.getElementById("cmp-" + s[0] + "-link");
        link.textContent = s[1].name;
        link.href = s[1].slug + "/index.html";
      });
      Array.prototype.forEach.call(cmp.tBodies[0].rows, function (r) {
        var k = r.getAttribute("data-fig"), x = a[k], y = b[k];
        var text = function (v) { return v && typeof v === "object" ? v.text : v; };
        r.querySelector(".cmp-a").textContent = text(x);
        r.querySelector(".cmp-b").textContent = text(y);
        r.querySelector(".cmp-r").textContent = x && typeof x === "object" ? ratio(x.value, y.value) : "";
      });
    };
    var params = new URLSearchParams(location.search);
    if (D[params.get("a")]) sa.value = params.get("a");
    if (D[params.get("b")]) sb.value = params.get("b");
    sa.addEventListener("change", fill);
    sb.addEventListener("change", fill);
    fill();
  }
})();
