// chart.js: corral's charts on uPlot, shared by the static reports (sim,
// kraken) and the live dashboard of `corral up`. It needs uPlot
// (uPlot.iife.min.js) loaded first and defines window.corralChart:
//
//   corralChart.mount(el, spec, data) -> handle
//       draws a chart into el (its width follows el's); spec as written by
//       Go's chart.Encode: {title, yLabel, unit, format: "si"|"percent",
//       time: "seconds"|"clock", timeLabel, series: [names], view: [min,
//       max] or null, height}; data [[t...], [y...] per series].
//   handle.setData(data), handle.append(t, [y per series], maxPoints)
//       replace the data, or add one point (live pages: a point per SSE
//       message), keeping at most maxPoints (default 3600) points.
//   corralChart.si(v, unit), corralChart.siTicks(splits, incr, unit),
//   corralChart.percent(v), corralChart.seconds(v)
//       the number formats of every chart: one SI prefix and one count of
//       decimals per axis ("0", "20 M", "40 M"; "1.2 k/s"), values with
//       three significant digits ("121 M", "1.23 k/s", "38.2 %").
//
// Every <figure class="corral-chart"> holding a <script
// type="application/json"> ({spec, data}) is mounted when the page loads.
// A mounted figure carries the labels drawn on its canvas in
// data-ticks-x and data-ticks-y ("|"-separated), for tests and for readers
// that cannot see the canvas.
(function () {
  "use strict";

  const PREFIXES = [
    [1e12, "T"],
    [1e9, "G"],
    [1e6, "M"],
    [1e3, "k"],
  ];
  // Okabe-Ito colours (told apart with most colour vision deficiencies),
  // each series also gets its own dash pattern: 7 colours x 4 dashes.
  const COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"];
  const DASHES = [[], [10, 4], [2, 3], [12, 4, 2, 4]];
  const SECOND_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400];

  function prefixFor(mag) {
    for (const [f, p] of PREFIXES) {
      if (mag >= f) return [f, p];
    }
    return [1, ""];
  }

  // join writes a number, its SI prefix and its unit: "110 M", "1.2 k/s",
  // "500/s", "12 s".
  function join(num, prefix, unit) {
    if (prefix === "" && unit === "") return num;
    if (prefix === "" && unit.startsWith("/")) return num + unit;
    return num + " " + prefix + unit;
  }

  // decimals is the number of decimals that shows every multiple of step.
  function decimals(step) {
    if (!(step > 0) || !isFinite(step)) return 0;
    let d = 0;
    while (d < 6) {
      const s = step * Math.pow(10, d);
      if (Math.abs(s - Math.round(s)) <= 1e-6 * Math.max(1, s)) break;
      d++;
    }
    return d;
  }

  // si formats one value with three significant digits.
  function si(v, unit) {
    unit = unit || "";
    if (v == null || !isFinite(v)) return "-";
    if (v === 0) return join("0", "", unit);
    const [f, p] = prefixFor(Math.abs(v));
    const x = v / f;
    const a = Math.abs(x);
    const num = a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : a >= 1 ? x.toFixed(2) : String(Number(x.toPrecision(3)));
    return join(num, p, unit);
  }

  // siTicks formats the tick values of one axis: one prefix (from the
  // largest tick) and one count of decimals (from the increment) for all.
  function siTicks(splits, incr, unit) {
    unit = unit || "";
    const finite = splits.filter((v) => v != null && isFinite(v));
    const mag = finite.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const [f, p] = prefixFor(mag);
    if (!(incr > 0) && finite.length > 1) incr = Math.abs(finite[1] - finite[0]);
    const d = decimals(incr / f);
    return splits.map((v) => (v == null ? null : v === 0 ? "0" : join((v / f).toFixed(d), p, unit)));
  }

  function percent(v) {
    if (v == null || !isFinite(v)) return "-";
    const x = 100 * v;
    const a = Math.abs(x);
    const num = x === 0 ? "0" : a >= 10 ? x.toFixed(1) : a >= 1 ? x.toFixed(2) : String(Number(x.toPrecision(2)));
    return num + " %";
  }

  function percentTicks(splits, incr) {
    const d = decimals(100 * incr);
    return splits.map((v) => (v == null ? null : v === 0 ? "0" : (100 * v).toFixed(d) + " %"));
  }

  // seconds formats an event time (seconds from the start of the run).
  function seconds(v) {
    if (v == null || !isFinite(v)) return "-";
    if (Math.abs(v) < 120) return (Number.isInteger(v) ? String(v) : v.toFixed(1)) + " s";
    const s = Math.round(v);
    const m = Math.trunc(s / 60);
    return m + " min " + Math.abs(s % 60) + " s";
  }

  function secondTicks(splits, incr) {
    if (incr >= 3600 && incr % 3600 === 0) return splits.map((v) => (v == null ? null : v / 3600 + " h"));
    if (incr >= 60 && incr % 60 === 0) return splits.map((v) => (v == null ? null : v / 60 + " min"));
    const d = decimals(incr);
    return splits.map((v) => (v == null ? null : v.toFixed(d) + " s"));
  }

  // fitAxis sizes a vertical axis to its widest label.
  function fitAxis(u, values, axisIdx, cycleNum) {
    const axis = u.axes[axisIdx];
    if (cycleNum > 1 && axis._size) return axis._size;
    let size = axis.ticks.size + axis.gap;
    let widest = 0;
    u.ctx.font = axis.font[0];
    for (const v of values || []) {
      if (v != null) widest = Math.max(widest, u.ctx.measureText(String(v)).width);
    }
    size += widest / (window.devicePixelRatio || 1);
    return Math.ceil(size + 4);
  }

  function record(el, key, labels) {
    el.dataset[key] = labels.filter((v) => v != null).join("|");
    return labels;
  }

  function options(el, spec, width) {
    const unit = spec.unit || "";
    const pct = spec.format === "percent";
    const clock = spec.time === "clock";
    const fmt = pct ? (v) => percent(v) : (v) => si(v, unit);
    const series = [{ label: spec.timeLabel || (clock ? "time" : "event time"), value: clock ? undefined : (u, v) => seconds(v) }];
    (spec.series || []).forEach((name, i) => {
      series.push({
        label: name,
        stroke: COLOURS[i % COLOURS.length],
        dash: DASHES[i % DASHES.length],
        width: 1.75,
        points: { show: false },
        value: (u, v) => fmt(v),
      });
    });
    const xAxis = {
      label: spec.timeLabel || (clock ? "time" : "event time"),
      space: clock ? 90 : 60,
      size: 36,
    };
    if (clock) {
      const inner = uPlot.fmtDate("{HH}:{mm}:{ss}");
      xAxis.values = (u, splits) => record(el, "ticksX", splits.map((v) => (v == null ? null : inner(new Date(v * 1000)))));
    } else {
      xAxis.incrs = SECOND_INCRS;
      xAxis.values = (u, splits, axisIdx, space, incr) => record(el, "ticksX", secondTicks(splits, incr));
    }
    const yAxis = {
      label: spec.yLabel || "",
      size: fitAxis,
      values: (u, splits, axisIdx, space, incr) => record(el, "ticksY", pct ? percentTicks(splits, incr) : siTicks(splits, incr, unit)),
    };
    return {
      title: spec.title || "",
      width: width,
      height: spec.height || 280,
      series: series,
      axes: [xAxis, yAxis],
      scales: {
        x: { time: clock },
        y: {
          range: (u, lo, hi) => {
            if (lo == null || hi == null) return [0, 1];
            const [a, b] = uPlot.rangeNum(lo, hi, 0.1, true);
            return [lo >= 0 ? 0 : a, hi === lo && hi === 0 ? 1 : b];
          },
        },
      },
      cursor: { drag: { x: true, y: false, setScale: true } },
      legend: { show: true, live: true },
    };
  }

  function mount(el, spec, data) {
    spec = spec || {};
    const n = (spec.series || []).length + 1;
    data = data && data.length === n ? data : Array.from({ length: n }, () => []);
    el.classList.add("corral-chart-mounted");
    const holder = document.createElement("div");
    el.insertBefore(holder, el.querySelector("figcaption"));
    const width = () => Math.max(200, Math.floor(el.clientWidth || 600));
    const u = new uPlot(options(el, spec, width()), data, holder);
    const view = spec.view;
    if (view && view.length === 2 && data[0].length > 0) u.setScale("x", { min: view[0], max: view[1] });
    if (typeof ResizeObserver === "function") {
      new ResizeObserver(() => {
        const w = width();
        if (w !== u.width) u.setSize({ width: w, height: u.height });
      }).observe(el);
    }
    return {
      plot: u,
      setData(d) {
        data = d;
        u.setData(d);
      },
      append(t, ys, maxPoints) {
        const max = maxPoints || 3600;
        data[0].push(t);
        for (let i = 1; i < n; i++) data[i].push(ys[i - 1] == null ? null : ys[i - 1]);
        if (data[0].length > max) for (const col of data) col.splice(0, col.length - max);
        u.setData(data);
      },
    };
  }

  function mountAll() {
    for (const el of document.querySelectorAll("figure.corral-chart")) {
      if (el.classList.contains("corral-chart-mounted")) continue;
      const src = el.querySelector('script[type="application/json"]');
      if (!src) continue;
      const doc = JSON.parse(src.textContent);
      el.corralChart = mount(el, doc.spec, doc.data);
    }
  }

  window.corralChart = { mount, mountAll, si, siTicks, percent, seconds };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
})();
