// Peers: every peer this agent knows from gossip, and a form to add one.
import { getJSON, postJSON, type Peer } from "../api";
import { esc, h } from "../dom";
import { fmtAgo } from "../format";
import type { Ctx } from "../main";
import { heading, message, SortTable } from "../widgets";

/** lastSeen writes a peer's last_seen (unix ms or an RFC 3339 time) as "… ago". */
export function lastSeen(v: number | string | undefined): string {
  if (v === undefined || v === null || v === "" || v === 0) return "–";
  const ms = typeof v === "number" ? v : Date.parse(v);
  return Number.isFinite(ms) ? fmtAgo(ms) : String(v);
}

export async function peers(ctx: Ctx) {
  const root = ctx.root;
  const table = new SortTable<Peer>([
    { key: "name", label: "Name", sort: (p) => p.name, html: (p) => (p.http ? `<a href="http://${esc(p.http)}/" target="_blank" rel="noopener">${esc(p.name)}</a>` : esc(p.name)) },
    { key: "addr", label: "Gossip address", sort: (p) => p.addr, html: (p) => `<span class="mono">${esc(p.addr)}</span>` },
    { key: "http", label: "HTTP", sort: (p) => p.http ?? "", html: (p) => `<span class="mono">${esc(p.http ?? "–")}</span>` },
    { key: "status", label: "Status", sort: (p) => p.status, html: (p) => `<span class="status ${esc(p.status)}">${esc(p.status)}</span>` },
    { key: "rtt", label: "RTT", num: true, sort: (p) => p.rtt_ms ?? Infinity, html: (p) => (p.rtt_ms == null ? "–" : `${p.rtt_ms.toFixed(1)} ms`) },
    { key: "seen", label: "Last seen", sort: (p) => String(p.last_seen ?? ""), html: (p) => esc(lastSeen(p.last_seen)) },
    { key: "id", label: "Node id", sort: (p) => p.id, html: (p) => `<span class="mono">${esc(p.id)}</span>` },
  ], "name", false, undefined, "Known peers");
  const note = h("div");
  const addr = h("input", { id: "peer-addr", name: "addr", required: true, placeholder: "host:port", class: "mono", autocomplete: "off", "data-search": true });
  const result = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "toolbar" }, h("label", { for: "peer-addr" }, "Add a peer "), addr, h("button", { type: "submit" }, "Add"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const a = addr.value.trim();
    if (!/^[^\s]+:\d+$/.test(a)) {
      result.replaceChildren(message("error", `"${a}" is not host:port`));
      return;
    }
    result.replaceChildren(message("info", `Adding ${a}…`));
    try {
      await postJSON("/api/v1/peers", { addr: a });
      if (!ctx.alive()) return;
      result.replaceChildren(message("info", `Asked to join ${a}; it appears below once gossip reaches it, and every other node learns it too.`));
      addr.value = "";
      refresh();
    } catch (e) {
      if (ctx.alive()) result.replaceChildren(message("error", `Peer not added: ${(e as Error).message}`));
    }
  });
  root.append(heading("Peers", "The nodes this agent knows through gossip (the node itself is not listed). Adding a peer on any node is enough: every node learns it."),
    note, h("div", { class: "table-wrap" }, table.el), h("h2", {}, "Add a peer"), form, result);

  const refresh = async () => {
    try {
      const ans = await getJSON<{ peers: Peer[] }>("/api/v1/peers");
      if (!ctx.alive()) return;
      table.set(ans.peers ?? []);
      note.replaceChildren((ans.peers ?? []).length === 0
        ? message("info", "No peers known. Gossip runs only when the agent has --cluster-name; then add one peer's address below (or start the agent with --peer).")
        : "");
    } catch (e) {
      if (ctx.alive()) note.replaceChildren(message("error", `Peers not loaded: ${(e as Error).message}`));
    }
    ctx.ready();
  };
  ctx.onTick(refresh);
  await refresh();
}
