// TimeChart: a uPlot line chart with units on both axes, theme colours from CSS variables,
// and its width following its container. The charts of one page share a ChartGroup: one
// crosshair (uPlot cursor sync), one zoom that stays until reset (live updates keep drawing
// inside it), pan, and a pause that holds every chart still while data keeps arriving.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { h } from "./dom";
import { axisLabel, BYTE_INCRS, fmtByteTicks, fmtTime, fmtUnit, type Unit } from "./format";
import { gapAfter, type Aligned, type Line } from "./store";

export interface ChartOptions {
  title: string;
  unit: Unit;
  height?: number;
  /** yMax fixes the top of the y scale (e.g. 100 for percentages). */
  yMax?: number;
  /** group shares crosshair, zoom and pause with the page's other charts. */
  group?: ChartGroup;
}

/** LineStyle marks a line: "stale" is dashed, "down" dashed and faint (a node not answering). */
export type LineStyle = "" | "stale" | "down";

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** palette returns the theme's ten tuned line colours (--c1 … --c10). */
export function palette(): string[] {
  const out: string[] = [];
  for (let i = 1; i <= 10; i++) out.push(cssVar(`--c${i}`) || "#888888");
  return out;
}

/** SLOTS is how many colours lines choose from: the theme's ten, then generated ones. */
const SLOTS = 40;
const PHI = 0.618033988749895;

