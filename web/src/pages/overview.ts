// Overview: the node at a glance, live: CPU (total and per CPU), memory, load, network, disks
// (throughput and latency), filesystem space, top processes and the agent's own cost.
import { getJSON, type Process, type Series, type Status } from "../api";
import { TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtBytes, fmtDuration, fmtNum, round } from "../format";
import type { Ctx } from "../main";
import { align, alignPoints, combine, Store, sum, sumLines, type Track } from "../store";
import { card, heading, setText, SortTable } from "../widgets";
import { fsRows, latency, perCPU } from "./machine";
import "./overview.css";

const WINDOW = "15m";
const WINDOW_MS = 15 * 60e3;
/**
 * CPU_TOTAL selects the machine-wide cpu.*_ms counters: without a cpu label, or with
 * cpu="total" (an absent label matches "", as in Prometheus).
 */
export const CPU_TOTAL = `{metric=~"cpu\\\\..*_ms", cpu=~"total|"}`;
/** CPU_EACH selects the per-CPU cpu.*_ms counters (cpu="0", "1", ...). */
export const CPU_EACH = `{metric=~"cpu\\\\..*_ms", cpu=~"[0-9]+"}`;

/** wholeDisks drops partitions when their disk is listed too (vda1 beside vda). */
export function wholeDisks(names: string[]): Set<string> {
  return new Set(names.filter((n) => !names.some((o) => o !== n && n.startsWith(o) && /^p?\d+$/.test(n.slice(o.length)))));
}

/** The row keys the top tables draw: fetched without the rest (a browser's command lines
 *  alone were ~7 KB per refresh, gzipped, on a busy node). */
const TOP_FIELDS = "fields=pid,name,cpu_percent,rss";

function procTable(sortKey: "cpu" | "rss", caption: string): SortTable<Process> {
  const t = new SortTable<Process>([
    { key: "pid", label: "PID", num: true, html: (p) => `<a href="/process/${p.pid}">${p.pid}</a>` },
    { key: "name", label: "Name", html: (p) => `<a href="/process/${p.pid}">${esc(p.name)}</a>` },
    { key: "cpu", label: "CPU", num: true, sort: (p) => p.cpu_percent, html: (p) => `${p.cpu_percent.toFixed(1)} %` },
    { key: "rss", label: "Memory", num: true, sort: (p) => p.rss, html: (p) => fmtBytes(p.rss) },
  ], sortKey, true, undefined, caption);
  t.rowKey = (p) => String(p.pid); // the top tables fetch pid, name, CPU and RSS only
  return t;
}

/**
 * seriesText writes the live series (written by the latest scan, what the Metrics page lists)
 * beside those kept in history (live ones plus those of processes and interfaces gone within
 * --history): "1.4k live / 96.2k kept".
 */
export function seriesText(st: Status): string {
  return `${fmtNum(st.counts.live_series ?? 0)} live / ${fmtNum(st.counts.series ?? 0)} kept`;
}

