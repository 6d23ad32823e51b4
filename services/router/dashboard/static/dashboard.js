// The live page of a pdd-emu mesh: polls /dashboard/data once a tick and redraws (docs/dashboard.md).
"use strict";

const COLOURS = { a: "#2b6cb0", b: "#38a169", c: "#dd6b20", sla: "#e53e3e", rate: "#4a5568" };
const MIN_SPAN_S = 20;  // the time axis spans at least this much: whole seconds on its ticks from the first samples
const state = { since: 0, booted: null, meta: null, rows: [], charts: {}, linkCharts: {} };

const $ = (id) => document.getElementById(id);
const num = (v, digits = 3) => (v == null ? "–" : Number(v.toPrecision(digits)).toString());
const seconds = (s) => (s == null ? "–" : s >= 1 ? `${num(s)} s` : `${num(s * 1e3)} ms`);
const percent = (f) => (f == null ? "–" : `${num(f * 100)}%`);
function rate(bps) {
  if (bps == null) return "unlimited";
  for (const [unit, scale] of [["Gbit/s", 1e9], ["Mbit/s", 1e6], ["kbit/s", 1e3]]) {
    if (bps >= scale) return `${num(bps / scale)} ${unit}`;
  }
  return `${num(bps)} bit/s`;
}
const mib = (b) => (b == null ? "–" : `${num(b / 2 ** 20)} MiB`);

function series(label, stroke, extra = {}) {
  return Object.assign({ label, stroke, width: 2, spanGaps: false, points: { show: false } }, extra);
}
// A setting (a rate, the SLA) holds until it changes: drawn as steps, dashed.
const setting = (label, stroke) => series(label, stroke, { dash: [6, 4], width: 1.5,
  paths: uPlot.paths.stepped({ align: 1 }) });

// A y axis from 0 to a little above the highest value, and never shorter than `least` (an idle chart).
function chart(el, ySeries, yLabel, least = 1) {
  const opts = {
    width: Math.max(300, el.clientWidth), height: 220,
    series: [{}, ...ySeries],
    axes: [{}, { label: yLabel, size: 60 }],
    scales: {
      x: { time: true, range: (u, lo, hi) => [Math.min(lo, hi - MIN_SPAN_S), hi] },
      y: { range: (u, lo, hi) => [0, Math.max((hi || 0) * 1.1, least)] },
    },
    legend: { live: false, markers: { dash: (u, i) => (u.series[i].dash ? "dashed" : "solid") } },
    cursor: { show: false },
  };
  const plot = new uPlot(opts, [[], ...ySeries.map(() => [])], el);
  el.uplot = plot;
  return plot;
}

function setup(meta) {
  state.meta = meta;
  $("scenario").textContent = `${meta.scenario} (${meta.mode}, ${meta.model})`;
  $("note").textContent = `Rates, shares and percentiles are over the requests that finished in the last ` +
    `${meta.window_s} s; the page reads the router every ${meta.tick_s} s and keeps ` +
    `${Math.round(meta.history * meta.tick_s / 60)} minutes. SLA: TTFT ≤ ${seconds(meta.sla.ttft_s)}, ` +
    `TPOT ≤ ${seconds(meta.sla.tpot_s)}.`;
  $("tile-ttft").querySelector("span").textContent = `TTFT p99 (SLA ${seconds(meta.sla.ttft_s)})`;
  $("tile-tpot").querySelector("span").textContent = `TPOT p99 (SLA ${seconds(meta.sla.tpot_s)})`;
  for (const el of document.querySelectorAll(".chart")) el.replaceChildren();
  state.charts = {
    // Within the SLA is an area under the finished line: where every request meets it, both stay visible.
    rps: chart($("chart-rps"), [series("within SLA", COLOURS.b, { fill: "rgba(56, 161, 105, 0.25)", width: 1 }),
      series("finished", COLOURS.a), series("errors", COLOURS.sla)], "req/s"),
    relay: chart($("chart-relay"), [series("relay share", COLOURS.c)], "%", 10),
    ttft: chart($("chart-ttft"), [series("p50", COLOURS.b), series("p90", COLOURS.a), series("p99", COLOURS.c),
      setting("SLA", COLOURS.sla)], "s"),
    tpot: chart($("chart-tpot"), [series("p50", COLOURS.b), series("p90", COLOURS.a), series("p99", COLOURS.c),
      setting("SLA", COLOURS.sla)], "ms"),
  };
  $("links").replaceChildren();
  state.linkCharts = {};
  for (const link of meta.links) {
    const card = document.createElement("figure");
    card.dataset.link = link.name;
    card.innerHTML = `<figcaption></figcaption><div class="chart"></div><p class="link-facts"></p>` +
      `<div class="queue" title="queue held / queue limit"><div></div></div>`;
    card.querySelector("figcaption").textContent =
      `${link.name} (${link.kind === "wan" ? "WAN" : "RDMA"}): throughput against its rate, Gbit/s`;
    $("links").append(card);
    state.linkCharts[link.name] = chart(card.querySelector(".chart"), [series("throughput", COLOURS.a),
      setting("rate", COLOURS.rate)], "Gbit/s");
  }
  state.rows = [];
}

