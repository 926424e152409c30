// Number, unit and time formatting shared by tables and chart axes.

/**
 * Unit of a value as shown on an axis or in a table: one of the known kinds ("", "%", "bytes",
 * "bytes/s", "ms", "ms/s", "s", "s/s", "/s", "load"), or any other text from a series' `unit`
 * label, written after the number (a per-second rate of it ends in "/s").
 */
export type Unit = string;

const IEC = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const SI = ["", "k", "M", "G", "T", "P"];

/** fmtBytes writes a byte count with IEC prefixes: 1536 → "1.5 KiB". */
export function fmtBytes(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  let i = 0;
  let a = Math.abs(v);
  while (a >= 1024 && i < IEC.length - 1) {
    a /= 1024;
    i++;
  }
  return `${v < 0 ? "-" : ""}${trim(a)} ${IEC[i]}`;
}

/**
 * BYTE_INCRS are the tick steps of a byte axis: 1, 2, 5, 10, 20, 50, 100, 200 and 500 of each
 * binary unit (B, KiB, MiB, …), and fractions of a byte for tiny rates, so every tick is a
 * round number in the unit it is written in (0, 2, 4, 6 GiB; not 9.31 GiB, which is the
 * decimal step 10 000 000 000 written in binary units).
 */
export const BYTE_INCRS: number[] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5].concat(
  ...IEC.map((_, i) => [1, 2, 5, 10, 20, 50, 100, 200, 500].map((m) => m * 1024 ** i)));

/**
 * fmtByteTicks writes the ticks of one byte axis, all in the unit of the step incr (one of
 * BYTE_INCRS), so they read as round numbers: 512 MiB steps → "0 MiB", "512 MiB", "1024 MiB".
 * suffix follows the unit ("/s" for rates).
 */
export function fmtByteTicks(splits: number[], incr: number, suffix = ""): string[] {
  let i = 0;
  while (i < IEC.length - 1 && incr >= 1024 ** (i + 1)) i++;
  const d = 1024 ** i;
  return splits.map((v) => {
    const x = v / d;
    const r = Math.round(x);
    const txt = Math.abs(x - r) < 1e-9 * Math.max(1, Math.abs(x)) ? String(r) : String(Number(x.toPrecision(3)));
    return `${txt} ${IEC[i]}${suffix}`;
  });
}

/** fmtNum writes a number with SI suffixes: 12345 → "12.3k". */
export function fmtNum(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  let i = 0;
  let a = Math.abs(v);
  while (a >= 1000 && i < SI.length - 1) {
    a /= 1000;
    i++;
  }
  return `${v < 0 ? "-" : ""}${trim(a)}${SI[i]}`;
}

function trim(a: number): string {
  if (a === 0) return "0";
  if (a >= 100) return a.toFixed(0);
  if (a >= 10) return a.toFixed(1).replace(/\.0$/, "");
  if (a >= 0.01) return a.toFixed(2).replace(/\.?0+$/, "");
  return a.toPrecision(2);
}

/** fmtDuration writes seconds as "3d 4h", "2h 5m", "4m 10s" or "12s". */
export function fmtDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return "–";
  const s = Math.floor(sec);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

/** fmtUnit writes v in unit, e.g. fmtUnit(2048, "bytes/s") → "2 KiB/s". */
export function fmtUnit(v: number | null | undefined, unit: Unit): string {
  if (v === null || v === undefined) return "–";
  if (!Number.isFinite(v)) return String(v);
  switch (unit) {
    case "%":
      return `${trim(v)} %`;
    case "bytes":
      return fmtBytes(v);
    case "bytes/s":
      return `${fmtBytes(v)}/s`;
    case "ms":
      return Math.abs(v) >= 1000 ? fmtSeconds(v / 1000) : `${fmtNum(v)} ms`;
    case "ms/s":
      return `${fmtNum(v)} ms/s`;
    case "s":
      return fmtSeconds(v);
    case "s/s":
      return `${fmtNum(v)} s/s`;
    case "/s":
      return `${fmtNum(v)}/s`;
    case "":
    case "load":
      return fmtNum(v);
    default:
      return `${fmtNum(v)} ${unit}`;
  }
}

/** fmtSeconds writes a duration in seconds: "250 ms" below one second, "12.5 s", then "4m 10s". */
export function fmtSeconds(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return "0 s";
  if (a < 1) return `${fmtNum(v * 1000)} ms`;
  if (a < 60) return `${v < 0 ? "-" : ""}${trim(a)} s`;
  return (v < 0 ? "-" : "") + fmtDuration(a);
}

/** round writes a plain number rounded for reading (load 5.5600000000000005 → "5.56"). */
export function round(v: number | null | undefined): string {
  if (v === null || v === undefined) return "–";
  return fmtNum(v);
}

/** axisLabel is the unit as written on an axis. */
export function axisLabel(unit: Unit): string {
  switch (unit) {
    case "":
      return "value";
    case "s":
      return "seconds";
    case "s/s":
      return "seconds/s";
    default:
      return unit;
  }
}

/**
 * guessUnit derives a series' unit from its metric name and kind (the agent's naming
 * conventions: *_ms, *_s, *bytes, memory.*), per second when rate is shown.
 */
export function guessUnit(metric: string, kind: string, rate: boolean, labels?: Record<string, string>): Unit {
  const perSec = rate && kind === "counter";
  const declared = labels?.unit ? unitLabel(labels.unit) : "";
  if (declared) return perSec ? (declared === "%" ? "%" : `${declared}/s`) : declared;
  const m = metric.toLowerCase();
  if (m.endsWith("_ms")) return perSec ? "ms/s" : "ms";
  if (/(bytes|^memory\.|\.memory\.|\.rss$|\.vsize$|\.swap$|\.limit$)/.test(m) &&
      !/hugepages_(total|free|rsvd|surp)/.test(m)) {
    return perSec ? "bytes/s" : "bytes";
  }
  if (m.startsWith("system.load_avg")) return "load";
  if (m.endsWith("_s") && !perSec) return "s";
  return perSec ? "/s" : "";
}

/**
 * unitLabel maps a series' `unit` label (Prometheus, OpenMetrics and Cantal spellings) to a
 * Unit: "milliseconds" → "ms", "seconds" → "s", "bytes" → "bytes", "percent" → "%"; any other
 * short text is kept as written. Empty for an empty or overlong label.
 */
export function unitLabel(u: string): Unit {
  const l = u.trim().toLowerCase();
  switch (l) {
    case "ms": case "msec": case "millisecond": case "milliseconds":
      return "ms";
    case "s": case "sec": case "second": case "seconds":
      return "s";
    case "b": case "byte": case "bytes":
      return "bytes";
    case "%": case "percent": case "pct":
      return "%";
    case "ratio":
      return "";
  }
  return l.length > 0 && l.length <= 16 ? u.trim() : "";
}

/** fmtTime writes a unix-ms timestamp as local HH:MM:SS. */
export function fmtTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** fmtAgo writes how long ago a unix-ms timestamp was. */
export function fmtAgo(ms: number, now = Date.now()): string {
  return `${fmtDuration((now - ms) / 1000)} ago`;
}
