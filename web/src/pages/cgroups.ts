// Cgroups: CPU and memory per cgroup (container), live, from the cgroup.* series; CPU falls
// back to the sum of the processes' CPU where the cgroup's cpu controller is not readable.
import { getJSON, num, type Process } from "../api";
import { TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtBytes } from "../format";
import type { Ctx } from "../main";
import { align, Store } from "../store";
import { heading, message, SortTable } from "../widgets";

interface Row {
  cgroup: string;
  procs: number;
  cpu: number | null;
  mem: number | null;
  anon: number | null;
  file: number | null;
  limit: number | null;
}

const TOP = 8;

export function cgroups(ctx: Ctx) {
  const root = ctx.root;
  const table = new SortTable<Row>([
    { key: "cgroup", label: "Cgroup", sort: (r) => r.cgroup, html: (r) => `<a class="mono" href="/processes?q=${encodeURIComponent(r.cgroup)}">${esc(r.cgroup || "/")}</a>` },
    { key: "procs", label: "Processes", num: true, sort: (r) => r.procs, html: (r) => String(r.procs) },
    { key: "cpu", label: "CPU (100 % = one core)", num: true, sort: (r) => r.cpu ?? -1, html: (r) => (r.cpu === null ? "–" : `${r.cpu.toFixed(1)} %`) },
    { key: "mem", label: "Memory", num: true, sort: (r) => r.mem ?? -1, html: (r) => (r.mem === null ? "–" : fmtBytes(r.mem)) },
    { key: "anon", label: "Anonymous", num: true, sort: (r) => r.anon ?? -1, html: (r) => (r.anon === null ? "–" : fmtBytes(r.anon)) },
    { key: "file", label: "Page cache", num: true, sort: (r) => r.file ?? -1, html: (r) => (r.file === null ? "–" : fmtBytes(r.file)) },
    { key: "limit", label: "Limit", num: true, sort: (r) => r.limit ?? -1, html: (r) => (r.limit === null || r.limit > 2 ** 60 ? "none" : fmtBytes(r.limit)) },
  ], "mem", true, undefined, "Cgroups");
  const note = h("div");
  const grid = h("section", { class: "charts" });
  root.append(heading("Cgroups", "CPU and memory of every cgroup (container, service) over the last 15 minutes. A cgroup opens its processes."), note, grid, h("div", { class: "table-wrap" }, table.el));
  const cpuChart = new TimeChart(grid, { group: ctx.charts, title: `CPU, top ${TOP} cgroups`, unit: "%" });
  const memChart = new TimeChart(grid, { group: ctx.charts, title: `Memory, top ${TOP} cgroups`, unit: "bytes" });
  ctx.cleanup(() => { cpuChart.destroy(); memChart.destroy(); });

  const store = new Store(15 * 60e3, true);
  let procCPU = new Map<string, number>();
  let procCount = new Map<string, number>();
  const latest = (m: string, cg: string) => {
    const t = store.get(m, { cgroup: cg });
    return t && t.v.length ? t.v[t.v.length - 1] : null;
  };
  const draw = () => {
    const names = new Set<string>();
    for (const t of store.tracks.values()) if (t.labels.cgroup !== undefined) names.add(t.labels.cgroup);
    const rows: Row[] = [...names].map((cg) => {
      const usage = latest("cgroup.cpu.usage_ms", cg);
      return {
        cgroup: cg,
        procs: latest("cgroup.processes", cg) ?? procCount.get(cg) ?? 0,
        cpu: usage !== null ? usage / 10 : procCPU.get(cg) ?? null,
        mem: latest("cgroup.memory.usage", cg), anon: latest("cgroup.memory.anon", cg),
        file: latest("cgroup.memory.file", cg), limit: latest("cgroup.memory.limit", cg),
      };
    });
    table.set(rows);
    if (rows.length === 0) note.replaceChildren(message("info", "No cgroups found: the agent reads /sys/fs/cgroup (v1 or v2)."));
    else note.replaceChildren();
    const top = (m: string) => store.find((l) => l.metric === m).sort((a, b) => (b.v[b.v.length - 1] ?? 0) - (a.v[a.v.length - 1] ?? 0)).slice(0, TOP);
    const mem = top("cgroup.memory.usage");
    if (mem.length) memChart.set(align(mem), mem.map((t) => t.labels.cgroup || "/"));
    const cpu = top("cgroup.cpu.usage_ms");
    if (cpu.length) {
      const d = align(cpu);
      cpuChart.set([d[0], ...(d.slice(1) as (number | null | undefined)[][]).map((l) => l.map((v) => (v == null ? v : v / 10)))], cpu.map((t) => t.labels.cgroup || "/"));
    } else {
      cpuChart.el.querySelector(".chart-empty")!.textContent = "no cgroup CPU accounting on this node (the table sums the processes' CPU instead)";
    }
  };
  ctx.sub(`{metric=~"cgroup\\\\..*"}`, {
    history: "15m", fn: "rate",
    onHistory: (hs) => { store.history(hs); draw(); },
    onUpdate: (ts, s) => { store.update(ts, s); draw(); ctx.ready(); },
  });
  // Per-cgroup CPU from the processes, for nodes without the cpu controller.
  let busy = false;
  ctx.onTick(async () => {
    if (busy || store.get("cgroup.cpu.usage_ms")) return;
    busy = true;
    try {
      const ps = (await getJSON<{ processes: Process[] }>("/api/v1/processes")).processes;
      const cpu = new Map<string, number>(), cnt = new Map<string, number>();
      for (const p of ps) {
        cpu.set(p.cgroup ?? "", (cpu.get(p.cgroup ?? "") ?? 0) + (num(p.cpu_percent) ?? 0));
        cnt.set(p.cgroup ?? "", (cnt.get(p.cgroup ?? "") ?? 0) + 1);
      }
      procCPU = cpu;
      procCount = cnt;
      if (ctx.alive()) draw();
    } catch {
      /* retried next scan */
    } finally {
      busy = false;
    }
  });
}
