// Containers: every container the agent names (/api/v1/containers), sortable, refreshed after
// every scan; a container opens its page: its cgroup's charts over 15 minutes (history, then
// live) and its processes.
import { exactSelector, getJSON, num, type Container, type Num, type Process } from "../api";
import { TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtBytes } from "../format";
import type { Ctx } from "../main";
import { alignPoints, sumLines, Store, type Line } from "../store";
import { heading, message, SortTable } from "../widgets";

const WINDOW_MS = 15 * 60e3;

/** fmtRate writes bytes per second, "–" when not collected. */
export function fmtRate(v: Num | undefined): string {
  const n = num(v);
  return n === null ? "–" : `${fmtBytes(n)}/s`;
}

/** pct writes a percentage with one decimal. */
function pct(v: Num): string {
  const n = num(v);
  return n === null || !Number.isFinite(n) ? "–" : `${n.toFixed(1)} %`;
}

/** podText is namespace/pod, or "–" for a container outside Kubernetes. */
export function podText(c: Container): string {
  if (!c.pod) return "–";
  return c.namespace ? `${c.namespace}/${c.pod}` : c.pod;
}

/** memText writes the working set against the limit, with a bar when there is one. */
function memText(c: Container): string {
  const ws = fmtBytes(c.memory_working_set);
  if (!c.memory_limit) return `<span class="mem">${ws}</span> <span class="muted">no limit</span>`;
  const p = (100 * c.memory_working_set) / c.memory_limit;
  return `<span class="bar" style="--p:${Math.min(100, Math.max(0, p)).toFixed(0)}%"></span> <span class="mem">${ws}</span> of <span class="limit">${fmtBytes(c.memory_limit)}</span>`;
}

/** cpuText writes CPU use and, with a quota, the share of periods throttled. */
function cpuText(c: Container): string {
  const thr = (num(c.cpu_periods) ?? 0) > 0 ? ` <span class="thr" title="CFS periods throttled (CPU quota)">throttled ${pct(c.throttled_percent)}</span>` : "";
  return `<span class="cpu">${pct(c.cpu_percent)}</span>${thr}`;
}

export function containers(ctx: Ctx) {
  const root = ctx.root;
  const sortParam = ctx.params.get("sort") ?? "-cpu";
  const table = new SortTable<Container>([
    { key: "name", label: "Name", sort: (c) => c.name.toLowerCase(), html: (c) => `<a class="ctr" data-id="${esc(c.id)}" data-ts="${c.ts}" href="/container/${encodeURIComponent(c.id)}">${esc(c.name || c.id)}</a>` },
    { key: "image", label: "Image", sort: (c) => c.image, html: (c) => `<span class="mono image">${esc(c.image)}</span>` },
    { key: "pod", label: "Pod", sort: (c) => podText(c), html: (c) => `<span class="pod">${esc(podText(c))}</span>` },
    { key: "cpu", label: "CPU (100 % = one core)", num: true, sort: (c) => num(c.cpu_percent) ?? -1, html: cpuText },
    { key: "mem", label: "Memory (working set)", num: true, sort: (c) => c.memory_working_set, html: memText },
    { key: "oom", label: "OOM kills", num: true, sort: (c) => c.oom_kills, html: (c) => `<span class="oom">${c.oom_kills}</span>` },
    { key: "procs", label: "Processes", num: true, sort: (c) => c.processes, html: (c) => `<span class="procs">${c.processes}</span>` },
    { key: "io", label: "Disk read / write", num: true, sort: (c) => (num(c.io_read_rate) ?? -1) + (num(c.io_write_rate) ?? 0), html: (c) => `<span class="io">${esc(fmtRate(c.io_read_rate))} / ${esc(fmtRate(c.io_write_rate))}</span>` },
    { key: "net", label: "Network in / out", num: true, sort: (c) => (num(c.net_rx_rate) ?? -1) + (num(c.net_tx_rate) ?? 0), html: (c) => `<span class="net">${esc(fmtRate(c.net_rx_rate))} / ${esc(fmtRate(c.net_tx_rate))}</span>` },
  ], sortParam.replace(/^-/, ""), sortParam.startsWith("-"), (key, desc) => {
    history.replaceState(null, "", key === "cpu" && desc ? "/containers" : `/containers?sort=${desc ? "-" : ""}${key}`);
  }, "Containers");
  const note = h("div");
  const count = h("span", { class: "count", role: "status" });
  root.append(heading("Containers", "Every container on the node by name (Podman, Docker), refreshed after each scan. A container opens its charts and processes."),
    h("div", { class: "toolbar" }, count), note, h("div", { class: "table-wrap" }, table.el));

  let busy = false;
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try {
      const ans = await getJSON<{ containers: Container[]; total: number }>("/api/v1/containers");
      if (!ctx.alive()) return;
      note.replaceChildren(ans.total === 0 ? message("info", "No containers named on this node: the agent names Podman's and Docker's containers when it runs as root (see docs/containers.md).") : "");
      count.textContent = `${ans.total} containers`;
      if (!table.el.contains(document.activeElement)) table.set(ans.containers);
      ctx.ready();
    } catch (e) {
      if (ctx.alive()) note.replaceChildren(message("error", `Containers not loaded: ${(e as Error).message}`));
      ctx.ready();
    } finally {
      busy = false;
    }
  };
  ctx.onTick(refresh);
  return refresh();
}

