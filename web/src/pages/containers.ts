// Containers: every container the agent names (/api/v1/containers), sortable, refreshed after
// every scan; a container opens its page: its cgroup's charts over 15 minutes (history, then
// live) and its processes.
import { exactSelector, getJSON, num, type ClusterAnswer, type Container, type HistorySeries, type Num, type Peer, type Process, type Series } from "../api";
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

/** ContainersAnswer is /api/v1/containers' answer; /api/v1/cluster/containers' has nodes too. */
interface ContainersAnswer {
  containers: Container[];
  total: number;
  nodes?: NodeHead[];
}

/** NodeHead is a node's head in a cluster answer: whether it answered. */
interface NodeHead {
  node: string;
  status: string;
  since?: number;
  error?: string;
}

/** containerHref is a row's page: this node's /container/ID, a peer's with ?node=. */
export function containerHref(c: Container, cluster: boolean): string {
  const p = `/container/${encodeURIComponent(c.id)}`;
  return cluster && c.node ? `${p}?node=${encodeURIComponent(c.node)}` : p;
}

/**
 * downText names the nodes of a cluster answer that did not answer now (any status but ok),
 * with their status: an unreachable node's containers are not listed, a stale or busy node's
 * rows are its last known values. Empty when every node answered.
 */
export function downText(nodes: NodeHead[]): string {
  const down = nodes.filter((n) => n.status !== "ok");
  if (down.length === 0) return "";
  return `Not answering now: ${down.map((n) => `${n.node} (${n.status})`).join(", ")}. An unreachable node's containers are not listed; a stale node's rows are its last known values.`;
}

