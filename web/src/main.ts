// The cantal-agent web UI: a small single-page app. Each page is a route (History API, so
// every page is bookmarkable and the agent serves index.html for it); live data comes from
// the agent's WebSocket through one shared Live connection.
import "./style.css";
import { getJSON, type Peer, type Status } from "./api";
import { alertsBadge } from "./alerts";
import { ChartGroup } from "./chart";
import { h } from "./dom";
import { fmtDuration } from "./format";
import { Live, wsURL, type SubOptions, type Subscription } from "./live";
import { overview } from "./pages/overview";
import { processes } from "./pages/processes";
import { processPage } from "./pages/process";
import { seriesList } from "./pages/series";
import { chartPage } from "./pages/chart";
import { cgroups } from "./pages/cgroups";
import { containerPage, containers } from "./pages/containers";
import { network } from "./pages/network";
import { peers } from "./pages/peers";
import { cluster } from "./pages/cluster";

/** Ctx is what a page gets: its root, its URL, and live data that ends when it is left. */
export interface Ctx {
  root: HTMLElement;
  path: string;
  params: URLSearchParams;
  live: Live;
  /** charts is the page's chart group: shared crosshair, zoom and pause. */
  charts: ChartGroup;
  /** status fetches /api/v1/status (cached for one scan). */
  status(): Promise<Status>;
  /** sub subscribes for the page's lifetime. */
  sub(match: string, opt: SubOptions): Subscription;
  /** onTick calls fn after every scan (for data only fetched over HTTP). */
  onTick(fn: (ts: number) => void): void;
  /** cleanup runs fn when the page is left. */
  cleanup(fn: () => void): void;
  /** ready marks the page as rendered with data (the browser tests wait for it). */
  ready(): void;
  /** go navigates to url (pushState), or replaces the URL when replace is set. */
  go(url: string, replace?: boolean): void;
  /** alive is false once the page was left; async work checks it before touching the DOM. */
  alive(): boolean;
}

type Page = (ctx: Ctx) => void | Promise<void>;

interface Route {
  re: RegExp;
  page: Page;
  nav?: string;
}

const routes: Route[] = [
  { re: /^\/$/, page: overview, nav: "/" },
  { re: /^\/processes$/, page: processes, nav: "/processes" },
  { re: /^\/process\/\d+$/, page: processPage, nav: "/processes" },
  { re: /^\/series$/, page: seriesList, nav: "/series" },
  { re: /^\/series\/chart$/, page: chartPage, nav: "/series" },
  { re: /^\/containers$/, page: containers, nav: "/containers" },
  { re: /^\/container\/[^/]+$/, page: containerPage, nav: "/containers" },
  { re: /^\/cgroups$/, page: cgroups, nav: "/cgroups" },
  { re: /^\/network$/, page: network, nav: "/network" },
  { re: /^\/peers$/, page: peers, nav: "/peers" },
  { re: /^\/cluster$/, page: cluster, nav: "/cluster" },
];

const navItems: [string, string][] = [
  ["/", "Overview"],
  ["/processes", "Processes"],
  ["/series", "Metrics"],
  ["/containers", "Containers"],
  ["/cgroups", "Cgroups"],
  ["/network", "Network"],
  ["/peers", "Peers"],
  ["/cluster", "Cluster"],
];

const live = new Live(wsURL());
let statusCache: { at: number; p: Promise<Status> } | null = null;
function status(): Promise<Status> {
  const now = Date.now();
  if (!statusCache || now - statusCache.at > 1000) {
    statusCache = { at: now, p: getJSON<Status>("/api/v1/status") };
    statusCache.p.catch(() => (statusCache = null));
  }
  return statusCache.p;
}

// ---- theme ----

