/**
 * The live page of the control API (issue #6): `GET /` serves one self-contained HTML page
 * (inline CSS and JS, no external assets) that shows the recording sessions, the default and
 * other collections' traffic outside sessions, recent captures, totals and the files being
 * written, updating as captures land. Its data come from two API routes:
 *
 * - `GET /api/v1/live` — a JSON snapshot (LiveSnapshot);
 * - `GET /api/v1/live/events` — Server-Sent Events: `snapshot` on connect, then `update`s.
 *
 * Access: the page itself holds no data and is served without a token; the two data routes are
 * ordinary API routes (Bearer token when one is configured). With a token, the page asks for it
 * (or takes it from the URL fragment, `/#token=…`, which never reaches the server or its logs),
 * keeps it in the tab's sessionStorage and sends it as `Authorization: Bearer`, reading the
 * event stream with fetch(). No cookie, so no ambient credential for other sites or ports.
 *
 * Everything captured (URLs, content types, file names) is hostile text: the page inserts it with
 * textContent only, and a Content-Security-Policy with a per-response nonce allows no other script.
 */
import { randomBytes } from "node:crypto";
import type { ExtraRoute, RequestContext } from "./api.js";
import type { LiveFeed } from "./liveFeed.js";

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function liveRoutes(feed: LiveFeed, o: { version: string; tokenConfigured: boolean }): ExtraRoute[] {
  return [
    {
      method: "GET",
      path: "/",
      auth: false,
      operation: {
        operationId: "getLivePage",
        summary: "The live page",
        description:
          "A self-contained HTML page showing the recording sessions and the collections' traffic outside sessions: recent captures (time, URL, status, record type, size on disk, new or revisit, file), totals, and the files being written, updating live from `/api/v1/live/events`. The page holds no data and needs no token; when a token is configured it asks for it (or reads it from the URL fragment `#token=…`) and sends it as a bearer token on its data requests.",
        tags: ["live"],
        responses: { "200": { description: "The page.", content: { "text/html": { schema: { type: "string" } } } } },
      },
      handle: (c) => sendPage(c, o),
    },
    {
      method: "GET",
      path: "/api/v1/live",
      auth: true,
      operation: {
        operationId: "getLiveSnapshot",
        summary: "What the live page shows, as one JSON snapshot",
        description: "Per group (each session; each collection's traffic outside sessions): totals, files, and the most recent captures (at most `perGroup`, oldest first); and the writers' current files.",
        tags: ["live"],
        responses: { "200": { description: "The snapshot.", content: { "application/json": { schema: { type: "object" } } } } },
      },
      handle: async (c) => {
        const body = JSON.stringify(await feed.snapshot()) + "\n";
        c.res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": String(Buffer.byteLength(body)), "cache-control": "no-store", "x-content-type-options": "nosniff" });
        c.res.end(body);
      },
    },
    {
      method: "GET",
      path: "/api/v1/live/events",
      auth: true,
      operation: {
        operationId: "getLiveEvents",
        summary: "The live page's event stream",
        description:
          "Server-Sent Events. `snapshot` (data: the same JSON as `/api/v1/live`) when the stream opens and whenever the client should start over; then `update` (data: `{now, totals, groups, writers, captures}`: every group's header and totals, and the captures written since the previous event, each with its `group` key), at most a few per second; `: ping` comments keep the connection alive.",
        tags: ["live"],
        responses: { "200": { description: "The stream.", content: { "text/event-stream": { schema: { type: "string" } } } } },
      },
      handle: (c) => feed.stream(c.res),
    },
  ];
}

