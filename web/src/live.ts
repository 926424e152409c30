// Live: the agent's WebSocket (/api/v1/ws, protocol at the top of internal/api/ws.go), with
// subscriptions that survive reconnects: when the agent restarts, the client reconnects with
// backoff and subscribes again (asking for history again, so the gap is filled from the
// agent's persisted history).
import type { HistorySeries, Series } from "./api";

export type ConnState = "connecting" | "live" | "reconnecting";

export interface SubOptions {
  /** history window to receive first, e.g. "15m". */
  history?: string;
  /** "rate" turns counters into per-second rates in the history. */
  fn?: "rate";
  onHistory?(series: HistorySeries[]): void;
  onUpdate(ts: number, series: Series[]): void;
  onError?(msg: string): void;
}

/** Subscription is a live selector; close it when its page goes away. */
export interface Subscription {
  close(): void;
}

interface Msg {
  type: string;
  id?: string;
  ts?: number;
  series?: unknown[];
  error?: string;
}

/** Live multiplexes every subscription of the page over one WebSocket. Single-threaded (UI). */
export class Live {
  private ws: WebSocket | null = null;
  private subs = new Map<string, { match: string; opt: SubOptions }>();
  private next = 1;
  private backoff = 250;
  private listeners = new Set<(s: ConnState) => void>();
  state: ConnState = "connecting";

  constructor(private url: string) {
    this.connect();
  }

  /** onState calls fn now and on every connection state change; returns a remover. */
  onState(fn: (s: ConnState) => void): () => void {
    this.listeners.add(fn);
    fn(this.state);
    return () => this.listeners.delete(fn);
  }

  subscribe(match: string, opt: SubOptions): Subscription {
    const id = `s${this.next++}`;
    this.subs.set(id, { match, opt });
    this.send(id);
    return {
      close: () => {
        if (!this.subs.delete(id)) return;
        if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "unsubscribe", id }));
      },
    };
  }

  private send(id: string) {
    const s = this.subs.get(id);
    if (!s || this.ws?.readyState !== WebSocket.OPEN) return; // sent on (re)connect
    const req: Record<string, string> = { type: "subscribe", id, match: s.match };
    if (s.opt.history) req.history = s.opt.history;
    if (s.opt.fn) req.fn = s.opt.fn;
    this.ws.send(JSON.stringify(req));
  }

  private setState(s: ConnState) {
    if (this.state === s) return;
    this.state = s;
    for (const fn of this.listeners) fn(s);
  }

  private connect() {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 250;
      this.setState("live");
      for (const id of this.subs.keys()) this.send(id);
    };
    ws.onmessage = (ev) => {
      let m: Msg;
      try {
        m = JSON.parse(ev.data as string) as Msg;
      } catch {
        return;
      }
      const s = m.id ? this.subs.get(m.id) : undefined;
      if (!s) return;
      switch (m.type) {
        case "history":
          s.opt.onHistory?.((m.series ?? []) as HistorySeries[]);
          break;
        case "update":
          s.opt.onUpdate(m.ts ?? Date.now(), (m.series ?? []) as Series[]);
          break;
        case "error":
          s.opt.onError?.(m.error ?? "error");
          break;
      }
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.setState("reconnecting");
      const wait = this.backoff;
      this.backoff = Math.min(this.backoff * 2, 5000);
      window.setTimeout(() => this.connect(), wait);
    };
    // onerror is always followed by onclose, which reconnects.
    ws.onerror = () => {};
  }
}

/** wsURL is the agent's WebSocket URL for the page's origin. */
export function wsURL(): string {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${location.host}/api/v1/ws`;
}
