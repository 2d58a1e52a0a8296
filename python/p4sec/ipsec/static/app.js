// The p4sec controller's live status page: reads the server-sent events of /status/events (with the bearer token
// the operator typed, or gave in the address as #token=...; kept for this tab only) and draws the controller,
// its gateways and its tunnels from each snapshot. Plain JavaScript, no build step; every value is written as
// text (never as HTML).
"use strict";

const KEY = "p4sec-status-token";
const $ = (id) => document.getElementById(id);
let previous = null;            // the last snapshot: packet rates are the difference to it
let lastEvent = 0;              // when the last snapshot arrived (ms)
let interval = 1;               // the controller's update interval (s)
let controller = null;          // the running stream's AbortController
const openHistory = new Set();  // tunnels whose history the operator opened

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, seconds);
  if (s < 90) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function clock(t) {
  return t ? new Date(t * 1000).toLocaleTimeString() : "–";
}

function setConn(state, text) {
  const c = $("conn");
  c.dataset.conn = state;
  c.textContent = text;
}

function showLogin(message) {
  if (controller) controller.abort();
  $("main").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  setConn("off", "not signed in");
}

// ------------------------------------------------------------------------------------------------ drawing

function drawController(snap) {
  const c = snap.controller || {};
  const leader = $("leader");
  if (c.mode === "single") {
    leader.textContent = "this controller (single, no replicas)";
    leader.dataset.leader = "";
  } else {
    leader.textContent = c.leader || "none right now (a replica takes over within the lease)";
    leader.dataset.leader = c.leader || "";
  }
  $("term").textContent = c.term === null || c.term === undefined ? "–" : String(c.term);
  $("term").dataset.term = c.term === null || c.term === undefined ? "" : String(c.term);
  $("served-by").textContent = c.mode === "single" ? "the controller" :
    `${c.served_by}${c.serving_leads ? " (the leader)" : " (a follower: the leader's view)"}`;
  $("updated").textContent = clock(snap.now);
  $("renewals").textContent = snap.renewals_total === undefined ? "–" :
    `${snap.renewals_total} done, ${snap.renewal_failures_total} failed`;
  const err = $("error");
  err.hidden = !snap.error;
  err.textContent = snap.error || "";
  document.body.classList.toggle("stale", Boolean(snap.error));
}

function drawGateways(gateways) {
  const body = $("gateways").tBodies[0];
  body.replaceChildren(...gateways.map((g) => {
    const conn = g.connected ? (g.primary ? "connected, primary" : "connected, not primary") : "unreachable";
    const last = (g.events || [])[0];
    return el("tr", {"data-gateway": g.name, "data-connected": String(g.connected)},
      el("td", {}, g.name), el("td", {}, g.address), el("td", {}, `${g.lan} (WAN ${g.wan})`), el("td", {}, g.grpc),
      el("td", {class: g.connected ? "ok" : "bad"}, conn), el("td", {}, g.election_id ?? "–"),
      el("td", {class: last && last.kind === "failure" ? "bad" : ""}, last ? `${clock(last.t)} ${last.what}` : "–"));
  }));
}

const rates = new Map();         // SPI and side -> the last packet rate shown (an SA's counters may be read less often)

function rate(tunnel, sa, side) {
  if (!previous || !sa[side] || !sa.counted_at) return "";
  const t = (previous.tunnels || []).find((x) => x.name === tunnel);
  const p = t && t.sas.find((x) => x.spi === sa.spi);
  if (!p || !p[side] || !p.counted_at) return "";
  const key = `${sa.spi} ${side}`;
  const dt = sa.counted_at - p.counted_at;
  if (dt <= 0) return rates.get(key) || "";
  const text = ` (${Math.max(0, (sa[side].packets - p[side].packets) / dt).toFixed(0)}/s)`;
  rates.set(key, text);
  return text;
}

function nextRenewal(nr) {
  const parts = [];
  if (nr.in_seconds !== undefined) parts.push(`in ${ago(nr.in_seconds)}`);
  if (nr.packets_left !== undefined) parts.push(`${nr.packets_left} packets left`);
  if (nr.bytes_left !== undefined) parts.push(`${bytes(nr.bytes_left)} left`);
  return parts.length ? parts.join(", ") : "–";
}

function dropped(d) {
  if (!d || (!d.in && !d.out)) return "–";
  const parts = [];
  for (const side of ["out", "in"]) {
    for (const [reason, n] of Object.entries(d[side] || {})) parts.push(`${reason} ${n}${side === "out" ? " (sender)" : ""}`);
  }
  return parts.length ? parts.join(", ") : "0";
}

