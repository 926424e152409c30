// Cluster: a selector across every node (one line per node, or their sum/avg/max/min) and a
// grid of nodes × key metrics, through /api/v1/cluster/*. With gossip off the page says so.
import { APIError, getJSON, num, seriesName, type ClusterAnswer, type ClusterNode, type HistorySeries, type Labels, type Num, type Peer, type Series } from "../api";
import { TimeChart, type LineStyle } from "../chart";
import { alignPoints } from "../store";
import { Suggester } from "../suggest";
import { esc, h } from "../dom";
import { fmtBytes, guessUnit, round } from "../format";
import type { Ctx } from "../main";
import { heading, message } from "../widgets";
import { CPU_TOTAL } from "./overview";

type Agg = "node" | "sum" | "avg" | "max" | "min";
const AGGS: Agg[] = ["node", "sum", "avg", "max", "min"];
const WINDOWS = ["5m", "15m", "1h"];

interface Line {
  name: string;
  pts: Map<number, number | null>; // ts ms → value
}

/**
 * HistoryAggregate is one group of /api/v1/cluster/history?agg=: the agent aggregates (one
 * definition, internal/clusteragg, which the CLI prints too); each point is [ts, value, nodes,
 * expected], nodes < expected marking a partial slot (a node's scan not in yet, an outage).
 */
interface HistoryAggregate {
  labels: Labels;
  kind: string;
  fn: string;
  series: number;
  step_ms: number;
  points: [number, Num, number, number][];
}

interface ClusterHistory {
  nodes: ClusterNode<HistorySeries>[];
  aggregate?: HistoryAggregate[];
}

/** AggSlot is one slot of the agent's aggregate: value, series with a value, series expected. */
type AggSlot = [number | null, number, number];

/**
 * mergeAggregate merges an answer's aggregate into kept (group name → ts → slot): the answer's
 * slots replace the kept ones from its first slot on, except that a slot the answer has as
 * partial only because its window cut it does not replace a complete one.
 */
export function mergeAggregate(kept: Map<string, Map<number, AggSlot>>, aggs: HistoryAggregate[]) {
  for (const g of aggs) {
    const name = seriesName(g.labels);
    let m = kept.get(name);
    if (!m) kept.set(name, (m = new Map()));
    if (g.points.length === 0) continue;
    const first = g.points[0][0];
    const fresh = new Set(g.points.map((p) => p[0]));
    for (const ts of m.keys()) if (ts >= first && !fresh.has(ts)) m.delete(ts);
    for (const [ts, v, n, e] of g.points) {
      const old = m.get(ts);
      if (n < e && old && old[1] >= old[2]) continue;
      m.set(ts, [num(v), n, e]);
    }
  }
}

function toAligned(lines: Line[]): [number[], ...(number | null | undefined)[][]] {
  const all = new Set<number>();
  for (const l of lines) for (const ts of l.pts.keys()) all.add(ts);
  const xs = [...all].sort((a, b) => a - b);
  return [xs.map((t) => t / 1000), ...lines.map((l) => xs.map((t) => l.pts.get(t) ?? null))];
}

