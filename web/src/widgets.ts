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

  /**
   * rowKey, when set, names a row across redraws (a process's pid, a container's node and id):
   * its <tr> is kept and moved with it when the order changes. Without it rows are matched by
   * their place.
   */
  rowKey?: (r: T) => string;

  /**
   * set replaces the rows (sorted by the current column). The rows already drawn are kept and
   * changed in place (patch), only those whose HTML changed: a table redrawn at every scan
   * would otherwise replace the link under a user's pointer between the press and the release
   * of a click, and the click would be lost.
   */
  set(rows: T[], presorted = false) {
    this.rows = rows;
    const list = presorted ? rows : this.sorted(rows);
    const cols = this.cols;
    const html: string[] = [];
    for (const r of list) {
      let row = "<tr>";
      for (const c of cols) row += c.num ? `<td class="num">${c.html(r)}</td>` : `<td>${c.html(r)}</td>`;
      html.push(row + "</tr>");
    }
    let keys = this.rowKey ? list.map(this.rowKey) : html.map((_, i) => String(i));
    if (new Set(keys).size !== keys.length) keys = html.map((_, i) => String(i));
    if (html.length === 0) {
      html.push(`<tr><td colspan="${cols.length}" class="none">nothing to show</td></tr>`);
      keys = ["\u0000none"];
    }
    const prev = new Map<string, HTMLTableRowElement>();
    for (const tr of Array.from(this.tbody.rows)) prev.set(this.keyOf.get(tr) ?? "", tr);
    // Parse the rows that are new or changed, all at once.
    const need: number[] = [];
    for (let i = 0; i < html.length; i++) if (!prev.has(keys[i]) || this.drawn.get(keys[i]) !== html[i]) need.push(i);
    const made = new Map<number, HTMLTableRowElement>();
    if (need.length > 0) {
      const tpl = document.createElement("template");
      tpl.innerHTML = `<table><tbody>${need.map((i) => html[i]).join("")}</tbody></table>`;
      const fresh = Array.from((tpl.content.firstElementChild as HTMLTableElement).tBodies[0].rows);
      need.forEach((i, k) => made.set(i, fresh[k]));
    }
    let cursor: Element | null = this.tbody.firstElementChild;
    for (let i = 0; i < html.length; i++) {
      let tr = prev.get(keys[i]);
      const m = made.get(i);
      if (tr) {
        prev.delete(keys[i]);
        if (m) patch(tr, m);
      } else {
        tr = m!;
        this.keyOf.set(tr, keys[i]);
      }
      if (tr === cursor) cursor = cursor.nextElementSibling;
      else this.tbody.insertBefore(tr, cursor);
    }
    for (const tr of prev.values()) tr.remove();
    this.drawn = new Map(keys.map((k, i) => [k, html[i]]));
  }

  private drawn = new Map<string, string>();
  private keyOf = new WeakMap<Element, string>();
}

/**
 * patch makes from look like to, keeping from's elements where to has an element of the same
 * tag at the same place (their attributes and text changed in place), replacing the others.
 */
export function patch(from: Element, to: Element) {
  if (from.tagName !== to.tagName) {
    from.replaceWith(to);
    return;
  }
  for (const a of Array.from(from.attributes)) if (!to.hasAttribute(a.name)) from.removeAttribute(a.name);
  for (const a of Array.from(to.attributes)) if (from.getAttribute(a.name) !== a.value) from.setAttribute(a.name, a.value);
  const fc = from.childNodes, tc = Array.from(to.childNodes);
  for (let i = 0; i < tc.length; i++) {
    const f = fc[i], t = tc[i];
    if (!f) from.append(t);
    else if (f.nodeType === Node.ELEMENT_NODE && t.nodeType === Node.ELEMENT_NODE) patch(f as Element, t as Element);
    else if (f.nodeType === Node.TEXT_NODE && t.nodeType === Node.TEXT_NODE) {
      if (f.nodeValue !== t.nodeValue) f.nodeValue = t.nodeValue;
    } else f.replaceWith(t);
  }
  while (fc.length > tc.length) from.lastChild!.remove();
}
