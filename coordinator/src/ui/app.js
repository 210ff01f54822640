// The dashboard's script (hand-written, no libraries). What it polls, so that it stays cheap
// with thousands of agents and tasks:
//  - every second GET /api/v1/history?after=N: only the samples it has not seen (a few hundred
//    bytes each), from which the charts and the summary are drawn;
//  - every 3 s on the overview: /api/v1/frameworks, /api/v1/roles and one page of agents
//    (/api/v1/dashboard/agents?offset=&limit=50), never the whole /api/v1/state;
//  - every 2 s on a detail view: /api/v1/dashboard/agents/{id} or /frameworks/{id} (tasks capped
//    by the coordinator, with their count) and a framework's explain;
//  - the offer stream /api/v1/offers/events with an EventSource for the live event log.
// With credentials, any answer 401 shows the login form; logging in (POST /api/v1/login) sets an
// HttpOnly cookie that every later request, the EventSource's included, carries.
// Markers for tests: #summary[data-samples], [data-tasks-running]; #events[data-offer-created];
// each chart's svg[data-points]; task rows tr[data-task-state].
"use strict";

const AGENT_PAGE = 50;
const MAX_ROWS = 200;
const PALETTE = ["#2b7bb9", "#e8743b", "#19a979", "#945ecf", "#ed4a7b", "#6c8893", "#d4a017",
  "#13a4b4", "#525df4", "#bf399e", "#58595b", "#8c564b"];

const view = { kind: "overview", id: null };
let samples = [];
let capacity = 600;
let lastSeq = 0;
let agentOffset = 0;
const frameworkNames = {};

// ---- small helpers -------------------------------------------------------------------------

function $(id) { return document.getElementById(id); }

function res(r) {
  return Object.entries(r || {}).map(([k, v]) => k + "=" + fmt(v)).join(" ");
}

function fmt(v) {
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 1);
}

function link(text, hash) {
  const a = document.createElement("a");
  a.href = hash;
  a.textContent = text;
  return a;
}

// The framework's own web UI (its registered webui_url, http(s) only), in a new tab.
function webui(f) {
  if (!f.webui_url) return "";
  const a = document.createElement("a");
  a.href = f.webui_url;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.textContent = "open";
  return a;
}

function row(cells, tag) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement(tag || "td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

function bar(share) {
  const span = document.createElement("span");
  span.textContent = share.toFixed(3) + " ";
  const b = document.createElement("span");
  b.className = "bar";
  b.style.width = Math.round(Math.min(share, 1) * 120) + "px";
  span.appendChild(b);
  return span;
}

// Fills a table with a header and at most MAX_ROWS rows; says how many were left out.
function fill(id, head, rows, total) {
  const shown = rows.slice(0, MAX_ROWS).map((r) => (r instanceof Node ? r : row(r)));
  const all = total === undefined ? rows.length : total;
  const t = $(id);
  t.replaceChildren(row(head, "th"), ...shown);
  if (all > shown.length) {
    t.appendChild(row(["\u2026 " + (all - shown.length) + " more not shown"]));
  }
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (r.status === 401) needLogin();
  const body = await r.json();
  if (!r.ok) throw new Error(body.error ? body.error.message : "HTTP " + r.status);
  return body;
}

function shortId(id) { return String(id).slice(0, 8); }

function fwName(id) { return frameworkNames[id] || shortId(id); }

// ---- charts --------------------------------------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// Draws series [{name, points: [[t_ms, value]]}] as lines over the time span of the samples.
// `max` fixes the top of the y axis (else the largest value); `unit` labels it.
function lineChart(id, series, opts) {
  const box = $(id);
  const W = 600, H = 170, L = 44, R = 8, T = 8, B = 20;
  const live = series.filter((s) => s.points.length > 0);
  const points = live.reduce((n, s) => n + s.points.length, 0);
  const svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H,
    "data-points": String(points), "data-series": String(live.length) });
  const legend = document.createElement("div");
  legend.className = "legend";
  if (samples.length < 2 || live.length === 0) {
    const empty = document.createElement("div");
    empty.className = "empty";
    empty.textContent = samples.length < 2 ? "collecting samples\u2026" : "nothing yet";
    svg.setAttribute("data-points", "0");
    box.replaceChildren(svg, empty);
    return;
  }
  const t0 = samples[0].at_ms, t1 = samples[samples.length - 1].at_ms;
  let top = opts.max;
  if (top === undefined) {
    top = 0;
    for (const s of live) for (const p of s.points) top = Math.max(top, p[1]);
    top = top <= 0 ? 1 : top * 1.1;
  }
  const x = (t) => L + (t1 === t0 ? 0 : ((t - t0) / (t1 - t0)) * (W - L - R));
  const y = (v) => T + (1 - Math.min(v, top) / top) * (H - T - B);
  for (const f of [0, 0.5, 1]) {
    svg.appendChild(svgEl("line", { class: "grid-line", x1: L, x2: W - R, y1: y(top * f), y2: y(top * f) }));
    const label = svgEl("text", { x: L - 4, y: y(top * f) + 3, "text-anchor": "end" });
    label.textContent = fmt(top * f) + (opts.unit || "");
    svg.appendChild(label);
  }
  svg.appendChild(svgEl("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.appendChild(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  const span = Math.round((t1 - t0) / 1000);
  const ago = svgEl("text", { x: L, y: H - 6 });
  ago.textContent = "-" + (span >= 120 ? Math.round(span / 60) + " min" : span + " s");
  const now = svgEl("text", { x: W - R, y: H - 6, "text-anchor": "end" });
  now.textContent = new Date(t1).toLocaleTimeString();
  svg.append(ago, now);
  live.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const line = svgEl("polyline", {
      points: s.points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "),
      stroke: color, "data-name": s.name,
    });
    if (s.dashed) line.setAttribute("stroke-dasharray", "4 3");
    svg.appendChild(line);
    const item = document.createElement("span");
    const sw = document.createElement("i");
    sw.style.background = color;
    const last = s.points[s.points.length - 1][1];
    item.append(sw, s.name + " " + fmt(last) + (opts.unit || ""));
    legend.appendChild(item);
  });
  box.replaceChildren(svg, legend);
}

