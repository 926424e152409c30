// TimeChart: a uPlot line chart with units on both axes, theme colours from CSS variables,
// and its width following its container.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { h } from "./dom";
import { axisLabel, fmtTime, fmtUnit, type Unit } from "./format";
import type { Aligned } from "./store";

export interface ChartOptions {
  title: string;
  unit: Unit;
  height?: number;
  /** yMax fixes the top of the y scale (e.g. 100 for percentages). */
  yMax?: number;
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** palette returns the theme's line colours. */
export function palette(): string[] {
  const out: string[] = [];
  for (let i = 1; i <= 10; i++) out.push(cssVar(`--c${i}`) || "#888");
  return out;
}

/** TimeChart draws named lines over time. Owned by the page that created it; destroy it on leave. */
export class TimeChart {
  readonly el: HTMLElement;
  private plot: uPlot | null = null;
  private body: HTMLElement;
  private empty: HTMLElement;
  private names = "";
  private ro: ResizeObserver;

  constructor(parent: HTMLElement, private opt: ChartOptions) {
    this.body = h("div", { class: "chart-body" });
    this.empty = h("div", { class: "chart-empty" }, "waiting for data…");
    this.el = h("figure", { class: "chart", "data-title": opt.title },
      h("figcaption", {}, opt.title, h("span", { class: "unit" }, ` (${axisLabel(opt.unit)})`)),
      this.body, this.empty);
    parent.appendChild(this.el);
    this.ro = new ResizeObserver(() => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: this.opt.height ?? 180 });
    });
    this.ro.observe(this.el);
  }

  private width(): number {
    return Math.max(200, this.body.clientWidth || this.el.clientWidth - 16);
  }

  /** set draws data with one line per name. */
  set(data: Aligned, names: string[]) {
    const x = data[0];
    this.empty.hidden = x.length > 0;
    this.el.dataset.points = String(x.length);
    if (x.length > 0) this.el.dataset.lastTs = String(Math.round(x[x.length - 1] * 1000));
    const key = names.join("\u0000");
    if (!this.plot || key !== this.names) {
      this.plot?.destroy();
      this.names = key;
      this.plot = new uPlot(this.options(names), data as uPlot.AlignedData, this.body);
    } else {
      this.plot.setData(data as uPlot.AlignedData);
    }
  }

  private options(names: string[]): uPlot.Options {
    const unit = this.opt.unit;
    const colors = palette();
    const fg = cssVar("--muted") || "#666";
    const grid = cssVar("--grid") || "#ddd";
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    return {
      width: this.width(),
      height: this.opt.height ?? 180,
      legend: { show: true, live: true },
      cursor: { points: { size: 6 } },
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
        { label: "time", value: (_u, v) => (v == null ? "–" : fmtTime(v * 1000)) },
        ...names.map((n, i) => ({
          label: n,
          stroke: colors[i % colors.length],
          width: 1.5,
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => fmtUnit(v, unit),
        })),
      ],
      axes: [
        { ...axis, label: "time (local)", labelSize: 20, size: 40 },
        {
          ...axis,
          label: axisLabel(unit),
          labelSize: 20,
          // Wide enough for the longest tick label (≈7 px a character at 12 px) plus the label.
          size: (_u, values) => Math.max(48, ...(values ?? []).map((v) => String(v).length * 7.2 + 30)),
          values: (_u, splits) => splits.map((v) => fmtUnit(v, unit)),
        },
      ],
    };
  }

  destroy() {
    this.ro.disconnect();
    this.plot?.destroy();
    this.plot = null;
    this.el.remove();
  }
}

/** drawSpark draws values as a sparkline on canvas (no axes: the row shows value and unit). */
export function drawSpark(canvas: HTMLCanvasElement, values: (number | null)[]) {
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
  const vs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (vs.length < 2) return;
  let lo = Math.min(...vs), hi = Math.max(...vs);
  if (hi === lo) {
    hi += 1;
    lo -= 1;
  }
  ctx.strokeStyle = cssVar("--c1") || "#36c";
  ctx.lineWidth = 1.25;
  ctx.beginPath();
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) {
      pen = false;
      return;
    }
    const x = (i / (values.length - 1)) * (w - 2) + 1;
    const y = hh - 2 - ((v - lo) / (hi - lo)) * (hh - 4);
    if (pen) ctx.lineTo(x, y);
    else ctx.moveTo(x, y);
    pen = true;
  });
  ctx.stroke();
}