function sendPage(c: RequestContext, o: { version: string; tokenConfigured: boolean }): void {
  const nonce = randomBytes(16).toString("base64");
  const body = PAGE.replace(/__NONCE__/g, () => nonce)
    .replace("__VERSION__", () => escapeHtml(o.version))
    .replace("__TOKEN__", () => (o.tokenConfigured ? "true" : "false"));
  c.res.writeHead(200, {
    "content-type": "text/html; charset=utf-8",
    "content-length": String(Buffer.byteLength(body)),
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "content-security-policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
  });
  c.res.end(c.req.method === "HEAD" ? undefined : body);
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>lathe · live</title>
<style nonce="__NONCE__">
:root { --bg:#f4f5f7; --card:#fff; --ink:#1d2330; --muted:#667085; --line:#e3e6eb; --accent:#2f5bd3;
  --ok:#1a7f43; --okbg:#e6f4ec; --warn:#8a5a00; --warnbg:#fdf1d8; --bad:#b42318; --badbg:#fde8e6; --info:#175cd3; --infobg:#e8effd; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif; }
header.top { position:sticky; top:0; z-index:2; display:flex; align-items:center; gap:16px; padding:10px 20px; background:#111827; color:#f9fafb; }
header.top h1 { margin:0; font-size:17px; font-weight:650; letter-spacing:.2px; }
header.top .ver { color:#9ca3af; font-size:12px; }
#conn { margin-left:auto; display:flex; align-items:center; gap:6px; font-size:13px; color:#d1d5db; }
#conn .dot { width:9px; height:9px; border-radius:50%; background:#9ca3af; }
#conn.live .dot { background:#34d399; box-shadow:0 0 0 3px rgba(52,211,153,.25); }
#conn.down .dot { background:#f87171; }
main { max-width:1400px; margin:0 auto; padding:16px 20px 40px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px; margin-bottom:16px; }
h2 { margin:0; font-size:15px; font-weight:650; display:flex; align-items:center; gap:8px; flex-wrap:wrap; }
h2 .kind { color:var(--muted); font-weight:500; }
.meta { color:var(--muted); font-size:12.5px; margin-top:2px; overflow-wrap:anywhere; }
.meta code, td code, .files code { font:12px/1.4 ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, monospace; }
dl.totals { display:flex; flex-wrap:wrap; gap:8px 22px; margin:12px 0 8px; }
dl.totals div { min-width:64px; }
dl.totals dt { color:var(--muted); font-size:11.5px; text-transform:uppercase; letter-spacing:.4px; }
dl.totals dd { margin:0; font-size:18px; font-weight:600; font-variant-numeric:tabular-nums; }
.files { font-size:12.5px; color:var(--muted); margin:4px 0 10px; overflow-wrap:anywhere; }
.files code { color:var(--ink); background:#f2f4f7; border-radius:4px; padding:1px 5px; margin-right:6px; display:inline-block; margin-bottom:2px; }
.scroll { max-height:460px; overflow:auto; border:1px solid var(--line); border-radius:8px; }
table { width:100%; border-collapse:collapse; font-size:13px; }
th { position:sticky; top:0; background:#f9fafb; color:var(--muted); font-weight:600; font-size:11.5px; text-transform:uppercase; letter-spacing:.4px; text-align:left; padding:7px 10px; border-bottom:1px solid var(--line); }
td { padding:6px 10px; border-bottom:1px solid #f0f1f4; vertical-align:top; }
tbody tr:last-child td { border-bottom:0; }
tbody tr.fresh { animation: fresh 1.6s ease-out; }
@keyframes fresh { from { background:#fff7d6; } to { background:transparent; } }
td.c-time, td.c-size, td.c-status { white-space:nowrap; font-variant-numeric:tabular-nums; }
td.c-size { text-align:right; }
th.r { text-align:right; }
td.c-url { width:55%; overflow-wrap:anywhere; word-break:break-word; }
td.c-url .m { color:var(--muted); font-size:11px; margin-right:6px; }
td.c-file { color:var(--muted); font-size:11.5px; white-space:nowrap; }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:11.5px; font-weight:600; line-height:18px; white-space:nowrap; }
.b-new { color:var(--ok); background:var(--okbg); }
.b-revisit { color:var(--warn); background:var(--warnbg); }
.b-failed { color:var(--bad); background:var(--badbg); }
.b-type { color:#344054; background:#eef0f3; font-weight:500; }
.b-open { color:var(--ok); background:var(--okbg); }
.b-closed { color:var(--muted); background:#eef0f3; }
.s2 { color:var(--ok); } .s3 { color:var(--info); } .s4, .s5 { color:var(--bad); } .s0 { color:var(--muted); }
.empty { color:var(--muted); margin:6px 0 2px; font-size:13px; }
#login { max-width:420px; margin:60px auto; }
#login label { display:block; font-weight:600; margin-bottom:6px; }
#login input { width:100%; padding:8px 10px; border:1px solid #cfd4dc; border-radius:6px; font-size:14px; }
#login button { margin-top:10px; padding:7px 16px; border:0; border-radius:6px; background:var(--accent); color:#fff; font-weight:600; cursor:pointer; }
#login p { color:var(--muted); font-size:13px; }
#login .err { color:var(--bad); }
[hidden] { display:none !important; }
</style>
</head>
<body>
<header class="top"><h1>lathe · live</h1><span class="ver">__VERSION__</span><span id="summary" class="ver"></span><span id="conn"><span class="dot"></span><span id="conn-text">connecting…</span></span></header>
<main>
<form id="login" class="card" hidden autocomplete="off">
  <label for="token">Control token</label>
  <input id="token" type="password" name="token" spellcheck="false">
  <button type="submit">Show the live view</button>
  <p id="login-msg">This lathe requires its control token (<code>control.token</code>). It is kept in this tab only and sent as a bearer token.</p>
</form>
<section id="writers" class="card" hidden>
  <h2>Files being written</h2>
  <div class="scroll"><table><thead><tr><th>Series</th><th>Current file</th><th class="r">Size</th><th class="r">Records written</th><th class="r">Bytes written</th><th class="r">Closed files</th><th class="r">Waiting</th><th>State</th></tr></thead><tbody id="writer-rows"></tbody></table></div>
  <p id="no-writers" class="empty">No file open yet.</p>
</section>
<section id="politeness" class="card" hidden>
  <h2>Polite hosts</h2>
  <div class="scroll"><table><thead><tr><th>Host</th><th class="r">In flight</th><th class="r">Waiting</th><th class="r">Gap</th><th class="r">Back-off</th></tr></thead><tbody id="polite-rows"></tbody></table></div>
</section>
<div id="groups"></div>
</main>
<template id="group-tpl">
<section class="card group">
  <h2><span class="kind"></span><span class="name"></span><span class="badge state"></span></h2>
  <div class="meta"></div>
  <dl class="totals">
    <div><dt>Captures</dt><dd data-total="captures">0</dd></div>
    <div><dt>New</dt><dd data-total="new">0</dd></div>
    <div><dt>Revisits</dt><dd data-total="revisits">0</dd></div>
    <div><dt>Resources</dt><dd data-total="resources">0</dd></div>
    <div><dt>HTML pages</dt><dd data-total="pages">0</dd></div>
    <div><dt>Failed</dt><dd data-total="failed">0</dd></div>
    <div><dt>Records</dt><dd data-total="records">0</dd></div>
    <div><dt>Bytes</dt><dd data-total="bytes">0</dd></div>
    <div><dt>Files</dt><dd data-total="files">0</dd></div>
  </dl>
  <div class="files"></div>
  <div class="scroll"><table class="captures"><thead><tr><th>Time</th><th>Status</th><th>Type</th><th class="r">Size</th><th>Dedup</th><th>URL</th><th>File</th></tr></thead><tbody></tbody></table></div>
  <p class="empty">No captures yet.</p>
</section>
</template>
<script nonce="__NONCE__">
"use strict";
(function () {
  const TOKEN_REQUIRED = __TOKEN__;
  const $ = (id) => document.getElementById(id);
  let perGroup = 200;
  let token = sessionStorage.getItem("lathe.token") || "";
  if (location.hash.indexOf("#token=") === 0) {
    token = decodeURIComponent(location.hash.slice(7));
    sessionStorage.setItem("lathe.token", token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  const groups = new Map(); // key -> { el, tbody, lastSeq }

  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };
  const fmtInt = (n) => Number(n).toLocaleString("en-US");
  const fmtBytes = (n) => {
    if (n < 1024) return n + " B";
    const u = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " " + u[i];
  };
  const fmtTime = (iso) => {
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleTimeString("en-GB", { hour12: false });
  };

  function setConn(kind, text) {
    $("conn").className = kind;
    $("conn-text").textContent = text;
  }

  function groupView(h) {
    let g = groups.get(h.key);
    if (!g) {
      const el0 = $("group-tpl").content.firstElementChild.cloneNode(true);
      el0.dataset.key = h.key;
      el0.dataset.kind = h.kind;
      g = { el: el0, tbody: el0.querySelector("tbody"), lastSeq: 0 };
      groups.set(h.key, g);
    }
    return g;
  }

  function renderHeader(g, h) {
    const e = g.el;
    e.querySelector(".kind").textContent = h.kind === "session" ? "Session" : "Collection";
    e.querySelector(".name").textContent = h.kind === "session" ? h.id : h.collection;
    const st = e.querySelector(".state");
    if (h.kind === "session") {
      st.hidden = false;
      st.textContent = h.open ? "recording" : "closed";
      st.className = "badge state " + (h.open ? "b-open" : "b-closed");
    } else st.hidden = true;
    e.dataset.open = String(h.open);
    const meta = e.querySelector(".meta");
    meta.textContent = "";
    if (h.kind === "session") {
      meta.append("collection ", el("b", "collection", h.collection));
      if (h.proxy) meta.append(" · proxy ", el("code", "proxy", h.proxy));
      if (h.createdAt) meta.append(" · opened " + fmtTime(h.createdAt));
      if (h.closedAt) meta.append(" · closed " + fmtTime(h.closedAt));
    } else {
      meta.append("traffic outside sessions: the main proxy port, Warcprox-Meta, pushed resources");
    }
    const t = h.totals;
    const num = (k, v) => {
      const d = e.querySelector('[data-total="' + k + '"]');
      d.textContent = fmtInt(v);
      d.dataset.value = String(v);
    };
    for (const k of ["captures", "revisits", "resources", "pages", "failed", "records"]) num(k, t[k]);
    num("new", t.captures - t.revisits);
    num("files", h.filesCount);
    const bytes = e.querySelector('[data-total="bytes"]');
    bytes.textContent = fmtBytes(t.bytes);
    bytes.dataset.value = String(t.bytes);
    bytes.title = fmtInt(t.bytes) + " bytes";
    const files = e.querySelector(".files");
    files.textContent = "";
    if (h.files.length) {
      files.append(h.filesCount > h.files.length ? "Files (latest " + h.files.length + " of " + h.filesCount + "): " : "Files: ");
      for (const f of h.files) files.append(el("code", "file", f));
    }
  }

  function row(c) {
    const tr = el("tr");
    tr.dataset.seq = String(c.seq);
    if (c.recordId) tr.dataset.recordId = c.recordId;
    const time = el("td", "c-time", fmtTime(c.time));
    time.title = c.time;
    const status = el("td", "c-status s" + (c.status ? String(c.status)[0] : "0"), c.status === null ? "—" : c.status);
    const type = el("td", "c-type");
    type.append(el("span", "badge " + (c.type === "failed" ? "b-failed" : "b-type"), c.type));
    const size = el("td", "c-size", c.type === "failed" ? "—" : fmtBytes(c.size));
    size.dataset.bytes = String(c.size);
    size.title = fmtInt(c.size) + " bytes on disk" + (c.records > 1 ? "; " + fmtInt(c.groupSize) + " with its " + c.records + " records" : "");
    const flag = el("td", "c-flag");
    if (c.type !== "failed") flag.append(el("span", "badge " + (c.revisit ? "b-revisit" : "b-new"), c.revisit ? "revisit" : "new"));
    const url = el("td", "c-url");
    if (c.method && c.method !== "GET") url.append(el("span", "m", c.method));
    url.append(el("span", "u", c.uri));
    url.title = c.uri + (c.contentType ? "\\n" + c.contentType : "") + (c.error ? "\\n" + c.error : "");
    const file = el("td", "c-file", c.file || (c.error ? c.error : ""));
    if (c.file) file.title = c.file + " @ " + c.offset;
    tr.append(time, status, type, size, flag, url, file);
    return tr;
  }

  function addCaptures(g, list, animate) {
    for (const c of list) {
      if (c.seq <= g.lastSeq) continue;
      g.lastSeq = c.seq;
      const tr = row(c);
      if (animate) tr.className = "fresh";
      g.tbody.insertBefore(tr, g.tbody.firstChild);
    }
    while (g.tbody.rows.length > perGroup) g.tbody.deleteRow(g.tbody.rows.length - 1);
    g.el.querySelector(".empty").hidden = g.tbody.rows.length > 0;
  }

  function placeGroups(headers) {
    const box = $("groups");
    const keep = new Set(headers.map((h) => h.key));
    for (const [k, g] of groups) if (!keep.has(k)) { g.el.remove(); groups.delete(k); }
    let prev = null;
    for (const h of headers) {
      const g = groupView(h);
      renderHeader(g, h);
      const want = prev ? prev.nextSibling : box.firstChild;
      if (want !== g.el) box.insertBefore(g.el, want);
      prev = g.el;
    }
  }

  function renderWriters(ws) {
    $("writers").hidden = false;
    const tb = $("writer-rows");
    tb.textContent = "";
    for (const w of ws) {
      const tr = el("tr");
      tr.dataset.series = w.series;
      const cur = el("td", "c-file");
      cur.append(el("code", null, w.currentFile || "—"));
      const size = el("td", "c-size", w.currentBytes === null ? "—" : fmtBytes(w.currentBytes));
      size.dataset.bytes = w.currentBytes === null ? "" : String(w.currentBytes);
      const state = el("td");
      state.append(el("span", "badge " + (w.failed ? "b-failed" : w.currentFile ? "b-open" : "b-closed"), w.failed ? "failed" : w.currentFile ? "writing" : "idle"));
      if (w.failed) state.title = w.failed;
      const bytes = el("td", "c-size", fmtBytes(w.bytes));
      bytes.dataset.bytes = String(w.bytes);
      // Captures kept for a writer that cannot write (issue #26): written once it can again.
      const waiting = el("td", "c-size c-waiting", w.waiting ? fmtInt(w.waiting) + " (" + fmtBytes(w.waitingBytes) + ")" : "—");
      waiting.dataset.waiting = String(w.waiting);
      tr.append(el("td", "c-series", w.series), cur, size, el("td", "c-size c-records", fmtInt(w.records)), bytes, el("td", "c-size", fmtInt(w.filesClosed)), waiting, state);
      tb.append(tr);
    }
    $("no-writers").hidden = ws.length > 0;
  }

  // Hosts with requests at or waiting for them, or backing off (issue #27); hidden when there are none.
  function renderPoliteness(p) {
    const hosts = p ? p.hosts : [];
    $("politeness").hidden = hosts.length === 0;
    const tb = $("polite-rows");
    tb.textContent = "";
    for (const h of hosts) {
      const tr = el("tr");
      tr.dataset.host = h.host;
      tr.dataset.queued = String(h.queued);
      const secs = (ms) => ms > 0 ? (ms / 1000).toFixed(1) + " s" : "—";
      tr.append(el("td", "c-series", h.host), el("td", "c-size", fmtInt(h.active)), el("td", "c-size c-queued", fmtInt(h.queued)), el("td", "c-size", secs(h.delayMs)), el("td", "c-size", secs(h.backoffMs)));
      tb.append(tr);
    }
  }

  function renderTotals(t) {
    const s = $("summary");
    s.textContent = fmtInt(t.captures) + " captures · " + fmtInt(t.revisits) + " revisits · " + fmtInt(t.resources) + " resources · " + fmtBytes(t.bytes);
    s.dataset.captures = String(t.captures);
  }

  function applySnapshot(s) {
    perGroup = s.perGroup || perGroup;
    for (const g of groups.values()) g.el.remove();
    groups.clear();
    placeGroups(s.groups);
    for (const h of s.groups) addCaptures(groups.get(h.key), h.captures, false);
    renderWriters(s.writers);
    renderPoliteness(s.politeness);
    renderTotals(s.totals);
    document.body.dataset.updated = s.now;
  }

  function applyUpdate(u) {
    placeGroups(u.groups);
    const byGroup = new Map();
    for (const c of u.captures) {
      if (!byGroup.has(c.group)) byGroup.set(c.group, []);
      byGroup.get(c.group).push(c);
    }
    for (const [k, list] of byGroup) { const g = groups.get(k); if (g) addCaptures(g, list, true); }
    renderWriters(u.writers);
    renderPoliteness(u.politeness);
    renderTotals(u.totals);
    document.body.dataset.updated = u.now;
  }

  function onBlock(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\\n")) {
      if (line === "" || line[0] === ":") continue;
      const i = line.indexOf(":");
      const f = i < 0 ? line : line.slice(0, i);
      let v = i < 0 ? "" : line.slice(i + 1);
      if (v[0] === " ") v = v.slice(1);
      if (f === "event") event = v;
      else if (f === "data") data.push(v);
    }
    if (!data.length) return;
    const msg = JSON.parse(data.join("\\n"));
    if (event === "snapshot") applySnapshot(msg);
    else if (event === "update") applyUpdate(msg);
  }

  let generation = 0;
  function retry(gen) {
    if (gen !== generation) return;
    setConn("down", "reconnecting…");
    setTimeout(() => { if (gen === generation) connect(); }, 2000);
  }

  async function connect() {
    const gen = ++generation;
    setConn("", "connecting…");
    let res;
    try {
      // Header values are byte strings: send the token's UTF-8 bytes (the server hashes those).
      res = await fetch("/api/v1/live/events", { headers: token ? { Authorization: "Bearer " + unescape(encodeURIComponent(token)) } : {}, cache: "no-store" });
    } catch (e) {
      return retry(gen);
    }
    if (res.status === 401) {
      $("login").hidden = false;
      $("login-msg").className = token ? "err" : "";
      if (token) $("login-msg").textContent = "That token was not accepted. Enter the control token of this lathe.";
      setConn("down", "token required");
      $("token").focus();
      return;
    }
    if (!res.ok || !res.body) { setConn("down", "error " + res.status); return retry(gen); }
    $("login").hidden = true;
    setConn("live", "live");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        buf += r.value.replace(/\\r\\n?/g, "\\n");
        let i;
        while ((i = buf.indexOf("\\n\\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onBlock(block);
        }
      }
    } catch (e) { /* the stream broke: reconnect */ }
    retry(gen);
  }

  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value.trim();
    $("token").value = "";
    sessionStorage.setItem("lathe.token", token);
    connect();
  });
  if (TOKEN_REQUIRED && !token) {
    $("login").hidden = false;
    setConn("down", "token required");
  } else connect();
})();
</script>
</body>
</html>
`;