// One series per key of sample[field] (a map), with the values `value(sample, key)`.
function seriesByKey(field, label, value) {
  const keys = new Set();
  for (const s of samples) for (const k of Object.keys(s[field] || {})) keys.add(k);
  return [...keys].sort().map((k) => ({
    name: label(k),
    points: samples.filter((s) => k in (s[field] || {})).map((s) => [s.at_ms, value(s, k)]),
  }));
}

const OUTCOMES = ["created", "accepted", "declined", "expired", "rescinded"];

function drawCharts() {
  lineChart("chart-roles",
    seriesByKey("roles", (k) => (k === "" ? "(root)" : k), (s, k) => s.roles[k]), { max: 1 });
  lineChart("chart-frameworks",
    seriesByKey("frameworks", fwName, (s, k) => s.frameworks[k]), { max: 1 });
  const usage = [];
  const names = new Set();
  for (const s of samples) for (const k of Object.keys(s.resources || {})) names.add(k);
  for (const k of [...names].sort()) {
    const pct = (s, f) => (s.resources[k] && s.resources[k].total > 0
      ? (100 * s.resources[k][f]) / s.resources[k].total : 0);
    const have = samples.filter((s) => s.resources && s.resources[k]);
    usage.push({ name: k + " used", points: have.map((s) => [s.at_ms, pct(s, "used")]) });
    usage.push({ name: k + " offered", dashed: true, points: have.map((s) => [s.at_ms, pct(s, "offered")]) });
  }
  lineChart("chart-usage", usage, { max: 100, unit: "%" });
  const rates = OUTCOMES.map((o) => ({ name: o, points: [] }));
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dt = (b.at_ms - a.at_ms) / 1000;
    if (dt <= 0) continue;
    OUTCOMES.forEach((o, j) => rates[j].points.push([b.at_ms, Math.max(0, b.offers[o] - a.offers[o]) / dt]));
  }
  lineChart("chart-offers", rates, { unit: "/s" });
  lineChart("chart-tasks", seriesByKey("tasks", (k) => k, (s, k) => s.tasks[k] || 0), {});
}

