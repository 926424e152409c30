// Process page: one process's CPU, memory and I/O charts and its application metrics, live.
import { exactSelector, getJSON, num, originLabels, seriesName, type Process } from "../api";
import { drawSpark, TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtDuration, fmtUnit, guessUnit } from "../format";
import type { Ctx } from "../main";
import { align, Store, type Track } from "../store";
import { heading, message } from "../widgets";

const WINDOW_MS = 15 * 60e3;
/** MAX_APP_ROWS bounds the application metrics table; the Metrics page lists any number. */
const MAX_APP_ROWS = 200;

export async function processPage(ctx: Ctx) {
  const pid = Number(ctx.path.split("/")[2]);
  const root = ctx.root;
  const ps = await getJSON<{ processes: Process[] }>("/api/v1/processes");
  if (!ctx.alive()) return;
  const p = ps.processes.find((x) => x.pid === pid);
  root.append(heading(p ? `${p.name} (pid ${pid})` : `Process ${pid}`));
  if (!p) {
    root.append(message("info", `No process ${pid} on this node now: it may have exited. `, h("a", { href: "/processes" }, "All processes")));
    ctx.ready();
    return;
  }
  const parent = ps.processes.find((x) => x.pid === p.ppid);
  root.append(h("dl", { class: "facts" },
    h("dt", {}, "Command line"), h("dd", { class: "mono" }, (p.cmdline ?? []).join(" ") || "(kernel thread)"),
    h("dt", {}, "Parent"), h("dd", {}, parent ? h("a", { href: `/process/${parent.pid}` }, `${parent.name} (${parent.pid})`) : String(p.ppid)),
    h("dt", {}, "User id"), h("dd", {}, String(p.uid)),
    h("dt", {}, "Cgroup"), h("dd", { class: "mono" }, p.cgroup || "–"),
    h("dt", {}, "Started"), h("dd", {}, `${new Date(p.start_time).toLocaleString()} (${fmtDuration((Date.now() - p.start_time) / 1000)} ago)`),
    h("dt", {}, "Threads"), h("dd", {}, String(p.threads)),
    p.appname ? [h("dt", {}, "Application"), h("dd", {}, p.appname, " · ",
      h("a", { href: `/series?match=${encodeURIComponent(`{appname=${JSON.stringify(p.appname)}}`)}` }, "series of every instance"))] : null,
  ));
  root.append(h("p", { class: "toolbar" },
    h("a", { class: "button", href: `/series?match=${encodeURIComponent(`{pid="${pid}"}`)}` }, "All its series"),
    h("a", { class: "button", href: `/series/chart?match=${encodeURIComponent(`{pid="${pid}", metric=~"process\\\\.(cpu|memory|io)\\\\..*"}`)}&window=1h` }, "Its charts over 1 h")));

  const grid = h("section", { class: "charts", "aria-label": "Process charts" });
  root.append(grid);
  const cpuChart = new TimeChart(grid, { group: ctx.charts, title: "CPU (100 % = one core)", unit: "%" });
  // Virtual size is often 100× RSS: on one axis it flattens RSS to a line at 0.
  const memChart = new TimeChart(grid, { group: ctx.charts, title: "Memory (resident, swap)", unit: "bytes" });
  const vszChart = new TimeChart(grid, { group: ctx.charts, title: "Virtual size", unit: "bytes" });
  const ioChart = new TimeChart(grid, { group: ctx.charts, title: "Disk I/O", unit: "bytes/s" });
  ctx.cleanup(() => [cpuChart, memChart, vszChart, ioChart].forEach((c) => c.destroy()));

  const appHead = h("h2", {}, "Application metrics");
  const appBody = h("div");
  root.append(appHead, appBody);

  const store = new Store(WINDOW_MS, true);
  const lines = (names: [string, string][], scale = 1) => {
    const ts = names.map(([m]) => store.get(m)).filter((t): t is Track => !!t);
    if (ts.length === 0) return null;
    const d = align(ts);
    const ys = (d.slice(1) as (number | null | undefined)[][]).map((l) => l.map((v) => (v == null ? v : v * scale)));
    return { data: [d[0], ...ys] as [number[], ...(number | null | undefined)[][]], labels: ts.map((t) => names.find(([m]) => m === t.labels.metric)![1]) };
  };
  const sparks = new Map<string, HTMLCanvasElement>();
  let appKeys: string | null = null;
  const draw = () => {
    const c = lines([["process.cpu.user_ms", "user"], ["process.cpu.system_ms", "system"]], 0.1);
    if (c) cpuChart.set(c.data, c.labels);
    const m = lines([["process.memory.rss", "resident (RSS)"], ["process.memory.swap", "swap"]]);
    if (m) memChart.set(m.data, m.labels);
    const vs = lines([["process.memory.vsize", "virtual"]]);
    if (vs) vszChart.set(vs.data, vs.labels);
    const io = lines([["process.io.read_bytes", "read"], ["process.io.write_bytes", "written"]]);
    if (io) ioChart.set(io.data, io.labels);

    const appAll = store.find((l) => !l.metric?.startsWith("process."));
    const app = appAll.slice(0, MAX_APP_ROWS);
    const keys = app.map((t) => t.key).join("\n");
    if (keys !== appKeys) {
      appKeys = keys;
      sparks.clear();
      if (app.length === 0) {
        appBody.replaceChildren(message("info", p.metrics ? "This process exports metrics but none are live." : "This process exports no metrics (no CANTAL_PATH, rrdd plugin or pushes)."));
      } else {
        const tbody = h("tbody");
        for (const t of app) {
          const cv = h("canvas", { class: "spark", width: 120, height: 20, "aria-hidden": "true" });
          sparks.set(t.key, cv);
          tbody.append(h("tr", { "data-key": t.key },
            h("td", {}, h("a", { href: `/series/chart?match=${encodeURIComponent(exactSelector(t.labels))}` }, seriesName(t.labels, originLabels)),
              t.labels.appname ? [" ", h("a", { class: "tag", title: "This metric in every instance of the application, with their sum", href: `/series/chart?match=${encodeURIComponent(instancesSelector(t.labels))}&sum=1` }, "all instances")] : null),
            h("td", {}, t.kind), h("td", { class: "num val" }), h("td", {}, cv)));
        }
        appBody.replaceChildren(h("table", { class: "grid" }, h("caption", {}, appAll.length > app.length
          ? [`${appAll.length} series; the first ${app.length} here, `, h("a", { href: `/series?match=${encodeURIComponent(`{pid="${pid}"}`)}` }, "all of them on the Metrics page")]
          : `${app.length} series`),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Series"), h("th", { scope: "col" }, "Kind"), h("th", { scope: "col", class: "num" }, "Value"), h("th", { scope: "col" }, "Last 15 min"))), tbody));
      }
    }
    for (const t of app) {
      const row = appBody.querySelector(`tr[data-key="${CSS.escape(t.key)}"] .val`);
      if (row) row.innerHTML = esc(valueText(t));
      const cv = sparks.get(t.key);
      if (cv) drawSpark(cv, t);
    }
  };
  ctx.sub(`{pid="${pid}"}`, {
    history: "15m", fn: "rate",
    onHistory: (hs) => { store.history(hs); draw(); },
    onUpdate: (ts, s) => {
      store.update(ts, s);
      draw();
      ctx.ready();
    },
  });
}

/** instancesSelector selects one application metric in every instance (any pid and process). */
export function instancesSelector(l: Record<string, string>): string {
  const keep: Record<string, string> = {};
  for (const [k, v] of Object.entries(l)) if (k !== "pid" && k !== "process" && k !== "cgroup") keep[k] = v;
  return exactSelector(keep);
}

/** valueText writes a track's latest value with its unit (a rate for counters, text for states). */
export function valueText(t: Track): string {
  const s = t.last;
  if (!s) return t.v.length ? fmtUnit(t.v[t.v.length - 1], guessUnit(t.labels.metric ?? "", t.kind, true, t.labels)) : "–";
  if (s.kind === "state") return s.since ? `${s.text ?? ""} (for ${fmtDuration((s.ts - s.since) / 1000)})` : s.text || "(no state)";
  const unit = guessUnit(s.labels.metric ?? "", s.kind, s.kind === "counter", s.labels);
  if (s.kind === "counter") return `${fmtUnit(num(s.rate ?? null), unit)} (total ${fmtUnit(num(s.value), guessUnit(s.labels.metric ?? "", s.kind, false, s.labels))})`;
  return fmtUnit(num(s.value), unit);
}

