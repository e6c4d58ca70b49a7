// spyglass ui: the run list, kept current by server-sent events.
(function () {
  const token = document.body.dataset.token, q = document.body.dataset.query;
  const body = document.getElementById("runs-body"), dot = document.getElementById("live-dot");
  const esc = s => String(s == null ? "-" : s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
  function row(r) {
    const lv = r.max_level ? `<span class="badge lv-${esc(r.max_level)}">${esc(r.max_level)}</span>` : "";
    const top = r.top_alert ? ` <code class="rule">${esc(r.top_alert.rule_id)}</code>` : "";
    return `<tr data-run="${esc(r.id)}" data-status="${esc(r.status)}"><td><a href="/run/${encodeURIComponent(r.id)}?token=${encodeURIComponent(token)}">${esc(r.id)}</a></td>` +
      `<td><span class="pill st-${esc(r.status)}">${esc(r.status)}</span></td><td>${esc(r.agent_id)}</td><td>${esc(r.task)}</td>` +
      `<td class="r">${esc(r.events)}</td><td class="alerts">${esc(r.alerts)} ${lv}${top}</td><td class="cmd"><code>${esc(r.command)}</code></td></tr>`;
  }
  const src = new EventSource(`/api/runs/stream?token=${encodeURIComponent(token)}${q}`);
  src.addEventListener("open", () => dot.classList.add("on"));
  src.addEventListener("error", () => dot.classList.remove("on"));
  src.addEventListener("runs", ev => { body.innerHTML = JSON.parse(ev.data).map(row).join(""); });
  document.body.dataset.ready = "1";
})();
