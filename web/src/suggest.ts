// Suggest: autocomplete for selector boxes and free-text search over metric names and label
// values, from /api/v1/labels?q=TEXT (the agent's small read-only search route: distinct metric
// names and label values containing the text, at most 40 of each, only of series the caller may
// see). Asked as the person types (debounced); single-threaded (UI); owned by its page.
import { getJSON, type Labels } from "./api";
import { h } from "./dom";

/** LabelsAnswer is the /api/v1/labels answer. */
export interface LabelsAnswer {
  metrics: string[];
  labels: { key: string; value: string }[];
  truncated: boolean;
}

const MAX_SUGGESTIONS = 40;

/** Suggestion is one completion: the text put in the box and what it is. */
export interface Suggestion {
  value: string;
  label: string;
}

/**
 * suggest turns an answer into completions for text: metric names (as bare names), then label
 * values (as {key="value"} selectors), those starting with the text first.
 */
export function suggest(ans: LabelsAnswer, text: string, max = MAX_SUGGESTIONS): Suggestion[] {
  const q = text.trim().toLowerCase();
  if (!q || q.startsWith("{") || NAMED_SELECTOR.test(q)) return [];
  const rank = (s: string) => (s.toLowerCase().startsWith(q) ? 0 : 1);
  const out: Suggestion[] = [];
  for (const m of [...ans.metrics].sort((a, b) => rank(a) - rank(b))) {
    if (out.length >= max) return out;
    out.push({ value: m, label: "metric" });
  }
  for (const l of [...ans.labels].sort((a, b) => rank(a.value) - rank(b.value))) {
    if (out.length >= max) break;
    out.push({ value: `{${l.key}=${JSON.stringify(l.value)}}`, label: `label ${l.key}` });
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
 * NAMED_SELECTOR is `name{...}`, the form README documents beside `{...}`: a metric name (no
 * spaces, braces or quotes) followed by a braced matcher list.
 */
const NAMED_SELECTOR = /^[^\s{}"'=~!]+\s*\{.*\}$/s;

/**
 * isSelector tells a selector from free text: a braced matcher list, with or without a metric
 * name before it (`{k="v"}`, `name{k="v"}`), or a bare name that is a metric the agent has.
 * Anything else is searched as text. The agent parses a selector and names what is wrong.
 */
export function isSelector(ans: LabelsAnswer | null, text: string): boolean {
  const t = text.trim();
  if (t.startsWith("{") || NAMED_SELECTOR.test(t)) return true;
  if (!ans) return false;
  return ans.metrics.includes(t);
}

/** Suggester attaches a datalist of completions to a text box. */
export class Suggester {
  private cache = new Map<string, Promise<LabelsAnswer | null>>();
  readonly list: HTMLDataListElement;

  constructor(private input: HTMLInputElement) {
    this.list = h("datalist", { id: `${input.id || "sel"}-suggest` });
    input.setAttribute("list", this.list.id);
    input.after(this.list);
    let timer: number | undefined;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = window.setTimeout(() => void this.fill(), 150);
    });
  }

  /** lookup asks the agent for metric names and label values containing text (cached per text). */
  lookup(text: string, limit = MAX_SUGGESTIONS): Promise<LabelsAnswer | null> {
    const q = text.trim();
    if (!q || q.startsWith("{") || NAMED_SELECTOR.test(q)) return Promise.resolve(null);
    const key = `${limit}\u0000${q}`;
    let p = this.cache.get(key);
    if (!p) {
      p = getJSON<LabelsAnswer>(`/api/v1/labels?q=${encodeURIComponent(q)}&limit=${limit}`).catch(() => {
        this.cache.delete(key);
        return null;
      });
      if (this.cache.size > 100) this.cache.clear();
      this.cache.set(key, p);
    }
    return p;
  }

  private async fill(attempt = 0) {
    const text = this.input.value;
    const ans = await this.lookup(text);
    if (text !== this.input.value) return; // typed on meanwhile
    if (!ans && text.trim() && !text.trim().startsWith("{") && attempt < 3) {
      // The agent was busy or away: ask again shortly, while the text stays the same.
      window.setTimeout(() => void this.fill(attempt + 1), 1000 * (attempt + 1));
      return;
    }
    const opts = ans ? suggest(ans, text) : [];
    this.list.replaceChildren(...opts.map((o) => h("option", { value: o.value, label: o.label })));
    this.input.dataset.suggestions = String(opts.length);
  }
}
