// Types and calls of the agent's JSON API (README.md, DESIGN.md contracts).

export type Labels = Record<string, string>;
export type Kind = "counter" | "level" | "float" | "state";
/** A JSON number, or the strings the agent writes for non-finite floats. */
export type Num = number | "NaN" | "+Inf" | "-Inf";

/** Series is one series' latest value (/api/v1/metrics, WebSocket updates). */
export interface Series {
  labels: Labels;
  kind: Kind;
  value: Num | null;
  ts: number;
  rate?: Num;
  text?: string;
  since?: number;
}

/** HistorySeries is one series' points over a window. */
export interface HistorySeries {
  labels: Labels;
  kind: Kind;
  points: [number, Num][];
}

export interface StatsSeries {
  labels: Labels;
  kind: Kind;
  count: number;
  min: Num; max: Num; mean: Num; median: Num; p90: Num; p95: Num; p99: Num; slope: Num;
}

export interface Status {
  node_id: string;
  node_name: string;
  hostname: string;
  version: string;
  started: number;
  uptime_s: number;
  /** host_uptime_s is the machine's uptime (absent when the agent could not read it). */
  host_uptime_s?: number;
  interval_ms: number;
  history_s: number;
  pid: number;
  last_scan: { ts: number; duration_ms: number; scans: number };
  counts: Record<string, number>;
  problems?: { source: string; reason: string }[];
}

export interface Process {
  pid: number;
  ppid: number;
  uid: number;
  name: string;
  cmdline: string[] | null;
  state: string;
  start_time: number;
  threads: number;
  cpu_user: number;
  cpu_system: number;
  cpu_percent: number;
  rss: number;
  vsz: number;
  swap: number;
  read_bytes: number;
  write_bytes: number;
  cgroup: string;
  appname?: string;
  metrics: boolean;
}

export interface Peer {
  id: string;
  name: string;
  addr: string;
  http?: string;
  status: string;
  rtt_ms?: number;
  last_seen?: number | string;
}

export interface ClusterNode<S> {
  node: string;
  status: string;
  error?: string;
  series: S[];
}

export interface ClusterAnswer<S> {
  nodes: ClusterNode<S>[];
  aggregate?: S[];
}

/** APIError is an answer with a 4xx/5xx code; status 0 means the agent was not reached. */
export class APIError extends Error {
  constructor(public status: number, message: string) {
    super(message);
  }
}

/** getJSON fetches url and decodes JSON, turning {"error"} answers into APIError. */
export async function getJSON<T>(url: string, init?: RequestInit): Promise<T> {
  let resp: Response;
  try {
    resp = await fetch(url, { headers: { Accept: "application/json" }, ...init });
  } catch (e) {
    throw new APIError(0, `agent not reachable: ${(e as Error).message}`);
  }
  const text = await resp.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    throw new APIError(resp.status, `bad answer from ${url}: ${text.slice(0, 200)}`);
  }
  if (!resp.ok) {
    const msg = (body as { error?: string }).error ?? `${resp.status} ${resp.statusText}`;
    throw new APIError(resp.status, msg);
  }
  return body as T;
}

/** postJSON sends body as JSON and decodes the answer like getJSON. */
export function postJSON<T>(url: string, body: unknown): Promise<T> {
  return getJSON<T>(url, { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json", Accept: "application/json" } });
}

/** num converts a JSON number or non-finite string to a number. */
export function num(v: Num | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === "number") return v;
  if (v === "+Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  return NaN;
}

/** labelsKey is a canonical key of a label set (sorted). */
export function labelsKey(l: Labels): string {
  return Object.keys(l).sort().map((k) => `${k}=${JSON.stringify(l[k])}`).join(",");
}

/** exactSelector selects exactly the series with labels l. */
export function exactSelector(l: Labels): string {
  // JSON string escapes are valid Go string escapes, which the selector language takes.
  return "{" + Object.keys(l).sort().map((k) => `${k}=${JSON.stringify(l[k])}`).join(", ") + "}";
}

/** reQuote escapes a literal for use in an anchored selector regexp. */
export function reQuote(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The labels the agent adds to every application series; shown apart from the metric's own. */
export const originLabels = new Set(["pid", "process", "cgroup", "appname", "node"]);

/** seriesName writes a series as metric{other labels}, without the labels in skip. */
export function seriesName(l: Labels, skip: Set<string> = new Set()): string {
  const rest = Object.keys(l).filter((k) => k !== "metric" && !skip.has(k)).sort();
  const m = l.metric ?? "";
  if (rest.length === 0) return m;
  return `${m}{${rest.map((k) => `${k}="${l[k]}"`).join(", ")}}`;
}

/** Container is one row of /api/v1/containers (Go: apiwire.Container). */
export interface Container {
  id: string;
  name: string;
  image: string;
  pod?: string;
  namespace?: string;
  cgroup: string;
  node?: string;
  cpu_percent: Num;
  cpu_periods: Num;
  cpu_throttled_periods: Num;
  cpu_throttled_ms: Num;
  throttled_percent: Num;
  memory_usage: number;
  memory_working_set: number;
  memory_rss: number;
  memory_cache: number;
  memory_limit: number;
  oom_events: number;
  oom_kills: number;
  processes: number;
  /** Absent: not collected for this container. */
  io_read_rate?: Num;
  io_write_rate?: Num;
  net_rx_rate?: Num;
  net_tx_rate?: Num;
  ts: number;
}
