// The pykueue dashboard: polls GET /api/v1/dashboard and redraws. Plain DOM, no framework, no build step.
//
// The token comes from the address's fragment (#token=..., never sent to a server) or from the form, and is
// kept in this tab's sessionStorage only. Polling rather than server-sent events: EventSource cannot send an
// Authorization header, and a token in a query string would land in logs.
//
// Routes live in the fragment, so a link to one works (after the token is given once in this tab):
//   #                                  the overview          #q=words   the overview, filtered
//   #ClusterQueue/<name>  #Cohort/<name>  #ResourceFlavor/<name>
//   #LocalQueue/<namespace>/<name>  #Workload/<namespace>/<name>       one object, with its YAML
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "pykueue-token";
const PALETTE = ["#2f6fd6", "#d9822b", "#2e8b57", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#b7950b"];
const SVG_NS = "http://www.w3.org/2000/svg";
const open = new Set(); // workloads whose events are unfolded, kept across redraws
const KINDS = ["ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "Workload"];
// How a workload ended or what last happened to it: an icon (hidden from screen readers) beside the word.
const OUTCOME_ICONS = { Succeeded: "\u2713", Failed: "\u2717", Preempted: "\u21ba", Evicted: "\u26a0" };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || key === "role") node.setAttribute(key, value);
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

// ------------------------------------------------------------------ routes, links and the filter

// The page the fragment names: {kind: null, q} for the overview, or {kind, path} for one object.
function route(hash) {
  const text = (hash || "").replace(/^#\/?/, "");
  if (!text || text.startsWith("q=")) {
    return { kind: null, q: new URLSearchParams(text).get("q") || "" };
  }
  const [kind, ...rest] = text.split("/");
  if (!KINDS.includes(kind) || !rest.length) return { kind: null, q: "" };
  return { kind, path: rest.map(decodeURIComponent).join("/") };
}

function href(kind, path) {
  return `#${kind}/${path.split("/").map(encodeURIComponent).join("/")}`;
}

// A name that opens its object's page; a click on it does not also fold its row.
function link(kind, path, text) {
  const a = el("a", { href: href(kind, path), class: "object-link", "data-kind": kind }, text ?? path);
  a.addEventListener("click", (event) => event.stopPropagation());
  return a;
}

// Every word of the filter must appear in what a row says of itself (case ignored).
function matches(haystack, query) {
  const text = haystack.toLowerCase();
  return query.toLowerCase().split(/\s+/).filter(Boolean).every((word) => text.includes(word));
}

function currentFilter() {
  const box = document.getElementById("filter");
  return box ? box.value.trim() : "";
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

// "✓ Succeeded", "✗ Failed", "↺ Preempted", "⚠ Evicted", coloured, with the condition's message on hover.
function outcomeMarker(w) {
  if (!w.outcome) return null;
  return el(
    "span",
    { class: `outcome outcome-${w.outcome}`, "data-outcome": w.outcome, title: w.outcomeMessage || w.outcome },
    el("span", { class: "icon", "aria-hidden": "true" }, OUTCOME_ICONS[w.outcome] || "\u2022"),
    w.outcome,
  );
}

// What the State cell says: the marker alone for a finished workload, else the state and any marker.
function stateCell(w) {
  const marker = outcomeMarker(w);
  if (w.state === "Finished" || w.state === "Failed") return marker || w.state;
  return marker ? el("span", { class: "state-and-outcome" }, w.state, " ", marker) : w.state;
}

function usageBars(usage, labelOf) {
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
      el("span", { class: "label" }, labelOf ? labelOf(u) : link("ResourceFlavor", u.flavor), ` · ${u.resource}`),
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

function clusterQueueCard(cq) {
  return el(
    "div",
    { class: "card", "data-cluster-queue": cq.name, "data-search": `${cq.name} ${cq.cohort} ${cq.active ? "active" : "inactive"}` },
    el(
      "h3",
      {},
      link("ClusterQueue", cq.name),
      el("span", { class: "meta" }, cq.cohort ? "cohort " : "no cohort", cq.cohort ? link("Cohort", cq.cohort) : null),
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
  );
}

function renderClusterQueues(rows) {
  document.getElementById("cluster-queues").replaceChildren(...rows.map(clusterQueueCard));
}

// A flavor: the nodes it stands for, and each ClusterQueue's quota and usage of it.
function flavorCard(f) {
  const chips = (items, cls) => el("div", { class: "chips" }, ...items.map((t) => el("span", { class: `chip ${cls}` }, t)));
  const labels = Object.entries(f.nodeLabels).map(([k, v]) => `${k}=${v}`);
  return el(
    "div",
    { class: "card flavor", "data-flavor": f.name, "data-search": `${f.name} ${f.clusterQueues.join(" ")} ${labels.join(" ")}` },
    el(
      "h3",
      {},
      link("ResourceFlavor", f.name),
      el("span", { class: "meta" }, f.topologyName ? `topology ${f.topologyName}` : "no topology"),
      f.defined ? null : el("span", { class: "chip cause-stopped", title: "no ResourceFlavor of this name exists" }, "missing"),
    ),
    el("div", { class: "meta" }, labels.length ? "node labels" : "no node labels"),
    labels.length ? chips(labels, "label-chip") : null,
    f.nodeTaints.length ? el("div", { class: "meta" }, "node taints") : null,
    f.nodeTaints.length ? chips(f.nodeTaints, "taint-chip") : null,
    f.tolerations.length ? el("div", { class: "meta" }, "tolerations added to admitted pods") : null,
    f.tolerations.length ? chips(f.tolerations, "toleration-chip") : null,
    el("div", { class: "meta" }, f.usage.length ? "quota and usage per ClusterQueue" : "no ClusterQueue you see uses it"),
    ...usageBars(
      f.usage.map((u) => ({ ...u, flavor: f.name, borrowingLimit: null })),
      (u) => link("ClusterQueue", u.clusterQueue),
    ),
  );
}

function renderFlavors(rows) {
  document.getElementById("flavors").replaceChildren(...rows.map(flavorCard));
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
    const queue = el(
      "span",
      {},
      w.queue ? link("LocalQueue", `${w.namespace}/${w.queue}`, w.queue) : "",
      w.clusterQueue ? " → " : "",
      w.clusterQueue ? link("ClusterQueue", w.clusterQueue) : null,
    );
    const search = `${key} ${w.queue} ${w.clusterQueue} ${w.state} ${w.outcome || ""} ${w.cause || ""} ${w.job || ""}`;
    const row = el(
      "tr",
      { class: "workload", "data-workload": key, "data-search": search, title: "show or hide its events" },
      el("td", { class: "position", "data-label": "Position" }, w.position === null ? "" : `${w.position} of ${w.pendingInQueue}`),
      el("td", { class: "name", "data-label": "Workload" }, link("Workload", key)),
      el("td", { class: "queue", "data-label": "Queue" }, queue),
      el("td", { class: `state state-${w.state}`, "data-label": "State" }, stateCell(w)),
      el("td", { class: "priority", "data-label": "Priority", title: w.aging || "" }, priorityText(w)),
      el("td", { class: "cause", "data-label": "Cause" }, w.cause ? el("span", { class: `chip cause-${w.cause}` }, w.cause) : ""),
      el("td", { class: "reason", "data-label": "Why" }, w.reason || ""),
      el("td", { class: "eta", "data-label": "Estimated start" }, w.state === "Pending" ? estimatedStart(w.estimatedStart, now) : ""),
    );
    if (!matches(search, currentFilter())) continue;
    row.addEventListener("click", () => {
      if (open.has(key)) open.delete(key);
      else open.add(key);
      if (latest) render(latest);
    });
    out.push(row);
    if (open.has(key)) {
      out.push(el("tr", { class: "events", "data-events-of": key }, el("td", { colSpan: 8 }, eventList(w.events))));
    }
  }
  body.replaceChildren(...out);
  const shown = body.querySelectorAll("tr.workload").length;
  document.getElementById("no-workloads").hidden = shown > 0;
  document.getElementById("no-workloads").textContent = rows.length ? "No workload matches the filter." : "No workloads you may see.";
  return [shown, rows.length];
}

function renderLocalQueues(rows) {
  document.querySelector("#local-queues tbody").replaceChildren(
    ...rows.map((lq) =>
      el(
        "tr",
        { "data-local-queue": `${lq.namespace}/${lq.name}`, "data-search": `${lq.namespace}/${lq.name} ${lq.clusterQueue}` },
        el("td", { "data-label": "Namespace" }, lq.namespace),
        el("td", { "data-label": "Name" }, link("LocalQueue", `${lq.namespace}/${lq.name}`, lq.name)),
        el("td", { "data-label": "ClusterQueue" }, link("ClusterQueue", lq.clusterQueue)),
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
      el("div", { class: "node" }, el("b", {}, link("Cohort", c.name)), el("div", { class: "meta" }, totals.join(" · ") || "no quota")),
      el(
        "ul",
        {},
        ...c.cohorts.map((child) => node(byName.get(child))),
        ...c.clusterQueues.map((name) => el("li", { class: "cq-leaf" }, "ClusterQueue ", link("ClusterQueue", name))),
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

// ------------------------------------------------------------------ one object's page

function facts(pairs) {
  return el("dl", { class: "facts" }, ...pairs.filter(([, v]) => v !== null && v !== "").flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// What the document says of the object, above its YAML; null when the caller's document does not hold it.
function summary(data, kind, path) {
  if (kind === "ClusterQueue") {
    const cq = data.clusterQueues.find((c) => c.name === path);
    if (!cq) return null;
    const queues = data.localQueues.filter((lq) => lq.clusterQueue === cq.name);
    return el(
      "div",
      {},
      clusterQueueCard(cq),
      facts([
        ["LocalQueues", queues.length ? el("span", {}, ...queues.flatMap((lq, i) => [i ? ", " : "", link("LocalQueue", `${lq.namespace}/${lq.name}`)])) : "none you see"],
      ]),
    );
  }
  if (kind === "ResourceFlavor") {
    const f = data.flavors.find((x) => x.name === path);
    return f ? flavorCard(f) : null;
  }
  if (kind === "Cohort") {
    const c = data.cohorts.find((x) => x.name === path);
    if (!c) return null;
    const links = (k, names) => (names.length ? el("span", {}, ...names.flatMap((n, i) => [i ? ", " : "", link(k, n)])) : "none");
    return facts([
      ["Parent", c.parent ? link("Cohort", c.parent) : "none (a root)"],
      ["Child cohorts", links("Cohort", c.cohorts)],
      ["ClusterQueues", links("ClusterQueue", c.clusterQueues)],
      ["Quota and usage", Object.entries(c.usage).map(([fr, u]) => `${fr}: ${amount(fr.split("/").pop(), u.used)} / ${amount(fr.split("/").pop(), u.nominal)}`).join(" · ") || "no quota"],
    ]);
  }
  if (kind === "LocalQueue") {
    const lq = data.localQueues.find((x) => `${x.namespace}/${x.name}` === path);
    if (!lq) return null;
    return facts([["Namespace", lq.namespace], ["ClusterQueue", link("ClusterQueue", lq.clusterQueue)], ["Pending", lq.pending], ["Admitted", lq.admitted], ["Stop policy", lq.stopPolicy]]);
  }
  const w = data.workloads.find((x) => `${x.namespace}/${x.name}` === path);
  if (!w) return null;
  return el(
    "div",
    {},
    facts([
      ["State", stateCell(w)],
      ["Job", w.job],
      ["LocalQueue", w.queue ? link("LocalQueue", `${w.namespace}/${w.queue}`, w.queue) : ""],
      ["ClusterQueue", w.clusterQueue ? link("ClusterQueue", w.clusterQueue) : ""],
      ["Position", w.position === null ? "" : `${w.position} of ${w.pendingInQueue}`],
      ["Cause", w.cause || ""],
      ["Why", w.reason || ""],
      ["Priority", priorityText(w)],
    ]),
    eventList(w.events),
  );
}

function renderDetail(data, where, object) {
  document.getElementById("detail-title").textContent = `${where.kind} ${where.path}`;
  const about = summary(data, where.kind, where.path);
  document.getElementById("detail-summary").replaceChildren(about || el("p", { class: "hint" }, "Not in what this page shows you now."));
  const error = document.getElementById("detail-error");
  error.textContent = object.error || "";
  const yamlBox = document.getElementById("yaml");
  yamlBox.hidden = !object.yaml;
  yamlBox.textContent = object.yaml || "";
}

async function fetchObject(where) {
  const response = await fetch(`/api/v1/dashboard/objects/${where.kind}/${where.path.split("/").map(encodeURIComponent).join("/")}`, {
    headers: { Authorization: `Bearer ${token()}` },
    cache: "no-store",
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) return { error: body.error || body.message || `HTTP ${response.status}` };
  return body;
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
let latestObject = null; // the object page's answer, refetched with every poll

let generation = 0; // a newer refresh (a link clicked mid-poll) wins; an older one's answer is dropped

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
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
    const data = await response.json();
    const where = route(location.hash);
    const object = where.kind ? await fetchObject(where) : null;
    if (mine !== generation) return;
    latest = data;
    latestObject = object;
    render(latest);
    live.className = "ok";
    live.textContent = `live · ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    if (mine !== generation) return;
    live.className = "stale";
    live.textContent = `not updating: ${error.message}`;
  }
  timer = setTimeout(refresh, POLL_MS);
}

function render(data) {
  const now = Date.now();
  const where = route(location.hash);
  document.getElementById("login").hidden = true;
  document.getElementById("board").hidden = Boolean(where.kind);
  document.getElementById("detail").hidden = !where.kind;
  document.getElementById("sign-out").hidden = false;
  const scope = data.identity.role === "admin" ? "admin: everything" : `tenant: ${data.identity.namespaces.join(", ")}`;
  document.getElementById("who").textContent = `${data.identity.name} (${scope})`;
  document.body.dataset.generatedAt = data.generatedAt;
  if (where.kind) {
    if (latestObject) renderDetail(data, where, latestObject);
    return;
  }
  renderClusterQueues(data.clusterQueues);
  const [shown, all] = renderWorkloads(data.workloads, now);
  renderCharts(data.history, data.clusterQueues);
  renderCohorts(data.cohorts, data.clusterQueues);
  renderLocalQueues(data.localQueues);
  renderFlavors(data.flavors || []);
  const query = currentFilter();
  for (const item of document.querySelectorAll("#cluster-queues [data-search], #local-queues [data-search], #flavors [data-search]")) {
    item.hidden = !matches(item.dataset.search, query);
  }
  document.getElementById("filter-count").textContent = query ? `${shown} of ${all} workloads match` : "";
}

// The filter box follows the address (#q=...) so a filtered view can be linked, and redraws at once.
function filterChanged() {
  const query = currentFilter();
  history.replaceState(null, "", query ? `#q=${encodeURIComponent(query)}` : location.pathname);
  if (latest) render(latest);
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
  document.getElementById("filter").value = route(location.hash).q || "";
  document.getElementById("filter").addEventListener("input", filterChanged);
  // A link to another object (or back): show it now, not at the next poll.
  window.addEventListener("hashchange", () => {
    latestObject = null;
    const where = route(location.hash);
    if (!where.kind) document.getElementById("filter").value = where.q || "";
    refresh();
    window.scrollTo(0, 0);
  });
  refresh();
}

document.addEventListener("DOMContentLoaded", start);
