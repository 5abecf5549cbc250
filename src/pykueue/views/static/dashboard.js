// The pykueue dashboard: polls GET /api/v1/dashboard and redraws. Plain DOM, no framework, no build step.
//
// The token comes from the address's fragment (#token=..., never sent to a server) or from the form, and is
// kept in this tab's sessionStorage only. Polling rather than server-sent events: EventSource cannot send an
// Authorization header, and a token in a query string would land in logs.
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "pykueue-token";
const PALETTE = ["#2f6fd6", "#d9822b", "#2e8b57", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b"];
const SVG_NS = "http://www.w3.org/2000/svg";
const open = new Set(); // workloads whose events are unfolded, kept across redraws

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined || child === "") continue; // an empty cell stays :empty
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

function number(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 2 : 1).replace(/\.?0+$/, "");
}

// Bytes as Gi or Mi for memory and storage; any other resource as a plain number (CPUs, GPUs, pods).
function amount(resource, value) {
  if (/memory|storage/.test(resource) && value >= 2 ** 20) {
    return value >= 2 ** 30 ? `${number(value / 2 ** 30)}Gi` : `${number(value / 2 ** 20)}Mi`;
  }
  return number(value);
}

// ------------------------------------------------------------------ estimated start

function minutesFromNow(text, now) {
  return (Date.parse(text) - now) / 60000;
}

function span(minutes) {
  if (minutes >= 90) return [minutes / 60, "h"];
  return [minutes, "min"];
}

// "in ~12 min (8–20)", "any moment", "unknown" when nothing is known of the running times
// it waits for (the basis says so on hover), or "—" when the server has no estimate.
function estimatedStart(estimate, now) {
  if (!estimate) return "—";
  if (!estimate.at) return el("span", { title: estimate.basis }, "unknown");
  const at = minutesFromNow(estimate.at, now);
  if (at < 1) return "any moment";
  const [value, unit] = span(at);
  const scale = unit === "h" ? 60 : 1;
  const low = Math.max(0, minutesFromNow(estimate.low, now)) / scale;
  const high = minutesFromNow(estimate.high, now) / scale;
  return `in ~${Math.round(value)} ${unit} (${Math.round(low)}–${Math.round(high)})`;
}

// ------------------------------------------------------------------ sections

function usageBars(usage) {
  return usage.map((u) => {
    const scale = Math.max(u.used, u.nominal + (u.borrowingLimit ?? 0), u.nominal, 1e-9);
    const used = el("span", { class: "used" });
    used.style.width = `${(100 * Math.min(u.used, u.nominal)) / scale}%`;
    const borrowed = el("span", { class: "borrowed" });
    borrowed.style.left = `${(100 * u.nominal) / scale}%`;
    borrowed.style.width = `${(100 * u.borrowed) / scale}%`;
    const nominal = el("span", { class: "nominal", title: "nominal quota" });
    nominal.style.left = `calc(${(100 * u.nominal) / scale}% - 1px)`;
    const borrowing = u.borrowed > 0 ? ` (borrows ${amount(u.resource, u.borrowed)})` : "";
    return el(
      "div",
      { class: "bar-row", "data-flavor-resource": `${u.flavor}/${u.resource}` },
      el("span", { class: "label", title: `${u.flavor} / ${u.resource}` }, `${u.flavor} · ${u.resource}`),
      el("span", { class: "bar" }, used, borrowed, nominal),
      el("span", { class: "amount" }, `${amount(u.resource, u.used)} / ${amount(u.resource, u.nominal)}${borrowing}`),
    );
  });
}

function causeChips(causes) {
  return el(
    "div",
    { class: "chips" },
    ...Object.entries(causes).map(([cause, count]) =>
      el("span", { class: `chip cause-${cause}`, "data-cause": cause, title: "pending workloads by cause" }, `${cause}: ${count}`),
    ),
  );
}

function renderClusterQueues(rows) {
  const box = document.getElementById("cluster-queues");
  box.replaceChildren(
    ...rows.map((cq) =>
      el(
        "div",
        { class: "card", "data-cluster-queue": cq.name },
        el(
          "h3",
          {},
          cq.name,
          el("span", { class: "meta" }, cq.cohort ? `cohort ${cq.cohort}` : "no cohort"),
          cq.active ? null : el("span", { class: "chip cause-stopped", title: cq.activeMessage }, "inactive"),
        ),
        el(
          "div",
          { class: "counts" },
          el("span", { class: "pending" }, el("b", {}, cq.pending), " pending"),
          el("span", { class: "admitted" }, el("b", {}, cq.admitted), " admitted"),
        ),
        causeChips(cq.causes),
        ...usageBars(cq.usage),
      ),
    ),
  );
}