export async function overview(ctx: Ctx) {
  const st = await ctx.status();
  if (!ctx.alive()) return;
  const root = ctx.root;
  root.append(
    heading("Overview", `Node ${st.node_name}: every chart shows the last 15 minutes and moves with each scan (every ${st.interval_ms / 1000} s).`),
    h("section", { class: "cards", "aria-label": "Node" },
      card("Node", "ov-host"), card("Host uptime", "ov-uptime"), card("Agent uptime", "ov-agent-up"), card("CPU busy", "ov-cpu"), card("Memory used", "ov-mem"),
      card("Load (1 min)", "ov-load"), card("Processes", "ov-procs"), card("Series: live / kept in history", "ov-series"), card("Last scan", "ov-scan")),
  );
  const grid = h("section", { class: "charts", "aria-label": "Machine charts" });
  root.append(grid);
  const cpuChart = new TimeChart(grid, { group: ctx.charts, title: "CPU", unit: "%", yMax: 100 });
  const memChart = new TimeChart(grid, { group: ctx.charts, title: "Memory", unit: "bytes" });
  const loadChart = new TimeChart(grid, { group: ctx.charts, title: "Load average", unit: "load" });
  const netChart = new TimeChart(grid, { group: ctx.charts, title: "Network (all interfaces but lo)", unit: "bytes/s" });
  const diskChart = new TimeChart(grid, { group: ctx.charts, title: "Disk I/O", unit: "bytes/s" });
  const cpusChart = new TimeChart(grid, { group: ctx.charts, title: "CPU busy per CPU (not idle, not iowait)", unit: "%", yMax: 100 });
  const latChart = new TimeChart(grid, { group: ctx.charts, title: "Disk latency (average per request)", unit: "ms" });
  const latNote = h("span", { class: "chart-note", role: "status" });
  latChart.el.querySelector("figcaption")?.append(latNote);

  const fsList = h("div", { class: "fs-list", role: "list", "aria-label": "Filesystem space" }, h("p", { class: "none" }, "waiting for data…"));
  root.append(h("h2", {}, "Filesystems (fullest first, Use% as df shows it)"), fsList);

  const agentSec = h("section", { class: "charts", "aria-label": "The agent itself" });
  root.append(h("h2", {}, `The agent itself (pid ${st.pid})`), agentSec);
  const agentCPU = new TimeChart(agentSec, { group: ctx.charts, title: "cantal-agent CPU", unit: "%" });
  const agentMem = new TimeChart(agentSec, { group: ctx.charts, title: "cantal-agent memory", unit: "bytes" });

  const topCPU = procTable("cpu", "Top processes by CPU");
  const topMem = procTable("rss", "Top processes by memory");
  root.append(h("h2", {}, "Top processes"), h("section", { class: "two" }, topCPU.el, topMem.el));
  const charts = [cpuChart, memChart, loadChart, netChart, diskChart, cpusChart, latChart, agentCPU, agentMem];
  ctx.cleanup(() => charts.forEach((c) => c.destroy()));

  setText(root, "ov-host", st.hostname === st.node_name ? st.hostname : `${st.node_name} (host ${st.hostname})`);
  setText(root, "ov-series", seriesText(st));
  setText(root, "ov-procs", String(st.counts.processes ?? "–"));

  // CPU: cpu.*_ms rates of cpu="total" as shares of their sum (which is CPUs × 1000 ms/s).
  const cpu = new Store(WINDOW_MS, true);
  const drawCPU = () => {
    const parts = ["user", "system", "iowait", "nice", "irq", "softirq", "steal", "idle"];
    const tracks = parts.map((p) => cpu.find((l) => l.metric === `cpu.${p}_ms` && (l.cpu === undefined || l.cpu === "total"))[0]);
    if (tracks.some((t) => !t)) return;
    const data = align(tracks as Track[]);
    const ys = data.slice(1) as (number | null | undefined)[][];
    const total = combine(ys, sum);
    const pct = (line: (number | null | undefined)[]) => line.map((v, i) => (v == null || !total[i] ? null : (100 * v) / total[i]!));
    // nice is user time at a lower priority: its own line (a batch job shows there), not
    // lumped with the kernel's interrupt time and a hypervisor's steal.
    const other = combine([ys[4], ys[5], ys[6]], sum);
    const lines = [pct(ys[0]), pct(ys[1]), pct(ys[2]), pct(ys[3]), pct(other)];
    cpuChart.set([data[0], ...lines], ["user", "system", "iowait", "nice", "other (irq, softirq, steal)"]);
    const busy = pct(combine(ys.slice(0, 7), sum));
    const last = busy[busy.length - 1];
    if (last !== null && last !== undefined) setText(root, "ov-cpu", `${last.toFixed(1)} %`);
  };
  ctx.sub(CPU_TOTAL, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { cpu.history(hs); drawCPU(); },
    onUpdate: (ts, s) => { cpu.update(ts, s); drawCPU(); },
  });

  // Per CPU: one busy line per CPU.
  const cpus = new Store(WINDOW_MS, true);
  const drawCPUs = () => {
    const p = perCPU(cpus.find());
    if (p) cpusChart.set(p.data, p.names);
  };
  ctx.sub(CPU_EACH, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { cpus.history(hs); drawCPUs(); },
    onUpdate: (ts, s) => { cpus.update(ts, s); drawCPUs(); },
  });

  // Filesystem space: the latest fs.size/free/avail of each mount.
  let fsKey = "";
  const drawFs = (series: Series[]) => {
    const rows = fsRows(series);
    // Rebuilt only when what it shows changed (mounts, Use%, free space as written).
    const key = rows.map((r) => `${r.mountpoint}\u0000${r.usePct}\u0000${fmtBytes(r.avail)}`).join("\u0001");
    if (key === fsKey) return;
    fsKey = key;
    fsList.replaceChildren(...(rows.length === 0 ? [h("p", { class: "none" }, "no mounted filesystem with space to show")] : rows.map((r) =>
      h("div", { class: "fs-row", role: "listitem", "data-mountpoint": r.mountpoint, "data-use": String(r.usePct), title: `${r.device} (${r.fstype}), ${fmtBytes(r.size)}` },
        h("span", { class: "fs-mount" }, r.mountpoint),
        h("span", { class: "fs-bar", "aria-hidden": "true" }, h("span", { class: r.usePct >= 90 ? "full" : "", style: `width:${Math.min(100, r.usePct)}%` })),
        h("span", { class: "fs-use" }, `${r.usePct} %`),
        h("span", { class: "fs-avail" }, `${fmtBytes(r.avail)} free`)))));
  };
  ctx.sub(`{metric=~"fs\\\\.(size|free|avail)"}`, { onUpdate: (_ts, s) => drawFs(s) });

  // Disk latency: rate(time_ms) / rate(ops) per whole disk, read and write.
  const lat = new Store(WINDOW_MS, true);
  const drawLat = () => {
    const all = lat.find();
    const l = latency(all, wholeDisks([...new Set(all.map((t) => t.labels.device))]));
    if (!l) return;
    latChart.set(l.data, l.names);
    latChart.el.dataset.io = String(l.ios);
    latNote.textContent = l.ios ? "" : " — no I/O in this window";
  };
  ctx.sub(`{metric=~"disk\\\\.(read|write)\\\\.(time_ms|ops)"}`, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { lat.history(hs); drawLat(); },
    onUpdate: (ts, s) => { lat.update(ts, s); drawLat(); },
  });

  const mem = new Store(WINDOW_MS, false);
  const drawMem = () => {
    const names = ["MemTotal", "MemAvailable", "MemFree", "Cached", "Buffers"];
    const tracks = names.map((n) => mem.get(`memory.${n}`));
    if (tracks.some((t) => !t)) return;
    const d = align(tracks as Track[]);
    const [total, avail, free, cached, buffers] = d.slice(1) as (number | null | undefined)[][];
    const used = combine([total, avail], ([t, a]) => t - a);
    const cache = combine([cached, buffers], sum);
    memChart.set([d[0], used, cache, free, total], ["used", "cache + buffers", "free", "total"]);
    const u = used[used.length - 1], t = total[total.length - 1];
    if (u != null && t) setText(root, "ov-mem", `${fmtBytes(u)} of ${fmtBytes(t)} (${((100 * u) / t).toFixed(0)} %)`);
  };
  ctx.sub(`{metric=~"memory\\\\.(MemTotal|MemAvailable|MemFree|Cached|Buffers)"}`, {
    history: WINDOW,
    onHistory: (hs) => { mem.history(hs); drawMem(); },
    onUpdate: (ts, s) => { mem.update(ts, s); drawMem(); },
  });

  const load = new Store(WINDOW_MS, false);
  const drawLoad = () => {
    const ts = ["1min", "5min", "15min"].map((n) => load.get(`system.load_avg_${n}`)).filter((t): t is Track => !!t);
    if (ts.length === 0) return;
    loadChart.set(align(ts), ts.map((t) => t.labels.metric.replace("system.load_avg_", "")));
    const one = load.get("system.load_avg_1min");
    if (one?.v.length) setText(root, "ov-load", round(one.v[one.v.length - 1]));
  };
  ctx.sub(`{metric=~"system\\\\.load_avg_.*"}`, {
    history: WINDOW,
    onHistory: (hs) => { load.history(hs); drawLoad(); },
    onUpdate: (ts, s) => { load.update(ts, s); drawLoad(); },
  });

  const net = new Store(WINDOW_MS, true);
  const drawNet = () => {
    const rx = net.find((l) => l.metric === "net.interface.rx.bytes");
    const tx = net.find((l) => l.metric === "net.interface.tx.bytes");
    if (rx.length + tx.length === 0) return;
    // Interfaces come and go: each scan's total is the sum of the interfaces it saw.
    netChart.set(alignPoints([sumLines(rx), sumLines(tx)]), ["received", "sent"]);
  };
  ctx.sub(`{metric=~"net\\\\.interface\\\\.(rx|tx)\\\\.bytes", interface!="lo"}`, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { net.history(hs); drawNet(); },
    onUpdate: (ts, s) => { net.update(ts, s); drawNet(); },
  });

  const disk = new Store(WINDOW_MS, true);
  const drawDisk = () => {
    const all = disk.find();
    const keep = wholeDisks([...new Set(all.map((t) => t.labels.device))]);
    const rd = all.filter((t) => t.labels.metric === "disk.read.bytes" && keep.has(t.labels.device));
    const wr = all.filter((t) => t.labels.metric === "disk.write.bytes" && keep.has(t.labels.device));
    if (rd.length + wr.length === 0) return;
    diskChart.set(alignPoints([sumLines(rd), sumLines(wr)]), ["read", "written"]);
  };
  ctx.sub(`{metric=~"disk\\\\.(read|write)\\\\.bytes"}`, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { disk.history(hs); drawDisk(); },
    onUpdate: (ts, s) => { disk.update(ts, s); drawDisk(); },
  });

  // The agent's own cost: its process series, CPU as a share of one core.
  const self = new Store(WINDOW_MS, true);
  const drawSelf = () => {
    const u = self.get("process.cpu.user_ms"), s = self.get("process.cpu.system_ms"), rss = self.get("process.memory.rss");
    if (u && s) {
      const d = align([u, s]);
      const ys = d.slice(1) as (number | null | undefined)[][];
      agentCPU.set([d[0], ...ys.map((l) => l.map((v) => (v == null ? v : v / 10)))], ["user", "system"]);
    }
    if (rss) agentMem.set(align([rss]), ["resident (RSS)"]);
  };
  ctx.sub(`{pid="${st.pid}", metric=~"process\\\\.(cpu\\\\..*|memory\\\\.rss)"}`, {
    history: WINDOW, fn: "rate",
    onHistory: (hs) => { self.history(hs); drawSelf(); },
    onUpdate: (ts, s) => { self.update(ts, s); drawSelf(); },
  });

  let busy = false;
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try {
      // Only the rows and columns the two tables show, ordered by the agent (the whole list
      // was ~27 KB per refresh on a busy node); total is the number of processes. The rows
      // carry only TOP_FIELDS, all procTable reads.
      type Top = { processes: Process[]; total: number };
      const [byCPU, byMem, st2] = await Promise.all([
        getJSON<Top>(`/api/v1/processes?sort=cpu&limit=10&${TOP_FIELDS}`), getJSON<Top>(`/api/v1/processes?sort=rss&limit=10&${TOP_FIELDS}`), ctx.status()]);
      if (!ctx.alive()) return;
      topCPU.set(topCPU.sorted(byCPU.processes), true);
      topMem.set(topMem.sorted(byMem.processes), true);
      setText(root, "ov-procs", String(byCPU.total));
      setText(root, "ov-series", seriesText(st2));
      setText(root, "ov-scan", `${st2.last_scan.duration_ms.toFixed(0)} ms`);
      setText(root, "ov-agent-up", fmtDuration(st2.uptime_s));
      ctx.ready();
    } catch {
      /* the connection badge shows the agent is gone; next tick retries */
    } finally {
      busy = false;
    }
  };
  ctx.sub(`{metric="system.uptime_s"}`, {
    onUpdate: (_ts, s) => {
      const v = s[0]?.value;
      if (typeof v === "number") setText(root, "ov-uptime", fmtDuration(v));
    },
  });
  ctx.onTick(refresh);
  await refresh();
}
