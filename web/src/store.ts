// Store keeps a window of points per series from a subscription's history and updates.
import { labelsKey, num, type HistorySeries, type Kind, type Labels, type Series } from "./api";

/** Track is one series' points (ts in unix ms) and its latest sample. */
export interface Track {
  key: string;
  labels: Labels;
  kind: Kind;
  ts: number[];
  v: (number | null)[];
  last?: Series;
}

/** Store holds the tracks of one subscription, trimmed to a window. Single-threaded (UI). */
export class Store {
  tracks = new Map<string, Track>();
  /** lastTS is the timestamp of the last update applied. */
  lastTS = 0;

  constructor(public windowMs: number, public rate: boolean) {}

  private track(labels: Labels, kind: Kind): Track {
    const key = labelsKey(labels);
    let t = this.tracks.get(key);
    if (!t) {
      t = { key, labels, kind, ts: [], v: [] };
      this.tracks.set(key, t);
    }
    return t;
  }

  /** history replaces the points of every series in hs. */
  history(hs: HistorySeries[]) {
    for (const h of hs) {
      const t = this.track(h.labels, h.kind);
      t.ts = h.points.map((p) => p[0]);
      t.v = h.points.map((p) => num(p[1]));
    }
  }

  /** update appends the values of one scan; rates replace counters when the store is a rate store. */
  update(ts: number, series: Series[]) {
    this.lastTS = Math.max(this.lastTS, ts);
    const cut = ts - this.windowMs;
    for (const s of series) {
      const t = this.track(s.labels, s.kind);
      t.last = s;
      if (s.kind === "state") continue;
      const v = this.rate && s.kind === "counter" ? num(s.rate) : num(s.value);
      if (v === null) continue; // a counter's first scan has no rate yet
      const n = t.ts.length;
      if (n > 0 && t.ts[n - 1] >= s.ts) continue; // already in the history
      t.ts.push(s.ts);
      t.v.push(v);
      let drop = 0;
      while (drop < t.ts.length && t.ts[drop] < cut) drop++;
      if (drop > 0) {
        t.ts.splice(0, drop);
        t.v.splice(0, drop);
      }
    }
  }

  /** find returns the tracks whose labels pass fn, sorted by key. */
  find(fn: (l: Labels) => boolean = () => true): Track[] {
    const out: Track[] = [];
    for (const t of this.tracks.values()) if (fn(t.labels)) out.push(t);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** get returns the track of the series with metric m (and the other labels in extra). */
  get(metric: string, extra: Labels = {}): Track | undefined {
    for (const t of this.tracks.values()) {
      if (t.labels.metric !== metric) continue;
      if (Object.entries(extra).every(([k, v]) => t.labels[k] === v)) return t;
    }
    return undefined;
  }
}

/**
 * Aligned is uPlot's data layout: x in seconds, then one array per line. In a line, null is a
 * gap (no point where one was due: uPlot breaks the line) and undefined is "this line has no
 * point at another line's time" (uPlot joins its neighbours): lines from different nodes, which
 * scan at their own phase, share one x axis without breaking each other into dots.
 */
export type Aligned = [number[], ...(number | null | undefined)[][]];

/**
 * gapAfter returns how far apart two points of ts may be before the line breaks: 1.5 times
 * the median step (the scan interval), at least one second. One missed scan (two steps) is
 * a gap; a scan late by less than half an interval is not.
 */
export function gapAfter(ts: number[]): number {
  if (ts.length < 3) return Infinity;
  const d: number[] = [];
  for (let i = 1; i < ts.length; i++) d.push(ts[i] - ts[i - 1]);
  d.sort((a, b) => a - b);
  return Math.max(1000, d[d.length >> 1] * 1.5);
}

/**
 * alignPoints puts lines of (ts ms, value) points on one time axis (the union of their
 * timestamps, in seconds). A line has undefined at the other lines' timestamps, and null
 * one millisecond after a point followed by a gap (a step over 1.5 scan intervals), so a
 * missing point is drawn as a break, never bridged.
 */
export function alignPoints(lines: Line[]): Aligned {
  const all = new Set<number>();
  const breaks: number[][] = lines.map((l) => {
    const gap = gapAfter(l.ts);
    const out: number[] = [];
    for (let i = 0; i < l.ts.length; i++) {
      all.add(l.ts[i]);
      if (i + 1 < l.ts.length && l.ts[i + 1] - l.ts[i] > gap) {
        out.push(l.ts[i] + 1);
        all.add(l.ts[i] + 1);
      }
    }
    return out;
  });
  const xs = [...all].sort((a, b) => a - b);
  const index = new Map<number, number>();
  xs.forEach((ts, i) => index.set(ts, i));
  const ys = lines.map((l, j) => {
    const y: (number | null | undefined)[] = new Array(xs.length).fill(undefined);
    l.ts.forEach((ts, i) => (y[index.get(ts)!] = l.v[i]));
    for (const b of breaks[j]) if (y[index.get(b)!] === undefined) y[index.get(b)!] = null;
    return y;
  });
  return [xs.map((ms) => ms / 1000), ...ys];
}

/** align puts tracks on one time axis; see alignPoints. */
export function align(tracks: Track[]): Aligned {
  return alignPoints(tracks);
}

/**
 * combine builds one line from several aligned lines with fn (e.g. a sum), null where any
 * input is null.
 */
export function combine(lines: (number | null | undefined)[][], fn: (vs: number[]) => number): (number | null)[] {
  if (lines.length === 0) return [];
  return lines[0].map((_, i) => {
    const vs: number[] = [];
    for (const l of lines) {
      const v = l[i];
      if (v === null || v === undefined) return null;
      vs.push(v);
    }
    return fn(vs);
  });
}

export const sum = (vs: number[]) => vs.reduce((a, b) => a + b, 0);

/** Line is one line's points: ts in unix ms, v its values (null: no value at that scan). */
export interface Line {
  ts: number[];
  v: (number | null)[];
}

/**
 * sumLines builds one line summing, at each timestamp any of lines has, the values of the
 * lines that have a point there: a line without one (an interface that did not exist yet, or
 * no longer) adds nothing instead of blanking the sum. A timestamp where every point is null
 * or not finite is null. The sum's own gaps (no line had a point for a while) are found by
 * alignPoints like any line's.
 */
export function sumLines(lines: Line[]): Line {
  const by = new Map<number, number | null>();
  for (const l of lines) {
    for (let i = 0; i < l.ts.length; i++) {
      const ts = l.ts[i], v = l.v[i];
      if (v === null || !Number.isFinite(v)) {
        if (!by.has(ts)) by.set(ts, null);
        continue;
      }
      by.set(ts, (by.get(ts) ?? 0) + v);
    }
  }
  const ts = [...by.keys()].sort((a, b) => a - b);
  return { ts, v: ts.map((t) => by.get(t) ?? null) };
}