const column = (pick) => state.rows.map(pick);
const gbit = (v) => (v == null ? null : v / 1e9);

function redraw() {
  const t = column((s) => s.t);
  const { sla } = state.meta;
  const draw = (plot, ...cols) => {
    plot.setData([t, ...cols]);
    // A series with nothing to draw (no request finished in the window, no relay) says so in the legend.
    plot.root.querySelectorAll(".u-legend .u-series").forEach((row, i) => {
      row.classList.toggle("empty", !cols[i].some((v) => v != null));
    });
    plot.root.parentElement.dataset.points = String(t.length);
    plot.root.parentElement.dataset.last = JSON.stringify(cols.map((c) => c[c.length - 1] ?? null));
  };
  const q = (field, p, scale = 1) => column((s) => (s[field] ? s[field][p] * scale : null));
  draw(state.charts.rps, column((s) => s.goodput ?? null), column((s) => s.rps ?? null),
    column((s) => s.errors_ps ?? null));
  draw(state.charts.relay, column((s) => (s.rld_share == null ? null : s.rld_share * 100)));
  draw(state.charts.ttft, q("ttft", "p50"), q("ttft", "p90"), q("ttft", "p99"), t.map(() => sla.ttft_s));
  draw(state.charts.tpot, q("tpot", "p50", 1e3), q("tpot", "p90", 1e3), q("tpot", "p99", 1e3),
    t.map(() => sla.tpot_s * 1e3));
  for (const [name, plot] of Object.entries(state.linkCharts)) {
    const link = (s) => s.links[name] || {};
    draw(plot, column((s) => gbit(link(s).bps)), column((s) => gbit(link(s).rate_bps)));
  }
}

function tile(id, text, good) {
  const el = $(id);
  el.querySelector("b").textContent = text;
  el.classList.toggle("good", good === true);
  el.classList.toggle("bad", good === false);
}

function fill(table, rows, empty) {
  const body = $(table).querySelector("tbody");
  const cell = (text) => Object.assign(document.createElement("td"), { textContent: text });
  if (rows.length === 0) {
    const note = Object.assign(cell(empty), { colSpan: $(table).querySelectorAll("th").length, className: "empty" });
    body.replaceChildren(Object.assign(document.createElement("tr")).appendChild(note).parentElement);
    return;
  }
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    tr.append(...cells.map(cell));
    return tr;
  }));
}

