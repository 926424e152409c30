// Suggest: autocomplete for selector boxes and free-text search over metric names and label
// values, from the series the agent lists (/api/v1/metrics without a selector: every series
// the caller may see, already filtered by the agent's privacy rules). The index is fetched
// when a box is first used and again after a minute. Single-threaded (UI); owned by its page.
import { getJSON, type Labels, type Series } from "./api";
import { h } from "./dom";

/** SeriesIndex is the metric names and label values of the agent's series. */
export interface SeriesIndex {
  metrics: string[];
  /** labels: "key\u0000value" pairs (not metric), sorted. */
  labels: [string, string][];
}

const MAX_LABEL_VALUES = 20000;
const MAX_SUGGESTIONS = 40;

/** buildIndex collects the distinct metric names and label values of series. */
export function buildIndex(series: { labels: Labels }[]): SeriesIndex {
  const metrics = new Set<string>();
  const labels = new Map<string, [string, string]>();
  for (const s of series) {
    for (const [k, v] of Object.entries(s.labels)) {
      if (k === "metric") metrics.add(v);
      else if (labels.size < MAX_LABEL_VALUES) labels.set(`${k}\u0000${v}`, [k, v]);
    }
  }
  return {
    metrics: [...metrics].sort(),
    labels: [...labels.values()].sort((a, b) => (a[0] + a[1] < b[0] + b[1] ? -1 : 1)),
  };
}

/** Suggestion is one completion: the text put in the box and what it is. */
export interface Suggestion {
  value: string;
  label: string;
}

/**
 * suggest returns completions for text: metric names containing it (as bare names), then label
 * values containing it (as {key="value"} selectors), names starting with the text first.
 */
export function suggest(ix: SeriesIndex, text: string, max = MAX_SUGGESTIONS): Suggestion[] {
  const q = text.trim().toLowerCase();
  if (!q || q.startsWith("{")) return [];
  const out: Suggestion[] = [];
  const rank = (s: string) => (s.toLowerCase().startsWith(q) ? 0 : 1);
  const ms = ix.metrics.filter((m) => m.toLowerCase().includes(q)).sort((a, b) => rank(a) - rank(b));
  for (const m of ms) {
    if (out.length >= max) return out;
    out.push({ value: m, label: "metric" });
  }
  const ls = ix.labels.filter(([, v]) => v.toLowerCase().includes(q)).sort((a, b) => rank(a[1]) - rank(b[1]));
  for (const [k, v] of ls) {
    if (out.length >= max) break;
    out.push({ value: `{${k}=${JSON.stringify(v)}}`, label: `label ${k}` });
  }
  return out;
}

/** matchesText reports whether a series' metric name or one of its label values contains q. */
export function matchesText(l: Labels, q: string): boolean {
  const needle = q.trim().toLowerCase();
  if (!needle) return true;
  for (const v of Object.values(l)) if (v.toLowerCase().includes(needle)) return true;
  return false;
}

/**
 * isSelector tells a selector from free text: a braced matcher list, or a bare name that is a
 * metric the agent has. Anything else is searched as text.
 */
export function isSelector(ix: SeriesIndex | null, text: string): boolean {
  const t = text.trim();
  if (t.startsWith("{")) return true;
  if (!ix) return /^[A-Za-z_][\w.:-]*$/.test(t);
  return ix.metrics.includes(t);
}

/** Suggester attaches a datalist of completions to a text box. */
export class Suggester {
  private ix: SeriesIndex | null = null;
  private at = 0;
  private loading: Promise<SeriesIndex | null> | null = null;
  readonly list: HTMLDataListElement;

  constructor(private input: HTMLInputElement) {
    this.list = h("datalist", { id: `${input.id || "sel"}-suggest` });
    input.setAttribute("list", this.list.id);
    input.after(this.list);
    let timer: number | undefined;
    input.addEventListener("focus", () => void this.index());
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = window.setTimeout(() => void this.fill(), 80);
    });
  }

  /** index returns the series index, fetching it when missing or older than a minute. */
  index(): Promise<SeriesIndex | null> {
    if (this.ix && Date.now() - this.at < 60e3) return Promise.resolve(this.ix);
    if (!this.loading) {
      this.loading = getJSON<{ series: Series[] }>("/api/v1/metrics")
        .then((ans) => {
          this.ix = buildIndex(ans.series ?? []);
          this.at = Date.now();
          return this.ix;
        })
        .catch(() => this.ix)
        .finally(() => (this.loading = null));
    }
    return this.loading;
  }

  private async fill() {
    const ix = await this.index();
    if (!ix) return;
    const opts = suggest(ix, this.input.value);
    this.list.replaceChildren(...opts.map((o) => h("option", { value: o.value, label: o.label })));
    this.input.dataset.suggestions = String(opts.length);
  }
}