type ThemeChoice = "auto" | "light" | "dark";
const media = window.matchMedia("(prefers-color-scheme: dark)");
function themeChoice(): ThemeChoice {
  const v = localStorage.getItem("cantal-theme");
  return v === "light" || v === "dark" ? v : "auto";
}
function applyTheme() {
  const c = themeChoice();
  const eff = c === "auto" ? (media.matches ? "dark" : "light") : c;
  document.documentElement.dataset.theme = eff;
  themeBtn.textContent = `Theme: ${c}`;
  themeBtn.setAttribute("aria-label", `Colour theme: ${c} (now ${eff}); change`);
}

// ---- layout ----

const themeBtn = h("button", { type: "button", class: "theme", title: "Switch between automatic, light and dark themes" });
const connBadge = h("span", { class: "conn", role: "status", "aria-live": "polite" });
const peersBadge = h("a", { class: "peers-down", href: "/peers", role: "status", "aria-live": "polite", hidden: true });
const hostEl = h("span", { class: "host" });
const navEl = h("nav", { "aria-label": "Pages" },
  h("ul", {}, navItems.map(([href, label]) => h("li", {}, h("a", { href }, label)))));
const main = h("main", { id: "content", tabindex: "-1" });
document.body.append(
  h("a", { class: "skip", href: "#content" }, "Skip to content"),
  h("header", {}, h("a", { class: "brand", href: "/" }, "cantal"), hostEl, h("span", { class: "spacer" }), alertsBadge(), peersBadge, connBadge, themeBtn),
  navEl,
  main,
);

themeBtn.addEventListener("click", () => {
  const order: ThemeChoice[] = ["auto", "light", "dark"];
  const next = order[(order.indexOf(themeChoice()) + 1) % order.length];
  if (next === "auto") localStorage.removeItem("cantal-theme");
  else localStorage.setItem("cantal-theme", next);
  applyTheme();
  render(); // charts take their colours when created
});
media.addEventListener("change", () => {
  if (themeChoice() === "auto") {
    applyTheme();
    render();
  }
});
applyTheme();

// ---- health: is this agent live, are its peers? ----
// The header says "● live" only while the WebSocket is open AND scans keep arriving: a node
// that stops answering (hung, partitioned, its host gone without closing the socket) turns the
// badge to "no data" after four scan intervals (at least 6 s: a scan late under load is not a
// dead node), every page alike.
let lastTick = Date.now();
let intervalMs = 2000;
function showConn() {
  const s = live.state;
  const silent = Date.now() - lastTick;
  const late = s === "live" && silent > Math.max(6000, 4 * intervalMs);
  connBadge.textContent = late ? `● no data for ${fmtDuration(silent / 1000)}` : s === "live" ? "● live" : s === "connecting" ? "connecting…" : "reconnecting…";
  connBadge.className = `conn ${late ? "silent" : s}`;
  connBadge.title = late ? "The agent's WebSocket is open but no scan arrived: the node may be hung or cut off" : "";
}
live.onState((s) => {
  if (s === "live") {
    lastTick = Date.now();
    refreshHeader();
  }
  showConn();
});
window.setInterval(showConn, 1000);

// Peers that gossip says are not alive, named in the header on every page (polled every 3 s,
// so a node killed is named within one probe plus one poll).
let peersBusy = false;
async function refreshPeers() {
  if (peersBusy) return;
  peersBusy = true;
  try {
    const ans = await getJSON<{ peers: Peer[] }>("/api/v1/peers", { signal: AbortSignal.timeout(2500) });
    const down = (ans.peers ?? []).filter((p) => p.status !== "alive").sort((a, b) => a.name.localeCompare(b.name));
    peersBadge.hidden = down.length === 0;
    peersBadge.textContent = down.length === 0 ? "" : `⚠ ${down.length} node${down.length > 1 ? "s" : ""} down: ${down.map((p) => `${p.name || p.addr} (${p.status})`).join(", ")}`;
    peersBadge.dataset.down = down.map((p) => p.name || p.addr).join(",");
  } catch {
    /* the connection badge tells when this agent does not answer */
  } finally {
    peersBusy = false;
  }
}
window.setInterval(refreshPeers, 3000);
refreshPeers();