export async function cluster(ctx: Ctx) {
  const root = ctx.root;
  const match = ctx.params.get("match") || "system.load_avg_1min";
  const agg = (AGGS.find((a) => a === ctx.params.get("agg")) ?? "node") as Agg;
  const win = WINDOWS.find((w) => w === ctx.params.get("window")) ?? "15m";
  const rate = ctx.params.get("rate") !== "0";
  const sel = h("input", { id: "cl-sel", name: "match", value: match, class: "mono wide", spellcheck: "false", "data-search": true });
  const aggSel = h("select", { id: "cl-agg", name: "agg" }, AGGS.map((a) => h("option", { value: a, selected: a === agg }, a === "node" ? "one line per node" : a)));
  const winSel = h("select", { id: "cl-win", name: "window" }, WINDOWS.map((w) => h("option", { value: w, selected: w === win }, w)));
  const rateBox = h("input", { type: "checkbox", id: "cl-rate", checked: rate });
  const form = h("form", { class: "toolbar", role: "search" },
    h("label", { for: "cl-sel" }, "Selector "), sel, h("label", { for: "cl-agg" }, "Show "), aggSel,
    h("label", { for: "cl-win" }, "Window "), winSel, h("label", {}, rateBox, " counters as rate"), h("button", { type: "submit" }, "Apply"));
  new Suggester(sel);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams({ match: sel.value.trim(), agg: aggSel.value, window: winSel.value });
    if (!rateBox.checked) p.set("rate", "0");
    ctx.go(`/cluster?${p}`);
  });
  const banner = h("div");
  const grid = h("section", { class: "charts one" });
  const nodesBody = h("div");
  root.append(heading("Cluster", "Any agent answers for the whole cluster: it subscribes to its peers on the first question."), banner, form, grid,
    h("h2", {}, "Nodes"), nodesBody);

  const [peersAns] = await Promise.all([
    getJSON<{ peers: Peer[] }>("/api/v1/peers").catch(() => ({ peers: [] as Peer[] })),
    ctx.status(),
  ]);
  if (!ctx.alive()) return;
  const noPeers = (peersAns.peers ?? []).length === 0;
  if (noPeers) {
    banner.replaceChildren(message("info", h("strong", {}, "Gossip is off or no peer is known: "),
      "this agent sees only itself. Start agents with --cluster-name and one --peer (or add a peer on the ", h("a", { href: "/peers" }, "Peers"), " page)."));
  }
  const fn = rate ? "&fn=rate" : "";
  let hist: ClusterHistory;
  const aggQ = agg === "node" ? "" : `&agg=${agg}`;
  try {
    hist = await getJSON<ClusterHistory>(`/api/v1/cluster/history?match=${encodeURIComponent(match)}&window=${win}${fn}${aggQ}`);
  } catch (e) {
    if (!ctx.alive()) return;
    const err = e as APIError;
    if (err.status === 404 || err.status === 501) {
      banner.replaceChildren(message("info", h("strong", {}, "Cluster queries are not available: "),
        noPeers ? "gossip is off on this agent (no --cluster-name), so there is no cluster to ask." : `this agent does not answer cluster routes (${err.message}).`));
      nodesBody.replaceChildren(message("info", "No nodes to show."));
    } else {
      banner.append(message("error", `Cluster history not loaded: ${err.message}`));
    }
    ctx.ready();
    return;
  }
  if (!ctx.alive()) return;

  // One line per node (and per series when a node has several). Nodes scan at their own phase,
  // so their points never share a timestamp: alignPoints joins each line across the others'
  // timestamps (undefined) and breaks it only at its own gaps (null).
  const lines = new Map<string, Line>();
  const lineNode = new Map<string, string>();
  const nodeStatus = new Map<string, string>();
  const lineName = (node: string, labels: Record<string, string>, many: boolean) => (many ? `${node} ${seriesName(labels, new Set(["node"]))}` : node);
  let kindMetric = { metric: "", kind: "", labels: {} as Record<string, string> };
  const many = hist.nodes.some((n) => n.series.length > 1);
  for (const n of hist.nodes) {
    nodeStatus.set(n.node, n.status);
    for (const s of n.series) {
      if (!kindMetric.metric) kindMetric = { metric: s.labels.metric ?? "", kind: s.kind, labels: s.labels };
      const name = lineName(n.node, s.labels, many);
      lineNode.set(name, n.node);
      lines.set(name, { name, pts: new Map(s.points.map((p) => [p[0], num(p[1])])) });
    }
  }
  const aggs = new Map<string, Map<number, AggSlot>>();
  mergeAggregate(aggs, hist.aggregate ?? []);
  const unit = guessUnit(kindMetric.metric, kindMetric.kind, rate, kindMetric.labels);
  const chart = new TimeChart(grid, { group: ctx.charts, title: agg === "node" ? `${match}, per node` : `${match}, ${agg} over nodes`, unit, height: 300 });
  ctx.cleanup(() => chart.destroy());
  const winMs = ({ "5m": 5, "15m": 15, "1h": 60 } as Record<string, number>)[win] * 60e3;
  const styleOf = (node: string): LineStyle => {
    const s = nodeStatus.get(node);
    return s === "unreachable" ? "down" : s === "stale" ? "stale" : "";
  };
  let downBox: HTMLElement | null = null;
  let downText = "";
  const draw = () => {
    const now = Date.now();
    for (const l of lines.values()) for (const ts of l.pts.keys()) if (ts < now - winMs) l.pts.delete(ts);
    if (agg === "node") {
      // Nodes that never answered still get a (empty) legend entry naming them.
      for (const [node, st] of nodeStatus) {
        if (st !== "ok" && ![...lineNode.values()].includes(node)) {
          lines.set(node, { name: node, pts: new Map() });
          lineNode.set(node, node);
        }
      }
      const ls = [...lines.values()].sort((a, b) => a.name.localeCompare(b.name)).slice(0, 20);
      const pts = ls.map((l) => {
        const ts = [...l.pts.keys()].sort((a, b) => a - b);
        return { ts, v: ts.map((t) => l.pts.get(t) ?? null) };
      });
      chart.set(alignPoints(pts), ls.map((l) => l.name), ls.map((l) => styleOf(lineNode.get(l.name) ?? l.name)));
    } else {
      // The agent's aggregate: complete slots as the line; partial ones (a node's scan of the
      // period not in yet, an outage) apart, as their own line from the last complete slot, so
      // that neither the line nor its legend shows a partial sum as the total.
      const groups = [...aggs.entries()].sort((a, b) => a[0].localeCompare(b[0])).slice(0, 10);
      const ls: Line[] = [];
      const shown: { complete: [number, number | null][]; partial: [number, number | null, number, number][] } = { complete: [], partial: [] };
      for (const [name, slots] of groups) {
        for (const ts of slots.keys()) if (ts < now - winMs) slots.delete(ts);
        const label = groups.length > 1 ? `${agg} ${name}` : agg;
        const complete = new Map<number, number | null>();
        const partial = new Map<number, number | null>();
        const tss = [...slots.keys()].sort((a, b) => a - b);
        tss.forEach((ts, i) => {
          const [v, n, e] = slots.get(ts)!;
          if (n >= e) {
            complete.set(ts, v);
            if (groups[0][0] === name) shown.complete.push([ts, v]);
            return;
          }
          partial.set(ts, v);
          if (groups[0][0] === name) shown.partial.push([ts, v, n, e]);
          const prev = i > 0 ? slots.get(tss[i - 1])! : null;
          if (prev && prev[1] >= prev[2]) partial.set(tss[i - 1], prev[0]); // joins the line
        });
        ls.push({ name: label, pts: complete }, { name: `${label}, partial slots`, pts: partial });
      }
      chart.set(toAligned(ls), ls.map((l) => l.name));
      // What the line shows, for the browser tests.
      grid.dataset.aggregate = JSON.stringify(shown);
    }
    // One banner at most, replaced at every update and removed once every node answers: the
    // banner is the message box itself (removing only its text left an empty box per update).
    const down = [...nodeStatus].filter(([, s]) => s !== "ok").map(([n, s]) => `${n} (${s})`);
    const text = down.length ? `Not answering now: ${down.join(", ")}. Their lines are dashed; the last points shown are their last known values.` : "";
    if (text !== downText) {
      downBox?.remove();
      downBox = text ? message("error", text) : null;
      downBox?.classList.add("nodes-down");
      if (downBox) banner.append(downBox);
      downText = text;
    }
  };
  draw();

  // Live: after every local scan, the latest values of every node.
  let busy = false;
  // A tick skipped while the last question was still out leaves a hole the nodes' histories do
  // not have: every 15th tick the last minute of history is asked again and merged (points at
  // their own timestamps, so nothing is stored twice).
  let ticks = 0;
  const refill = async () => {
    try {
      const h = await getJSON<ClusterAnswer<HistorySeries>>(`/api/v1/cluster/history?match=${encodeURIComponent(match)}&window=1m${fn}`);
      if (!ctx.alive()) return;
      const m = h.nodes.some((n) => n.series.length > 1);
      for (const n of h.nodes) {
        for (const s of n.series) {
          const l = lines.get(lineName(n.node, s.labels, m));
          if (!l) continue;
          for (const [ts, v] of s.points) {
            const x = num(v);
            if (x !== null && !l.pts.has(ts)) l.pts.set(ts, x);
          }
        }
      }
    } catch {
      /* the next refill retries */
    }
  };
  ctx.onTick(async () => {
    if (busy) return;
    busy = true;
    try {
      if (agg !== "node") {
        // The agent's aggregate of the last minute (from what its peer subscriptions keep).
        const cur = await getJSON<ClusterHistory>(`/api/v1/cluster/history?match=${encodeURIComponent(match)}&window=1m${fn}${aggQ}`);
        if (!ctx.alive()) return;
        for (const n of cur.nodes) nodeStatus.set(n.node, n.status);
        mergeAggregate(aggs, cur.aggregate ?? []);
        draw();
        return;
      }
      if (++ticks % 15 === 0) await refill();
      const cur = await getJSON<ClusterAnswer<Series>>(`/api/v1/cluster/metrics?match=${encodeURIComponent(match)}${fn}`);
      if (!ctx.alive()) return;
      const m = cur.nodes.some((n) => n.series.length > 1);
      for (const n of cur.nodes) {
        nodeStatus.set(n.node, n.status);
        if (n.status !== "ok") continue; // a stale answer repeats old points: keep them out
        for (const s of n.series) {
          const name = lineName(n.node, s.labels, m);
          let l = lines.get(name);
          if (!l) lines.set(name, (l = { name, pts: new Map() }));
          lineNode.set(name, n.node);
          const v = rate && s.kind === "counter" ? num(s.rate ?? null) : num(s.value);
          if (v !== null) l.pts.set(s.ts, v);
        }
      }
      draw();
    } catch {
      /* next scan retries */
    } finally {
      busy = false;
    }
  });

  // The nodes × key metrics grid, like the original Cantal's.
  const drawGrid = async () => {
    try {
      const q = (m: string, r = false) => getJSON<ClusterAnswer<Series>>(`/api/v1/cluster/metrics?match=${encodeURIComponent(m)}${r ? "&fn=rate" : ""}`);
      const [cpu, mem, load] = await Promise.all([
        q(CPU_TOTAL, true), q(`{metric=~"memory\\\\.(MemTotal|MemAvailable)"}`), q("system.load_avg_1min"),
      ]);
      if (!ctx.alive()) return;
      const nodes = [...new Set([...cpu.nodes, ...mem.nodes, ...load.nodes].map((n) => n.node))].sort();
      const find = (a: ClusterAnswer<Series>, node: string) => a.nodes.find((n) => n.node === node);
      const rows = nodes.map((node) => {
        const c = find(cpu, node)?.series ?? [];
        let total = 0, idle = 0;
        for (const s of c) {
          const r = num(s.rate ?? null) ?? 0;
          total += r;
          if (s.labels.metric === "cpu.idle_ms" || s.labels.metric === "cpu.iowait_ms") idle += r;
        }
        const ms = find(mem, node)?.series ?? [];
        const mt = num(ms.find((s) => s.labels.metric === "memory.MemTotal")?.value ?? null);
        const ma = num(ms.find((s) => s.labels.metric === "memory.MemAvailable")?.value ?? null);
        const ld = num(find(load, node)?.series[0]?.value ?? null);
        const status = find(cpu, node)?.status ?? find(load, node)?.status ?? "?";
        // An unreachable node's values are its last known ones: not shown as current.
        if (status === "unreachable") return { node, status, cpu: null, mem: null, load: null };
        return { node, status, cpu: total > 0 ? (100 * (total - idle)) / total : null, mem: mt && ma !== null ? { used: mt - ma, total: mt } : null, load: ld };
      });
      const bar = (pct: number | null) => pct === null ? "–" : `<span class="bar" style="--p:${Math.min(100, Math.max(0, pct)).toFixed(0)}%"></span> ${pct.toFixed(0)} %`;
      nodesBody.innerHTML = `<table class="grid nodes"><caption>Nodes × key metrics (last scan)</caption><thead><tr><th scope="col">Node</th><th scope="col">Status</th><th scope="col">CPU busy</th><th scope="col">Memory used</th><th scope="col" class="num">Load (1 min)</th></tr></thead><tbody>${
        rows.map((r) => `<tr><td>${esc(r.node)}</td><td><span class="status ${esc(r.status)}">${esc(r.status)}</span></td><td>${bar(r.cpu)}</td><td>${r.mem ? `${bar((100 * r.mem.used) / r.mem.total)} of ${fmtBytes(r.mem.total)}` : "–"}</td><td class="num">${esc(round(r.load))}</td></tr>`).join("")
      }</tbody></table>`;
    } catch (e) {
      if (ctx.alive()) nodesBody.replaceChildren(message("error", `Nodes not loaded: ${(e as Error).message}`));
    }
    ctx.ready();
  };
  ctx.onTick(drawGrid);
  await drawGrid();
}
