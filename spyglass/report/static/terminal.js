/* The recorded terminal, in step with the timeline: a line lists the events that happened while it was the
   newest line on screen; clicking a timeline event selects the line printed at that moment. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("spyglass-data").textContent);
  var rows = data.terminal || [];
  var events = data.events || [];
  var box = document.getElementById("term");
  if (!box || !rows.length) return;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function windowOf(i) {
    var from = rows[i][0], to = i + 1 < rows.length ? rows[i + 1][0] : Infinity;
    var hits = [];
    for (var k = 0; k < events.length; k++) {
      var t = events[k][1];
      if (t !== null && t >= from && t < to) hits.push(events[k]);
    }
    return hits;
  }
  var lineEls = [];
  rows.forEach(function (r, i) {
    var line = el("div", "tl" + (r[1] === "operator" ? " op" : ""));
    line.dataset.i = i;
    line.appendChild(el("span", "t", (r[0] / 1000).toFixed(3) + "s"));
    line.appendChild(el("span", "x", (r[1] === "operator" ? "> " : "") + r[2]));
    var n = windowOf(i).length;
    if (n) line.appendChild(el("span", "n", n + " event" + (n > 1 ? "s" : "")));
    box.appendChild(line);
    lineEls.push(line);
  });
  function select(i, scroll) {
    lineEls.forEach(function (l) { l.classList.remove("sel"); });
    Array.from(box.querySelectorAll(".evs")).forEach(function (e) { e.remove(); });
    var line = lineEls[i];
    if (!line) return;
    line.classList.add("sel");
    var hits = windowOf(i);
    if (hits.length) {
      var list = el("div", "evs", hits.slice(0, 50).map(function (e) {
        return "#" + e[0] + " " + e[2] + " " + e[4];
      }).join("\n") + (hits.length > 50 ? "\n… " + (hits.length - 50) + " more" : ""));
      line.after(list);
    }
    if (scroll) line.scrollIntoView({ block: "center" });
  }
  box.addEventListener("click", function (ev) {
    var line = ev.target.closest(".tl");
    if (line) select(Number(line.dataset.i), false);
  });
  function seek(ms) {
    var best = -1;
    for (var i = 0; i < rows.length; i++) { if (rows[i][0] <= ms) best = i; else break; }
    select(best < 0 ? 0 : best, true);
  }
  var body = document.getElementById("tl-body");
  if (body) body.addEventListener("click", function (ev) {
    var tr = ev.target.closest("tr");
    if (!tr || (ev.target.classList && ev.target.classList.contains("pidlink"))) return;
    var seq = Number(tr.firstChild && tr.firstChild.textContent);
    for (var k = 0; k < events.length; k++) {
      if (events[k][0] === seq) { if (events[k][1] !== null) seek(events[k][1]); return; }
    }
  });
  window.spyglassTerminalSeek = seek;
  box.dataset.ready = "1";
})();
