// spyglass ui: a running run's report, with alerts and counts arriving live.
(function () {
  const cfg = JSON.parse(document.getElementById("live-config").textContent);
  const bar = document.getElementById("live-bar"), list = document.getElementById("live-alerts");
  const esc = s => String(s == null ? "" : s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
  const src = new EventSource(`/api/run/${encodeURIComponent(cfg.run)}/stream?token=${encodeURIComponent(cfg.token)}&after=${cfg.after}`);
  src.addEventListener("alert", ev => {
    const a = JSON.parse(ev.data);
    const art = document.createElement("article");
    art.className = `alert live lv-${esc(a.level)}-edge`;
    art.innerHTML = `<header><span class="badge lv-${esc(a.level)}">${esc(a.level)}</span> <b>${esc(a.title)}</b> ` +
      `<code class="rule">${esc(a.rule_id)}</code></header><p>${esc(a.message)}</p>` +
      `<p class="by">by pid ${esc(a.pid)}: <code>${esc(a.argv.join(" "))}</code>${a.tool_call ? ` <span class="tool">${esc(a.tool_call)}</span>` : ""}</p>`;
    list.prepend(art);
  });
  src.addEventListener("status", ev => {
    const s = JSON.parse(ev.data);
    bar.querySelector(".live-text").textContent =
      `${s.status}: ${s.alerts} alerts, ${(s.event_bytes / 1024).toFixed(0)} KB of events so far`;
    if (s.status !== "running") { src.close(); location.reload(); }
  });
})();