/** hashName is FNV-1a of a line's name: the same name always gets the same slot. */
function hashName(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** hslHex writes an HSL colour as #rrggbb (callers append an alpha byte to it). */
function hslHex(hue: number, sat: number, light: number): string {
  const a = sat * Math.min(light, 1 - light);
  const f = (n: number) => {
    const k = (n + hue / 30) % 12;
    const c = light - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(255 * c).toString(16).padStart(2, "0");
  };
  return `#${f(0)}${f(8)}${f(4)}`;
}

/**
 * slotColor is colour slot i: the theme's tuned colours first, then hues spaced by the golden
 * ratio (each far from the ones before it), alternating two lightness levels, lighter in the
 * dark theme.
 */
function slotColor(i: number, tuned: string[], dark: boolean): string {
  if (i < tuned.length) return tuned[i];
  const k = i - tuned.length;
  const hue = ((k * PHI + 0.05) % 1) * 360;
  const light = (dark ? 0.68 : 0.4) + (k % 2 ? (dark ? -0.12 : 0.12) : 0);
  return hslHex(hue, 0.72, light);
}

/** rgbDistance is the sum of the channel differences of two #rrggbb colours. */
function rgbDistance(a: string, b: string): number {
  let d = 0;
  for (let i = 1; i < 7; i += 2) d += Math.abs(parseInt(a.slice(i, i + 2), 16) - parseInt(b.slice(i, i + 2), 16));
  return d;
}

/** NEAR is the distance under which two line colours are hard to tell apart. */
const NEAR = 70;

/**
 * lineColors gives each line a colour derived from its name (a hash picks one of SLOTS
 * colours), so a series keeps its colour as other lines come and go and across pages. A name
 * whose slot is taken in this chart, or whose colour is near one already given, takes the next
 * slot that is neither, so up to SLOTS lines are told apart (more wrap around).
 */
export function lineColors(names: string[], tuned: string[] = palette(), dark = document.documentElement.dataset.theme === "dark"): string[] {
  const used = new Set<number>();
  const given: string[] = [];
  return names.map((n) => {
    const first = hashName(n) % SLOTS;
    let pick = -1, free = -1;
    for (let i = 0; i < SLOTS; i++) {
      const slot = (first + i) % SLOTS;
      if (used.has(slot)) continue;
      if (free < 0) free = slot;
      const c = slotColor(slot, tuned, dark);
      if (given.every((g) => rgbDistance(g, c) >= NEAR)) {
        pick = slot;
        break;
      }
    }
    if (pick < 0) pick = free >= 0 ? free : first;
    used.add(pick);
    const c = slotColor(pick, tuned, dark);
    given.push(c);
    return c;
  });
}

/** Range is a time window in unix seconds. */
export interface Range {
  min: number;
  max: number;
}

/**
 * ChartGroup is the state the charts of one page share: the zoomed time range (null: follow
 * the data), whether drawing is paused, and the toolbar that shows and changes both. Owned by
 * the page (main.ts makes one per render); single-threaded (UI).
 */
export class ChartGroup {
  /** key is the uPlot cursor sync key of the group. */
  readonly key: string;
  zoom: Range | null = null;
  paused = false;
  readonly bar: HTMLElement;
  private charts = new Set<TimeChart>();
  private pauseBtn: HTMLButtonElement;
  private resetBtn: HTMLButtonElement;
  private panL: HTMLButtonElement;
  private panR: HTMLButtonElement;
  private state: HTMLElement;

  constructor(key: string) {
    this.key = key;
    this.pauseBtn = h("button", { type: "button", class: "chart-pause", "aria-pressed": "false", onclick: () => this.setPaused(!this.paused) });
    this.resetBtn = h("button", { type: "button", class: "chart-reset", onclick: () => this.setZoom(null) }, "Reset zoom");
    this.panL = h("button", { type: "button", class: "chart-pan-left", title: "Pan back in time", "aria-label": "Pan back in time", onclick: () => this.pan(-0.5) }, "◀");
    this.panR = h("button", { type: "button", class: "chart-pan-right", title: "Pan forward in time", "aria-label": "Pan forward in time", onclick: () => this.pan(0.5) }, "▶");
    this.state = h("span", { class: "chart-state", role: "status" });
    this.bar = h("div", { class: "chart-bar toolbar", role: "group", "aria-label": "Charts" },
      this.pauseBtn, this.panL, this.panR, this.resetBtn, this.state);
    this.update();
  }

  add(c: TimeChart) {
    this.charts.add(c);
    if (!this.bar.isConnected) c.el.parentElement?.before(this.bar);
  }

  remove(c: TimeChart) {
    this.charts.delete(c);
    if (this.charts.size === 0) this.bar.remove();
  }

  /** setZoom shows range on every chart of the group until reset (null). */
  setZoom(r: Range | null) {
    if (r && !(r.max > r.min)) return;
    this.zoom = r;
    for (const c of this.charts) c.redraw();
    this.update();
  }

  /** pan moves the zoomed range by frac of its width (negative: back in time). */
  pan(frac: number) {
    let r = this.zoom;
    if (!r) {
      // Not zoomed: pan from the whole range shown.
      for (const c of this.charts) r = r ?? c.shown();
      if (!r) return;
    }
    const d = (r.max - r.min) * frac;
    this.setZoom({ min: r.min + d, max: r.max + d });
  }

  setPaused(p: boolean) {
    this.paused = p;
    if (!p) for (const c of this.charts) c.redraw();
    this.update();
  }

  private update() {
    this.pauseBtn.textContent = this.paused ? "Resume live" : "Pause";
    this.pauseBtn.setAttribute("aria-pressed", String(this.paused));
    this.resetBtn.disabled = this.zoom === null;
    this.bar.dataset.zoomed = String(this.zoom !== null);
    this.bar.dataset.paused = String(this.paused);
    const z = this.zoom;
    this.state.textContent = (this.paused ? "paused" : "live") +
      (z ? ` · zoomed to ${fmtTime(z.min * 1000)}–${fmtTime(z.max * 1000)} (double-click a chart to reset)` : " · drag across a chart to zoom");
  }
}

/** lastValue is the last non-null value of a line, for the legend when the cursor is away. */
function lastValue(ys: readonly (number | null | undefined)[] | undefined): number | null {
  if (!ys) return null;
  for (let i = ys.length - 1; i >= 0; i--) {
    const v = ys[i];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

/** TimeChart draws named lines over time. Owned by the page that created it; destroy it on leave. */
export class TimeChart {
  readonly el: HTMLElement;
  private plot: uPlot | null = null;
  private body: HTMLElement;
  private empty: HTMLElement;
  private names = "";
  private ro: ResizeObserver;
  private data: Aligned | null = null;
  private group: ChartGroup;

  constructor(parent: HTMLElement, private opt: ChartOptions) {
    this.body = h("div", { class: "chart-body" });
    this.empty = h("div", { class: "chart-empty" }, "waiting for data…");
    this.el = h("figure", { class: "chart unloaded", "data-title": opt.title },
      h("figcaption", {}, opt.title, h("span", { class: "unit" }, ` (${axisLabel(opt.unit)})`)),
      this.body, this.empty);
    parent.appendChild(this.el);
    this.group = opt.group ?? new ChartGroup(`chart-${Math.random().toString(36).slice(2)}`);
    this.group.add(this);
    this.ro = new ResizeObserver(() => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: this.opt.height ?? 180 });
    });
    this.ro.observe(this.el);
  }

  private width(): number {
    return Math.max(200, this.body.clientWidth || this.el.clientWidth - 16);
  }

  /** shown is the time range the chart shows now. */
  shown(): Range | null {
    const x = this.plot?.scales.x;
    return x && x.min != null && x.max != null ? { min: x.min, max: x.max } : null;
  }

  /**
   * set draws data with one line per name (styles marks lines, by index). While the group is
   * paused the data is kept and drawn on resume.
   */
  set(data: Aligned, names: string[], styles: LineStyle[] = []) {
    const x = data[0];
    this.empty.hidden = x.length > 0;
    this.data = data;
    const key = names.map((n, i) => `${n}\u0001${styles[i] ?? ""}`).join("\u0000");
    if (!this.plot || key !== this.names) {
      this.plot?.destroy();
      this.names = key;
      this.plot = new uPlot(this.options(names, styles), data as uPlot.AlignedData, this.body);
      this.el.classList.remove("unloaded");
      // The browser tests read what uPlot holds and draws (data, scales, colours) from here.
      (this.el as HTMLElement & { uplot?: uPlot }).uplot = this.plot;
      this.el.dataset.lines = String(names.length);
      this.el.dataset.legend = names.join("\n");
      this.el.dataset.colors = lineColors(names).join(" ");
      this.applyZoom();
      this.mark();
      return;
    }
    if (this.group.paused) return;
    this.draw();
  }

  /** redraw draws the latest data with the group's zoom (after a zoom, pan or resume). */
  redraw() {
    if (this.plot && this.data) this.draw();
  }

  private draw() {
    const p = this.plot!;
    if (this.group.zoom) {
      p.setData(this.data as uPlot.AlignedData, false);
      this.applyZoom();
    } else {
      p.setData(this.data as uPlot.AlignedData);
    }
    this.mark();
  }

  private applyZoom() {
    const z = this.group.zoom;
    if (z && this.plot) this.plot.setScale("x", { min: z.min, max: z.max });
  }

  /** mark writes what the chart shows into data- attributes (the browser tests read them). */
  private mark() {
    const d = this.data!;
    const x = d[0];
    this.el.dataset.points = String(x.length);
    if (x.length > 0) this.el.dataset.lastTs = String(Math.round(x[x.length - 1] * 1000));
    this.el.dataset.draws = String(Number(this.el.dataset.draws ?? 0) + 1);
    // Time to first chart: from navigation start to the first draw of a line (two points).
    if (x.length > 1 && this.el.dataset.firstDrawMs === undefined) {
      this.el.dataset.firstDrawMs = String(Math.round(performance.now()));
    }
  }

  private options(names: string[], styles: LineStyle[]): uPlot.Options {
    const unit = this.opt.unit;
    const colors = lineColors(names);
    const fg = cssVar("--muted") || "#666";
    const grid = cssVar("--grid") || "#ddd";
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const group = this.group;
    const narrow = this.width() < 420;
    return {
      width: this.width(),
      height: this.opt.height ?? 180,
      legend: { show: true, live: true },
      cursor: {
        points: { size: 6 },
        sync: { key: group.key },
        // The group zooms every chart together: uPlot only shows the selection.
        drag: { x: true, y: false, setScale: false },
        bind: {
          dblclick: () => () => {
            group.setZoom(null);
            return null;
          },
        },
      },
      hooks: {
        // uPlot commits scale changes after the current task: record what is shown then.
        setScale: [
          (u, key) => {
            const x = u.scales.x;
            if (key === "x" && x.min != null && x.max != null) {
              this.el.dataset.xMin = String(x.min);
              this.el.dataset.xMax = String(x.max);
            }
          },
        ],
        setSelect: [
          (u) => {
            if (u.select.width > 4) {
              const min = u.posToVal(u.select.left, "x");
              const max = u.posToVal(u.select.left + u.select.width, "x");
              u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
              group.setZoom({ min, max });
            }
          },
        ],
      },
      scales: {
        x: { time: true },
        y: {
          range: (_u, min, max) => {
            const lo = Math.min(0, min ?? 0);
            let hi = this.opt.yMax ?? (max ?? 1) * 1.1;
            if (this.opt.yMax !== undefined && (max ?? 0) > this.opt.yMax) hi = (max ?? 0) * 1.05;
            if (!(hi > lo)) hi = lo + 1;
            return [lo, hi];
          },
        },
      },
      series: [
        { label: "time", value: (_u, v) => (v == null ? "now" : fmtTime(v * 1000)) },
        ...names.map((n, i) => {
          const st = styles[i] ?? "";
          const color = colors[i];
          return {
            label: st === "down" ? `${n} (unreachable)` : st === "stale" ? `${n} (stale)` : n,
            stroke: st === "down" ? color + "80" : color,
            width: st === "down" ? 1 : 1.5,
            dash: st ? [6, 4] : undefined,
            spanGaps: false,
            // Without a cursor the legend shows each line's latest value, not "–".
            value: (u: uPlot, v: number | null, si: number, idx: number | null) =>
              fmtUnit(idx == null ? lastValue(u.data[si] as (number | null | undefined)[]) : v, unit),
          };
        }),
      ],
      axes: [
        // Time ticks on one line (HH:MM:SS, local): uPlot's two-line date ticks ran into the label.
        { ...axis, size: 28, space: 80, values: (_u, splits) => splits.map((v) => fmtTime(v * 1000)) },
        {
          ...axis,
          label: narrow ? undefined : axisLabel(unit),
          labelSize: narrow ? 0 : 20,
          // Wide enough for the longest tick label (≈7 px a character at 12 px) plus the label.
          size: (_u, values) => Math.max(40, ...(values ?? []).map((v) => String(v).length * 7.2 + (narrow ? 24 : 30))),
          // Byte axes step in round binary units, each axis written in one unit.
          ...(unit === "bytes" || unit === "bytes/s"
            ? { incrs: BYTE_INCRS, values: (_u: uPlot, splits: number[], _ax: number, _sp: number, incr: number) => fmtByteTicks(splits, incr, unit === "bytes/s" ? "/s" : "") }
            : { values: (_u: uPlot, splits: number[]) => splits.map((v) => fmtUnit(v, unit)) }),
        },
      ],
    };
  }

  destroy() {
    this.ro.disconnect();
    this.plot?.destroy();
    this.plot = null;
    this.group.remove(this);
    this.el.remove();
  }
}