function drawSummary() {
  const s = samples[samples.length - 1];
  if (!s) return;
  const sum = (m) => Object.values(m || {}).reduce((a, b) => a + b, 0);
  const box = $("summary");
  const part = (label, v) => {
    const span = document.createElement("span");
    const b = document.createElement("b");
    b.textContent = fmt(v);
    span.append(label + " ", b);
    return span;
  };
  box.replaceChildren(
    part("agents active", (s.agents || {}).active || 0),
    part("tasks", sum(s.tasks)),
    part("running", (s.tasks || {}).running || 0),
    part("outstanding offers", s.outstanding_offers),
    part("offers made", s.offers.created));
  box.dataset.samples = String(samples.length);
  box.dataset.tasksRunning = String((s.tasks || {}).running || 0);
  box.dataset.outstandingOffers = String(s.outstanding_offers);
}

async function pollHistory() {
  try {
    let h = await getJSON("/api/v1/history?after=" + lastSeq);
    if (h.latest < lastSeq) {
      // The coordinator restarted (its numbering began again): start over.
      samples = [];
      lastSeq = 0;
      h = await getJSON("/api/v1/history?after=0");
    }
    capacity = h.capacity || capacity;
    for (const s of h.samples) samples.push(s);
    if (samples.length > capacity) samples = samples.slice(samples.length - capacity);
    if (samples.length > 0) lastSeq = samples[samples.length - 1].seq;
    drawSummary();
    if (view.kind === "overview") drawCharts();
  } catch (e) {
    // The coordinator may be restarting: keep what we have, try again next tick.
  }
}

// ---- overview tables -----------------------------------------------------------------------

function roleRows(node, depth, out) {
  const name = node.path === "" ? "(root)" : node.path;
  const quota = (q) => (q ? res(q) : "");
  const guarantee = quota(node.guarantee) + (node.guarantee_unmet ? " (cannot be met now)" : "");
  out.push(["\u00a0".repeat(depth * 3) + name, node.weight, res(node.allocated), bar(node.dominant_share),
    guarantee, quota(node.limit), quota(node.reserved), node.frameworks.length]);
  for (const c of node.children) roleRows(c, depth + 1, out);
  return out;
}

// A "why?" link per framework: asks /api/v1/frameworks/{id}/explain and shows the answer.
function why(f) {
  const a = link("why?", "#");
  a.onclick = async (e) => {
    e.preventDefault();
    $("why").textContent = f.name + ": " + (await explainText(f.framework_id));
  };
  return a;
}

async function explainText(id) {
  try {
    const x = await getJSON("/api/v1/frameworks/" + id + "/explain");
    const n = x.agents;
    return x.summary + " [agents: " + n.active + " active, " + n.offered_to_it + " offered to it, " +
      n.nothing_free + " nothing free, " + n.filtered + " filtered, " + n.demand_does_not_fit +
      " too small for its demand, " + (n.gpu_gated ? n.gpu_gated + " held back by GPU gating, " : "") +
      (n.draining ? n.draining + " draining, " : "") +
      (n.limit_reached ? n.limit_reached + " held back by a limit, " : "") +
      (n.guarantee_first ? n.guarantee_first + " going first to another role's guarantee, " : "") +
      (n.reserved_for_others ? n.reserved_for_others + " reserved for other roles, " : "") +
      n.eligible + " eligible]" + ((x.preemption || []).length ? " " + x.preemption.join(" ") : "");
  } catch (err) {
    return "no answer (" + err.message + ")";
  }
}

// An agent's GPUs as "used / total" ("" for an agent without GPUs).
function gpus(a) {
  const total = (a.resources || {}).gpus || 0;
  return total > 0 ? fmt((a.used || {}).gpus || 0) + " / " + fmt(total) : "";
}