export async function containerPage(ctx: Ctx) {
  const id = decodeURIComponent(ctx.path.split("/")[2] ?? "");
  const root = ctx.root;
  const ans = await getJSON<{ containers: Container[] }>("/api/v1/containers");
  if (!ctx.alive()) return;
  const c = ans.containers.find((x) => x.id === id);
  root.append(heading(c ? `Container ${c.name}` : `Container ${id}`));
  if (!c) {
    root.append(message("info", `No container ${id} on this node now: it may have stopped. `, h("a", { href: "/containers" }, "All containers")));
    ctx.ready();
    return;
  }
  const facts = h("dl", { class: "facts" },
    h("dt", {}, "Image"), h("dd", { class: "mono" }, c.image),
    h("dt", {}, "Id"), h("dd", { class: "mono" }, c.id),
    c.pod ? [h("dt", {}, "Pod"), h("dd", {}, podText(c))] : null,
    h("dt", {}, "Cgroup"), h("dd", { class: "mono" }, c.cgroup),
    h("dt", {}, "Memory limit"), h("dd", {}, c.memory_limit ? fmtBytes(c.memory_limit) : "none"),
    h("dt", {}, "OOM kills"), h("dd", { class: "oom" }, String(c.oom_kills)));
  const sel = exactSelector({ container_id: c.id, cgroup: c.cgroup });
  root.append(facts, h("p", { class: "toolbar" },
    h("a", { class: "button", href: `/series?match=${encodeURIComponent(sel)}` }, "All its series"),
    h("a", { class: "button", href: `/series/chart?match=${encodeURIComponent(sel)}&window=1h` }, "Its charts over 1 h")));

  const grid = h("section", { class: "charts", "aria-label": "Container charts" });
  root.append(grid);
  const cpuChart = new TimeChart(grid, { group: ctx.charts, title: "Container CPU (100 % = one core)", unit: "%" });
  const memChart = new TimeChart(grid, { group: ctx.charts, title: "Container memory", unit: "bytes" });
  const ioChart = new TimeChart(grid, { group: ctx.charts, title: "Container disk I/O", unit: "bytes/s" });
  const netChart = new TimeChart(grid, { group: ctx.charts, title: "Container network", unit: "bytes/s" });
  ctx.cleanup(() => [cpuChart, memChart, ioChart, netChart].forEach((x) => x.destroy()));

  const procHead = h("h2", {}, "Processes");
  const procBody = h("div");
  root.append(procHead, procBody);
  const procTable = new SortTable<Process>([
    { key: "pid", label: "PID", num: true, sort: (p) => p.pid, html: (p) => `<a href="/process/${p.pid}">${p.pid}</a>` },
    { key: "name", label: "Name", sort: (p) => p.name.toLowerCase(), html: (p) => `<a href="/process/${p.pid}">${esc(p.name)}</a>` },
    { key: "cpu", label: "CPU", num: true, sort: (p) => p.cpu_percent, html: (p) => `${p.cpu_percent.toFixed(1)} %` },
    { key: "rss", label: "Memory (RSS)", num: true, sort: (p) => p.rss, html: (p) => fmtBytes(p.rss) },
    { key: "cmd", label: "Command line", html: (p) => `<span class="mono cmd">${esc((p.cmdline ?? []).join(" "))}</span>` },
  ], "cpu", true, undefined, "Its processes");
  procBody.append(h("div", { class: "table-wrap" }, procTable.el));
  const inside = (p: Process) => p.cgroup === c.cgroup || p.cgroup.startsWith(c.cgroup + ".");
  let busy = false;
  const procs = async () => {
    if (busy) return;
    busy = true;
    try {
      const ps = (await getJSON<{ processes: Process[] }>("/api/v1/processes")).processes;
      if (ctx.alive()) procTable.set(ps.filter(inside));
    } catch {
      /* retried next scan */
    } finally {
      busy = false;
    }
  };
  ctx.onTick(procs);
  void procs();

  const store = new Store(WINDOW_MS, true);
  // line sums a metric's series (devices, interfaces) into one line, scaled.
  const line = (metric: string, scale = 1): Line | null => {
    const ts = store.find((l) => l.metric === metric);
    if (ts.length === 0) return null;
    const s = ts.length === 1 ? { ts: ts[0].ts, v: ts[0].v } : sumLines(ts);
    return scale === 1 ? s : { ts: s.ts, v: s.v.map((v) => (v === null ? null : v * scale)) };
  };
  const chart = (ch: TimeChart, lines: [string, string, number?][], none: string) => {
    const got: Line[] = [], names: string[] = [];
    for (const [m, name, scale] of lines) {
      const l = line(m, scale);
      if (l) {
        got.push(l);
        names.push(name);
      }
    }
    if (got.length) ch.set(alignPoints(got), names);
    else ch.el.querySelector(".chart-empty")!.textContent = none;
  };
  const draw = () => {
    chart(cpuChart, [["cgroup.cpu.usage_ms", "CPU", 0.1], ["cgroup.cpu.throttled_ms", "throttled (time)", 0.1]], "no CPU accounting for this cgroup");
    chart(memChart, [["cgroup.memory.working_set", "working set"], ["cgroup.memory.usage", "usage"], ["cgroup.memory.limit", "limit"]], "no memory accounting for this cgroup");
    chart(ioChart, [["cgroup.io.read_bytes", "read"], ["cgroup.io.write_bytes", "written"]], "disk I/O is not collected for this container");
    chart(netChart, [["cgroup.net.rx.bytes", "received"], ["cgroup.net.tx.bytes", "sent"]], "network is not collected for this container");
  };
  ctx.sub(`{container_id=${JSON.stringify(c.id)}, cgroup=${JSON.stringify(c.cgroup)}, metric=~"cgroup\\\\..*"}`, {
    history: "15m", fn: "rate",
    onHistory: (hs) => { store.history(hs); draw(); },
    onUpdate: (ts, s) => { store.update(ts, s); draw(); ctx.ready(); },
  });
}
