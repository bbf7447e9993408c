// The /admin dashboard. Everything goes through /graphql, authenticated by
// the HttpOnly session cookie: queries and mutations by fetch with the CSRF
// header, live stock by one graphql-transport-ws WebSocket that resumes from
// the last seen seq after a drop, so no change is missed.
"use strict";

const CSRF = {"X-Inventory-CSRF": "1"};
const ROW_H = 28;           // px, must match .row in admin.css
const HEALTH_EVERY = 3000;  // ms between inventoryHealth polls
const RECON_EVERY = 30000;  // reconciliation reads the ledger: less often
const FLASH_MS = 1500;

const state = {
  rows: new Map(),   // "sku\u0000location" -> balance
  view: [],          // filtered, sorted keys
  seq: 0,            // last stock event applied
  seqKnown: false,   // seq was read from the server (0 may be a real seq)
  selected: null,    // key the quick actions act on
  ws: null, live: false, retry: 0,
  ages: null,        // the last heldByAge, redrawn when the window resizes
};
window.__admin = state; // for tests and the curious

const $ = (id) => document.getElementById(id);
const key = (sku, loc) => sku + "\u0000" + loc;

// gql runs one operation; a lost session sends the browser back to sign-in.
async function gql(query, variables) {
  const res = await fetch("/graphql", {
    method: "POST", credentials: "same-origin",
    headers: Object.assign({"Content-Type": "application/json"}, CSRF),
    body: JSON.stringify({query, variables}),
  });
  const body = await res.json();
  if (body.errors && body.errors.some((e) => e.extensions && e.extensions.code === "UNAUTHENTICATED")) {
    location.reload();
    throw new Error("session ended");
  }
  if (body.errors) throw new Error(body.errors.map((e) => e.message).join("; "));
  return body.data;
}

// ---- table -------------------------------------------------------------

const BALANCES = `query($after: String) { balancesConnection(first: 1000, after: $after) {
  edges { node { sku location onHand reserved committed available pendingSupply preordered } }
  pageInfo { hasNextPage endCursor } seq } }`;

// loadBalances replaces the table with a fresh snapshot; the first page's
// seq is where the subscription resumes (later changes replay on top).
async function loadBalances() {
  const rows = new Map();
  let after = null, seq = null;
  do {
    const page = (await gql(BALANCES, {after})).balancesConnection;
    if (seq === null) seq = page.seq;
    for (const {node: b} of page.edges) rows.set(key(b.sku, b.location), b);
    after = page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null;
  } while (after);
  state.rows = rows;
  state.seq = seq;
  state.seqKnown = true;
  refilter();
}

function refilter() {
  const fs = $("f-sku").value.trim().toUpperCase(), fl = $("f-loc").value.trim().toUpperCase();
  state.view = [...state.rows.keys()].filter((k) => {
    const b = state.rows.get(k);
    return b.sku.toUpperCase().includes(fs) && b.location.toUpperCase().includes(fl);
  }).sort();
  $("count").textContent = state.view.length;
  $("spacer").style.height = state.view.length * ROW_H + "px";
  renderTotals();
  render();
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); renderTotals(); });
}

// render draws only the rows in (and just around) the viewport.
function render() {
  const vp = $("viewport");
  const first = Math.max(0, Math.floor(vp.scrollTop / ROW_H) - 5);
  const last = Math.min(state.view.length, Math.ceil((vp.scrollTop + vp.clientHeight) / ROW_H) + 5);
  const threshold = Number($("f-threshold").value || 0);
  const now = Date.now();
  const box = $("rows");
  box.style.transform = "translateY(" + first * ROW_H + "px)";
  const frag = document.createDocumentFragment();
  for (let i = first; i < last; i++) {
    const k = state.view[i], b = state.rows.get(k);
    const row = document.createElement("div");
    row.className = "row" + (b.available < threshold ? " low" : "") + (b.changedAt && now - b.changedAt < FLASH_MS ? " changed" : "");
    row.dataset.key = b.sku + "@" + b.location;
    cell(row, "sku", b.sku).title = b.sku; // a long code is cut short with an ellipsis
    cell(row, "location", b.location).title = b.location;
    for (const f of ["onHand", "reserved", "committed", "available", "pendingSupply", "preordered"]) cell(row, "num " + f, b[f]);
    const btn = document.createElement("button");
    btn.type = "button"; btn.textContent = "Actions"; btn.className = "act";
    btn.addEventListener("click", () => select(k));
    row.appendChild(btn);
    frag.appendChild(row);
  }
  box.replaceChildren(frag);
}