async function refreshOverview() {
  try {
    const [fws, roles, agents] = await Promise.all([
      getJSON("/api/v1/frameworks"),
      getJSON("/api/v1/roles"),
      getJSON("/api/v1/dashboard/agents?offset=" + agentOffset + "&limit=" + AGENT_PAGE),
    ]);
    for (const f of fws.frameworks) frameworkNames[f.framework_id] = f.name || shortId(f.framework_id);
    $("frameworks-count").textContent = "(" + fws.frameworks.length + ")";
    fill("frameworks", ["name", "role", "state", "share", "tasks", "offers", "web UI"],
      fws.frameworks.map((f) => [link(f.name || shortId(f.framework_id), "#framework/" + f.framework_id), f.role,
        f.state + (f.suppressed ? " (suppressed)" : ""), bar(f.dominant_share), f.active_tasks, why(f),
        webui(f)]));
    fill("roles", ["role", "weight", "allocated", "dominant share", "guarantee", "limit", "reserved", "frameworks"],
      roleRows(roles, 0, []));
    const first = agents.total === 0 ? 0 : agents.offset + 1;
    $("agents-count").textContent = "(" + first + "\u2013" + (agents.offset + agents.agents.length) +
      " of " + agents.total + ")";
    $("agents-prev").disabled = agents.offset === 0;
    $("agents-next").disabled = agents.offset + agents.agents.length >= agents.total;
    fill("agents", ["host", "state", "GPUs used", "total", "used", "offered"],
      agents.agents.map((a) => [link(a.hostname, "#agent/" + a.agent_id),
        a.state + (a.drain_deadline ? " (deadline " + a.drain_deadline + ")" : ""), gpus(a),
        res(a.resources), res(a.used), res(a.offered)]));
  } catch (e) {
    // Try again on the next tick.
  }
}

$("agents-prev").onclick = () => { agentOffset = Math.max(0, agentOffset - AGENT_PAGE); refreshOverview(); };
$("agents-next").onclick = () => { agentOffset += AGENT_PAGE; refreshOverview(); };

// ---- detail views --------------------------------------------------------------------------

// A task's health as its agent last reported it ("" for a task without a health check).
function health(t) {
  if (t.healthy === true) return "healthy";
  if (t.healthy === false) return "unhealthy";
  return "";
}

function taskRows(tasks, withAgent) {
  return tasks.map((t) => {
    const tr = row([t.task_id, t.name,
      withAgent ? link(shortId(t.agent_id), "#agent/" + t.agent_id)
        : link(fwName(t.framework_id), "#framework/" + t.framework_id),
      t.state, health(t), res(t.resources), t.message || "",
      t.exit_code === null || t.exit_code === undefined ? "" : t.exit_code]);
    tr.dataset.taskState = t.state;
    tr.dataset.taskId = t.task_id;
    return tr;
  });
}

function offerRows(offers, withAgent) {
  return offers.map((o) => [shortId(o.offer_id),
    withAgent ? link(shortId(o.agent_id), "#agent/" + o.agent_id)
      : link(fwName(o.framework_id), "#framework/" + o.framework_id),
    res(o.resources)]);
}

async function refreshDetail() {
  const { kind, id } = view;
  try {
    if (kind === "agent") {
      const d = await getJSON("/api/v1/dashboard/agents/" + id);
      if (view.id !== id) return;
      const a = d.agent;
      $("detail-title").textContent = "Agent " + a.hostname;
      $("detail-info").textContent = a.agent_id + " \u00b7 " + a.state + " \u00b7 " + a.endpoint +
        " \u00b7 registered " + a.registered_at + " \u00b7 last heartbeat " + a.last_heartbeat_at +
        (Object.keys(a.attributes || {}).length ? " \u00b7 " + res(a.attributes) : "");
      $("detail-explain").textContent = "";
      fill("detail-resources", ["resource", "total", "used", "offered", "free"],
        Object.keys(a.resources).sort().map((k) => {
          const total = a.resources[k], used = (a.used || {})[k] || 0, offered = (a.offered || {})[k] || 0;
          return [k, fmt(total), fmt(used), fmt(offered), fmt(Math.max(0, total - used - offered))];
        }));
      $("detail-tasks-count").textContent = "(" + d.task_count + ")";
      fill("detail-tasks", ["task", "name", "framework", "state", "health", "resources", "message", "exit"],
        taskRows(d.tasks, false), d.task_count);
      $("detail-offers-count").textContent = "(" + d.offers.length + ")";
      fill("detail-offers", ["offer", "framework", "resources"], offerRows(d.offers, false));
    } else if (kind === "framework") {
      const [d, why] = await Promise.all([getJSON("/api/v1/dashboard/frameworks/" + id), explainText(id)]);
      if (view.id !== id) return;
      const f = d.framework;
      frameworkNames[f.framework_id] = f.name || shortId(f.framework_id);
      $("detail-title").textContent = "Framework " + (f.name || "(placeholder)");
      $("detail-info").textContent = f.framework_id + " \u00b7 role " + f.role + " \u00b7 " + f.state +
        (f.suppressed ? " (suppressed)" : "") + " \u00b7 dominant share " + f.dominant_share.toFixed(3) +
        " \u00b7 registered " + f.registered_at;
      $("detail-explain").textContent = "Offers: " + why;
      fill("detail-resources", ["resource", "used", "offered", "demand"],
        [...new Set([...Object.keys(f.used || {}), ...Object.keys(f.offered || {}), ...Object.keys(f.demand || {})])]
          .sort().map((k) => [k, fmt((f.used || {})[k] || 0), fmt((f.offered || {})[k] || 0),
            (f.demand || {})[k] === undefined ? "" : fmt(f.demand[k])]));
      $("detail-tasks-count").textContent = "(" + d.task_count + ")";
      fill("detail-tasks", ["task", "name", "agent", "state", "health", "resources", "message", "exit"],
        taskRows(d.tasks, true), d.task_count);
      $("detail-offers-count").textContent = "(" + d.offers.length + ")";
      fill("detail-offers", ["offer", "agent", "resources"], offerRows(d.offers, true));
    }
  } catch (e) {
    $("detail-info").textContent = "cannot load: " + e.message;
  }
}

