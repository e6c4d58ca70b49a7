/* spyglass report: process tree and timeline, drawn from the embedded JSON. No fetches. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("spyglass-data").textContent);
  var PAGE = 100;

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function category(type) {
    if (type.indexOf("process.") === 0) return "process";
    if (type === "file.read") return "file-read";
    if (type.indexOf("file.") === 0) return "file-change";
    if (type.indexOf("net.") === 0 || type.indexOf("proxy.") === 0) return "net";
    return "security";
  }
  function secs(ms) { return ms === null || ms === undefined ? "-" : (ms / 1000).toFixed(3) + " s"; }

  /* ---------------------------------------------------------------- process tree */
  var byPid = new Map(), kids = new Map(), roots = [];
  data.procs.forEach(function (p) { byPid.set(p.pid, p); });
  data.procs.forEach(function (p) {
    if (p.ppid !== null && byPid.has(p.ppid)) {
      if (!kids.has(p.ppid)) kids.set(p.ppid, []);
      kids.get(p.ppid).push(p);
    } else {
      roots.push(p);
    }
  });
  var alertPath = new Set();
  data.procs.forEach(function (p) {
    if (!p.alerts) return;
    var cur = byPid.get(p.ppid);
    while (cur && !alertPath.has(cur.pid)) { alertPath.add(cur.pid); cur = byPid.get(cur.ppid); }
  });

  var COUNT_WORDS = { "file-read": "reads", "file-change": "file changes", "net": "network", "security": "sensitive" };

  function countsText(n) {
    var parts = [];
    Object.keys(COUNT_WORDS).forEach(function (k) { if (n[k]) parts.push(n[k] + " " + COUNT_WORDS[k]); });
    return parts.join(", ");
  }

  function setOpen(li, open) {
    var btn = li.querySelector(":scope > .row > .tog");
    if (!btn) return;
    var ul = li.querySelector(":scope > ul");
    if (open && !ul) {
      ul = childList(li._children);
      li.appendChild(ul);
    }
    if (ul) ul.hidden = !open;
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    btn.textContent = open ? "▾" : "▸";
  }

  function nodeEl(p) {
    var li = el("li", "node" + (p.alerts ? " has-alert" : ""));
    li.dataset.pid = p.pid;
    var row = el("div", "row");
    var children = kids.get(p.pid) || [];
    li._children = children;
    if (children.length) {
      var tog = el("button", "tog", "▸");
      tog.type = "button";
      tog.setAttribute("aria-expanded", "false");
      tog.title = children.length + " child process" + (children.length > 1 ? "es" : "");
      tog.addEventListener("click", function () { setOpen(li, tog.getAttribute("aria-expanded") !== "true"); });
      row.appendChild(tog);
    } else {
      row.appendChild(el("span", "tog-none", "•"));
    }
    var label = el("span", "label");
    label.appendChild(el("span", "pid", p.pid));
    label.appendChild(el("code", "cmd", p.cmd));
    row.appendChild(label);
    if (p.alerts) row.appendChild(el("span", "badge lv-high", p.alerts + " alert" + (p.alerts > 1 ? "s" : "")));
    row.appendChild(el("span", "exit" + (p.bad ? " bad" : ""), p.exit));
    var ct = countsText(p.n);
    if (ct) row.appendChild(el("span", "counts", ct));
    if (children.length) row.appendChild(el("span", "counts", children.length + (children.length > 1 ? " children" : " child")));
    li.appendChild(row);
    label.addEventListener("click", function () {
      var det = li.querySelector(":scope > .details");
      if (det) { det.hidden = !det.hidden; return; }
      li.insertBefore(detailsEl(p), li.querySelector(":scope > ul"));
    });
    return li;
  }

  function detailsEl(p) {
    var d = el("div", "details");
    var dl = el("dl");
    function add(k, v) { if (v === null || v === undefined || v === "") return; dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", v)); }
    add("executable", p.exe);
    add("working directory", p.cwd);
    add("started", secs(p.t) + " after the run began");
    add("ran for", p.dur !== null ? secs(p.dur) : null);
    add("result", p.exit);
    add("events", countsText(p.n) || "none beyond process events");
    d.appendChild(dl);
    var b = el("button", "link", "show its events in the timeline");
    b.type = "button";
    b.addEventListener("click", function () { showPid(p.pid); });
    d.appendChild(b);
    return d;
  }

  var CHUNK = 100;

  function appendChunk(ul, list, from) {
    var end = Math.min(list.length, from + CHUNK);
    for (var i = from; i < end; i++) ul.appendChild(nodeEl(list[i]));
    if (end < list.length) {
      var li = el("li", "node more");
      var b = el("button", "link", "show " + Math.min(CHUNK, list.length - end) + " more of " +
        (list.length - end) + " further processes");
      b.type = "button";
      b.addEventListener("click", function () { ul.removeChild(li); appendChunk(ul, list, end); });
      li.appendChild(b);
      ul.appendChild(li);
    }
  }

  function childList(children) {
    var ul = el("ul");
    var routine = [], normal = [];
    children.forEach(function (c) { (c.routine ? routine : normal).push(c); });
    appendChunk(ul, normal, 0);
    if (routine.length) {
      var li = el("li", "node group");
      var row = el("div", "row");
      var tog = el("button", "tog", "▸");
      tog.type = "button";
      tog.setAttribute("aria-expanded", "false");
      var names = Array.from(new Set(routine.map(function (r) { return (r.exe || r.cmd).split("/").pop(); })));
      row.appendChild(tog);
      row.appendChild(el("span", "label muted", routine.length + " routine helper process" +
        (routine.length > 1 ? "es" : "") + " (" + names.slice(0, 5).join(", ") + ")"));
      li.appendChild(row);
      li._children = routine;
      tog.addEventListener("click", function () {
        var open = tog.getAttribute("aria-expanded") !== "true";
        var sub = li.querySelector(":scope > ul");
        if (open && !sub) {
          sub = el("ul");
          appendChunk(sub, routine, 0);
          li.appendChild(sub);
        }
        if (sub) sub.hidden = !open;
        tog.setAttribute("aria-expanded", open ? "true" : "false");
        tog.textContent = open ? "▾" : "▸";
      });
      ul.appendChild(li);
    }
    return ul;
  }

  function openWhere(li, pred) {
    if (li.dataset.pid && pred(Number(li.dataset.pid))) {
      setOpen(li, true);
      var ul = li.querySelector(":scope > ul");
      if (ul) Array.from(ul.children).forEach(function (c) { openWhere(c, pred); });
    }
  }

  function drawTree() {
    var box = $("tree");
    box.textContent = "";
    if (!roots.length) { box.appendChild(el("p", "na", "No process was recorded.")); return; }
    var ul = childList(roots);
    ul.className = "root";
    box.appendChild(ul);
    Array.from(ul.children).forEach(function (li) {
      setOpen(li, true);
      var sub = li.querySelector(":scope > ul");
      if (sub) Array.from(sub.children).forEach(function (c) { openWhere(c, function (pid) { return alertPath.has(pid); }); });
    });
  }

  function expandAll(open) {
    var box = $("tree");
    var guard = 0;
    var pending = Array.from(box.querySelectorAll("li.node"));
    while (pending.length && guard < 20000) {
      var li = pending.shift();
      guard++;
      var btn = li.querySelector(":scope > .row > .tog");
      if (!btn) continue;
      if (li.classList.contains("group")) {
        if ((btn.getAttribute("aria-expanded") === "true") !== open) btn.click();
      } else {
        setOpen(li, open);
      }
      if (open) {
        var ul = li.querySelector(":scope > ul");
        if (ul) pending = pending.concat(Array.from(ul.children));
      }
    }
  }

  /* ---------------------------------------------------------------- timeline */
  var events = data.events;
  var state = { type: "", pid: "", text: "", failed: false, alerts: false, noise: false, page: 0 };
  var focusSeq = null;
  var matches = [];

  function fillTypes() {
    var sel = $("f-type");
    var g1 = el("optgroup"); g1.label = "kinds";
    data.categories.forEach(function (c) { var o = el("option", "", c); o.value = "cat:" + c; g1.appendChild(o); });
    sel.appendChild(g1);
    var g2 = el("optgroup"); g2.label = "event types";
    data.types.forEach(function (t) { var o = el("option", "", t); o.value = "type:" + t; g2.appendChild(o); });
    sel.appendChild(g2);
  }

  function filter() {
    var type = state.type, pid = state.pid.trim(), text = state.text.trim().toLowerCase();
    var pidNum = pid === "" ? null : Number(pid);
    matches = [];
    for (var i = 0; i < events.length; i++) {
      var e = events[i];
      if (type) {
        if (type.indexOf("cat:") === 0) { if (category(e[2]) !== type.slice(4)) continue; }
        else if (e[2] !== type.slice(5)) continue;
      }
      if (pidNum !== null && e[3] !== pidNum) continue;
      if (!state.noise && e[7] && e[0] !== focusSeq) continue;
      if (state.failed && !e[5]) continue;
      if (state.alerts && !e[6]) continue;
      if (text && String(e[4]).toLowerCase().indexOf(text) < 0) continue;
      matches.push(i);
    }
    var pages = Math.max(1, Math.ceil(matches.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
  }

  function drawTimeline() {
    var body = $("tl-body");
    body.textContent = "";
    var start = state.page * PAGE, end = Math.min(matches.length, start + PAGE);
    var frag = document.createDocumentFragment();
    for (var k = start; k < end; k++) {
      var e = events[matches[k]];
      var tr = el("tr", (e[6] ? "hit" : "") + (e[0] === focusSeq ? " focus" : ""));
      tr.dataset.seq = e[0];
      tr.appendChild(el("td", "r", e[0]));
      tr.appendChild(el("td", "r", e[1] === null ? "-" : (e[1] / 1000).toFixed(3)));
      var tdp = el("td", "r");
      var pb = el("button", "link pidlink", e[3]);
      pb.type = "button";
      pb.dataset.pid = e[3];
      tdp.appendChild(pb);
      tr.appendChild(tdp);
      var tdt = el("td");
      tdt.appendChild(el("span", "ty c-" + category(e[2]), e[2]));
      tr.appendChild(tdt);
      var tdw = el("td");
      tdw.appendChild(el("code", "", e[4]));
      if (e[5]) tdw.appendChild(el("span", "err", " " + e[5]));
      tr.appendChild(tdw);
      frag.appendChild(tr);
    }
    body.appendChild(frag);
    var pages = Math.max(1, Math.ceil(matches.length / PAGE));
    $("tl-page").textContent = "page " + (state.page + 1) + " of " + pages;
    $("tl-prev").disabled = state.page === 0;
    $("tl-next").disabled = state.page >= pages - 1;
    var st = matches.length + " matching of " + events.length + " events in this report";
    if (data.eventsTotal > events.length) st += " (" + data.eventsTotal.toLocaleString("en") + " in the run)";
    if (matches.length) st += "; showing " + (start + 1) + "–" + end;
    $("tl-status").textContent = st;
  }

  function refresh(resetPage) {
    if (resetPage) state.page = 0;
    filter();
    drawTimeline();
  }

  function showPid(pid) {
    focusSeq = null;
    state.type = ""; state.text = ""; state.failed = false; state.alerts = false; state.pid = String(pid);
    $("f-type").value = ""; $("f-text").value = ""; $("f-failed").checked = false; $("f-alerts").checked = false;
    $("f-pid").value = String(pid);
    refresh(true);
    $("timeline").scrollIntoView();
  }

  function showSeq(seq, pid) {
    /* jump to the alert's event: clear the filters, open its page, mark and scroll to its row */
    focusSeq = seq;
    state = { type: "", pid: "", text: "", failed: false, alerts: false, noise: state.noise, page: 0 };
    $("tl-filters").reset(); $("f-noise").checked = state.noise;
    filter();
    var k = -1;
    for (var i = 0; i < matches.length; i++) { if (events[matches[i]][0] === seq) { k = i; break; } }
    if (k < 0) { focusSeq = null; showPid(pid); return; }
    state.page = Math.floor(k / PAGE);
    drawTimeline();
    var row = document.querySelector("#tl-body tr[data-seq='" + seq + "']");
    if (row) row.scrollIntoView({ block: "center" });
  }

  function wire() {
    $("f-type").addEventListener("change", function (ev) { state.type = ev.target.value; refresh(true); });
    $("f-pid").addEventListener("input", function (ev) { state.pid = ev.target.value; refresh(true); });
    $("f-text").addEventListener("input", function (ev) { state.text = ev.target.value; refresh(true); });
    $("f-failed").addEventListener("change", function (ev) { state.failed = ev.target.checked; refresh(true); });
    $("f-noise").addEventListener("change", function (ev) { state.noise = ev.target.checked; refresh(true); });
    $("f-alerts").addEventListener("change", function (ev) { state.alerts = ev.target.checked; refresh(true); });
    $("f-clear").addEventListener("click", function () { $("tl-filters").reset(); focusSeq = null; state = { type: "", pid: "", text: "", failed: false, alerts: false, noise: false, page: 0 }; refresh(true); });
    $("tl-prev").addEventListener("click", function () { if (state.page > 0) { state.page--; drawTimeline(); } });
    $("tl-next").addEventListener("click", function () { state.page++; filter(); drawTimeline(); });
    $("tl-body").addEventListener("click", function (ev) {
      var t = ev.target;
      if (t.classList && t.classList.contains("pidlink")) showPid(t.dataset.pid);
    });
    Array.from(document.querySelectorAll(".show-pid")).forEach(function (b) {
      b.addEventListener("click", function () {
        if (b.dataset.seq) showSeq(Number(b.dataset.seq), b.dataset.pid); else showPid(b.dataset.pid);
      });
    });
    $("tree-expand").addEventListener("click", function () { expandAll(true); });
    $("tree-collapse").addEventListener("click", function () { expandAll(false); });
  }

  drawTree();
  fillTypes();
  wire();
  refresh(true);
  document.body.dataset.ready = "1";
})();
