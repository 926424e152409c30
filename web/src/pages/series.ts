// Metrics: every series matching a selector (the API's syntax), live, with a sparkline each.
// The list is virtualised: only the rows in view exist in the DOM, and sparkline history is
// fetched only for rows that have been in view, so 10k+ series stay responsive.
import { exactSelector, getJSON, num, reQuote, seriesName, type HistorySeries, type Series } from "../api";
import { drawSpark } from "../chart";
import { h } from "../dom";
import { fmtDuration, fmtUnit, guessUnit } from "../format";
import type { Ctx } from "../main";
import type { Line } from "../store";
import { heading, message } from "../widgets";
import { matchesText, isSelector, Suggester } from "../suggest";

const ROW = 30; // px, fixed so the list can be virtualised
const OVERSCAN = 8;
const SPARK_WINDOW = "5m";
const SPARK_WINDOW_MS = 5 * 60e3;

/** valueOf writes a series' latest value with its unit: rates for counters, text for states. */
export function valueOf(s: Series): string {
  const metric = s.labels.metric ?? "";
  switch (s.kind) {
    case "state":
      if (!s.since) return s.text || "(no state)";
      return `${s.text ?? ""} · for ${fmtDuration((s.ts - s.since) / 1000)}`;
    case "counter":
      return s.rate === undefined ? fmtUnit(num(s.value), guessUnit(metric, s.kind, false, s.labels)) : fmtUnit(num(s.rate), guessUnit(metric, s.kind, true, s.labels));
    default:
      return fmtUnit(num(s.value), guessUnit(metric, s.kind, false, s.labels));
  }
}

function sparkValue(s: Series): number | null {
  if (s.kind === "state") return null;
  return s.kind === "counter" ? num(s.rate ?? null) : num(s.value);
}