export function containers(ctx: Ctx) {
  const root = ctx.root;
  // view=cluster: every node's containers (/api/v1/cluster/containers), with a Node column.
  const cluster = ctx.params.get("view") === "cluster";
  const sortParam = ctx.params.get("sort") ?? "-cpu";
  const urlOf = (view: boolean, key: string, desc: boolean) => {
    const p = new URLSearchParams();
    if (view) p.set("view", "cluster");
    if (key !== "cpu" || !desc) p.set("sort", `${desc ? "-" : ""}${key}`);
    const s = p.toString();
    return `/containers${s ? "?" + s : ""}`;
  };
  const nameCol = {
    key: "name", label: "Name", sort: (c: Container) => c.name.toLowerCase(),
    html: (c: Container) => `<a class="ctr" data-id="${esc(c.id)}"${cluster ? ` data-node="${esc(c.node ?? "")}"` : ""} data-ts="${c.ts}" href="${esc(containerHref(c, cluster))}">${esc(c.name || c.id)}</a>`,
  };
  const nodeCol = { key: "node", label: "Node", sort: (c: Container) => c.node ?? "", html: (c: Container) => `<span class="node">${esc(c.node ?? "")}</span>` };
  const table = new SortTable<Container>([
    nameCol,
    ...(cluster ? [nodeCol] : []),
    { key: "image", label: "Image", sort: (c) => c.image, html: (c) => `<span class="mono image">${esc(c.image)}</span>` },
    { key: "pod", label: "Pod", sort: (c) => podText(c), html: (c) => `<span class="pod">${esc(podText(c))}</span>` },
    { key: "cpu", label: "CPU (100 % = one core)", num: true, sort: (c) => num(c.cpu_percent) ?? -1, html: cpuText },
    { key: "mem", label: "Memory (working set)", num: true, sort: (c) => c.memory_working_set, html: memText },
    { key: "oom", label: "OOM kills", num: true, sort: (c) => c.oom_kills, html: (c) => `<span class="oom">${c.oom_kills}</span>` },
    { key: "procs", label: "Processes", num: true, sort: (c) => c.processes, html: (c) => `<span class="procs">${c.processes}</span>` },
    { key: "io", label: "Disk read / write", num: true, sort: (c) => (num(c.io_read_rate) ?? -1) + (num(c.io_write_rate) ?? 0), html: (c) => `<span class="io">${esc(fmtRate(c.io_read_rate))} / ${esc(fmtRate(c.io_write_rate))}</span>` },
    { key: "net", label: "Network in / out", num: true, sort: (c) => (num(c.net_rx_rate) ?? -1) + (num(c.net_tx_rate) ?? 0), html: (c) => `<span class="net">${esc(fmtRate(c.net_rx_rate))} / ${esc(fmtRate(c.net_tx_rate))}</span>` },
  ], sortParam.replace(/^-/, ""), sortParam.startsWith("-"), (key, desc) => {
    history.replaceState(null, "", urlOf(cluster, key, desc));
  }, cluster ? "Containers of every node" : "Containers");
  table.rowKey = (c) => `${c.node ?? ""}\u0000${c.id}`;
  // The switch re-renders the page under the new URL (the columns differ), keeping the sort.
  const viewBtn = (label: string, on: boolean) => h("button", {
    type: "button", "aria-pressed": String(cluster === on), "data-view": on ? "cluster" : "node",
    onclick: () => { if (cluster !== on) ctx.go(urlOf(on, table.sortKey, table.desc), true); },
  }, label);
  const note = h("div");
  const down = h("div");
  const count = h("span", { class: "count", role: "status" });
  root.append(heading("Containers", cluster
    ? "Every container of every node of the cluster by name, refreshed after each scan. A container opens its charts."
    : "Every container on the node by name (Podman, Docker), refreshed after each scan. A container opens its charts and processes."),
  h("div", { class: "toolbar" }, h("span", { class: "seg", role: "group", "aria-label": "Containers of" }, viewBtn("This node", false), viewBtn("Whole cluster", true)), count),
  note, down, h("div", { class: "table-wrap" }, table.el));

  let busy = false;
  let shownDown = "";
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try {
      const ans = await getJSON<ContainersAnswer>(cluster ? "/api/v1/cluster/containers" : "/api/v1/containers");
      if (!ctx.alive()) return;
      const nodes = ans.nodes ?? [];
      if (cluster) {
        note.replaceChildren(nodes.length <= 1 ? message("info", "This agent knows no peer: the cluster is this node alone (start agents with --cluster-name and --peer, see the ", h("a", { href: "/peers" }, "Peers"), " page).") :
          ans.total === 0 ? message("info", "No containers named on any node.") : "");
        count.textContent = `${ans.total} containers on ${nodes.filter((n) => n.status === "ok").length} of ${nodes.length} nodes`;
        // One line naming the nodes that did not answer, replaced only when it changes.
        const text = downText(nodes);
        if (text !== shownDown) {
          const box = text ? message("error", text) : null;
          if (box) {
            box.classList.add("nodes-down");
            box.dataset.nodes = nodes.filter((n) => n.status !== "ok").map((n) => n.node).join(",");
          }
          down.replaceChildren(box ?? "");
          shownDown = text;
        }
      } else {
        note.replaceChildren(ans.total === 0 ? message("info", "No containers named on this node: the agent names Podman's and Docker's containers when it runs as root (see docs/containers.md).") : "");
        count.textContent = `${ans.total} containers`;
      }
      // Rows are not rewritten under a keyboard user in them; a sort button (the header is not
      // rewritten) keeps the focus after a click without stopping the live rows.
      if (!table.el.tBodies[0].contains(document.activeElement)) table.set(ans.containers);
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
  // ?node=NAME: the container of that node. A peer's container is read through the cluster
  // routes (its row from /api/v1/cluster/containers, its history from /api/v1/cluster/history,
  // its latest values from /api/v1/cluster/metrics, all with node=NAME); this node's through
  // its own API and the WebSocket.
  const want = ctx.params.get("node") ?? "";
  const self = want ? (await ctx.status()).node_name : "";
  if (!ctx.alive()) return;
  const node = want && want !== self ? want : "";
  const ans = await getJSON<ContainersAnswer>(node ? "/api/v1/cluster/containers" : "/api/v1/containers");
  if (!ctx.alive()) return;
  const c = ans.containers.find((x) => x.id === id && (!node || x.node === node));
  root.append(heading(c ? `Container ${c.name}` : `Container ${id}`, node ? `On node ${node}.` : undefined));
  if (!c) {
    const head = node ? (ans.nodes ?? []).find((n) => n.node === node) : undefined;
    const why = !node ? `No container ${id} on this node now: it may have stopped. `
      : !head ? `No node ${node} in the cluster now. `
      : head.status === "ok" ? `No container ${id} on ${node} now: it may have stopped. `
      : `Node ${node} is not answering now (${head.status}): its containers are not listed. `;
    root.append(message("info", why, h("a", { href: node ? "/containers?view=cluster" : "/containers" }, "All containers")));
    ctx.ready();
    return;
  }
  const facts = h("dl", { class: "facts" },
    node ? [h("dt", {}, "Node"), h("dd", { class: "node" }, node)] : null,
    h("dt", {}, "Image"), h("dd", { class: "mono" }, c.image),
    h("dt", {}, "Id"), h("dd", { class: "mono" }, c.id),
    c.pod ? [h("dt", {}, "Pod"), h("dd", {}, podText(c))] : null,
    h("dt", {}, "Cgroup"), h("dd", { class: "mono" }, c.cgroup),
    h("dt", {}, "Memory limit"), h("dd", {}, c.memory_limit ? fmtBytes(c.memory_limit) : "none"),
    h("dt", {}, "OOM kills"), h("dd", { class: "oom" }, String(c.oom_kills)));
  const sel = exactSelector({ container_id: c.id, cgroup: c.cgroup });
  const cpuSel = exactSelector({ metric: "cgroup.cpu.usage_ms", container_id: c.id, cgroup: c.cgroup, node });
  root.append(facts, h("p", { class: "toolbar" }, node
    ? h("a", { class: "button", href: `/cluster?match=${encodeURIComponent(cpuSel)}&window=1h` }, "Its CPU on the Cluster page")
    : [h("a", { class: "button", href: `/series?match=${encodeURIComponent(sel)}` }, "All its series"),
      h("a", { class: "button", href: `/series/chart?match=${encodeURIComponent(sel)}&window=1h` }, "Its charts over 1 h")]));

  const grid = h("section", { class: "charts", "aria-label": "Container charts" });
  root.append(grid);
  const cpuChart = new TimeChart(grid, { group: ctx.charts, title: "Container CPU (100 % = one core)", unit: "%" });
  const memChart = new TimeChart(grid, { group: ctx.charts, title: "Container memory", unit: "bytes" });
  const ioChart = new TimeChart(grid, { group: ctx.charts, title: "Container disk I/O", unit: "bytes/s" });
  const netChart = new TimeChart(grid, { group: ctx.charts, title: "Container network", unit: "bytes/s" });
  ctx.cleanup(() => [cpuChart, memChart, ioChart, netChart].forEach((x) => x.destroy()));

  if (node) void remoteProcesses(ctx, node, c);
  else localProcesses(ctx, c);

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
  const match = `{container_id=${JSON.stringify(c.id)}, cgroup=${JSON.stringify(c.cgroup)}, metric=~"cgroup\\\\..*"}`;
  if (!node) {
    ctx.sub(match, {
      history: "15m", fn: "rate",
      onHistory: (hs) => { store.history(hs); draw(); },
      onUpdate: (ts, s) => { store.update(ts, s); draw(); ctx.ready(); },
    });
    return;
  }
  // A peer's container: its history through the hub, then its latest values after every scan
  // of this node (the UI's beat), as the Cluster page reads a peer.
  const q = `match=${encodeURIComponent(match)}&node=${encodeURIComponent(node)}&fn=rate`;
  try {
    const hist = await getJSON<ClusterAnswer<HistorySeries>>(`/api/v1/cluster/history?${q}&window=15m`);
    if (!ctx.alive()) return;
    store.history(hist.nodes.find((n) => n.node === node)?.series ?? []);
    draw();
  } catch (e) {
    if (ctx.alive()) grid.before(message("error", `History of ${node} not loaded: ${(e as Error).message}`));
  }
  const status = h("div");
  grid.before(status);
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const cur = await getJSON<ClusterAnswer<Series>>(`/api/v1/cluster/metrics?${q}`);
      if (!ctx.alive()) return;
      const n = cur.nodes.find((x) => x.node === node);
      status.replaceChildren(!n || n.status === "ok" ? "" : message("error", `${node} is not answering now (${n.status}): the charts stop at its last values.`));
      if (n?.status === "ok" && n.series.length > 0) {
        store.update(Math.max(...n.series.map((s) => s.ts)), n.series);
        draw();
      }
    } catch {
      /* the next scan retries */
    } finally {
      busy = false;
      if (ctx.alive()) ctx.ready();
    }
  };
  ctx.onTick(tick);
  await tick();
}

/** localProcesses lists the processes of this node's container c (its cgroup and those below). */
function localProcesses(ctx: Ctx, c: Container) {
  const root = ctx.root;
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
  procTable.rowKey = (p) => `${p.pid}:${p.start_time}`;
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
}

/**
 * remoteProcesses says where a peer's container's processes are: the agent of that node lists
 * them (process series are not asked across the cluster), on its own UI when its address is
 * known.
 */
async function remoteProcesses(ctx: Ctx, node: string, c: Container) {
  const p = h("p", { class: "remote-procs" }, `Its processes are listed by ${node}'s own agent.`);
  ctx.root.append(h("h2", {}, "Processes"), p);
  try {
    const peers = (await getJSON<{ peers: Peer[] }>("/api/v1/peers")).peers ?? [];
    const peer = peers.find((x) => x.name === node);
    if (!ctx.alive() || !peer?.http) return;
    p.append(" ", h("a", { href: `http://${peer.http}${containerHref(c, false)}`, target: "_blank", rel: "noopener" }, `Open it on ${node}'s page`));
  } catch {
    /* the text stands without the link */
  }
}
