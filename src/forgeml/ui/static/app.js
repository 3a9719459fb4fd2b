// forgeml's pages: charts from <script type="application/json"> blocks, a job's live log.
// No inline script runs on a page (Content-Security-Policy: script-src 'self').
"use strict";

function readJson(id) {
  const block = document.getElementById(id);
  return block ? JSON.parse(block.textContent) : null;
}

// a color a series: the first 8 as before, then hues a golden angle apart (100 runs compared)
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
function seriesColor(i) {
  return i < COLORS.length ? COLORS[i] : `hsl(${Math.round((i * 137.508) % 360)}, 70%, 42%)`;
}

// {label: [[steps], [values]]} -> uPlot's data: the steps of all series once, sorted, and
// each series' values at them (null where it logged none); one pass a series, no Map of it
function alignSeries(series, labels) {
  const xs = [...new Set(labels.flatMap((l) => series[l][0]))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const data = [xs];
  for (const label of labels) {
    const [steps, values] = series[label];
    const column = new Array(xs.length).fill(null);
    for (let i = 0; i < steps.length; i++) column[index.get(steps[i])] = values[i];
    data.push(column);
  }
  return data;
}

// {metric: {label: [[steps], [values]]}} -> one uPlot chart per metric, its series aligned
// on the steps; a chart of many series keeps its legend still (no 100 values a mouse move)
function drawCurves(target) {
  const byMetric = readJson("curves-data");
  if (!byMetric || typeof uPlot === "undefined") return;
  const width = Number(target.dataset.width || 520);
  for (const [metric, series] of Object.entries(byMetric)) {
    const labels = Object.keys(series);
    const figure = document.createElement("figure");
    figure.className = "curve";
    figure.dataset.metric = metric;
    const caption = document.createElement("figcaption");
    caption.textContent = metric;
    figure.appendChild(caption);
    target.appendChild(figure);
    new uPlot({
      width, height: labels.length > 8 ? 360 : 240,
      scales: { x: { time: false } },
      legend: { live: labels.length <= 8 },
      // marked once drawn, for whoever waits on the chart (the UI benchmark, the tests)
      hooks: { draw: [() => { figure.dataset.drawn = "1"; }] },
      series: [{ label: "step" }, ...labels.map((label, i) => ({
        label, stroke: seriesColor(i), spanGaps: true,
      }))],
    }, alignSeries(series, labels), figure);
  }
}

// {x: [window end, epoch s], series: {feature: [score | null]}} -> one uPlot chart, with
// the threshold (a score of 1) drawn as its own series
function drawDrift(target) {
  const chart = readJson("drift-data");
  if (!chart || typeof uPlot === "undefined") return;
  const colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f"];
  const names = Object.keys(chart.series);
  const data = [chart.x, ...names.map((n) => chart.series[n]), chart.x.map(() => 1)];
  new uPlot({
    width: 860, height: 300,
    series: [{ label: "window end" }, ...names.map((label, i) => ({
      label, stroke: colors[i % colors.length], spanGaps: true, points: { show: true },
    })), { label: "threshold", stroke: "#000000", dash: [6, 4] }],
  }, data, target);
}

// {x: [window end, epoch s], series: {name: [value | null]}, reference, reference_label}
// -> one uPlot chart of accuracy by window, the validation's value dashed across it
function drawAccuracy(target) {
  const chart = readJson("accuracy-data");
  if (!chart || typeof uPlot === "undefined") return;
  const colors = ["#2563eb", "#ea580c"];
  const names = Object.keys(chart.series);
  const data = [chart.x, ...names.map((n) => chart.series[n])];
  const series = [{ label: "window end" }, ...names.map((label, i) => ({
    label, stroke: colors[i % colors.length], spanGaps: true, points: { show: true },
  }))];
  if (chart.reference !== null) {
    data.push(chart.x.map(() => chart.reference));
    series.push({ label: chart.reference_label, stroke: "#000000", dash: [6, 4] });
  }
  new uPlot({ width: 860, height: 240, series }, data, target);
}

function drawQueueLoad(target) {
  const queues = readJson("queue-load-data");
  if (!queues || typeof echarts === "undefined") return;
  const states = [...new Set(queues.flatMap((q) => Object.keys(q.jobs)))].sort();
  const chart = echarts.init(target, null, { renderer: "svg" });
  chart.setOption({
    animation: false,
    tooltip: {}, legend: { data: states },
    xAxis: { type: "category", data: queues.map((q) => q.name) },
    yAxis: { type: "value", minInterval: 1 },
    series: states.map((s) => ({ name: s, type: "bar", stack: "jobs", data: queues.map((q) => q.jobs[s] || 0) })),
  });
}

function drawHistograms() {
  const charts = readJson("histograms-data");
  if (!charts || typeof echarts === "undefined") return;
  for (const target of document.querySelectorAll("[data-chart=histogram]")) {
    const h = charts[target.dataset.column];
    const chart = echarts.init(target, null, { renderer: "svg" });
    chart.setOption({
      animation: false, tooltip: {},
      xAxis: { type: "category", data: h.labels, axisLabel: { rotate: 45, fontSize: 9 } },
      yAxis: { type: "value" },
      series: [{ type: "bar", data: h.counts }],
    });
  }
}

// {features: [...], values: [...]} (smallest |value| first) -> a horizontal bar chart
function drawAttributions(target) {
  const found = JSON.parse(target.dataset.attributions || "null");
  if (!found || typeof echarts === "undefined") return;
  target.style.height = `${60 + 22 * found.features.length}px`;
  const chart = echarts.init(target, null, { renderer: "svg" });
  chart.setOption({
    animation: false, tooltip: {},
    grid: { left: 140 },
    xAxis: { type: "value", name: "attribution" },
    yAxis: { type: "category", data: found.features },
    series: [{
      type: "bar",
      data: found.values.map((v) => ({ value: v, itemStyle: { color: v >= 0 ? "#dc2626" : "#2563eb" } })),
    }],
  });
}

// the API's Server-Sent Events route: `log` events append, one `end` event names the state
function followLog(pre) {
  const source = new EventSource(pre.dataset.logUrl);
  source.addEventListener("log", (event) => {
    pre.textContent += event.data + "\n";
  });
  source.addEventListener("end", (event) => {
    const ended = JSON.parse(event.data);
    document.getElementById("job-log-end").textContent = `Ended ${ended.state} after ${ended.attempts} attempt(s).`;
    source.close();
  });
  source.onerror = () => source.close();
}

document.addEventListener("DOMContentLoaded", () => {
  const curves = document.querySelector("[data-chart=curves]");
  if (curves) drawCurves(curves);
  const load = document.querySelector("[data-chart=queue-load]");
  if (load) drawQueueLoad(load);
  const drift = document.querySelector("[data-chart=drift]");
  if (drift) drawDrift(drift);
  const accuracy = document.querySelector("[data-chart=accuracy]");
  if (accuracy) drawAccuracy(accuracy);
  drawHistograms();
  const log = document.getElementById("job-log");
  if (log) followLog(log);
});

// the explain form's answer: drawn once swapped in; a refusal (4xx) is swapped in too,
// so its sentence shows where the answer would
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.target.id === "explain-result" && event.detail.xhr.status >= 400) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
document.addEventListener("htmx:afterSettle", () => {
  const chart = document.querySelector("[data-chart=attributions]");
  if (chart && !chart.dataset.drawn) {
    chart.dataset.drawn = "1";
    drawAttributions(chart);
  }
});
