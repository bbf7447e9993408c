// The Webhooks panel of /admin: every outbound endpoint with its state and how
// far it is behind the stock event stream, the actions on-call needs (pause
// with a reason, resume, send a test) and each endpoint's delivery log. It
// runs after dashboard.js and uses its gql, $ and state (state.seq, the newest
// stock event the page has seen, gives the lag). URLs come from whoever
// registered the endpoint and errors and pause reasons from whatever the
// receiver answered, so server text only ever goes in as textContent.
"use strict";

const WEBHOOKS_EVERY = 5000; // ms between polls of the list (and the open log)
const LOG_PAGE = 50;         // delivery log rows per page (the server allows 1..100)
const CODES_SHOWN = 5;       // SKU or location codes listed before "+N more"

const WEBHOOK_FIELDS = `id url topics skus locations lowStockThreshold cursorSeq paused pausedAt pauseReason
  consecutiveFailures previousSecretUntil createdAt updatedAt`;
const DELIVERY_FIELDS = "id webhookId eventSeq topic attempt statusCode latencyMs error at";
const WEBHOOKS = `{ webhooks { ${WEBHOOK_FIELDS} } }`;
const DELIVERIES = `query($id: ID!, $first: Int, $after: String) {
  webhookDeliveriesConnection(endpointId: $id, first: $first, after: $after) {
    edges { node { ${DELIVERY_FIELDS} } } pageInfo { hasNextPage endCursor } } }`;
const PAUSE = `mutation($id: ID!, $reason: String) { pauseWebhook(id: $id, reason: $reason) {
  webhook { ${WEBHOOK_FIELDS} } userErrors { code message } } }`;
const RESUME = `mutation($id: ID!) { resumeWebhook(id: $id) { webhook { ${WEBHOOK_FIELDS} } userErrors { code message } } }`;
const SEND_TEST = `mutation($id: ID!) { sendTestWebhook(id: $id) { delivery { ${DELIVERY_FIELDS} } userErrors { code message } } }`;

const hooks = {
  rows: new Map(), // endpoint id -> {w, tr, cells, reason, pause, resume, result}
  listGen: 0,      // the newest list request; an older answer arriving late is dropped
  log: null,       // the open delivery log: {id, newest (an id), oldest (its cursor), epoch}
};
window.__webhooks = hooks; // for tests and the curious

// el makes an element; its text, if any, is set as text, never parsed.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function button(cls, text, onClick) {
  const b = el("button", cls, text);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

const when = (t) => t ? new Date(t).toLocaleString() : "–";

// lag is how many stock events the endpoint has still to get past, by the
// newest seq this page has seen; null until the page has read one. The page
// can be behind the deliverer (its socket is slower, or down), so never < 0.
function lag(w) {
  return state.seqKnown ? Math.max(0, state.seq - w.cursorSeq) : null;
}

// codes lists a filter; an empty one means every SKU (or location) is sent.
function codes(list) {
  if (list.length === 0) return "all";
  const shown = list.slice(0, CODES_SHOWN).join(", ");
  return list.length > CODES_SHOWN ? shown + " +" + (list.length - CODES_SHOWN) + " more" : shown;
}

// failed: an attempt the receiver did not take (no answer, an error, or a
// status outside 2xx). An event's delivery is retried under the same
// webhook-id, so a failed row is followed by a later attempt or a pause.
function failed(d) {
  return d.error != null || d.statusCode == null || d.statusCode < 200 || d.statusCode > 299;
}

// checked turns a payload's userErrors into an exception, so an action shows
// a refusal the way it shows a failed request.
function checked(p) {
  if (!p) throw new Error("no answer");
  if (p.userErrors.length) throw new Error(p.userErrors.map((e) => e.code + ": " + e.message).join("; "));
  return p;
}

// ---- the list ----------------------------------------------------------

// loadWebhooks reads every endpoint and updates the rows in place: rows are
// kept across polls so a pause reason being typed, or an action's result,
// survives the refresh.
async function loadWebhooks() {
  const gen = ++hooks.listGen;
  let list;
  try {
    list = (await gql(WEBHOOKS)).webhooks;
  } catch (e) {
    if (gen === hooks.listGen) { $("wh-status").className = "result error"; $("wh-status").textContent = e.message; }
    return;
  }
  if (gen !== hooks.listGen) return; // a later request (after an action) answered first
  $("wh-status").textContent = "";
  const body = $("wh-rows"), seen = new Set();
  let prev = null;
  for (const w of list) {
    seen.add(w.id);
    let r = hooks.rows.get(w.id);
    if (!r) { r = newRow(w.id); hooks.rows.set(w.id, r); }
    updateRow(r, w);
    // Keep the server's order (oldest first), moving a row only when it is
    // out of place: a move would take the focus from a reason being typed.
    const at = prev ? prev.nextSibling : body.firstChild;
    if (at !== r.tr) body.insertBefore(r.tr, at);
    prev = r.tr;
  }
  for (const [id, r] of hooks.rows) {
    if (seen.has(id)) continue;
    r.tr.remove(); // deleted elsewhere
    hooks.rows.delete(id);
    if (hooks.log && hooks.log.id === id) closeLog();
  }
  summarize();
}