/**
 * drawSpark draws a line as a sparkline on canvas (no axes: the row shows value and unit),
 * placed by time: a step longer than gapAfter (a missed scan, an outage) and a null are left
 * blank, never bridged.
 */
export function drawSpark(canvas: HTMLCanvasElement, line: Line) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 120, hh = canvas.clientHeight || 20;
  if (canvas.width !== w * dpr) {
    canvas.width = w * dpr;
    canvas.height = hh * dpr;
  }
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, hh);
  const vs = line.v.filter((v): v is number => v !== null && Number.isFinite(v));
  if (vs.length < 2) return;
  let lo = Math.min(...vs), hi = Math.max(...vs);
  if (hi === lo) {
    hi += 1;
    lo -= 1;
  }
  const n = line.ts.length;
  const t0 = line.ts[0], span = Math.max(1, line.ts[n - 1] - t0);
  const gap = gapAfter(line.ts);
  ctx.strokeStyle = cssVar("--c1") || "#36c";
  ctx.lineWidth = 1.25;
  ctx.beginPath();
  let pen = false;
  for (let i = 0; i < n; i++) {
    const v = line.v[i];
    if (v === null || !Number.isFinite(v)) {
      pen = false;
      continue;
    }
    if (i > 0 && line.ts[i] - line.ts[i - 1] > gap) pen = false;
    const x = ((line.ts[i] - t0) / span) * (w - 2) + 1;
    const y = hh - 2 - ((v - lo) / (hi - lo)) * (hh - 4);
    if (pen) ctx.lineTo(x, y);
    else ctx.moveTo(x, y);
    pen = true;
  }
  ctx.stroke();
}