function eventList(events) {
  if (!events.length) return el("p", { class: "hint" }, "No events yet.");
  return el(
    "ol",
    { class: "events" },
    ...events.map((e) =>
      el(
        "li",
        {},
        el("time", {}, e.time),
        `${e.type}=${e.status}`,
        e.reason && e.reason !== e.type ? ` (${e.reason})` : "",
        e.message ? `: ${e.message}` : "",
      ),
    ),
  );
}

// The effective priority, with what aging added to it (docs/governance.md, "Aging").
function priorityText(w) {
  if (w.priority === null || w.priority === undefined) return "";
  return w.aged ? `${w.priority} (+${w.aged} aged)` : `${w.priority}`;
}

function renderWorkloads(rows, now) {
  const body = document.querySelector("#workloads tbody");
  const out = [];
  for (const w of rows) {
    const key = `${w.namespace}/${w.name}`;
    const queue = w.clusterQueue ? `${w.queue} → ${w.clusterQueue}` : w.queue;
    const row = el(
      "tr",
      { class: "workload", "data-workload": key, title: "show or hide its events" },
      el("td", { class: "position", "data-label": "Position" }, w.position === null ? "" : `${w.position} of ${w.pendingInQueue}`),
      el("td", { class: "name", "data-label": "Workload" }, key),
      el("td", { class: "queue", "data-label": "Queue" }, queue),
      el("td", { class: `state state-${w.state}`, "data-label": "State" }, w.state),
      el("td", { class: "priority", "data-label": "Priority", title: w.aging || "" }, priorityText(w)),
      el("td", { class: "cause", "data-label": "Cause" }, w.cause ? el("span", { class: `chip cause-${w.cause}` }, w.cause) : ""),
      el("td", { class: "reason", "data-label": "Why" }, w.reason || ""),
      el("td", { class: "eta", "data-label": "Estimated start" }, w.state === "Pending" ? estimatedStart(w.estimatedStart, now) : ""),
    );
    row.addEventListener("click", () => {
      if (open.has(key)) open.delete(key);
      else open.add(key);
      if (latest) render(latest);
    });
    out.push(row);
    if (open.has(key)) {
      out.push(el("tr", { class: "events", "data-events-of": key }, el("td", { colSpan: 7 }, eventList(w.events))));
    }
  }
  body.replaceChildren(...out);
  document.getElementById("no-workloads").hidden = rows.length > 0;
}

function renderLocalQueues(rows) {
  document.querySelector("#local-queues tbody").replaceChildren(
    ...rows.map((lq) =>
      el(
        "tr",
        { "data-local-queue": `${lq.namespace}/${lq.name}` },
        el("td", { "data-label": "Namespace" }, lq.namespace),
        el("td", { "data-label": "Name" }, lq.name),
        el("td", { "data-label": "ClusterQueue" }, lq.clusterQueue),
        el("td", { class: "pending", "data-label": "Pending" }, lq.pending),
        el("td", { class: "admitted", "data-label": "Admitted" }, lq.admitted),
      ),
    ),
  );
}

function renderCohorts(cohorts, clusterQueues) {
  const byName = new Map(cohorts.map((c) => [c.name, c]));
  const node = (c) => {
    const totals = Object.entries(c.usage).map(([fr, u]) => {
      const resource = fr.split("/").pop();
      return `${fr}: ${amount(resource, u.used)} / ${amount(resource, u.nominal)}`;
    });
    return el(
      "li",
      { "data-cohort": c.name },
      el("div", { class: "node" }, el("b", {}, c.name), el("div", { class: "meta" }, totals.join(" · ") || "no quota")),
      el(
        "ul",
        {},
        ...c.cohorts.map((child) => node(byName.get(child))),
        ...c.clusterQueues.map((name) => el("li", { class: "cq-leaf" }, `ClusterQueue ${name}`)),
      ),
    );
  };
  const roots = cohorts.filter((c) => !c.parent || !byName.has(c.parent));
  document.getElementById("cohorts").replaceChildren(...roots.map(node));
  document.getElementById("no-cohorts").hidden = cohorts.length > 0 || clusterQueues.length === 0;
}