async function pollWebhooks() {
  try {
    await loadWebhooks();
    await loadLog(false);
  } catch (e) { console.warn(e); }
  setTimeout(pollWebhooks, WEBHOOKS_EVERY);
}

// newRow builds an endpoint's row and its actions once; updateRow fills in
// the rest on every poll.
function newRow(id) {
  const r = {tr: el("tr"), cells: {}};
  r.tr.dataset.id = id;
  for (const c of ["url", "topics", "filters", "state", "num failures", "num cursor", "num lag"]) {
    r.cells[c.replace("num ", "")] = r.tr.appendChild(el("td", c));
  }
  const box = el("div", "wh-actions");
  r.reason = el("input", "reason");
  r.reason.placeholder = "reason (optional)";
  r.reason.maxLength = 500; // the server's limit
  r.pause = button("pause", "Pause", () => act(r, r.pause, async () => {
    const reason = r.reason.value.trim();
    const p = checked((await gql(PAUSE, {id, reason: reason || null})).pauseWebhook);
    r.reason.value = "";
    updateRow(r, p.webhook);
    return "paused";
  }));
  r.resume = button("resume", "Resume", () => act(r, r.resume, async () => {
    updateRow(r, checked((await gql(RESUME, {id})).resumeWebhook).webhook);
    return "resumed";
  }));
  r.test = button("test", "Send test", () => act(r, r.test, async () => {
    const d = checked((await gql(SEND_TEST, {id})).sendTestWebhook).delivery;
    if (hooks.log && hooks.log.id === id) loadLog(false);
    if (failed(d)) throw new Error("test failed: " + answer(d) + (d.error ? " (" + d.error + ")" : ""));
    return "test delivered: " + d.statusCode + " in " + d.latencyMs + " ms";
  }));
  r.logBtn = button("log", "Deliveries", () => openLog(id));
  r.result = el("span", "result");
  box.append(r.reason, r.pause, r.resume, r.test, r.logBtn, r.result);
  r.tr.appendChild(el("td", "actions")).appendChild(box);
  return r;
}

function updateRow(r, w) {
  if (!w) return;
  r.w = w;
  const c = r.cells, n = lag(w);
  r.tr.classList.toggle("paused", w.paused);
  r.tr.classList.toggle("failing", w.consecutiveFailures > 0);
  c.url.textContent = w.url;
  c.url.title = w.url;
  c.topics.textContent = w.topics.join(", ");
  c.filters.replaceChildren(el("div", "", "SKUs: " + codes(w.skus)), el("div", "", "locations: " + codes(w.locations)));
  c.filters.title = "SKUs: " + (w.skus.join(", ") || "all") + "\nlocations: " + (w.locations.join(", ") || "all");
  if (w.topics.includes("STOCK_LOW")) c.filters.appendChild(el("div", "muted", "low at ≤ " + w.lowStockThreshold + " (SKUs without their own)"));
  c.state.replaceChildren(el("div", "state-label", w.paused ? "paused" : "active"));
  if (w.paused) {
    c.state.appendChild(el("div", "since muted", "since " + when(w.pausedAt)));
    if (w.pauseReason) c.state.appendChild(el("div", "pause-reason", w.pauseReason));
  }
  // After a rotation the receiver may still check the old secret: say until when.
  if (w.previousSecretUntil && new Date(w.previousSecretUntil) > new Date()) {
    c.state.appendChild(el("div", "muted", "old secret signs too until " + when(w.previousSecretUntil)));
  }
  c.failures.textContent = w.consecutiveFailures;
  c.cursor.textContent = w.cursorSeq;
  c.lag.textContent = n === null ? "–" : n;
  // Offer what applies: a reason and Pause to an active endpoint, Resume to
  // a paused one (pausing again would only replace the reason).
  r.reason.hidden = r.pause.hidden = w.paused;
  r.resume.hidden = !w.paused;
}

