// Network: interfaces (traffic, packets, errors), TCP socket states and listening ports, live.
import { TimeChart } from "../chart";
import { esc, h } from "../dom";
import { fmtNum, fmtUnit } from "../format";
import type { Ctx } from "../main";
import { align, Store } from "../store";
import { heading, SortTable } from "../widgets";

interface Iface { name: string; rx: number | null; tx: number | null; rxp: number | null; txp: number | null; err: number | null; drop: number | null }
interface Port { port: string; sockets: number | null; queue: number | null; established: number | null }

export function network(ctx: Ctx) {
  const root = ctx.root;
  const ifaces = new SortTable<Iface>([
    { key: "name", label: "Interface", sort: (r) => r.name, html: (r) => `<a href="/series?match=${encodeURIComponent(`{interface="${r.name}"}`)}">${esc(r.name)}</a>` },
    { key: "rx", label: "Received", num: true, sort: (r) => r.rx ?? 0, html: (r) => fmtUnit(r.rx, "bytes/s") },
    { key: "tx", label: "Sent", num: true, sort: (r) => r.tx ?? 0, html: (r) => fmtUnit(r.tx, "bytes/s") },
    { key: "rxp", label: "Packets in", num: true, sort: (r) => r.rxp ?? 0, html: (r) => fmtUnit(r.rxp, "/s") },
    { key: "txp", label: "Packets out", num: true, sort: (r) => r.txp ?? 0, html: (r) => fmtUnit(r.txp, "/s") },
    { key: "err", label: "Errors", num: true, sort: (r) => r.err ?? 0, html: (r) => fmtUnit(r.err, "/s") },
    { key: "drop", label: "Drops", num: true, sort: (r) => r.drop ?? 0, html: (r) => fmtUnit(r.drop, "/s") },
  ], "name", false, undefined, "Interfaces (per second, last scan)");
  const states = h("div");
  const ports = new SortTable<Port>([
    { key: "port", label: "Port", num: true, sort: (r) => Number(r.port), html: (r) => esc(r.port) },
    { key: "sockets", label: "Listening sockets", num: true, sort: (r) => r.sockets ?? 0, html: (r) => fmtNum(r.sockets ?? 0) },
    { key: "established", label: "Established", num: true, sort: (r) => r.established ?? 0, html: (r) => fmtNum(r.established ?? 0) },
    { key: "queue", label: "Accept queue", num: true, sort: (r) => r.queue ?? 0, html: (r) => fmtNum(r.queue ?? 0) },
  ], "port", false, undefined, "Listening TCP ports");
  const grid = h("section", { class: "charts" });
  root.append(heading("Network", "Interfaces, TCP socket states and listening ports; charts cover 15 minutes."), grid,
    h("div", { class: "table-wrap" }, ifaces.el),
    h("section", { class: "two" }, h("div", {}, h("h2", {}, "TCP sockets by state"), states), h("div", {}, h("h2", {}, "Listening ports"), ports.el)));
  const traffic = new TimeChart(grid, { group: ctx.charts, title: "Traffic per interface", unit: "bytes/s" });
  const tcpChart = new TimeChart(grid, { group: ctx.charts, title: "TCP sockets by state", unit: "" });
  ctx.cleanup(() => { traffic.destroy(); tcpChart.destroy(); });

  const nets = new Store(15 * 60e3, true);
  const last = (s: Store, m: string, extra: Record<string, string>) => {
    const t = s.get(m, extra);
    return t && t.v.length ? t.v[t.v.length - 1] : null;
  };
  const drawNet = () => {
    const names = [...new Set(nets.find().map((t) => t.labels.interface))].sort();
    const add = (a: number | null, b: number | null) => (a === null && b === null ? null : (a ?? 0) + (b ?? 0));
    ifaces.set(names.map((n) => {
      const f = (m: string) => last(nets, `net.interface.${m}`, { interface: n });
      return { name: n, rx: f("rx.bytes"), tx: f("tx.bytes"), rxp: f("rx.packets"), txp: f("tx.packets"), err: add(f("rx.errors"), f("tx.errors")), drop: add(f("rx.drop"), f("tx.drop")) };
    }));
    const ts = nets.find((l) => l.metric === "net.interface.rx.bytes" || l.metric === "net.interface.tx.bytes");
    if (ts.length) traffic.set(align(ts), ts.map((t) => `${t.labels.interface} ${t.labels.metric.includes(".rx.") ? "in" : "out"}`));
  };
  ctx.sub(`{metric=~"net\\\\.interface\\\\.(rx|tx)\\\\.(bytes|packets|errors|drop)"}`, {
    history: "15m", fn: "rate",
    onHistory: (hs) => { nets.history(hs); drawNet(); },
    onUpdate: (ts, s) => { nets.update(ts, s); drawNet(); ctx.ready(); },
  });

  const tcp = new Store(15 * 60e3, false);
  const drawTCP = () => {
    const ts = tcp.find((l) => l.metric === "tcp.sockets" && l.state !== undefined);
    states.innerHTML = `<table class="grid"><thead><tr><th scope="col">State</th><th scope="col" class="num">Sockets</th></tr></thead><tbody>${
      ts.map((t) => `<tr><td>${esc(t.labels.state)}</td><td class="num">${fmtNum(t.v[t.v.length - 1] ?? 0)}</td></tr>`).join("") || '<tr><td colspan="2" class="none">no TCP sockets</td></tr>'
    }</tbody></table>`;
    const busy = ts.filter((t) => t.v.some((v) => v));
    if (busy.length) tcpChart.set(align(busy), busy.map((t) => t.labels.state));
    const ps = [...new Set(tcp.find((l) => l.metric.startsWith("tcp.listen.")).map((t) => t.labels.port))];
    ports.set(ps.map((p) => ({
      port: p, sockets: last(tcp, "tcp.listen.sockets", { port: p }), queue: last(tcp, "tcp.listen.queue", { port: p }),
      established: last(tcp, "tcp.listen.established", { port: p }),
    })));
  };
  ctx.sub(`{metric=~"tcp\\\\.(sockets|listen\\\\..*)"}`, {
    history: "15m",
    onHistory: (hs) => { tcp.history(hs); drawTCP(); },
    onUpdate: (ts, s) => { tcp.update(ts, s); drawTCP(); },
  });
}