export async function seriesList(ctx: Ctx) {
  const t0 = performance.now();
  const root = ctx.root;
  const q = ctx.params.get("q") ?? "";
  const match = q ? "" : (ctx.params.get("match") ?? "");
  const input = h("input", {
    type: "search", id: "sel", name: "match", value: q || match, class: "mono wide", spellcheck: "false", autocomplete: "off",
    placeholder: `a word, or cpu.user_ms, cpu.user_ms{cpu="0"}, {metric=~"memory\\\\..*"}, {pid="1"}`, "data-search": true,
    "aria-describedby": "sel-help",
  });
  const form = h("form", { class: "toolbar", role: "search" },
    h("label", { for: "sel" }, "Selector "), input, h("button", { type: "submit" }, "Apply"),
    h("a", { href: "/series", class: "button" }, "All"));
  const suggester = new Suggester(input);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = input.value.trim();
    if (!v) return ctx.go("/series");
    // A selector goes to the agent; a word is searched in metric names and label values.
    const sel = isSelector(await suggester.lookup(v), v);
    if (ctx.alive()) ctx.go(sel ? `/series?match=${encodeURIComponent(v)}` : `/series?q=${encodeURIComponent(v)}`);
  });
  const count = h("p", { class: "count", role: "status", id: "series-count" }, "loading…");
  const err = h("div");
  const inner = h("div", { class: "vlist-inner", role: "list" });
  const viewport = h("div", { class: "vlist", id: "series-list", tabindex: "-1", "aria-label": "Series" }, inner);
  const head = h("div", { class: "vlist-head", "aria-hidden": "true" },
    h("span", {}, "Series"), h("span", {}, "Kind"), h("span", { class: "num" }, "Value (counters per second)"), h("span", {}, "Last 5 min"));
  root.append(
    heading("Metrics", "Every live series (written by the latest scan; the overview also counts those kept in history). Type a word to search metric names and label values (suggestions as you type); a bare metric name selects it; {key=\"v\", key!=\"v\", key=~\"re\", key!~\"re\"} match labels, also after a name: name{key=\"v\"}. Counters show their rate."),
    form, h("p", { id: "sel-help", class: "suggest-note" }, "Suggestions: metric names and label values of this agent's series containing what you type; Enter applies."), count, err, head, viewport,
  );

  let byKey = new Map<string, Series>();
  let keys: string[] = [];
  const sparks = new Map<string, Line>();
  const wanted = new Set<string>(); // keys whose sparkline history is yet to fetch
  let rendered = false;

  // ---- rows ----
  const pool: HTMLElement[] = [];
  function rowEl(i: number): HTMLElement {
    let el = pool[i];
    if (!el) {
      el = h("div", { class: "vrow", role: "listitem" },
        h("a", { class: "name mono" }), h("span", { class: "kind" }), h("span", { class: "num val" }),
        h("canvas", { class: "spark", width: 120, height: 20, "aria-hidden": "true" }));
      pool[i] = el;
    }
    return el;
  }

  let frame = 0;
  function schedule() {
    if (!frame) frame = requestAnimationFrame(renderRows);
  }
  function renderRows() {
    frame = 0;
    inner.style.height = `${keys.length * ROW}px`;
    const top = viewport.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(keys.length, Math.ceil((top + viewport.clientHeight) / ROW) + OVERSCAN);
    // The list may have shrunk below a scroll position past its new end: no row then.
    const n = Math.max(0, last - first);
    for (let j = 0; j < n; j++) {
      const i = first + j;
      const key = keys[i];
      const s = byKey.get(key)!;
      const el = rowEl(j);
      el.style.transform = `translateY(${i * ROW}px)`;
      el.dataset.index = String(i);
      const a = el.children[0] as HTMLAnchorElement;
      if (el.dataset.key !== key) {
        el.dataset.key = key;
        const name = seriesName(s.labels, new Set());
        a.textContent = name;
        a.title = name;
        a.href = `/series/chart?match=${encodeURIComponent(exactSelector(s.labels))}`;
        el.children[1].textContent = s.kind;
      }
      el.children[2].textContent = valueOf(s);
      const sp = sparks.get(key);
      if (sp) drawSpark(el.children[3] as HTMLCanvasElement, sp);
      else {
        drawSpark(el.children[3] as HTMLCanvasElement, { ts: [], v: [] });
        if (s.kind !== "state") wanted.add(key);
      }
      if (el.parentNode !== inner) inner.appendChild(el);
    }
    for (let j = n; j < pool.length; j++) pool[j].remove();
    if (wanted.size) fetchSparks();
    if (!rendered && keys.length > 0) {
      rendered = true;
      performance.mark("cantal:series-first-render");
      viewport.dataset.firstRenderMs = String(Math.round(performance.now()));
      viewport.dataset.firstRenderSinceMountMs = String(Math.round(performance.now() - t0));
    }
  }
  viewport.addEventListener("scroll", schedule, { passive: true });
  const ro = new ResizeObserver(schedule);
  ro.observe(viewport);
  ctx.cleanup(() => {
    ro.disconnect();
    cancelAnimationFrame(frame);
  });

  // Arrow keys move between rows, scrolling the virtual list as needed.
  viewport.addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp" && ev.key !== "Home" && ev.key !== "End") return;
    const cur = (document.activeElement as HTMLElement | null)?.closest<HTMLElement>(".vrow");
    let i = cur ? Number(cur.dataset.index) : -1;
    i = ev.key === "ArrowDown" ? i + 1 : ev.key === "ArrowUp" ? i - 1 : ev.key === "Home" ? 0 : keys.length - 1;
    if (i < 0 || i >= keys.length) return;
    ev.preventDefault();
    if (i * ROW < viewport.scrollTop) viewport.scrollTop = i * ROW;
    else if ((i + 1) * ROW > viewport.scrollTop + viewport.clientHeight) viewport.scrollTop = (i + 1) * ROW - viewport.clientHeight;
    renderRows();
    inner.querySelector<HTMLElement>(`.vrow[data-index="${i}"] a`)?.focus({ preventScroll: true });
  });

  // ---- sparkline history, for rows that have been in view ----
  let inflight = 0;
  const fetchSparks = () => {
    while (inflight < 4 && wanted.size) {
      const key = wanted.values().next().value as string;
      wanted.delete(key);
      const s = byKey.get(key);
      if (!s || sparks.has(key)) continue;
      sparks.set(key, { ts: [], v: [] }); // placeholder: fetched once
      inflight++;
      const q = `match=${encodeURIComponent(exactSelector(s.labels))}&window=${SPARK_WINDOW}${s.kind === "counter" ? "&fn=rate" : ""}`;
      getJSON<{ series: HistorySeries[] }>(`/api/v1/history?${q}`)
        .then((ans) => {
          const pts = ans.series[0]?.points ?? [];
          const cur = sparks.get(key) ?? { ts: [], v: [] };
          // The history, then the live points that came after it.
          const last = pts.length ? pts[pts.length - 1][0] : -Infinity;
          const keep = cur.ts.findIndex((ts) => ts > last);
          const from = keep < 0 ? cur.ts.length : keep;
          sparks.set(key, {
            ts: [...pts.map((p) => p[0]), ...cur.ts.slice(from)],
            v: [...pts.map((p) => num(p[1])), ...cur.v.slice(from)],
          });
          schedule();
        })
        .catch(() => sparks.delete(key))
        .finally(() => {
          inflight--;
          if (ctx.alive() && wanted.size) fetchSparks();
        });
    }
  };

  // ---- live data ----
  const apply = (all: Series[]) => {
    const series = q ? all.filter((s) => matchesText(s.labels, q)) : all;
    const next = new Map<string, Series>();
    let changed = series.length !== byKey.size;
    for (const s of series) {
      const k = JSON.stringify(s.labels); // the agent writes labels with sorted keys
      next.set(k, s);
      if (!changed && !byKey.has(k)) changed = true;
      const sp = sparks.get(k);
      if (sp && (sp.ts.length === 0 || s.ts > sp.ts[sp.ts.length - 1])) {
        sp.ts.push(s.ts);
        sp.v.push(sparkValue(s));
        let drop = 0;
        while (drop < sp.ts.length && sp.ts[drop] < s.ts - SPARK_WINDOW_MS) drop++;
        if (drop) {
          sp.ts.splice(0, drop);
          sp.v.splice(0, drop);
        }
      }
    }
    byKey = next;
    if (changed) keys = [...next.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    count.textContent = `${keys.length.toLocaleString("en-US")} live series${match ? ` match ${match}` : q ? ` contain “${q}” in their name or a label${searchNote}` : ""}`;
    count.dataset.count = String(keys.length);
    err.replaceChildren();
    if (keys.length === 0) err.replaceChildren(message("info", q ? `No live series has “${q}” in its name or a label.` : "No live series match this selector."));
    renderRows();
    ctx.ready();
  };
  const onError = (msg: string) => {
    count.textContent = "0 series";
    count.dataset.count = "0";
    err.replaceChildren(message("error", msg));
    keys = [];
    byKey = new Map();
    renderRows();
    ctx.ready();
  };
  let searchNote = "";
  if (!q) {
    ctx.sub(match, { onUpdate: (_ts, all) => apply(all), onError });
    return;
  }
  // Free text: the agent names the metrics and label values containing it (/api/v1/labels);
  // one subscription per label key (and one for the metric names) selects exactly those, and
  // their updates are merged, so a search never streams every series of a large node.
  const ans = await suggester.lookup(q, 200);
  if (!ctx.alive()) return;
  if (!ans) return onError("Search failed: the agent did not answer /api/v1/labels.");
  if (ans.truncated) searchNote = " (more names match: the first 200 of each kind are shown; type more to narrow)";
  const groups = new Map<string, string[]>();
  if (ans.metrics.length) groups.set("metric", ans.metrics);
  for (const l of ans.labels) {
    let g = groups.get(l.key);
    if (!g) groups.set(l.key, (g = []));
    g.push(l.value);
  }
  if (groups.size === 0) return apply([]);
  const latest = new Map<string, Series[]>();
  for (const [key, values] of groups) {
    const re = values.map(reQuote).join("|");
    const sel = `{${key}=~${JSON.stringify(re)}}`;
    ctx.sub(sel, {
      onUpdate: (_ts, got) => {
        latest.set(key, got);
        apply([...latest.values()].flat());
      },
      onError,
    });
  }
}