// summarize heads the panel with what needs attention, in the alert colour
// like a health card that has something to show.
function summarize() {
  let paused = 0, failing = 0;
  for (const r of hooks.rows.values()) {
    if (r.w.paused) paused++;
    else if (r.w.consecutiveFailures > 0) failing++;
  }
  const parts = [hooks.rows.size + (hooks.rows.size === 1 ? " endpoint" : " endpoints")];
  if (paused) parts.push(paused + " paused");
  if (failing) parts.push(failing + " failing");
  $("wh-summary").textContent = parts.join(" · ");
  // No endpoint: say how to add one instead of a table of headers only.
  $("wh-empty").hidden = hooks.rows.size > 0;
  $("wh-table").hidden = hooks.rows.size === 0;
  $("webhooks").classList.toggle("alert", paused + failing > 0);
}

// act runs one action from a row: the button waits for the answer, which
// (or the refusal) shows in the row; then the list is read again so every
// row shows the server's state, not a guess.
async function act(r, btn, run) {
  btn.disabled = true;
  r.result.className = "result";
  r.result.textContent = "…";
  try {
    r.result.textContent = await run();
  } catch (e) {
    r.result.className = "result error";
    r.result.textContent = e.message;
  } finally {
    btn.disabled = false;
  }
  summarize();
  loadWebhooks();
}

// ---- the delivery log --------------------------------------------------

function answer(d) {
  return d.statusCode == null ? "no answer" : String(d.statusCode);
}

function deliveryRow(d) {
  const tr = el("tr", failed(d) ? "failed" : "");
  tr.dataset.id = d.id;
  if (failed(d)) tr.title = "failed";
  const at = tr.appendChild(el("td", "at", when(d.at)));
  at.title = d.at;
  tr.appendChild(el("td", "wid", d.webhookId));
  tr.appendChild(el("td", "topic", d.topic));
  tr.appendChild(el("td", "num attempt", d.attempt));
  tr.appendChild(el("td", "num status", answer(d)));
  tr.appendChild(el("td", "num latency", d.latencyMs));
  tr.appendChild(el("td", "error", d.error || ""));
  return tr;
}

// openLog shows endpoint id's deliveries, from the newest.
function openLog(id) {
  const epoch = hooks.log ? hooks.log.epoch + 1 : 0;
  hooks.log = {id, newest: null, oldest: null, epoch};
  const r = hooks.rows.get(id);
  $("wh-log-url").textContent = r ? r.w.url : id;
  $("wh-log-rows").replaceChildren();
  $("wh-log-result").textContent = "";
  $("wh-more").hidden = true;
  $("wh-log").hidden = false;
  for (const [k, row] of hooks.rows) row.tr.classList.toggle("selected", k === id);
  loadLog(false);
}

function closeLog() {
  hooks.log = null;
  $("wh-log").hidden = true;
  for (const row of hooks.rows.values()) row.tr.classList.remove("selected");
}

// loadLog reads one page of the open log. older: the page below the oldest
// row shown (More). Otherwise the newest page, of which only deliveries newer
// than those shown go on top, so polling keeps what More added; when the
// whole page is new there may be a gap under it, so the log starts over.
async function loadLog(older) {
  const log = hooks.log;
  if (!log || (older && log.oldest === null)) return;
  const epoch = log.epoch;
  let list, page;
  try {
    const conn = (await gql(DELIVERIES, {id: log.id, first: LOG_PAGE, after: older ? log.oldest : null})).webhookDeliveriesConnection;
    list = conn.edges.map((e) => e.node);
    page = conn.pageInfo;
  } catch (e) {
    if (hooks.log === log) { $("wh-log-result").className = "result error"; $("wh-log-result").textContent = e.message; }
    return;
  }
  if (hooks.log !== log || log.epoch !== epoch) return; // another log was opened, or this one started over
  $("wh-log-result").textContent = "";
  const body = $("wh-log-rows");
  if (older) {
    body.append(...list.map(deliveryRow));
    if (list.length) log.oldest = page.endCursor;
    $("wh-more").hidden = !page.hasNextPage;
  } else {
    const fresh = log.newest === null ? list : list.filter((d) => BigInt(d.id) > BigInt(log.newest));
    if (log.newest === null || (list.length > 0 && fresh.length === list.length)) {
      log.epoch++; // a More still under way would append below the wrong rows
      body.replaceChildren();
      log.oldest = list.length ? page.endCursor : null;
      $("wh-more").hidden = !page.hasNextPage;
    }
    body.prepend(...fresh.map(deliveryRow));
    if (fresh.length) log.newest = fresh[0].id;
  }
  $("wh-log-empty").hidden = body.children.length > 0;
}

// ---- start -------------------------------------------------------------

$("wh-log-close").addEventListener("click", closeLog);
$("wh-more").addEventListener("click", async () => {
  $("wh-more").disabled = true;
  try { await loadLog(true); } finally { $("wh-more").disabled = false; }
});
pollWebhooks();
