// Lockwarden dashboard: renders the document lw-rapi streams on /ui/events (server-sent
// events, one "snapshot" per change). No framework, no build step, nothing from outside.
// The page is built from elements and text nodes only (never HTML from data), and styles
// are set through the CSSOM: lw-rapi's Content-Security-Policy (default-src 'self')
// refuses inline scripts and style attributes.
"use strict";

const STATUS_ORDER = ["queued", "waiting", "running", "canceling", "success", "error", "canceled"];

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "style") Object.assign(el.style, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function ago(ts) {
  if (!ts) return "";
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ts * 1000).toLocaleString();
}

// A relative time that stays true between snapshots (refreshed by the page's own clock,
// not by asking lw-rapi again).
const agoCell = (ts) => h("td", { class: "muted ago", "data-ts": ts }, ago(ts));
function refreshAges() {
  for (const el of document.querySelectorAll(".ago[data-ts]")) el.textContent = ago(Number(el.dataset.ts));
}

const badge = (status) => h("span", { class: `badge st-${status}` }, status);
const lockChip = ([name, mode], extra) =>
  h("span", { class: `chip lock ${mode} ${extra || ""}`, title: mode }, name);
const actionOf = (f) => (Array.isArray(f.action) ? f.action : String(f.action).split(" "));
const summary = (job) => (job.summary || []).join(", ");
// A filter's uuid in a pending reason, cut to its first 8 characters (the full one in a tooltip).
const shortReason = (text) => h("span", { title: text },
  text.replace(/\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, "$1…"));

// The first link of a job's why_job chain (what holds it), under its reason or locks.
const whyLine = (job) => (job.why ? h("div", { class: "why" }, shortReason(job.why)) : null);

function fillTable(sectionId, rows, tbodySelector) {
  const section = document.getElementById(sectionId);
  const tbody = section.querySelector(tbodySelector || "tbody");
  tbody.replaceChildren(...rows);
  const table = tbody.closest(".scroll");
  const empty = table.nextElementSibling;
  table.hidden = rows.length === 0;
  if (empty && empty.classList.contains("empty")) empty.hidden = rows.length !== 0;
}

function renderSummary(v) {
  const c = v.cluster;
  const counts = v.counts || {};
  const tiles = [
    ["nodes", c.nodes], ["instances", c.instances],
    ["running", `${c.running} / ${c.max_running_jobs}`], ["queued", counts.queued || 0],
    ["waiting", counts.waiting || 0], ["locks held", c.locks],
    ["lock waiters", c.waiters], ["filters", c.filters],
  ];
  document.getElementById("summary").replaceChildren(
    ...tiles.map(([label, value]) =>
      h("div", { class: "tile", "data-tile": label }, h("div", { class: "value" }, value),
        h("div", { class: "label" }, label))));
  document.getElementById("cluster-name").textContent = c.name;
  const q = document.getElementById("queue-state");
  q.textContent = c.drained ? "queue drained" : "queue open";
  q.className = `pill ${c.drained ? "warn" : "ok"}`;
}

function renderQueue(v) {
  const counts = v.counts || {};
  const total = STATUS_ORDER.reduce((n, s) => n + (counts[s] || 0), 0);
  document.getElementById("status-bar").replaceChildren(
    ...STATUS_ORDER.filter((s) => counts[s]).map((s) =>
      h("span", { class: `seg st-${s}`, style: { flexGrow: String(counts[s]) }, title: `${s}: ${counts[s]}` })));
  document.getElementById("status-legend").replaceChildren(
    ...STATUS_ORDER.map((s) =>
      h("li", { "data-status": s }, h("span", { class: `dot st-${s}` }), `${s} `,
        h("b", {}, counts[s] || 0))),
    h("li", { class: "total" }, "total ", h("b", {}, total)));
  document.getElementById("queued-count").textContent =
    v.queued_total > v.queued.length ? `(${v.queued.length} of ${v.queued_total} shown)` : `(${v.queued_total})`;
  document.getElementById("pending-reasons").replaceChildren(
    ...v.pending_reasons.map(([reason, n]) => h("li", { class: "chip" }, shortReason(reason), " ", h("b", {}, n))));
  fillTable("queued", v.queued.map((j) =>
    h("tr", { "data-job-id": j.id }, h("td", { class: "num" }, j.id), h("td", { class: "what" }, summary(j)),
      h("td", { class: "num" }, j.priority),
      h("td", { class: "reason" }, shortReason(j.pending_reason || "about to start"), whyLine(j)))));
  fillTable("running", v.active.map((j) =>
    h("tr", { "data-job-id": j.id }, h("td", { class: "num" }, j.id), h("td", { class: "what" }, summary(j)),
      h("td", {}, badge(j.status)),
      h("td", { class: "chips" }, j.locks.map((l) => lockChip(l)), j.wants.map((l) => lockChip(l, "wanted")),
        j.locks.length + j.wants.length ? null : h("span", { class: "muted" }, "none"), whyLine(j)))));
  fillTable("recent", v.recent.map((j) =>
    h("tr", { "data-job-id": j.id }, h("td", { class: "num" }, j.id), h("td", { class: "what" }, summary(j)),
      h("td", {}, badge(j.status)), agoCell(j.end_ts))));
}