function cell(row, cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return row.appendChild(s);
}

function renderTotals() {
  let sum = 0;
  for (const b of state.rows.values()) sum += b.available;
  $("m-available").textContent = sum.toLocaleString();
  $("seq").textContent = state.seq;
}

// applyEvent takes one stock event's balance-after into its row.
function applyEvent(e) {
  if (e.seq <= state.seq) return; // replayed after a reconnect: already applied
  state.seq = e.seq;
  const k = key(e.sku, e.location);
  let b = state.rows.get(k);
  const isNew = !b;
  if (isNew) b = {sku: e.sku, location: e.location, pendingSupply: 0, preordered: 0};
  Object.assign(b, {onHand: e.onHand, reserved: e.reserved, committed: e.committed, available: e.available, changedAt: Date.now()});
  state.rows.set(k, b);
  if (isNew) refilter(); else scheduleRender();
  setTimeout(scheduleRender, FLASH_MS + 50); // take the highlight off
}

// ---- live updates ------------------------------------------------------

const STOCK_CHANGED = `subscription($after: Int64) { stockChanged(after: $after) {
  seq sku location onHand reserved committed available } }`;

// connect opens the socket and subscribes from state.seq; on any drop it
// reconnects with backoff and resumes from the last applied seq.
function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/graphql", "graphql-transport-ws");
  state.ws = ws;
  ws.onopen = () => ws.send(JSON.stringify({type: "connection_init", payload: {}}));
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    switch (msg.type) {
      case "connection_ack":
        setLive(true);
        state.retry = 0;
        ws.send(JSON.stringify({id: "stock", type: "subscribe", payload: {query: STOCK_CHANGED, variables: {after: state.seq}}}));
        break;
      case "ping": ws.send(JSON.stringify({type: "pong"})); break;
      case "next":
        if (msg.payload.errors) { resync(msg.payload.errors); break; }
        applyEvent(msg.payload.data.stockChanged);
        break;
      case "error": resync(msg.payload); break;
      // The server ended the stream (e.g. it is shutting down): reconnect
      // and resume from the last seq.
      case "complete": ws.close(); break;
    }
  };
  ws.onclose = (ev) => {
    if (state.ws !== ws) return;
    setLive(false);
    if (ev.code === 4401 || ev.code === 4403) { location.reload(); return; } // session ended
    const delay = Math.min(10000, 500 * 2 ** state.retry++);
    setTimeout(connect, delay);
  };
}

// resync: the cursor is older than the retained events (or the stream
// failed): reload the whole table and subscribe again from its seq.
async function resync(errors) {
  console.warn("stockChanged:", errors);
  const ws = state.ws;
  state.ws = null;
  if (ws) ws.close();
  setLive(false);
  try { await loadBalances(); } catch (e) { console.warn(e); }
  setTimeout(connect, 1000);
}

function setLive(live) {
  state.live = live;
  $("conn").className = live ? "live" : "down";
  $("conn").textContent = live ? "live" : "reconnecting";
}

// ---- the numbers -------------------------------------------------------

const HEALTH = `{ inventoryHealth { heldReservations overdueHolds heldByAge { label count }
  allocationFailureRate lastSweepReleased lastSweepAt unshippedOrders unshippedUnits oldestUnshippedSeconds } }`;

async function pollHealth() {
  try {
    const h = (await gql(HEALTH)).inventoryHealth;
    $("m-held").textContent = h.heldReservations;
    $("m-failure").textContent = (h.allocationFailureRate * 100).toFixed(1) + " %";
    $("m-overdue").textContent = h.overdueHolds;
    $("c-overdue").classList.toggle("alert", h.overdueHolds > 0);
    drawSweep(h.lastSweepReleased, h.lastSweepAt);
    drawUnshipped(h.unshippedOrders, h.unshippedUnits, h.oldestUnshippedSeconds);
    drawAges(h.heldByAge);
  } catch (e) { console.warn(e); }
  setTimeout(pollHealth, HEALTH_EVERY);
}