// One line chart per ClusterQueue: each flavor/resource's usage as a share of its nominal quota, in %.
function chart(name, samples) {
  const width = 360, height = 150, left = 34, right = 8, top = 16, bottom = 20;
  const series = new Map();
  samples.forEach((s, i) => {
    const cq = s.clusterQueues[name];
    if (!cq) return;
    for (const [fr, used] of Object.entries(cq.used)) {
      const nominal = cq.nominal[fr] || 0;
      if (!series.has(fr)) series.set(fr, []);
      series.get(fr).push([i, nominal > 0 ? (100 * used) / nominal : 0]);
    }
  });
  const peak = Math.max(100, ...[...series.values()].flat().map((p) => p[1]));
  const x = (i) => left + ((width - left - right) * i) / Math.max(1, samples.length - 1);
  const y = (v) => top + (height - top - bottom) * (1 - v / peak);
  const plot = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `usage of ${name}` });
  const title = svg("text", { x: left, y: 11, class: "t" });
  title.textContent = `${name}: usage, % of nominal quota`;
  plot.append(title);
  for (const v of [0, 100, peak > 100 ? peak : null].filter((v) => v !== null)) {
    plot.append(svg("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), class: "axis" }));
    const label = svg("text", { x: 2, y: y(v) + 3 });
    label.textContent = `${Math.round(v)}%`;
    plot.append(label);
  }
  const legend = el("figcaption", { class: "legend" });
  [...series.entries()].forEach(([fr, points], index) => {
    const color = PALETTE[index % PALETTE.length];
    const d = points.map(([i, v], n) => `${n ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    plot.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.8 }));
    const [i, v] = points[points.length - 1]; // the latest sample, visible even when it is the only one
    plot.append(svg("circle", { cx: x(i), cy: y(v), r: 2.5, fill: color }));
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = color;
    legend.append(el("span", {}, swatch, fr));
  });
  if (samples.length) {
    const first = svg("text", { x: left, y: height - 4 });
    first.textContent = samples[0].at.slice(11, 19);
    const last = svg("text", { x: width - right, y: height - 4, "text-anchor": "end" });
    last.textContent = samples[samples.length - 1].at.slice(11, 19);
    plot.append(first, last);
  }
  return el("figure", { class: "card chart", "data-chart": name }, plot, legend);
}

function renderCharts(history, clusterQueues) {
  document.getElementById("charts").replaceChildren(...clusterQueues.map((cq) => chart(cq.name, history.samples)));
}

// ------------------------------------------------------------------ polling

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function showLogin(message) {
  document.getElementById("board").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
}

let timer = null;
let latest = null;

async function refresh() {
  clearTimeout(timer);
  if (!token()) {
    showLogin("");
    return;
  }
  const live = document.getElementById("live");
  try {
    const response = await fetch("/api/v1/dashboard", { headers: { Authorization: `Bearer ${token()}` }, cache: "no-store" });
    if (response.status === 401 || response.status === 403) {
      // The standalone API says {"error"}; a cluster's side door answers a Kubernetes Status {"message"}.
      const refusal = await response.json().catch(() => ({}));
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(refusal.error || refusal.message || "the token was refused");
      return;
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    latest = await response.json();
    render(latest);
    live.className = "ok";
    live.textContent = `live · ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    live.className = "stale";
    live.textContent = `not updating: ${error.message}`;
  }
  timer = setTimeout(refresh, POLL_MS);
}

function render(data) {
  const now = Date.now();
  document.getElementById("login").hidden = true;
  document.getElementById("board").hidden = false;
  document.getElementById("sign-out").hidden = false;
  const scope = data.identity.role === "admin" ? "admin: everything" : `tenant: ${data.identity.namespaces.join(", ")}`;
  document.getElementById("who").textContent = `${data.identity.name} (${scope})`;
  renderClusterQueues(data.clusterQueues);
  renderWorkloads(data.workloads, now);
  renderCharts(data.history, data.clusterQueues);
  renderCohorts(data.cohorts, data.clusterQueues);
  renderLocalQueues(data.localQueues);
  document.body.dataset.generatedAt = data.generatedAt;
}

function start() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    sessionStorage.setItem(TOKEN_KEY, fragment.get("token"));
    history.replaceState(null, "", location.pathname); // the token leaves the address bar and the history
  }
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    refresh();
  });
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("");
  });
  refresh();
}

document.addEventListener("DOMContentLoaded", start);
