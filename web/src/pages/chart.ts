// Chart page: the series of a selector over 5 m, 15 m or 1 h, live, counters as rates, with
// window statistics from /api/v1/stats and states as text with time in state.
import { exactSelector, getJSON, num, originLabels, seriesName, type Series, type StatsSeries } from "../api";
import { TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtDuration, fmtUnit, guessUnit, type Unit } from "../format";
import type { Ctx } from "../main";
import { align, alignPoints, Store, sumLines } from "../store";
import { heading, message, SortTable } from "../widgets";

const WINDOWS: [string, number][] = [["5m", 5 * 60e3], ["15m", 15 * 60e3], ["1h", 60 * 60e3]];
const MAX_LINES = 20;

export function chartPage(ctx: Ctx) {
  const root = ctx.root;
  const match = ctx.params.get("match") ?? "";
  const win = WINDOWS.find(([w]) => w === ctx.params.get("window")) ?? WINDOWS[0];
  const rate = ctx.params.get("rate") !== "0";
  const withSum = ctx.params.get("sum") === "1";
  const url = (w: string, r: boolean, sm = withSum) => `/series/chart?match=${encodeURIComponent(match)}&window=${w}${r ? "" : "&rate=0"}${sm ? "&sum=1" : ""}`;

  root.append(
    heading("Chart", h("span", { class: "mono" }, match || "(every series)")),
    h("div", { class: "toolbar" },
      h("span", { class: "seg", role: "group", "aria-label": "Window" },
        WINDOWS.map(([w]) => h("a", { href: url(w, rate), class: "button", "aria-current": w === win[0] ? "true" : null }, w))),
      h("a", { href: url(win[0], !rate), class: "button", "aria-pressed": String(rate), role: "button" }, rate ? "Counters as rate: on" : "Counters as rate: off"),
      h("a", { href: url(win[0], rate, !withSum), class: "button", "aria-pressed": String(withSum), role: "button", title: "Add a line summing every series shown (e.g. the instances of one application)" }, withSum ? "Sum line: on" : "Sum line: off"),
      h("a", { href: `/series?match=${encodeURIComponent(match)}`, class: "button" }, "Back to the list")),
  );
  if (!match) {
    root.append(message("info", "No selector: open a series from the ", h("a", { href: "/series" }, "Metrics"), " page."));
    ctx.ready();
    return;
  }
  const note = h("div");
  const grid = h("section", { class: "charts one" });
  root.append(note, grid);
  const statsHead = h("h2", {}, `Statistics over ${win[0]}`);
  const statsBody = h("div");
  const statesHead = h("h2", { hidden: true }, "States");
  const statesBody = h("div");
  root.append(statsHead, statsBody, statesHead, statesBody);

  const store = new Store(win[1], rate);
  let chart: TimeChart | null = null;
  let unit: Unit = "";
  ctx.cleanup(() => chart?.destroy());
  // Labels every series shares are dropped from the legend.
  const legend = (ls: Record<string, string>[]) => {
    const common = new Set(Object.keys(ls[0] ?? {}).filter((k) => ls.every((l) => l[k] === ls[0][k])));
    return ls.map((l) => (ls.length === 1 ? seriesName(l, originLabels) : seriesName(l, common) || seriesName(l)));
  };
  const draw = () => {
    const tracks = store.find().filter((t) => t.kind !== "state");
    if (tracks.length === 0) return;
    if (!chart) {
      const t = tracks[0];
      unit = guessUnit(t.labels.metric ?? "", t.kind, rate, t.labels);
      chart = new TimeChart(grid, { group: ctx.charts, title: tracks.length === 1 ? seriesName(t.labels) : `${tracks.length} series`, unit, height: 320 });
    }
    const shown = tracks.slice(0, MAX_LINES);
    if (tracks.length > MAX_LINES) note.replaceChildren(message("info", `${tracks.length} series match; the chart shows the first ${MAX_LINES}. Narrow the selector to see others.`));
    const names = legend(shown.map((t) => t.labels));
    if (withSum && shown.length > 1) {
      // The sum over the instances each scan saw (instances come and go).
      chart.set(alignPoints([...shown, sumLines(shown)]), [...names, `sum of ${shown.length}`]);
    } else {
      chart.set(align(shown), names);
    }
  };
  const drawStates = (series: Series[]) => {
    const states = series.filter((s) => s.kind === "state");
    statesHead.hidden = states.length === 0;
    if (states.length === 0) return;
    statesBody.innerHTML = `<table class="grid"><thead><tr><th scope="col">Series</th><th scope="col">State</th><th scope="col" class="num">In state for</th><th scope="col">Since</th></tr></thead><tbody>${
      states.map((s) => `<tr><td><a href="/series/chart?match=${encodeURIComponent(exactSelector(s.labels))}">${esc(seriesName(s.labels))}</a></td><td>${esc(s.text || "(no state)")}</td><td class="num">${s.since ? fmtDuration((s.ts - s.since) / 1000) : "–"}</td><td>${s.since ? new Date(s.since).toLocaleString() : "–"}</td></tr>`).join("")
    }</tbody></table>`;
  };

  ctx.sub(match, {
    history: win[0],
    fn: rate ? "rate" : undefined,
    onHistory: (hs) => { store.history(hs); draw(); },
    onUpdate: (ts, s) => {
      store.update(ts, s);
      draw();
      drawStates(s);
      if (s.length === 0) note.replaceChildren(message("info", "No live series match this selector."));
      ctx.ready();
    },
    onError: (msg) => {
      note.replaceChildren(message("error", msg));
      ctx.ready();
    },
  });

  const stats = new SortTable<StatsSeries>([
    { key: "name", label: "Series", sort: (s) => seriesName(s.labels), html: (s) => esc(seriesName(s.labels)) },
    { key: "count", label: "Points", num: true, sort: (s) => s.count, html: (s) => String(s.count) },
    ...(["min", "max", "mean", "median", "p90", "p99"] as const).map((k) => ({
      key: k, label: k === "median" ? "p50" : k, num: true,
      sort: (s: StatsSeries) => num(s[k]) ?? 0,
      html: (s: StatsSeries) => esc(fmtUnit(num(s[k]), guessUnit(s.labels.metric ?? "", s.kind, rate, s.labels))),
    })),
    { key: "slope", label: "Slope", num: true, sort: (s) => num(s.slope) ?? 0, html: (s) => `${esc(fmtUnit(num(s.slope), guessUnit(s.labels.metric ?? "", s.kind, rate, s.labels)))}/s` },
  ], "name", false, undefined, "Window statistics (counters as per-second rates when rate is on)");
  statsBody.append(stats.el);
  let n = 0;
  const loadStats = async () => {
    try {
      const ans = await getJSON<{ series: StatsSeries[] }>(`/api/v1/stats?match=${encodeURIComponent(match)}&window=${win[0]}${rate ? "&fn=rate" : ""}`);
      if (ctx.alive()) stats.set(ans.series.filter((s) => s.kind !== "state"));
    } catch (e) {
      if (ctx.alive()) statsBody.replaceChildren(message("error", `Statistics not loaded: ${(e as Error).message}`));
    }
  };
  // Statistics over a window change slowly: refresh every fifth scan.
  ctx.onTick(() => { if (++n % 5 === 0) loadStats(); });
  loadStats();
}