function renderDrains(v) {
  const list = document.querySelector("#drains .list");
  list.replaceChildren(...v.drains.map((d) =>
    h("div", { class: "drain", "data-target": d.target },
      h("div", { class: "drain-head" }, h("b", {}, d.target), badge(d.status || "?"),
        h("span", { class: "muted" }, `${d.total - d.remaining} / ${d.total} moved`)),
      h("div", { class: "progress", role: "progressbar", "aria-valuenow": d.percent, "aria-valuemin": 0, "aria-valuemax": 100 },
        h("span", { style: { width: `${d.percent}%` } })),
      d.message ? h("div", { class: "muted" }, d.message) : null)));
  list.hidden = v.drains.length === 0;
  list.nextElementSibling.hidden = v.drains.length !== 0;
}

function renderBudgets(v) {
  const list = document.querySelector("#budgets .list");
  const budgets = v.budgets || [];
  list.replaceChildren(...budgets.map((b) =>
    h("div", { class: "budget", "data-budget": b.name },
      h("div", { class: "drain-head" }, h("b", {}, b.name),
        badge(b.disrupted.length > b.max_disrupted ? "exceeded" : b.disrupted.length === b.max_disrupted ? "full" : "room"),
        h("span", { class: "muted" }, `${b.disrupted.length} of ${b.max_disrupted} disrupted · ${b.members} members · tags ${b.tags.join(",")}`)),
      h("div", { class: "chips" }, b.disrupted.map(([inst, why]) =>
        h("span", { class: "chip", "data-instance": inst }, `${inst} · ${why}`))))));
  list.hidden = budgets.length === 0;
  list.nextElementSibling.hidden = budgets.length !== 0;
}

function renderCluster(v) {
  fillTable("nodes", v.nodes.map((n) =>
    h("tr", {}, h("td", {}, h("b", {}, n.name)), h("td", {}, n.group), h("td", { class: "mono" }, n.ip),
      h("td", { class: "num" }, n.instances),
      h("td", {}, n.offline ? badge("offline") : n.drained ? badge("drained") : badge("online")))));
  fillTable("instances", v.instances.map((i) =>
    h("tr", {}, h("td", {}, h("b", {}, i.name)), h("td", {}, i.node), h("td", {}, badge(i.state)),
      h("td", { class: "num" }, i.memory ? `${i.memory} MiB` : ""), h("td", { class: "num" }, i.vcpus))));
  fillTable("filters", v.filters.map((f) =>
    h("tr", {}, h("td", { class: "num" }, f.priority), h("td", {}, badge(actionOf(f)[0]), " ", actionOf(f).slice(1).join(" ")),
      h("td", { class: "mono" }, JSON.stringify(f.predicates)), h("td", { class: "mono muted" }, String(f.uuid).slice(0, 8)))));
  fillTable("locks", v.locks.map((l) =>
    h("tr", {}, h("td", { class: "mono" }, l.name),
      h("td", { class: "chips" }, l.owners.map((o) => h("span", { class: `chip ${o.mode}` }, `${o.label} · ${o.mode}`))))));
  fillTable("locks", v.waiters.map((w) =>
    h("tr", {}, h("td", {}, w.label), h("td", { class: "num" }, w.priority),
      h("td", { class: "chips" }, w.request.map((r) => lockChip(r, "wanted"))), agoCell(w.since))),
    "#waiters tbody");
}

function render(v) {
  renderSummary(v);
  renderQueue(v);
  renderDrains(v);
  renderBudgets(v);
  renderCluster(v);
  document.body.dataset.serial = v.serial;
  document.getElementById("updated").textContent = new Date().toLocaleTimeString();
}

function setLive(state, text) {
  const el = document.getElementById("live");
  el.className = `pill live-${state}`;
  el.textContent = text;
}

function connect() {
  const source = new EventSource("/ui/events");
  source.addEventListener("snapshot", (e) => {
    render(JSON.parse(e.data));
    setLive("on", "live");
  });
  source.addEventListener("trouble", (e) => setLive("wait", JSON.parse(e.data).error));
  source.onerror = () => setLive("wait", "reconnecting…");
}

connect();
setInterval(refreshAges, 5000);