// drawSweep shows the backstop sweeper's last pass: how many holds it
// released (each hold has an expiry job of its own, so anything above 0 was
// released late) and when, absolute and relative, so "0" cannot be read as
// a time or the time as that of a release.
function drawSweep(released, at) {
  $("m-sweep").textContent = released == null ? "–" : released;
  $("c-sweep").classList.toggle("alert", released > 0);
  if (!at) { $("m-sweep-at").textContent = "no pass yet"; return; }
  const ago = Math.max(0, Math.round((Date.now() - new Date(at)) / 1000));
  $("m-sweep-at").textContent = "at " + new Date(at).toLocaleTimeString() + ", " + waited(ago) + " ago; " +
    (released > 0 ? "expiry jobs were late for these" : "expiry jobs are on time");
}

// drawUnshipped shows the orders waiting to ship from ON_SHIPMENT locations:
// their committed units stay on hand, never for sale, until fulfillOrder.
function drawUnshipped(orders, units, oldest) {
  $("m-unshipped").textContent = orders;
  $("m-unshipped-detail").textContent = orders === 0 ? "nothing committed" :
    units + " units committed; oldest confirmed " + waited(Math.round(oldest)) + " ago";
}

const AGE_GAP = 6; // px at least between two age labels

// drawAges draws held reservations by age as an SVG bar chart, a label
// under each bar and its count above. Labels that would come closer than
// AGE_GAP to their neighbours (a narrow card) go on two alternating lines.
function drawAges(buckets) {
  state.ages = buckets;
  const svg = $("age-chart"), NS = "http://www.w3.org/2000/svg";
  const w = svg.clientWidth || 240, line = 16, top = 14;
  const bw = w / Math.max(1, buckets.length);
  const text = (x, y, s) => {
    const l = document.createElementNS(NS, "text");
    l.setAttribute("x", x); l.setAttribute("y", y); l.setAttribute("text-anchor", "middle");
    l.textContent = s;
    return svg.appendChild(l);
  };
  svg.replaceChildren();
  const labels = buckets.map((b, i) => text(i * bw + bw / 2, 0, b.label.replace("-", "–").replace(">=", "≥")));
  const widest = Math.max(0, ...labels.map((l) => l.getComputedTextLength()));
  const rows = widest + AGE_GAP > bw ? 2 : 1;
  const h = 74 + rows * line, base = h - rows * line - 2;
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.style.height = h + "px";
  labels.forEach((l, i) => l.setAttribute("y", base + 12 + line * (rows === 2 ? i % 2 : 0)));
  const max = Math.max(1, ...buckets.map((b) => b.count));
  buckets.forEach((b, i) => {
    const bh = (base - top) * b.count / max;
    const r = document.createElementNS(NS, "rect");
    r.setAttribute("x", i * bw + 4); r.setAttribute("width", Math.max(1, bw - 8));
    r.setAttribute("y", base - bh); r.setAttribute("height", bh);
    const t = document.createElementNS(NS, "title"); t.textContent = b.label + ": " + b.count; r.appendChild(t);
    svg.appendChild(r);
    text(i * bw + bw / 2, base - bh - 3, b.count);
  });
}

async function pollReconciliation() {
  try {
    const issues = (await gql("{ reconciliationConnection { edges { node { kind sku location detail } } } }"))
      .reconciliationConnection.edges.map((e) => e.node);
    $("m-recon").textContent = issues.length === 0 ? "OK" : issues.length + " issues";
    $("c-recon").classList.toggle("alert", issues.length > 0);
    $("m-recon-detail").textContent = issues.length === 0 ? "balances match the ledger" :
      issues.slice(0, 3).map((i) => i.kind + " " + (i.sku || "") + "@" + (i.location || "")).join(", ");
  } catch (e) { console.warn(e); }
  setTimeout(pollReconciliation, RECON_EVERY);
}

// ---- waitlists ---------------------------------------------------------

const WAITLISTS = `{ waitlistLinesConnection(first: 20) { edges { node { sku waiting units oldestJoinedAt oldestWaitSeconds } } } }`;