/** hostUp is the host's uptime as last read (seconds) and when, for the header's "up …". */
let hostUp: { s: number; at: number } | null = null;
async function refreshHeader() {
  try {
    const st = await status();
    document.title = `${st.node_name} · cantal`;
    if (st.host_uptime_s && !hostUp) hostUp = { s: st.host_uptime_s, at: Date.now() };
    if (st.interval_ms > 0) intervalMs = st.interval_ms;
    // The node as the cluster names it (--node-name); the host name and the agent's own
    // uptime in the tooltip.
    hostEl.textContent = st.node_name;
    hostEl.title = `node ${st.node_name} (${st.node_id}) on host ${st.hostname}, cantal-agent ${st.version}, agent up ${fmtDuration(st.uptime_s)}`;
    showUptime();
  } catch {
    /* the connection badge tells */
  }
}

function showUptime() {
  if (hostUp) hostEl.dataset.uptime = fmtDuration(hostUp.s + (Date.now() - hostUp.at) / 1000);
}

// ---- ticks: one subscription shared by every page ----

const tickFns = new Set<(ts: number) => void>();
live.subscribe(`{metric="system.uptime_s"}`, {
  onUpdate(ts, series) {
    lastTick = Date.now();
    showConn();
    for (const fn of tickFns) fn(ts);
    // The host's uptime, as this scan read it.
    const v = series[0]?.value;
    if (typeof v === "number") hostUp = { s: v, at: Date.now() };
    showUptime();
  },
});

// ---- router ----

let leave: (() => void) | null = null;
let generation = 0;

function render() {
  leave?.();
  const gen = ++generation;
  const path = location.pathname.replace(/\/+$/, "") || "/";
  const route = routes.find((r) => r.re.test(path));
  for (const a of navEl.querySelectorAll("a")) {
    if (route?.nav === a.getAttribute("href")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  delete document.body.dataset.ready;
  main.replaceChildren();
  const cleanups: (() => void)[] = [];
  const ctx: Ctx = {
    root: main,
    path,
    params: new URLSearchParams(location.search),
    live,
    charts: new ChartGroup(`page-${gen}`),
    status,
    sub(match, opt) {
      const s = live.subscribe(match, opt);
      cleanups.push(() => s.close());
      return s;
    },
    onTick(fn) {
      tickFns.add(fn);
      cleanups.push(() => tickFns.delete(fn));
    },
    cleanup(fn) {
      cleanups.push(fn);
    },
    ready() {
      if (gen === generation) document.body.dataset.ready = path;
    },
    go,
    alive: () => gen === generation,
  };
  leave = () => {
    for (const fn of cleanups.splice(0)) fn();
  };
  if (!route) {
    main.append(h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, `No page at ${path}. `, h("a", { href: "/" }, "Overview")));
    ctx.ready();
    return;
  }
  Promise.resolve(route.page(ctx)).catch((e: Error) => {
    if (!ctx.alive()) return;
    main.append(h("p", { class: "error", role: "alert" }, `This page failed: ${e.message}`));
    ctx.ready();
  });
}

function go(url: string, replace = false) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
  if (!replace) {
    window.scrollTo(0, 0);
    (main.querySelector("h1") as HTMLElement | null)?.focus({ preventScroll: true });
  }
}

document.addEventListener("click", (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = (ev.target as Element).closest("a");
  if (!a || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || a.getAttribute("href")?.startsWith("#")) return;
  if (url.pathname === "/metrics" || url.pathname === "/influx") return; // the agent's exports
  ev.preventDefault();
  go(url.pathname + url.search);
});
window.addEventListener("popstate", render);

// "/" focuses the page's search box, as in most consoles.
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target as HTMLElement;
  if (t.closest("input, textarea, select, [contenteditable]")) return;
  const box = main.querySelector<HTMLInputElement>("[data-search]");
  if (box) {
    ev.preventDefault();
    box.focus();
    box.select();
  }
});

render();
