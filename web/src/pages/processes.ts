// Processes: every process, flat or as a tree, sortable, filtered by name, command line,
// cgroup or pid; refreshed after every scan. View, filter and sort are in the URL.
import { getJSON, type Process } from "../api";
import { debounce, esc, h } from "../dom";
import { fmtBytes, fmtDuration } from "../format";
import type { Ctx } from "../main";
import { heading, message, SortTable } from "../widgets";

/** matches tells whether p passes the filter q (case-insensitive substring). */
export function matches(p: Process, q: string): boolean {
  if (!q) return true;
  const s = q.toLowerCase();
  return String(p.pid) === s || p.name.toLowerCase().includes(s) || (p.cgroup ?? "").toLowerCase().includes(s) ||
    (p.appname ?? "").toLowerCase().includes(s) || (p.cmdline ?? []).join(" ").toLowerCase().includes(s);
}

interface Row extends Process {
  depth: number;
}

/**
 * treeRows orders processes as a depth-first tree by ppid; with a filter, a process is kept
 * when it or one of its descendants matches (so matches keep their ancestry).
 */
export function treeRows(ps: Process[], keep: (p: Process) => boolean, order: (a: Process[]) => Process[]): Row[] {
  const byPid = new Map(ps.map((p) => [p.pid, p]));
  const kids = new Map<number, Process[]>();
  const roots: Process[] = [];
  for (const p of ps) {
    if (p.ppid !== p.pid && byPid.has(p.ppid)) {
      let l = kids.get(p.ppid);
      if (!l) kids.set(p.ppid, (l = []));
      l.push(p);
    } else roots.push(p);
  }
  const wanted = new Set<number>();
  const mark = (p: Process): boolean => {
    let any = keep(p);
    for (const k of kids.get(p.pid) ?? []) if (mark(k)) any = true;
    if (any) wanted.add(p.pid);
    return any;
  };
  roots.forEach(mark);
  const out: Row[] = [];
  const walk = (p: Process, depth: number) => {
    if (!wanted.has(p.pid)) return;
    out.push({ ...p, depth });
    for (const k of order(kids.get(p.pid) ?? [])) walk(k, depth + 1);
  };
  for (const r of order(roots)) walk(r, 0);
  return out;
}

export async function processes(ctx: Ctx) {
  const root = ctx.root;
  const params = ctx.params;
  let view = params.get("view") === "tree" ? "tree" : "flat";
  let q = params.get("q") ?? "";
  const updateURL = () => {
    const p = new URLSearchParams();
    if (view === "tree") p.set("view", "tree");
    if (q) p.set("q", q);
    if (table.sortKey !== "cpu" || !table.desc) p.set("sort", `${table.desc ? "-" : ""}${table.sortKey}`);
    const s = p.toString();
    history.replaceState(null, "", `/processes${s ? "?" + s : ""}`);
  };
  const sortParam = params.get("sort") ?? "-cpu";
  const table = new SortTable<Row>([
    { key: "pid", label: "PID", num: true, sort: (p) => p.pid, html: (p) => `<a href="/process/${p.pid}">${p.pid}</a>` },
    {
      key: "name", label: "Name", sort: (p) => p.name.toLowerCase(),
      html: (p) => `<span class="indent" style="--d:${p.depth}"></span><a href="/process/${p.pid}">${esc(p.name)}</a>${p.metrics ? ' <span class="tag" title="exports metrics">metrics</span>' : ""}`,
    },
    { key: "uid", label: "UID", num: true, sort: (p) => p.uid, html: (p) => String(p.uid) },
    { key: "cpu", label: "CPU", num: true, sort: (p) => p.cpu_percent, html: (p) => `${p.cpu_percent.toFixed(1)} %` },
    { key: "rss", label: "Memory (RSS)", num: true, sort: (p) => p.rss, html: (p) => fmtBytes(p.rss) },
    { key: "threads", label: "Threads", num: true, sort: (p) => p.threads, html: (p) => String(p.threads) },
    { key: "age", label: "Running for", num: true, sort: (p) => -p.start_time, html: (p) => fmtDuration((Date.now() - p.start_time) / 1000) },
    { key: "cgroup", label: "Cgroup", sort: (p) => p.cgroup ?? "", html: (p) => `<span class="mono">${esc(p.cgroup ?? "")}</span>` },
    { key: "cmd", label: "Command line", html: (p) => `<span class="mono cmd" title="${esc((p.cmdline ?? []).join(" "))}">${esc((p.cmdline ?? []).join(" "))}</span>` },
  ], sortParam.replace(/^-/, ""), sortParam.startsWith("-"), () => { updateURL(); draw(); }, "Processes");
  table.rowKey = (p) => `${p.pid}:${p.start_time}`;

  const filter = h("input", {
    type: "search", id: "proc-filter", value: q, placeholder: "name, command, cgroup or pid", "data-search": true,
    "aria-label": "Filter processes by name, command line, cgroup or pid",
  });
  const flatBtn = h("button", { type: "button", "aria-pressed": String(view === "flat") }, "Flat");
  const treeBtn = h("button", { type: "button", "aria-pressed": String(view === "tree") }, "Tree");
  const count = h("span", { class: "count", role: "status" });
  const setView = (v: string) => {
    view = v;
    flatBtn.setAttribute("aria-pressed", String(v === "flat"));
    treeBtn.setAttribute("aria-pressed", String(v === "tree"));
    updateURL();
    draw();
  };
  flatBtn.addEventListener("click", () => setView("flat"));
  treeBtn.addEventListener("click", () => setView("tree"));
  filter.addEventListener("input", debounce(() => { q = filter.value.trim(); updateURL(); draw(); }, 150));
  const err = h("div");
  root.append(
    heading("Processes", "Every process on the node, refreshed after each scan. CPU is the share of one core over the last scan."),
    h("div", { class: "toolbar" }, h("label", { for: "proc-filter" }, "Filter "), filter,
      h("span", { class: "seg", role: "group", "aria-label": "View" }, flatBtn, treeBtn), count),
    err, h("div", { class: "table-wrap" }, table.el),
  );

  let all: Process[] = [];
  function draw() {
    const keep = (p: Process) => matches(p, q);
    const rows: Row[] = view === "tree"
      ? treeRows(all, keep, (l) => table.sorted(l as Row[]))
      : all.filter(keep).map((p) => ({ ...p, depth: 0 }));
    table.set(rows, view === "tree");
    count.textContent = `${rows.length} of ${all.length} processes`;
  }

  let busy = false;
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try {
      const ans = await getJSON<{ processes: Process[] }>("/api/v1/processes");
      if (!ctx.alive()) return;
      all = ans.processes;
      err.replaceChildren();
      // Don't rewrite the rows under a keyboard user: skip this refresh while focus is in a row.
      // A sort button keeps the focus after a click (the header is not rewritten): it must not
      // stop the live rows.
      if (!table.el.tBodies[0].contains(document.activeElement)) draw();
      ctx.ready();
    } catch (e) {
      if (ctx.alive()) err.replaceChildren(message("error", `Processes not loaded: ${(e as Error).message}`));
      ctx.ready();
    } finally {
      busy = false;
    }
  };
  ctx.onTick(refresh);
  await refresh();
}
