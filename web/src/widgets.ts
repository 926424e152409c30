// Page building blocks: headings, stat cards, sortable tables, messages.
import { h } from "./dom";

/** heading is a page's h1 (focusable, so navigation can move focus to it) and a lead line. */
export function heading(title: string, lead?: string | Node): HTMLElement {
  return h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, title), lead ? h("p", { class: "lead" }, lead) : null);
}

/** card is a labelled value; update it through the returned element's value span. */
export function card(label: string, id: string): HTMLElement {
  return h("div", { class: "card" }, h("div", { class: "card-label" }, label), h("div", { class: "card-value", id }, "–"));
}

/** setText sets the text of the element with id inside root. */
export function setText(root: ParentNode, id: string, text: string) {
  const el = root.querySelector(`#${CSS.escape(id)}`);
  if (el && el.textContent !== text) el.textContent = text;
}

/** message is a notice: "info" for empty states, "error" for failures. */
export function message(kind: "info" | "error", ...text: (string | Node)[]): HTMLElement {
  return h("div", { class: `msg ${kind}`, role: kind === "error" ? "alert" : "status" }, ...text);
}

/** Column of a SortTable. */
export interface Column<T> {
  key: string;
  label: string;
  /** sort value; columns without one are not sortable. */
  sort?: (r: T) => number | string;
  /** cell HTML (already escaped). */
  html: (r: T) => string;
  num?: boolean;
}

/**
 * SortTable is a table whose headers are buttons sorting it (keyboard-operable); rows are
 * written as HTML for speed with a few thousand rows.
 */
export class SortTable<T> {
  readonly el: HTMLTableElement;
  private tbody: HTMLTableSectionElement;
  private rows: T[] = [];

  constructor(private cols: Column<T>[], public sortKey: string, public desc: boolean, private onSort?: (key: string, desc: boolean) => void, caption?: string) {
    this.tbody = h("tbody");
    const head = h("tr", {}, cols.map((c) => {
      const th = h("th", { scope: "col", class: c.num ? "num" : "", "data-key": c.key });
      if (c.sort) {
        th.append(h("button", { type: "button", class: "sort", onclick: () => this.sortBy(c.key) }, c.label));
      } else {
        th.textContent = c.label;
      }
      return th;
    }));
    this.el = h("table", { class: "grid" }, caption ? h("caption", {}, caption) : null, h("thead", {}, head), this.tbody);
    this.markSorted();
  }

  private sortBy(key: string) {
    if (this.sortKey === key) this.desc = !this.desc;
    else {
      this.sortKey = key;
      this.desc = typeof this.cols.find((c) => c.key === key)?.sort?.(this.rows[0]) === "number";
    }
    this.markSorted();
    this.onSort?.(this.sortKey, this.desc);
    this.set(this.rows);
  }

  private markSorted() {
    for (const th of this.el.querySelectorAll("th")) {
      const k = th.dataset.key;
      th.setAttribute("aria-sort", k === this.sortKey ? (this.desc ? "descending" : "ascending") : "none");
    }
  }

  /** sorted returns rows in the table's order. */
  sorted(rows: T[]): T[] {
    const col = this.cols.find((c) => c.key === this.sortKey);
    if (!col?.sort) return rows;
    const f = col.sort;
    const d = this.desc ? -1 : 1;
    return [...rows].sort((a, b) => {
      const x = f(a), y = f(b);
      return (x < y ? -1 : x > y ? 1 : 0) * d;
    });
  }

  /** set replaces the rows (sorted by the current column). */
  set(rows: T[], presorted = false) {
    this.rows = rows;
    const list = presorted ? rows : this.sorted(rows);
    const cols = this.cols;
    let html = "";
    for (const r of list) {
      html += "<tr>";
      for (const c of cols) html += c.num ? `<td class="num">${c.html(r)}</td>` : `<td>${c.html(r)}</td>`;
      html += "</tr>";
    }
    this.tbody.innerHTML = html || `<tr><td colspan="${cols.length}" class="none">nothing to show</td></tr>`;
  }
}
