// dashboard.js: the live page of `corral up`. It reads the state the
// server sends every second on /api/events (JSON documented in README.md,
// "corral up"), appends a point to each chart (internal/chart's
// corralChart) and fills the node table; the buttons call the control
// API. window.corralDash holds the charts and the last state, for tests.
(function () {
  "use strict";

  const MAX_POINTS = 900;
  const PRIOS = ["P0", "P1", "P2"];
  const POLICIES = ["multivalue", "weighted", "weighted-subset"];
  const dash = { charts: {}, last: null, events: 0 };
  window.corralDash = dash;
  let prev = null;

  const el = (id) => document.getElementById(id);
  const sum = (xs, f) => xs.reduce((a, x) => a + f(x), 0);

  function status(text, isError) {
    const s = el("status");
    s.textContent = text;
    s.className = isError ? "error" : "";
  }

  // chart adds a chart with these series under #charts.
  function chart(id, title, yLabel, unit, series) {
    const fig = document.createElement("figure");
    fig.className = "corral-chart";
    fig.id = "chart-" + id;
    el("charts").appendChild(fig);
    dash.charts[id] = window.corralChart.mount(fig, { title, yLabel, unit, format: "si", time: "clock", series }, null);
  }

  function setup(s) {
    const nodes = s.hubs.concat(s.edges).map((n) => n.name);
    chart("sessions", "Sessions per hub and edge", "sessions", "", nodes);
    chart("limits", "Adaptive limit (edges: handshakes, hubs: publishes)", "limit", "", nodes);
    chart("stages", "Shedding stage (0 normal, 3 sheds P0 too)", "stage", "", nodes);
    const adm = [];
    for (const k of ["admitted", "refused", "severed"]) for (const p of PRIOS) adm.push(k + " " + p);
    chart("admission", "Edges: sessions admitted, refused, severed per priority", "sessions", "/s", adm);
    chart("dns", "DNS answers per policy", "answers", "/s", POLICIES);
    chart("replay", "Replay cache hits against origin reads", "reads", "/s", ["edge cache hits", "edge cache misses", "hub store reads"]);
    chart("storm", "kraken storm", "devices", "", ["attempts/s", "held by kraken", "sessions at the edges"]);
  }

  // rate is the per-second rate of a counter between two states.
  function rate(now, before, dt) {
    if (before == null || !(dt > 0)) return 0;
    return Math.max(0, (now - before) / dt);
  }

  function update(s) {
    if (!dash.last) setup(s);
    const t = s.unix_ms / 1000;
    const dt = prev ? (s.unix_ms - prev.unix_ms) / 1000 : 0;
    const nodes = s.hubs.concat(s.edges);
    const c = dash.charts;
    c.sessions.append(t, nodes.map((n) => n.sessions), MAX_POINTS);
    c.limits.append(t, nodes.map((n) => n.limit), MAX_POINTS);
    c.stages.append(t, nodes.map((n) => n.stage), MAX_POINTS);
    const adm = [];
    for (const k of ["admitted", "refused", "severed"]) {
      for (let p = 0; p < 3; p++) {
        adm.push(rate(sum(s.edges, (e) => e[k][p]), prev && sum(prev.edges, (e) => e[k][p]), dt));
      }
    }
    c.admission.append(t, adm, MAX_POINTS);
    c.dns.append(t, POLICIES.map((p) => rate(s.dns.answers[p] || 0, prev && (prev.dns.answers[p] || 0), dt)), MAX_POINTS);
    const hits = sum(s.edges, (e) => e.replay_hits || 0);
    const misses = sum(s.edges, (e) => e.replay_misses || 0);
    const reads = sum(s.hubs, (h) => h.store_reads || 0);
    c.replay.append(t, [
      rate(hits, prev && sum(prev.edges, (e) => e.replay_hits || 0), dt),
      rate(misses, prev && sum(prev.edges, (e) => e.replay_misses || 0), dt),
      rate(reads, prev && sum(prev.hubs, (h) => h.store_reads || 0), dt),
    ], MAX_POINTS);
    const st = s.storm;
    const pst = prev && prev.storm;
    c.storm.append(t, [
      st && st.running ? rate(st.attempts, pst && pst.running ? pst.attempts : 0, dt) : 0,
      st && st.running ? st.held : 0,
      sum(s.edges, (e) => e.sessions),
    ], MAX_POINTS);
    table(s);
    prev = s;
    dash.last = s;
    dash.events++;
  }

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function table(s) {
    const body = el("node-rows");
    body.replaceChildren();
    s.hubs.forEach((n, i) => row(body, n, "hub", i + 1));
    s.edges.forEach((n) => row(body, n, "edge", 0));
    el("policy-now").textContent = "origin.corral.test answers by " + s.policy;
    const recs = el("records");
    recs.replaceChildren(document.createTextNode("DNS " + s.dns.addr + ": "));
    for (const r of s.dns.records) {
      const span = document.createElement("span");
      span.className = "rec " + (r.healthy ? "up" : "down");
      span.textContent = r.value + " (" + r.check + ") " + (r.healthy ? "healthy" : "unhealthy");
      recs.appendChild(span);
    }
    const st = s.storm;
    el("storm").textContent = !st ? "no storm yet" :
      `storm ${st.scenario} (${st.file}): ${st.running ? "running" : "ended" + (st.stopped ? " (" + st.stopped + ")" : "")}` +
      `, ${st.clock}, held ${st.held} of ${st.devices}, attempts ${st.attempts}, failures ${st.failures}` +
      (st.error ? ", error: " + st.error : "");
  }

  function row(body, n, kind, hub) {
    const tr = document.createElement("tr");
    tr.className = "node " + kind;
    tr.dataset.name = n.name;
    cell(tr, n.name);
    cell(tr, n.addr, "addr");
    cell(tr, n.state, "state " + n.state);
    cell(tr, n.sessions, "sessions");
    cell(tr, n.limit);
    cell(tr, n.stage);
    cell(tr, n.admitted.join(" / "));
    cell(tr, n.refused.join(" / "));
    cell(tr, n.severed.join(" / "));
    const act = cell(tr, "");
    if (kind === "hub" && n.state !== "killed") {
      for (const a of n.state === "paused" ? ["resume", "kill"] : ["pause", "kill"]) {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = a;
        b.addEventListener("click", () => control("POST", `/api/hubs/${hub}/${a}`));
        act.appendChild(b);
      }
    }
    body.appendChild(tr);
  }

  // control calls the API and shows its answer (a refusal's error too).
  async function control(method, path, body) {
    try {
      const r = await fetch(path, { method, headers: { "Content-Type": "application/json" }, body: body ? JSON.stringify(body) : undefined });
      const j = await r.json();
      if (!r.ok) status(`${method} ${path}: ${j.error}`, true);
      else status(`${method} ${path}: ${JSON.stringify(j)}`, false);
    } catch (e) {
      status(`${method} ${path}: ${e.message}`, true);
    }
  }

  async function scenarios() {
    try {
      const r = await fetch("/api/scenarios");
      const j = await r.json();
      const sel = el("scenario");
      for (const f of j.scenarios) {
        const o = document.createElement("option");
        o.textContent = f;
        sel.appendChild(o);
      }
    } catch (e) {
      status("scenarios: " + e.message, true);
    }
  }

  function wire() {
    el("policy-set").addEventListener("click", () => control("POST", "/api/policy", { policy: el("policy").value }));
    el("drop").addEventListener("click", () => control("POST", "/api/drop", { percent: Number(el("drop-percent").value) }));
    el("storm-start").addEventListener("click", () => control("POST", "/api/storm", { scenario: el("scenario").value }));
    el("storm-stop").addEventListener("click", () => control("DELETE", "/api/storm"));
    scenarios();
    const es = new EventSource("/api/events");
    es.onmessage = (m) => {
      update(JSON.parse(m.data));
      if (el("status").textContent === "reconnecting") status("", false);
    };
    es.onerror = () => status("reconnecting", false);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
