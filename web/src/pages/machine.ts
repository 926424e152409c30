// Machine views of the overview page computed from its stores: busy % per CPU, filesystem
// space as df shows it, and disk latency per device. Pure functions of tracks and series
// (no DOM), so the page only draws what they return. Single-threaded (UI).
import { num, type Series } from "../api";
import { align, type Aligned, type Track } from "../store";

/** CPU_MODES are the cpu.<mode>_ms counters whose sum is a CPU's whole time. */
export const CPU_MODES = ["user", "system", "iowait", "nice", "irq", "softirq", "steal", "idle"];

/**
 * perCPU turns per-CPU cpu.<mode>_ms rates (label cpu="N") into one line per CPU, named cpuN
 * in numeric order: 100 × (all − idle − iowait) / all. A scan where a mode is missing or the
 * sum is 0 is a gap (null), never a made-up 0.
 */
export function perCPU(tracks: Track[]): { data: Aligned; names: string[] } | null {
  const byCPU = new Map<string, Map<string, Track>>();
  for (const t of tracks) {
    const cpu = t.labels.cpu, m = /^cpu\.(\w+)_ms$/.exec(t.labels.metric ?? "");
    if (!cpu || !/^\d+$/.test(cpu) || !m || !CPU_MODES.includes(m[1])) continue;
    let modes = byCPU.get(cpu);
    if (!modes) byCPU.set(cpu, (modes = new Map()));
    modes.set(m[1], t);
  }
  const cpus = [...byCPU.keys()].filter((c) => byCPU.get(c)!.size === CPU_MODES.length).sort((a, b) => Number(a) - Number(b));
  if (cpus.length === 0) return null;
  const flat = cpus.flatMap((c) => CPU_MODES.map((m) => byCPU.get(c)!.get(m)!));
  const d = align(flat);
  const ys = d.slice(1) as (number | null | undefined)[][];
  const lines = cpus.map((_, j) => {
    const modes = ys.slice(j * CPU_MODES.length, (j + 1) * CPU_MODES.length);
    return d[0].map((_, i) => {
      let all = 0, idle = 0;
      for (let k = 0; k < modes.length; k++) {
        const v = modes[k][i];
        if (v === undefined) return undefined; // another CPU's point time: no point here
        if (v === null) return null;
        all += v;
        if (CPU_MODES[k] === "idle" || CPU_MODES[k] === "iowait") idle += v;
      }
      return all > 0 ? (100 * (all - idle)) / all : null;
    });
  });
  return { data: [d[0], ...lines], names: cpus.map((c) => `cpu${c}`) };
}

/** FsRow is one mount's space. */
export interface FsRow {
  mountpoint: string;
  device: string;
  fstype: string;
  size: number;
  avail: number;
  /** usePct is df's Use%: used / (used + avail) rounded up, used = size − free. */
  usePct: number;
}

/**
 * fsRows builds one row per mount from the latest fs.size, fs.free and fs.avail series,
 * fullest first. A mount without all three (statfs failed or timed out), or of size 0
 * (proc-like filesystems), is left out: there is no space to show.
 */
export function fsRows(series: Iterable<Series>): FsRow[] {
  const by = new Map<string, Partial<Record<"size" | "free" | "avail", number>> & { l: Series["labels"] }>();
  for (const s of series) {
    const m = /^fs\.(size|free|avail)$/.exec(s.labels.metric ?? "");
    if (!m || s.labels.mountpoint === undefined) continue;
    const v = num(s.value);
    if (v === null || !Number.isFinite(v)) continue;
    const key = s.labels.mountpoint;
    let r = by.get(key);
    if (!r) by.set(key, (r = { l: s.labels }));
    r[m[1] as "size" | "free" | "avail"] = v;
  }
  const out: FsRow[] = [];
  for (const [mp, r] of by) {
    if (r.size === undefined || r.free === undefined || r.avail === undefined || !(r.size > 0)) continue;
    const used = Math.max(0, r.size - r.free);
    const denom = used + r.avail;
    out.push({
      mountpoint: mp, device: r.l.device ?? "", fstype: r.l.fstype ?? "",
      size: r.size, avail: r.avail,
      usePct: denom > 0 ? Math.ceil((100 * used) / denom) : 0,
    });
  }
  return out.sort((a, b) => b.usePct - a.usePct || (a.mountpoint < b.mountpoint ? -1 : 1));
}

/**
 * latency turns per-device disk.{read,write}.{time_ms,ops} rates into average ms per
 * request: two lines per device ("vda read", "vda write"). A scan without requests has no
 * latency: it is a gap (null), never 0 or a division by zero. devices limits the devices
 * (e.g. whole disks only). ios reports whether any request was seen in the window.
 */
export function latency(tracks: Track[], devices: Set<string>): { data: Aligned; names: string[]; ios: boolean } | null {
  const get = (dev: string, op: string, what: string) => tracks.find((t) => t.labels.device === dev && t.labels.metric === `disk.${op}.${what}`);
  const lines: Track[] = [];
  const names: string[] = [];
  for (const dev of [...devices].sort()) {
    for (const op of ["read", "write"]) {
      const time = get(dev, op, "time_ms"), ops = get(dev, op, "ops");
      if (!time || !ops) continue;
      lines.push(time, ops);
      names.push(`${dev} ${op}`);
    }
  }
  if (lines.length === 0) return null;
  const d = align(lines);
  const ys = d.slice(1) as (number | null | undefined)[][];
  let ios = false;
  const out = names.map((_, j) => {
    const time = ys[2 * j], ops = ys[2 * j + 1];
    return time.map((t, i) => {
      const o = ops[i];
      if (t === undefined || o === undefined) return undefined;
      if (t === null || o === null || !(o > 0)) return null;
      ios = true;
      return t / o;
    });
  });
  return { data: [d[0], ...out], names, ios };
}