function drawTunnel(t, snap) {
  const side = (gw, prefix) => prefix ? `${gw} (${prefix})` : gw;
  const head = el("div", {class: "head"},
    el("span", {class: "name"}, t.name), " ",
    el("span", {class: `state state-${t.state}`, "data-role": "state"}, t.state), " ",
    `${side(t.a, t.a_prefix)} ⇄ ${side(t.b, t.b_prefix)} · ${t.suite} · ${t.encap} · ${t.keying} · ${t.kind}`,
    t.unreachable && t.unreachable.length ? el("span", {class: "bad"}, ` · unreachable: ${t.unreachable.join(", ")}`) : null);
  const renewals = el("div", {class: "renewals"},
    `renewals: ${t.renewals}`,
    el("span", {class: t.renewal_failures ? "bad" : ""}, `, failed: ${t.renewal_failures}`),
    `, last: ${t.last_renewal ? ago(snap.now - t.last_renewal) + " ago" : "never"}`);
  const rows = t.sas.map((sa) => el("tr", {"data-spi": sa.spi, "data-sa-state": sa.state, "data-src": sa.src, "data-dst": sa.dst},
    el("td", {}, `${sa.src} → ${sa.dst}`),
    el("td", {class: "spi"}, sa.spi),
    el("td", {class: `sa-${sa.state}`}, sa.state),
    el("td", {}, ago(sa.age)),
    el("td", {}, sa.state === "active" ? nextRenewal(sa.next_renewal || {}) : "–"),
    el("td", {"data-role": "sent"}, sa.out ? `${sa.out.packets} pkts, ${bytes(sa.out.bytes)}${rate(t.name, sa, "out")}` : "–"),
    el("td", {"data-role": "accepted"}, sa.in ? `${sa.in.packets} pkts, ${bytes(sa.in.bytes)}${rate(t.name, sa, "in")}` : "–"),
    el("td", {class: sa.unreceived ? "warn" : ""}, sa.unreceived ?? "–"),
    el("td", {"data-role": "dropped", class: dropped(sa.dropped).match(/[a-z] \d/) ? "bad" : ""}, dropped(sa.dropped))));
  const table = !t.detailed ? el("p", {class: "none"}, "SAs, counters and history left out (more tunnels than the page details)") :
    rows.length ? el("table", {class: "sas"},
    el("thead", {}, el("tr", {}, ...["Direction", "SPI", "SA", "Key age", "Next renewal", "Sent", "Accepted", "Not accepted", "Dropped"]
      .map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows)) : el("p", {class: "none"}, "no SAs");
  const history = el("details", {class: "history", open: openHistory.has(t.name)},
    el("summary", {}, `history (latest ${t.events.length})`),
    el("ol", {}, ...t.events.map((e) => el("li", {class: `ev-${e.kind}`, "data-kind": e.kind}, `${clock(e.t)} ${e.what}`))));
  history.addEventListener("toggle", () => { if (history.open) openHistory.add(t.name); else openHistory.delete(t.name); });
  return el("div", {class: "tunnel", "data-tunnel": t.name, "data-state": t.state}, head, renewals, table, t.detailed ? history : null);
}

function draw(snap) {
  $("login").hidden = true;
  $("main").hidden = false;
  $("signout").hidden = false;
  drawController(snap);
  if (snap.gateways) drawGateways(snap.gateways);
  if (snap.tunnels) {
    $("tunnels").replaceChildren(...snap.tunnels.map((t) => drawTunnel(t, snap)));
    const live = new Set(snap.tunnels.flatMap((t) => t.sas.map((sa) => sa.spi)));
    for (const key of rates.keys()) if (!live.has(key.split(" ")[0])) rates.delete(key);
    previous = snap;
  }
}

// ------------------------------------------------------------------------------------------------ the stream

function onBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (event !== "status" || !data.length) return;
  const snap = JSON.parse(data.join("\n"));
  if (snap.interval) interval = snap.interval;
  lastEvent = Date.now();
  setConn(snap.error ? "degraded" : "live", snap.error ? "live, no leader's view" : "live");
  draw(snap);
}

async function stream() {
  for (;;) {
    const token = sessionStorage.getItem(KEY);
    if (!token) return showLogin();
    controller = new AbortController();
    try {
      const res = await fetch("/status/events", {headers: {Authorization: `Bearer ${token}`}, cache: "no-store",
                                                 signal: controller.signal});
      if (res.status === 401) {
        sessionStorage.removeItem(KEY);
        return showLogin("the controller refused this token");
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      lastEvent = Date.now();
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += decoder.decode(value, {stream: true});
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          onBlock(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
      }
    } catch (e) {
      if (!sessionStorage.getItem(KEY)) return;
      setConn("lost", `reconnecting (${e.message || e})`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// a stream that went silent (a paused controller) is dropped and opened again
setInterval(() => {
  if (controller && lastEvent && Date.now() - lastEvent > 3000 + 3000 * interval) {
    setConn("lost", "no update for a while: reconnecting");
    lastEvent = Date.now();
    controller.abort();
  }
}, 1000);

function start() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("token").value.trim());
    $("token").value = "";
    $("login").hidden = true;
    setConn("connecting", "connecting…");
    stream();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    showLogin();
  });
  stream();
}

start();
