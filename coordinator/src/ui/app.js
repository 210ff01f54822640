// The dashboard's script: polls /api/v1/state every 2 s for the tables and follows
// /api/v1/offers/events with an EventSource for the live offer list.
"use strict";

function res(r) {
  return Object.entries(r || {}).map(([k, v]) => k + "=" + v).join(" ");
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
  b.style.width = Math.round(share * 120) + "px";
  span.appendChild(b);
  return span;
}

function fill(id, head, rows) {
  const t = document.getElementById(id);
  t.replaceChildren(row(head, "th"), ...rows.map((r) => row(r)));
}

function roleRows(node, depth, out) {
  const name = node.path === "" ? "(root)" : node.path;
  out.push(["\u00a0".repeat(depth * 3) + name, node.weight, res(node.allocated), bar(node.dominant_share),
            node.frameworks.length]);
  for (const c of node.children) roleRows(c, depth + 1, out);
  return out;
}

// A "why?" link per framework: asks /api/v1/frameworks/{id}/explain and shows the answer.
function why(f) {
  const a = document.createElement("a");
  a.href = "#";
  a.textContent = "why?";
  a.onclick = async (e) => {
    e.preventDefault();
    const out = document.getElementById("why");
    try {
      const r = await fetch("/api/v1/frameworks/" + f.framework_id + "/explain");
      const x = await r.json();
      if (!r.ok) {
        out.textContent = f.name + ": " + (x.error ? x.error.message : r.status);
        return;
      }
      const n = x.agents;
      out.textContent = f.name + ": " + x.summary + " [agents: " + n.active + " active, " +
        n.offered_to_it + " offered to it, " + n.nothing_free + " nothing free, " + n.filtered +
        " filtered, " + n.demand_does_not_fit + " too small for its demand, " + n.eligible + " eligible]";
    } catch (err) {
      out.textContent = f.name + ": no answer (" + err + ")";
    }
  };
  return a;
}

async function refresh() {
  try {
    const s = await (await fetch("/api/v1/state")).json();
    fill("agents", ["host", "state", "total", "used", "offered"],
      s.agents.map((a) => [a.hostname, a.state, res(a.resources), res(a.used), res(a.offered)]));
    fill("frameworks", ["name", "role", "state", "share", "tasks", "offers"],
      s.frameworks.map((f) => [f.name, f.role, f.state + (f.suppressed ? " (suppressed)" : ""),
        bar(f.dominant_share), f.active_tasks, why(f)]));
    fill("roles", ["role", "weight", "allocated", "dominant share", "frameworks"], roleRows(s.roles, 0, []));
  } catch (e) {
    // The coordinator may be restarting; try again on the next tick.
  }
}

const events = document.getElementById("events");
const source = new EventSource("/api/v1/offers/events");
for (const kind of ["offer_created", "offer_accepted", "offer_declined", "offer_rescinded", "offer_expired"]) {
  source.addEventListener(kind, (e) => {
    const d = JSON.parse(e.data);
    const line = document.createElement("div");
    line.textContent = new Date().toLocaleTimeString() + " " + kind + " " + d.offer_id.slice(0, 8) +
      " fw=" + d.framework_id.slice(0, 8) + " agent=" + d.agent_id.slice(0, 8) +
      (d.resources ? " " + res(d.resources) : "") + (d.reason ? " (" + d.reason + ")" : "");
    events.prepend(line);
    while (events.childNodes.length > 200) events.removeChild(events.lastChild);
  });
}

refresh();
setInterval(refresh, 2000);
