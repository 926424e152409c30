// The header's alert badge, on every page: the number of alerts firing anywhere in the cluster
// (GET /api/v1/cluster/alerts, polled every 3 s), hidden while none fires. A click opens a
// list of what fires (and what is pending) where; Escape or a click outside closes it.
import { getJSON, type Labels } from "./api";
import { clear, h } from "./dom";
import { fmtDuration, fmtNum } from "./format";

/** Alert is one alert of /api/v1/cluster/alerts (docs/alerts.md). */
export interface Alert {
  name: string;
  state: "pending" | "firing";
  severity: string;
  node: string;
  labels: Labels;
  value: number;
  op: string;
  threshold: number;
  since_ms: number;
  summary: string;
}

interface ClusterAlerts {
  alerts: Alert[];
  nodes?: { node: string; status: string; error?: string; firing: number }[];
}

const pollMs = 3000;

/** alertsBadge returns the header's badge and its list; it polls for the page's lifetime. */
export function alertsBadge(): HTMLElement {
  const badge = h("button", {
    type: "button", class: "alerts-badge", hidden: true, "aria-haspopup": "true", "aria-expanded": "false",
    "aria-controls": "alerts-panel", title: "Firing alerts in the cluster: show what fires where",
  });
  const panel = h("div", { id: "alerts-panel", class: "alerts-panel", role: "dialog", "aria-label": "Alerts", hidden: true });
  const wrap = h("span", { class: "alerts", role: "status", "aria-live": "polite" }, badge, panel);
  let last: ClusterAlerts = { alerts: [] };

  const setOpen = (open: boolean) => {
    panel.hidden = !open;
    badge.setAttribute("aria-expanded", String(open));
    if (open) {
      const hdr = wrap.closest("header");
      panel.style.top = `${Math.round((hdr ?? wrap).getBoundingClientRect().bottom)}px`;
      drawList(panel, last);
    }
  };
  badge.addEventListener("click", () => setOpen(panel.hidden !== false));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !panel.hidden) {
      setOpen(false);
      badge.focus();
    }
  });
  document.addEventListener("click", (e) => {
    if (!panel.hidden && !wrap.contains(e.target as Node)) setOpen(false);
  });

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      last = await getJSON<ClusterAlerts>("/api/v1/cluster/alerts", { signal: AbortSignal.timeout(pollMs + 5000) });
      const firing = (last.alerts ?? []).filter((a) => a.state === "firing");
      const nodes = new Set(firing.map((a) => a.node));
      badge.dataset.firing = String(firing.length);
      badge.hidden = firing.length === 0;
      badge.textContent = firing.length === 0 ? "" : `⚠ ${firing.length} alert${firing.length > 1 ? "s" : ""}`;
      badge.classList.toggle("critical", firing.some((a) => a.severity === "critical"));
      badge.title = firing.length === 0 ? "" : `${firing.length} firing on ${[...nodes].sort().join(", ")}: show what fires where`;
      if (firing.length === 0) setOpen(false);
      else if (!panel.hidden) drawList(panel, last);
    } catch {
      /* the connection badge tells when this agent does not answer */
    } finally {
      busy = false;
    }
  }
  window.setInterval(refresh, pollMs);
  refresh();
  return wrap;
}

function labelText(l: Labels): string {
  const parts = Object.entries(l ?? {}).filter(([k]) => k !== "metric").map(([k, v]) => `${k}=${v}`);
  const m = l?.metric;
  return (m ?? "") + (parts.length ? `{${parts.join(", ")}}` : "");
}

function drawList(panel: HTMLElement, ans: ClusterAlerts) {
  clear(panel);
  const alerts = ans.alerts ?? [];
  const now = Date.now();
  panel.append(h("h2", {}, "Alerts in the cluster"));
  if (alerts.length === 0) panel.append(h("p", { class: "muted" }, "Nothing fires or is pending."));
  else {
    panel.append(h("table", { class: "alerts-list" },
      h("thead", {}, h("tr", {}, ["State", "Node", "Alert", "Series", "Value", "For"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, alerts.map((a) => h("tr", { class: `${a.state} ${a.severity}` },
        h("td", {}, a.state),
        h("td", {}, a.node),
        h("td", { title: a.summary }, a.name, h("span", { class: "sev" }, ` ${a.severity}`)),
        h("td", { class: "mono" }, labelText(a.labels)),
        h("td", { class: "num" }, `${fmtNum(a.value)} ${a.op} ${fmtNum(a.threshold)}`),
        h("td", {}, fmtDuration(Math.max(0, (now - a.since_ms) / 1000))),
      ))),
    ));
  }
  const bad = (ans.nodes ?? []).filter((n) => n.status !== "ok");
  if (bad.length) panel.append(h("p", { class: "muted" }, `Not answering: ${bad.map((n) => n.node).join(", ")}`));
}