function route() {
  const m = location.hash.match(/^#(agent|framework)\/([0-9a-fA-F-]{36})$/);
  view.kind = m ? m[1] : "overview";
  view.id = m ? m[2] : null;
  $("overview").hidden = view.kind !== "overview";
  $("detail").hidden = view.kind === "overview";
  if (view.kind === "overview") {
    drawCharts();
    refreshOverview();
  } else {
    for (const t of ["detail-title", "detail-info", "detail-explain"]) $(t).textContent = "";
    for (const t of ["detail-resources", "detail-tasks", "detail-offers"]) $(t).replaceChildren();
    refreshDetail();
  }
}

// ---- the live offer stream -----------------------------------------------------------------

const events = $("events");
let source = null;

function openStream() {
  if (source) source.close();
  source = new EventSource("/api/v1/offers/events");
  // A refused stream (401) is closed for good by the browser: check whether it is the login.
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      fetch("/api/v1/history?after=0", { cache: "no-store" }).then((r) => {
        if (r.status === 401) needLogin();
        else setTimeout(openStream, 3000);
      }, () => setTimeout(openStream, 3000));
    }
  });
  for (const kind of ["offer_created", "offer_accepted", "offer_declined", "offer_rescinded", "offer_expired"]) {
    source.addEventListener(kind, (e) => {
      const d = JSON.parse(e.data);
      const line = document.createElement("div");
      line.textContent = new Date().toLocaleTimeString() + " " + kind + " " + shortId(d.offer_id) +
        " fw=" + fwName(d.framework_id) + " agent=" + shortId(d.agent_id) +
        (d.resources ? " " + res(d.resources) : "") + (d.reason ? " (" + d.reason + ")" : "");
      line.className = kind;
      events.prepend(line);
      while (events.childNodes.length > 200) events.removeChild(events.lastChild);
      if (kind === "offer_created") events.dataset.offerCreated = String(Number(events.dataset.offerCreated) + 1);
    });
  }
}

// ---- login ---------------------------------------------------------------------------------

function needLogin() {
  $("login").hidden = false;
  $("logout").hidden = true;
}

$("login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const r = await fetch("/api/v1/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ token: $("login-token").value }),
  });
  $("login-token").value = "";
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    $("login-error").textContent = body.error ? body.error.message : "HTTP " + r.status;
    return;
  }
  $("login-error").textContent = "";
  $("login").hidden = true;
  $("logout").hidden = false;
  openStream();
  route();
  pollHistory();
});

$("logout").addEventListener("click", async () => {
  await fetch("/api/v1/logout", { method: "POST", headers: { "X-Parley-CSRF": "1" } });
  if (source) source.close();
  needLogin();
});

window.addEventListener("hashchange", route);
openStream();
route();
pollHistory();
setInterval(pollHistory, 1000);
setInterval(() => (view.kind === "overview" ? refreshOverview() : refreshDetail()), 2500);