function showLatest(now) {
  const last = state.rows[state.rows.length - 1] || {};
  const { sla } = state.meta;
  tile("tile-rps", num(last.rps));
  tile("tile-goodput", num(last.goodput), last.sla_met == null ? undefined : last.sla_met >= 0.9);
  $("tile-goodput").querySelector("span").textContent = `within SLA / s (${percent(last.sla_met)})`;
  tile("tile-ttft", seconds(last.ttft && last.ttft.p99), last.ttft ? last.ttft.p99 <= sla.ttft_s : undefined);
  tile("tile-tpot", seconds(last.tpot && last.tpot.p99), last.tpot ? last.tpot.p99 <= sla.tpot_s : undefined);
  tile("tile-relay", percent(last.rld_share));
  tile("tile-inflight", num(last.inflight));
  tile("tile-errors", num(last.errors_ps), last.errors_ps == null ? undefined : last.errors_ps === 0);
  const degraded = Object.values(now.degraded).reduce((a, b) => a + b, 0);
  tile("tile-degraded", String(degraded), degraded === 0);
  for (const card of $("links").children) {
    const figures = (last.links || {})[card.dataset.link] || {};
    const facts = card.querySelector(".link-facts");
    facts.classList.toggle("link-error", Boolean(figures.error));
    facts.textContent = figures.error ? `not answering: ${figures.error}` :
      `now ${rate(figures.bps)} of ${rate(figures.rate_bps)} · queue ${mib(figures.queue_bytes)} of ` +
      `${mib(figures.queue_limit_bytes)} · backlog ${seconds(figures.backlog_s)} · ` +
      `delay ${seconds(figures.delay_s)} · loss ${percent(figures.loss)}` +
      (figures.partition ? ` · PARTITIONED (${figures.partition})` : "");
    const held = figures.queue_limit_bytes ? figures.queue_bytes / figures.queue_limit_bytes : 0;
    card.querySelector(".queue div").style.width = `${Math.min(100, held * 100)}%`;
  }
  const windowed = last.pipelines || {};
  fill("pipelines", Object.entries(now.pipelines).map(([name, total]) => [name, num(windowed[name] ?? 0), num(total)]),
    "no request finished yet");
  fill("degraded", Object.entries(now.degraded).map(([kind, total]) => [kind, num(total)]), "none");
  fill("processes", state.meta.keepers ? now.processes.map((p) => [p.name, p.state ?? "starting",
    p.restarts == null ? "–" : String(p.restarts)]) : [], "no keepers: compose restarts its containers");
}

function addEvents(events) {
  for (const event of events) {
    const li = document.createElement("li");
    const when = Object.assign(document.createElement("time"),
      { textContent: new Date(event.t * 1000).toLocaleTimeString() });
    li.append(when, event.text);
    $("events").prepend(li);
  }
  while ($("events").children.length > state.meta.events) $("events").lastChild.remove();
}

async function poll() {
  try {
    const asked = state.since;
    const reply = await fetch(`/dashboard/data?since=${asked}`, { cache: "no-store" });
    if (!reply.ok) throw new Error(`HTTP ${reply.status}`);
    const data = await reply.json();
    if (data.meta.booted !== state.booted || data.now.seq < asked) {  // a new router: start over
      state.booted = data.meta.booted;
      state.since = 0;
      $("events").replaceChildren();
      setup(data.meta);
      if (asked !== 0) return;  // this answer skipped the new router's first samples: ask again for all
    }
    for (const sample of data.samples) {  // a pause in sampling (nobody watched) is a gap, not a line across it
      const previous = state.rows[state.rows.length - 1];
      if (previous && sample.t - previous.t > 2.5 * data.meta.tick_s) {
        state.rows.push({ t: previous.t + data.meta.tick_s, links: {} });
      }
      state.rows.push(sample);
    }
    state.rows.splice(0, Math.max(0, state.rows.length - data.meta.history));
    state.since = data.now.seq;
    addEvents(data.events);
    redraw();
    showLatest(data.now);
    $("status").textContent = `live · updated ${new Date().toLocaleTimeString()}`;
    $("status").className = "status live";
  } catch (err) {
    $("status").textContent = `no answer from the router (${err.message}); retrying`;
    $("status").className = "status stale";
  } finally {
    setTimeout(poll, (state.meta ? state.meta.tick_s : 1) * 1000);
  }
}

window.addEventListener("resize", () => {
  for (const plot of [...Object.values(state.charts), ...Object.values(state.linkCharts)]) {
    plot.setSize({ width: Math.max(300, plot.root.parentElement.clientWidth), height: 220 });
  }
});
poll();