// pollWaitlists shows the 20 longest lines (waitlistLinesConnection), every
// HEALTH_EVERY: entries waiting, units they want, and how long the one at
// the front has waited.
async function pollWaitlists() {
  try {
    const lines = (await gql(WAITLISTS)).waitlistLinesConnection.edges.map((e) => e.node);
    $("wl-rows").replaceChildren(...lines.map((l) => {
      const tr = document.createElement("tr");
      tr.dataset.sku = l.sku;
      for (const [cls, text] of [["wl-sku", l.sku], ["wl-waiting num", l.waiting], ["wl-units num", l.units], ["wl-oldest num", waited(l.oldestWaitSeconds)]]) {
        const td = document.createElement("td");
        td.className = cls;
        td.textContent = text;
        tr.appendChild(td);
      }
      tr.lastChild.title = "joined " + new Date(l.oldestJoinedAt).toLocaleString();
      return tr;
    }));
    $("wl-summary").textContent = lines.length === 0 ? "nobody waiting" : "the " + lines.length + " longest lines (at most 20)";
    $("wl-table").hidden = lines.length === 0; // no table of headers only
  } catch (e) { console.warn(e); }
  setTimeout(pollWaitlists, HEALTH_EVERY);
}

// waited spells a wait in seconds as s, min or h + min.
function waited(s) {
  if (s < 120) return s + " s";
  if (s < 7200) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

// ---- quick actions -----------------------------------------------------

const BALANCE_FIELDS = "balance { sku location onHand reserved committed available pendingSupply preordered } userErrors { code message }";

function select(k) {
  const b = state.rows.get(k);
  state.selected = k;
  $("a-target").textContent = b.sku + " @ " + b.location;
  $("a-adjust").elements.expectedOnHand.value = b.onHand;
  for (const r of document.querySelectorAll("#actions .result")) r.textContent = "";
  $("actions").hidden = false;
}

// action submits one mutation from a quick-action form and shows its
// userErrors inline; a success updates the row at once (the stock event
// follows and agrees).
function action(formId, field, mutation, input) {
  const form = $(formId);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const out = form.querySelector(".result");
    const b = state.rows.get(state.selected);
    out.className = "result"; out.textContent = "…";
    try {
      const p = (await gql(mutation, {in: Object.assign({sku: b.sku, location: b.location}, input(form.elements))}))[field];
      if (p.userErrors.length) {
        out.className = "result error";
        out.textContent = p.userErrors.map((e) => e.code + ": " + e.message).join("; ");
        return;
      }
      Object.assign(b, p.balance, {changedAt: Date.now()});
      $("a-adjust").elements.expectedOnHand.value = b.onHand;
      out.textContent = "done";
      scheduleRender();
    } catch (e) {
      out.className = "result error"; out.textContent = e.message;
    }
  });
}

action("a-receive", "receiveStock", `mutation($in: ReceiveStockInput!) { receiveStock(input: $in) { ${BALANCE_FIELDS} } }`,
  (f) => ({quantity: Number(f.quantity.value), reference: f.reference.value}));
action("a-adjust", "adjustStock", `mutation($in: AdjustStockInput!) { adjustStock(input: $in) { ${BALANCE_FIELDS} } }`,
  (f) => ({delta: Number(f.delta.value), reason: f.reason.value, reference: f.reference.value,
    expectedOnHand: f.expectedOnHand.value === "" ? null : Number(f.expectedOnHand.value)}));
action("a-preorder", "setPreorder", `mutation($in: SetPreorderInput!) { setPreorder(input: $in) { ${BALANCE_FIELDS} } }`,
  (f) => ({pendingSupply: Number(f.pendingSupply.value)}));
$("a-close").addEventListener("click", () => { $("actions").hidden = true; state.selected = null; });

// ---- start -------------------------------------------------------------

$("signout").addEventListener("click", async () => {
  await fetch("/admin/session", {method: "DELETE", headers: CSRF, credentials: "same-origin"});
  location.assign("/admin");
});
for (const id of ["f-sku", "f-loc"]) $(id).addEventListener("input", refilter);
$("f-threshold").addEventListener("input", render);
$("viewport").addEventListener("scroll", render, {passive: true});
window.addEventListener("resize", () => { render(); if (state.ages) drawAges(state.ages); });

(async function start() {
  fetch("/admin/session", {headers: CSRF, credentials: "same-origin"}).then((r) => r.json()).then((w) => { $("who").textContent = w.name || ""; });
  try { await loadBalances(); } catch (e) { console.warn(e); }
  connect();
  pollHealth();
  pollReconciliation();
  pollWaitlists();
})();
