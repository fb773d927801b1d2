// msprobe-inspect report: the page's script (embedded into the report after Chart.js; plain ES2017, no modules).
// It reads the data msprobe-inspect wrote into <script type="application/json"> elements (tools/inspect/report_page.cpp:
// "report-data" for the dump, "folder-N" per step/rank folder, parsed when first shown) and draws it with Chart.js.
// Chart.js does the drawing; this file only arranges the data, the tables and the controls.
(function () {
  "use strict";
  const note = window.reportNote || ((t) => { throw new Error(t); });
  const $ = (id) => document.getElementById(id);
  // Where the first drawing spends its time (written on #status, for bench/bench_report.py).
  const phases = [];
  const phase = (name) => { if (!phases.done) phases.push(name + " " + performance.now().toFixed(0)); };
  phase("script");
  const data = JSON.parse($("report-data").textContent);
  phase("data");
  const folders = data.folders;
  const COLORS = { norm: "#1f77b4", max: "#2ca02c", min: "#9467bd", nan: "#d62728", inf: "#ff7f0e", diff: "#8c564b",
                   mark: "#d62728", divergence: "#e377c2", selected: "#555" };
  const FLAG_NAN = 1, FLAG_INF = 2, FLAG_INPUT = 4;

  // ---- Data -------------------------------------------------------------------------------------------------------
  const num = (v) => (v === "NaN" ? NaN : v === "Inf" ? Infinity : v === "-Inf" ? -Infinity : v);
  const cache = new Map();
  function folder(i) {
    let f = cache.get(i);
    if (f) return f;
    const raw = JSON.parse($("folder-" + i).textContent);
    f = { index: i, info: folders[i], n: raw.x.length, x: raw.x, name: raw.name, norm: raw.norm.map(num),
          max: raw.max.map(num), min: raw.min.map(num), flags: raw.flags, stack: raw.stack, tensors: raw.tensors,
          rel: raw.rel ? raw.rel.map(num) : null, where: raw.where || null, matched: raw.matched || null, byName: null };
    cache.set(i, f);
    return f;
  }
  const kernelName = (f, pos) => data.stems[f.name[2 * pos]] + data.tails[f.name[2 * pos + 1]];
  // A kernel's stack: its frames (each on one line, as msprobe-inspect prints them) and which is the innermost frame of
  // the user's own code (format/stack_text.h), the one a table cell shows.
  const stackOf = (f, pos) => (f.stack[pos] < 0 ? null
    : { frames: data.stacks[f.stack[pos]].map((id) => data.frames[id]), user: data.stack_user[f.stack[pos]] });
  function findKernel(f, name) {
    if (!f.byName) {
      f.byName = new Map();
      for (let p = 0; p < f.n; p++) f.byName.set(kernelName(f, p), p);
    }
    const p = f.byName.get(name);
    return p === undefined ? -1 : p;
  }
  const folderOf = (rank, step) => folders.findIndex((f) => f.rank === rank && f.step === step);

  // ---- Text -------------------------------------------------------------------------------------------------------
  // Exact: as the dump holds it (shortest round trip); short: for tooltips and labels.
  function exact(v) {
    if (v === null || v === undefined) return "null";
    if (typeof v === "boolean") return String(v);
    if (Number.isNaN(v)) return "NaN";
    if (v === Infinity) return "Infinity";
    if (v === -Infinity) return "-Infinity";
    return String(v);
  }
  // An LLM's kernel names run to 200 characters (their scopes): where the chart draws one it is shortened to its op
  // type and its end (the call count and direction); the tooltip shows it whole, in lines of at most NAME_LINE.
  const opType = (name) => (name.indexOf(".") < 0 ? name : name.slice(0, name.indexOf(".")));
  const SHORT_NAME = 40, NAME_LINE = 60;
  function shortName(name) {
    if (name.length <= SHORT_NAME) return name;
    const op = opType(name);
    return op + ".\u2026" + name.slice(-Math.max(12, SHORT_NAME - op.length - 2));
  }
  function nameLines(name) {
    const lines = [];
    let rest = name;
    while (rest.length > NAME_LINE) {
      const cut = Math.max(rest.lastIndexOf("_", NAME_LINE - 1), rest.lastIndexOf(".", NAME_LINE - 1));
      const at = cut > NAME_LINE / 2 ? cut + 1 : NAME_LINE;  // after a separator, else at the width
      lines.push(rest.slice(0, at));
      rest = rest.slice(at);
    }
    lines.push(rest);
    return lines;
  }
  function short(v) {
    if (typeof v !== "number" || !Number.isFinite(v)) return exact(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }
  const bad = (v) => typeof v === "number" && !Number.isFinite(v);
  // "outputs hold NaN and Inf; inputs hold NaN/Inf": one phrase for a kernel's flags (two labels once ran together).
  function nonFiniteText(fl) {
    const outs = [fl & FLAG_NAN ? "NaN" : "", fl & FLAG_INF ? "Inf" : ""].filter((s) => s).join(" and ");
    return [outs ? "outputs hold " + outs : "", fl & FLAG_INPUT ? "inputs hold NaN/Inf" : ""].filter((s) => s).join("; ");
  }
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  const folderLabel = (i) => folders[i].label;
  function kernelLink(fi, pos, text) {
    return el("a", { class: "kernel kernel-name", "data-folder": fi, "data-pos": pos,
                     onclick: () => showKernel(fi, pos, true) }, text || kernelName(folder(fi), pos));
  }
  function stackList(stack) {
    if (!stack) return el("p", { class: "hint", text: "stack: not recorded (stack.json holds none for this kernel)" });
    if (!stack.frames.length) return el("p", { class: "hint", text: "stack: empty" });
    return el("ol", { class: "stack" },
              ...stack.frames.map((f, i) => el("li", i === stack.user ? { class: "user", text: f } : { text: f })));
  }
  const userFrame = (stack) => (stack.user === null || stack.user < 0 ? stack.frames[0] : stack.frames[stack.user]) || "";
  function tensorTable(rows, id) {
    const t = el("table", id ? { id } : {});
    t.append(el("tr", {}, ...["tensor", "dtype", "shape", "Max", "Min", "Mean", "Norm"].map((h) => el("th", { text: h }))));
    for (const r of rows) {
      const tr = el("tr", { "data-row": r[0] }, el("td", { text: r[0] }), el("td", { text: r[1] }), el("td", { text: r[2] }));
      ["Max", "Min", "Mean", "Norm"].forEach((s, i) => {
        const v = num(r[3 + i]);
        tr.append(el("td", { class: "num stat-" + s + (bad(v) ? " bad" : ""), text: exact(v) }));
      });
      t.append(tr);
    }
    return t;
  }
  function metaList(dl, items) {
    dl.textContent = "";
    for (const [k, v] of items) dl.append(el("dt", { text: k }), el("dd", { text: v }));
  }

  // ---- Views: the kernels of one rank, for one step or all of them, in launch order --------------------------------
  // x is launch_index; when a later step's launch_index does not go on from the step before, its kernels are shifted
  // to follow it.
  function makeView(rank, step, filter, op) {
    const idx = folders.map((f, i) => i).filter((i) => folders[i].rank === rank && (step === "all" || folders[i].step === step));
    let n = 0;
    for (const i of idx) n += folder(i).n;
    const v = { rank, step, folders: idx, fi: new Int32Array(n), pos: new Int32Array(n), x: new Float64Array(n), n: 0 };
    let offset = 0, last = -Infinity;
    for (const i of idx) {
      const f = folder(i);
      if (f.n && f.x[0] + offset <= last) offset = last + 1 - f.x[0];
      for (let p = 0; p < f.n; p++) {
        if ((filter || op) && !named(kernelName(f, p), filter, op)) continue;
        v.fi[v.n] = i;
        v.pos[v.n] = p;
        v.x[v.n] = f.x[p] + offset;
        v.n++;
      }
      if (f.n) last = Math.max(last, f.x[f.n - 1] + offset);
    }
    return v;
  }
  const named = (name, filter, op) => (!op || opType(name) === op) && (!filter || filter.test(name));
  function viewIndexOf(v, fi, pos) {
    for (let k = 0; k < v.n; k++) if (v.fi[k] === fi && v.pos[k] === pos) return k;
    return -1;
  }

  // ---- Chart.js helpers ---------------------------------------------------------------------------------------------
  // Vertical lines at given x values (the first NaN, the first divergence, the kernel shown).
  const markLines = {
    id: "markLines",
    afterDatasetsDraw(chart, args, opts) {
      const { ctx, chartArea: a, scales } = chart;
      for (const m of opts.lines || []) {
        const px = scales.x.getPixelForValue(m.x);
        if (!(px >= a.left && px <= a.right)) continue;
        ctx.save();
        ctx.strokeStyle = m.color;
        ctx.lineWidth = m.width || 1.5;
        ctx.setLineDash(m.dash || []);
        ctx.beginPath();
        ctx.moveTo(px, a.top);
        ctx.lineTo(px, a.bottom);
        ctx.stroke();
        if (m.label) {
          ctx.fillStyle = m.color;
          ctx.font = "bold 11px sans-serif";
          const w = ctx.measureText(m.label).width;
          ctx.fillText(m.label, px + 4 + w < a.right ? px + 4 : px - 4 - w, a.top + 28 + (m.row || 0) * 13);
        }
        ctx.restore();
      }
    },
  };
  // Drag across a chart to zoom into that range of launch order (the whole-range button goes back). Listens on the
  // canvas once; the chart on it is looked up at each drag (a redraw makes a new one).
  function dragZoom(canvas) {
    let from = null;
    canvas.addEventListener("mousedown", (e) => { from = e.offsetX; });
    canvas.addEventListener("mouseup", (e) => {
      const chart = Chart.getChart(canvas);
      if (from === null || !chart) return;
      const a = Math.min(from, e.offsetX), b = Math.max(from, e.offsetX);
      from = null;
      if (b - a < 6) return;
      const x = chart.scales.x;
      chart.options.scales.x.min = x.getValueForPixel(a);
      chart.options.scales.x.max = x.getValueForPixel(b);
      chart.update("none");
    });
  }
  function unzoom(chart) {
    if (!chart) return;
    delete chart.options.scales.x.min;
    delete chart.options.scales.x.max;
    chart.update("none");
  }
  function point(arr, x, v, k, log) {
    if (v === null || !Number.isFinite(v)) return;
    const y = log ? Math.abs(v) : v;
    if (log && y <= 0) return;
    arr.push({ x, y, k });
  }
  // A line over kernels. `gaps` (optional): gaps[k] counts the kernels before view index k whose outputs hold NaN/Inf;
  // a segment of the line that passes over one of them (it has no value to draw there) is not drawn: the line stops
  // where the NaN/Inf region begins and starts again after it (the markers show the region).
  function lineSet(label, data, color, gaps) {
    const ds = { label, data, borderColor: color, backgroundColor: color, borderWidth: 1, pointRadius: 0,
                 pointHoverRadius: 3, pointHitRadius: 3, yAxisID: "y" };
    if (gaps) {
      // ds.data is the decimated list while Chart.js draws (its decimation swaps it in), as the indexes are.
      const crosses = (ctx) => {
        const a = ds.data[ctx.p0DataIndex], b = ds.data[ctx.p1DataIndex];
        return a && b && gaps[b.k] - gaps[a.k + 1] > 0;
      };
      ds.segment = { borderColor: (ctx) => (crosses(ctx) ? "transparent" : undefined) };
    }
    return ds;
  }
  function markerSet(label, data, color, style) {
    return { type: "scatter", label, data, borderColor: color, backgroundColor: color, pointStyle: style,
             pointRadius: 6, pointHoverRadius: 8, yAxisID: "flags" };
  }
  // A log axis is labelled at powers of ten only: 1e-5, 0.001, 1, 1000, 1e+6.
  function logTick(value) {
    const e = Math.round(Math.log10(value));
    if (Math.abs(Math.log10(value) - e) > 1e-9) return "";
    return e < -3 || e > 4 ? "1e" + (e > 0 ? "+" : "") + e : String(Number(value.toPrecision(1)));
  }
  function baseOptions(log, yTitle, onPick, lines, tooltip) {
    return {
      animation: false, parsing: false, normalized: true, responsive: true, maintainAspectRatio: false,
      interaction: { mode: "nearest", axis: "x", intersect: false },
      scales: {
        x: { type: "linear", title: { display: true, text: "launch_index" }, ticks: { precision: 0 } },
        y: { type: log ? "logarithmic" : "linear", title: { display: true, text: yTitle },
             ticks: log ? { callback: logTick } : {} },
        flags: { type: "linear", axis: "y", display: false, min: 0, max: 1.06 },
      },
      plugins: { decimation: { enabled: true, algorithm: "min-max" }, legend: { position: "top" },
                 tooltip: { callbacks: tooltip }, markLines: { lines } },
      onClick: (evt, elements, chart) => {
        const hit = chart.getElementsAtEventForMode(evt, "nearest", { axis: "x", intersect: false }, true)[0];
        if (hit) onPick(chart.data.datasets[hit.datasetIndex].data[hit.index].k);
      },
    };
  }
  function seriesData(v, log) {
    const sets = { norm: [], max: [], min: [], nan: [], inf: [], gaps: new Int32Array(v.n + 1) };
    for (let k = 0; k < v.n; k++) {
      const f = cache.get(v.fi[k]), p = v.pos[k], x = v.x[k];
      sets.gaps[k + 1] = sets.gaps[k] + (f.flags[p] & (FLAG_NAN | FLAG_INF) ? 1 : 0);
      point(sets.norm, x, f.norm[p], k, log);
      point(sets.max, x, f.max[p], k, log);
      point(sets.min, x, f.min[p], k, log);
      const fl = f.flags[p];
      if (fl & FLAG_NAN) sets.nan.push({ x, y: 1, k });
      if (fl & FLAG_INF) sets.inf.push({ x, y: 0.94, k });
    }
    return sets;
  }
  function kernelTooltip(v) {
    return {
      title: (items) => (items.length ? nameLines(kernelName(folder(v.fi[items[0].raw.k]), v.pos[items[0].raw.k])) : ""),
      label: (item) => {
        const k = item.raw.k, f = folder(v.fi[k]), p = v.pos[k];
        const lines = [`${f.info.label}, launch_index ${f.x[p]}`,
                       `Norm ${short(f.norm[p])}   Max ${short(f.max[p])}   Min ${short(f.min[p])}`];
        if (f.flags[p] & (FLAG_NAN | FLAG_INF))
          lines.push(nonFiniteText(f.flags[p]));
        if (f.rel && f.rel[p] !== null) lines.push(`relative difference ${short(f.rel[p])} (${f.where[p]})`);
        return lines;
      },
    };
  }
  function chartOn(canvas, config) {
    const old = Chart.getChart(canvas);
    if (old) old.destroy();
    const chart = new Chart(canvas, config);
    if (!canvas.dataset.zoom) {
      canvas.dataset.zoom = "1";
      dragZoom(canvas);
    }
    return chart;
  }

  // ---- State ------------------------------------------------------------------------------------------------------
  const state = { view: null, selected: null, seriesChart: null, diffChart: null, drawnPoints: 0 };
  const markOf = (m) => (m && m.folder !== null ? { fi: m.folder, pos: m.pos } : null);
  function marksIn(v) {
    const lines = [];
    const add = (m, color, label, row) => {
      const at = markOf(m);
      if (!at) return;
      const k = viewIndexOf(v, at.fi, at.pos);
      if (k >= 0) lines.push({ x: v.x[k], color, label, row });
    };
    add(data.first_nan, COLORS.mark, data.first_nan && "first NaN: " + shortName(data.first_nan.kernel), 0);
    add(data.first_diff, COLORS.divergence, data.first_diff && "first divergence: " + shortName(data.first_diff.kernel), 1);
    if (state.selected) {
      const k = viewIndexOf(v, state.selected.fi, state.selected.pos);
      if (k >= 0) lines.push({ x: v.x[k], color: COLORS.selected, dash: [4, 3], width: 1 });
    }
    return lines;
  }

  // ---- Overview ---------------------------------------------------------------------------------------------------
  const ranks = [...new Set(folders.map((f) => f.rank))];
  const stepKey = (s) => (s === null ? "-" : String(s));
  function drawOverview() {
    const steps = [...new Set(folders.map((f) => f.step))].sort((a, b) => (a === null ? -1 : b === null ? 1 : a - b));
    const t = el("table", { id: "overview-grid" });
    t.append(el("tr", {}, el("th", { text: "step" }), ...ranks.map((r) => el("th", { text: r }))));
    const origin = markOf(data.first_nan);
    for (const s of steps) {
      const tr = el("tr", {}, el("th", { text: stepKey(s) }));
      for (const r of ranks) {
        const i = folderOf(r, s);
        if (i < 0) {
          tr.append(el("td", { class: "missing", text: "" }));
          continue;
        }
        const f = folders[i];
        const cls = "cell " + (f.nan ? "nan" : f.inf ? "inf" : "clean") + (origin && origin.fi === i ? " origin" : "");
        tr.append(el("td", { class: cls, "data-folder": i, title: f.label + " (" + f.task + ")",
                             onclick: () => select(f.rank, f.step, null) },
                     el("span", { class: "kernels", text: f.kernels + " kernels" }),
                     el("span", { class: "nan" + (f.nan ? " bad" : ""), text: f.nan + " NaN" }),
                     el("span", { class: "inf" + (f.inf ? " bad" : ""), text: f.inf + " Inf" }),
                     f.first_bad ? el("span", { class: "first-bad", title: f.first_bad.kernel,
                                                text: "from launch_index " + f.first_bad.x }) : null));
      }
      t.append(tr);
    }
    $("overview-table").append(t);
  }
  function markCurrent() {
    for (const td of document.querySelectorAll("#overview-table td.cell")) {
      const i = Number(td.dataset.folder);
      td.classList.toggle("current", state.view.folders.includes(i));
    }
  }

  // ---- Series -----------------------------------------------------------------------------------------------------
  function fillSteps(rank, step) {
    const sel = $("step");
    sel.textContent = "";
    const steps = folders.filter((f) => f.rank === rank).map((f) => f.step);
    if (steps.length > 1) sel.append(el("option", { value: "all", text: "all steps" }));
    for (const s of steps) sel.append(el("option", { value: stepKey(s), text: stepKey(s) }));
    sel.value = stepKey(step);
  }
  const parseStep = (text) => (text === "all" ? "all" : text === "-" ? null : Number(text));
  function currentFilter() {
    const text = $("filter").value.trim();
    if (!text) return null;
    try {
      $("filter").classList.remove("bad");
      return new RegExp(text);
    } catch (e) {
      $("filter").classList.add("bad");
      return null;
    }
  }
  // The op types of a rank and step with their kernel counts, most kernels first (an LLM's attention and MoE kernels
  // among a few dozen types); the one chosen stays chosen while the rank or step it is in has it.
  function fillOpTypes(rank, step) {
    const sel = $("optype"), keep = sel.value, counts = new Map();
    const v = makeView(rank, step, null, null);
    for (let k = 0; k < v.n; k++) {
      const op = opType(kernelName(folder(v.fi[k]), v.pos[k]));
      counts.set(op, (counts.get(op) || 0) + 1);
    }
    sel.textContent = "";
    sel.append(el("option", { value: "", text: `all op types (${counts.size})` }));
    const sorted = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    for (const [op, n] of sorted) sel.append(el("option", { value: op, text: `${op} (${n})` }));
    sel.value = counts.has(keep) ? keep : "";
  }
  // Draws a rank and step (or "all"), with `kernel` ({fi, pos}) shown when given.
  function select(rank, step, kernel) {
    $("rank").value = rank;
    fillSteps(rank, step);
    fillOpTypes(rank, step);
    state.view = makeView(rank, step, currentFilter(), $("optype").value);
    phase("view");
    if (kernel) state.selected = kernel;  // drawn with the charts' marks
    drawSeries();
    drawDiff();
    markCurrent();
    if (kernel) showPanel(kernel.fi, kernel.pos, false);
  }
  function summaryItem(cls, text) { return el("span", { class: cls, text }); }
  function drawSeries() {
    const v = state.view, log = $("log").checked;
    const sets = seriesData(v, log);
    phase("points");
    let nan = 0, inf = 0, top = null;
    for (let k = 0; k < v.n; k++) {
      const f = cache.get(v.fi[k]), p = v.pos[k];
      if (f.flags[p] & FLAG_NAN) nan++;
      if (f.flags[p] & FLAG_INF) inf++;
      const n = f.norm[p];
      if (n !== null && Number.isFinite(n) && (top === null || n > top.v)) top = { v: n, k };
    }
    const s = $("series-summary");
    s.textContent = "";
    const where = v.step === "all" ? v.rank + ", all steps" : folders[v.folders[0]].label;
    s.append(summaryItem("where", where + ": "), summaryItem("sum-kernels", String(v.n)), " kernels",
             v.n ? ` (launch_index ${v.x[0]}–${v.x[v.n - 1]})` : "", "; outputs with NaN: ",
             summaryItem("sum-nan" + (nan ? " bad" : ""), String(nan)), ", with Inf: ",
             summaryItem("sum-inf" + (inf ? " bad" : ""), String(inf)));
    if (top) {
      s.append("; largest finite Norm ", summaryItem("sum-norm", exact(top.v)), " in ");
      s.append(kernelLink(v.fi[top.k], v.pos[top.k]));
    }
    const lines = marksIn(v);
    state.seriesChart = chartOn($("series-chart"), {
      type: "line",
      data: { datasets: [lineSet("Norm", sets.norm, COLORS.norm, sets.gaps),
                         lineSet(log ? "|Max|" : "Max", sets.max, COLORS.max, sets.gaps),
                         lineSet(log ? "|Min|" : "Min", sets.min, COLORS.min, sets.gaps),
                         markerSet("NaN", sets.nan, COLORS.nan, "triangle"), markerSet("Inf", sets.inf, COLORS.inf, "rectRot")] },
      options: baseOptions(log, log ? "|value|" : "value", (k) => showKernel(v.fi[k], v.pos[k], true), lines, kernelTooltip(v)),
      plugins: [markLines],
    });
    phase("chart");
    state.drawnPoints = sets.norm.length + sets.max.length + sets.min.length + sets.nan.length + sets.inf.length;
  }
  function redrawMarks() {
    for (const chart of [state.seriesChart, state.diffChart]) {
      if (!chart) continue;
      chart.options.plugins.markLines.lines = marksIn(state.view);
      chart.update("none");
    }
  }

  // ---- One kernel -------------------------------------------------------------------------------------------------
  function showCommand(fi, name) {
    const f = folders[fi];
    let cmd = `msprobe-inspect show ${data.root} ${name}`;
    if (f.step !== null) cmd += ` --step ${f.step}`;
    if (/^rank\d*$/.test(f.rank)) cmd += ` --rank ${f.rank}`;  // the folder's name: rank3, or rank (no number)
    return cmd;
  }
  function kernelDetails(fi, pos, withDiff) {
    const f = folder(fi), name = kernelName(f, pos), box = el("div", { class: "kernel-details" });
    const fl = f.flags[pos];
    box.append(el("p", {}, el("b", { class: "kernel-name", text: name }), ` ${f.info.label}, launch_index ${f.x[pos]}`,
                  fl & (FLAG_NAN | FLAG_INF | FLAG_INPUT) ? el("span", { class: "bad", text: "; " + nonFiniteText(fl) }) : null));
    const rows = f.tensors[String(pos)];
    if (rows) {
      box.append(tensorTable(rows));
    } else {
      box.append(el("p", {}, `outputs: Norm ${exact(f.norm[pos])}, Max ${exact(f.max[pos])}, Min ${exact(f.min[pos])}. `,
                    el("span", { class: "hint", text: "The tensors of each kernel are in the report for folders of up " +
                                  "to 10,000 kernels; for this one: " }), el("code", { text: showCommand(fi, name) })));
    }
    if (withDiff && f.rel) {
      box.append(el("p", {}, f.matched[pos] ? `relative difference from ${data.against}: ${exact(f.rel[pos])}` +
                    (f.where[pos] ? ` (${f.where[pos]})` : "") : `not in ${data.against}`));
    }
    box.append(stackList(stackOf(f, pos)));
    return box;
  }
  // Shows a kernel: draws its folder first when another one is drawn, else marks it on the charts.
  function showKernel(fi, pos, scroll) {
    if (!state.view || !state.view.folders.includes(fi)) {
      select(folders[fi].rank, folders[fi].step, { fi, pos });
      if (scroll) $("kernel").scrollIntoView({ block: "nearest" });
      return;
    }
    state.selected = { fi, pos };
    redrawMarks();
    showPanel(fi, pos, scroll);
  }
  function showPanel(fi, pos, scroll) {
    const panel = $("kernel");
    panel.hidden = false;
    panel.textContent = "";
    panel.append(el("h3", { text: "Kernel" }), kernelDetails(fi, pos, true));
    panel.dataset.folder = fi;
    panel.dataset.pos = pos;
    const f = folders[fi];
    try {
      history.replaceState(null, "", `#rank=${encodeURIComponent(f.rank)}&step=${stepKey(f.step)}&kernel=` +
                           encodeURIComponent(kernelName(folder(fi), pos)));
    } catch (e) {
      // a browser that keeps file: pages from changing their address: the link just is not updated
    }
    if (scroll) panel.scrollIntoView({ block: "nearest" });
  }

  // ---- Marks: first NaN, first divergence ---------------------------------------------------------------------------
  function markBody(m, none, ids) {
    const box = el("div");
    if (!m) {
      box.append(el("p", { id: ids.none, text: none }));
      return box;
    }
    const at = markOf(m);
    const where = (m.step === null ? "" : `step${m.step}/`) + m.rank;
    box.append(el("p", {}, el("span", { id: ids.folder, text: where }), " ",
                  at ? kernelLink(at.fi, at.pos, m.kernel) : el("span", { class: "kernel-name", text: m.kernel }),
                  el("span", { id: ids.kernel, hidden: "", text: m.kernel }),
                  m.launch_index === null ? "" : ` (launch_index ${m.launch_index})`));
    box.append(el("p", { id: ids.verdict, text: m.verdict }));
    if (at) {
      const rows = folder(at.fi).tensors[String(at.pos)];
      if (rows) box.append(tensorTable(rows, ids.tensors));
    }
    box.append(el("h3", { text: "Stack" }), stackList(m.stack.length ? { frames: m.stack, user: m.stack_user } : null));
    box.append(el("h3", { text: "The route it went on by" }));
    if (!m.spread.length) {
      box.append(el("p", { class: "hint", text: "no later kernel listed" }));
    } else {
      const ol = el("ol", { id: ids.spread });
      for (const s of m.spread) {
        const w = (s.step === null ? "" : `step${s.step}/`) + s.rank;
        ol.append(el("li", {}, w + " ", s.folder === null ? el("span", { class: "kernel-name", text: s.kernel })
                                                          : kernelLink(s.folder, s.pos, s.kernel),
                     s.launch_index === null ? "" : ` (launch_index ${s.launch_index})`, s.note ? ": " + s.note : ""));
      }
      box.append(ol);
    }
    return box;
  }
  function drawFirstNan() {
    $("first-nan-body").append(markBody(data.first_nan, "No kernel's statistics hold a NaN or an infinity.",
      { none: "first-nan-none", folder: "first-nan-folder", kernel: "first-nan-kernel", verdict: "first-nan-verdict",
        tensors: "first-nan-tensors", spread: "first-nan-spread" }));
  }

  // ---- Against ------------------------------------------------------------------------------------------------------
  function drawAgainstStatic() {
    if (data.against === null) return;
    $("against").hidden = false;
    const items = [["A (this run)", data.root], ["B (the other run)", data.against],
                   ["thresholds", `--stat-rtol ${data.thresholds.stat_rtol}, --atol ${data.thresholds.atol}, --cos ${data.thresholds.cos}`],
                   ["kernels only in A / only in B", `${data.kernels_only_a} / ${data.kernels_only_b}`]];
    if (data.only_a.length) items.push(["folders only in A", data.only_a.join(", ")]);
    if (data.only_b.length) items.push(["folders only in B", data.only_b.join(", ")]);
    metaList($("against-meta"), items);
    $("first-diff-body").append(markBody(data.first_diff, "No divergence: every matched kernel passes.",
      { none: "first-diff-none", folder: "first-diff-folder", kernel: "first-diff-kernel", verdict: "first-diff-verdict",
        tensors: "first-diff-tensors", spread: "first-diff-spread" }));
    const t = $("top-diffs");
    t.append(el("tr", {}, ...["#", "folder", "kernel", "launch_index", "where", "relative difference", "A", "B", "stack"]
      .map((h) => el("th", { text: h }))));
    data.top.forEach((d, i) => {
      const f = folder(d.folder);
      const stack = stackOf(f, d.pos);
      t.append(el("tr", { "data-folder": d.folder, "data-pos": d.pos }, el("td", { text: String(i + 1) }),
                  el("td", { text: folderLabel(d.folder) }), el("td", {}, kernelLink(d.folder, d.pos)),
                  el("td", { class: "num", text: String(f.x[d.pos]) }), el("td", { class: "where", text: d.where }),
                  el("td", { class: "num rel", text: exact(num(d.rel)) }), el("td", { class: "num a", text: exact(num(d.a)) }),
                  el("td", { class: "num b", text: exact(num(d.b)) }),
                  el("td", { class: "stack" }, stack ? el("details", {}, el("summary", { text: userFrame(stack) }), stackList(stack))
                                      : "not recorded")));
    });
    if (!data.top.length) t.append(el("tr", {}, el("td", { colspan: 9, text: "every matched kernel's statistics are equal" })));
  }
  function drawDiff() {
    if (data.against === null) return;
    const v = state.view, rel = [], unmatched = [], infinite = [];
    let equal = 0, over = 0, compared = 0;
    for (let k = 0; k < v.n; k++) {
      const f = cache.get(v.fi[k]), p = v.pos[k];
      if (!f.rel) continue;
      if (!f.matched[p]) {
        unmatched.push({ x: v.x[k], y: 0.03, k });
        continue;
      }
      const r = f.rel[p];
      if (r === null) continue;
      compared++;
      if (r === 0) equal++;
      if (r > data.thresholds.stat_rtol) over++;
      if (r === Infinity) infinite.push({ x: v.x[k], y: 0.97, k });
      else if (r > 0) rel.push({ x: v.x[k], y: r, k });
    }
    const s = $("diff-summary");
    s.textContent = "";
    s.append(summaryItem("diff-compared", String(compared)), " kernels compared, ", summaryItem("diff-over", String(over)),
             ` above --stat-rtol ${data.thresholds.stat_rtol}, `, summaryItem("diff-equal", String(equal)),
             " equal in every statistic, ", summaryItem("diff-unmatched", String(unmatched.length)), " not in B");
    const x0 = v.n ? v.x[0] : 0, x1 = v.n ? v.x[v.n - 1] : 1;
    const threshold = { label: "--stat-rtol", data: [{ x: x0, y: data.thresholds.stat_rtol }, { x: x1, y: data.thresholds.stat_rtol }],
                        borderColor: "#999", borderDash: [6, 4], borderWidth: 1, pointRadius: 0, yAxisID: "y" };
    state.diffChart = chartOn($("diff-chart"), {
      type: "line",
      data: { datasets: [lineSet("relative difference", rel, COLORS.diff), threshold,
                         markerSet("NaN/Inf or null on one side", infinite, COLORS.nan, "triangle"),
                         markerSet("not in B", unmatched, "#999", "crossRot")] },
      options: baseOptions(true, "relative difference", (k) => showKernel(v.fi[k], v.pos[k], true), marksIn(v), kernelTooltip(v)),
      plugins: [markLines],
    });
  }

  // ---- Races between streams (MSPROBE_RACECHECK) ---------------------------------------------------------------------------
  function drawRaces() {
    if (!data.races || !data.races.length) return;
    $("races").hidden = false;
    const t = $("races-table");
    t.append(el("tr", {}, ...["folder", "kind", "bytes", "times", "first kernel", "stream", "access", "second kernel",
                              "stream", "access"].map((h) => el("th", { text: h }))));
    const side = (fi, s) => [
      el("td", {}, s.pos === null ? s.name : kernelLink(fi, s.pos, s.name)),
      el("td", { text: String(s.stream) }),
      el("td", { text: `${s.access} ${s.tensors.join(", ")}` }),
    ];
    for (const r of data.races)
      t.append(el("tr", { class: "race" }, el("td", { text: folderLabel(r.folder) }), el("td", { text: r.kind }),
                  el("td", { class: "num", text: String(r.bytes) }), el("td", { class: "num", text: String(r.count) }),
                  ...side(r.folder, r.first), ...side(r.folder, r.second)));
  }

  // ---- Flight records -------------------------------------------------------------------------------------------------
  function drawFlight() {
    if (!data.flight.length) return;
    $("flight").hidden = false;
    const body = $("flight-body");
    data.flight.forEach((rec, ri) => {
      const box = el("div", { class: "record", id: "flight-" + ri });
      box.append(el("h3", { class: "trigger", text: `${rec.rank}: ${rec.trigger_text}` }));
      if (rec.overflow) box.append(el("p", { class: "overflow", text: rec.overflow }));
      // The shim says "written with the N kernels before it": the trigger kernel is one of the record's, not before it.
      const withTrigger = rec.trigger_kernel && rec.kernels.some((k) => k.name === rec.trigger_kernel);
      box.append(el("p", { class: "hint record-count", text: withTrigger
        ? `${rec.kernels.length} kernel(s) recorded, in launch order: the trigger and the ${rec.kernels.length - 1} before it`
        : `${rec.kernels.length} kernel(s) recorded before the trigger, in launch order` }));
      const canvas = el("canvas");
      box.append(el("div", { class: "chart small" }, canvas));
      const t = el("table", { class: "flight-kernels" });
      t.append(el("tr", {}, ...["launch_index", "folder", "kernel", "inputs finite", "outputs NaN/Inf", "flight_note"]
        .map((h) => el("th", { text: h }))));
      const v = { fi: [], pos: [], x: [], n: 0 };
      for (const k of rec.kernels) {
        const f = folder(k.folder);
        const trig = rec.trigger_kernel && k.name === rec.trigger_kernel;
        t.append(el("tr", { class: trig ? "trigger" : "", "data-folder": k.folder, "data-pos": k.pos === null ? "" : k.pos },
                    el("td", { class: "num", text: k.pos === null ? "?" : String(f.x[k.pos]) }),
                    el("td", { text: folderLabel(k.folder) }),
                    el("td", {}, k.pos === null ? k.name : kernelLink(k.folder, k.pos, k.name)),
                    el("td", { text: k.inputs_finite ? "yes" : "no", class: k.inputs_finite ? "" : "bad" }),
                    el("td", { text: k.output_non_finite ? "yes" : "no", class: k.output_non_finite ? "bad" : "" }),
                    el("td", { text: k.note })));
        if (k.pos === null) continue;
        v.fi.push(k.folder);
        v.pos.push(k.pos);
        v.x.push(v.n);
        v.n++;
      }
      box.append(el("div", { class: "scroll" }, t));
      body.append(box);
      const sets = seriesData(v, true);
      const trigger = v.fi.findIndex((fi, k) => kernelName(folder(fi), v.pos[k]) === rec.trigger_kernel);
      const options = baseOptions(true, "|value|", (k) => showKernel(v.fi[k], v.pos[k], true),
                                  trigger >= 0 ? [{ x: trigger, color: COLORS.mark, label: "trigger" }] : [], kernelTooltip(v));
      options.scales.x.title.text = "kernel of the record (launch order)";
      new Chart(canvas, {
        type: "line",
        data: { datasets: [lineSet("Norm", sets.norm, COLORS.norm, sets.gaps),
                           lineSet("|Max|", sets.max, COLORS.max, sets.gaps),
                           lineSet("|Min|", sets.min, COLORS.min, sets.gaps), markerSet("NaN", sets.nan, COLORS.nan, "triangle"),
                           markerSet("Inf", sets.inf, COLORS.inf, "rectRot")] },
        options, plugins: [markLines],
      });
    });
  }

  // ---- Start ------------------------------------------------------------------------------------------------------
  function drawPartial() {
    if (!data.partial.length) return;
    $("partial").hidden = false;
    $("partial").textContent = "Read in part (the page shows the kernels read):\n" + data.partial.join("\n");
  }
  function drawMeta() {
    const tasks = [...new Set(folders.map((f) => f.task))].join(", ");
    const kernels = folders.reduce((a, f) => a + f.kernels, 0);
    metaList($("meta"), [["dump", data.root], ["task", tasks || "?"],
      ["folders", `${folders.length} (${ranks.length} rank(s)), ${kernels} kernels`],
      ["written", `${data.generated} by msprobe-inspect report; drawn with Chart.js ${data.chartjs}`]]);
  }
  function initial() {
    const h = new URLSearchParams(location.hash.slice(1));
    if (h.has("rank")) {
      const rank = h.get("rank"), step = parseStep(h.get("step") || "all");
      const candidates = folders.map((f, i) => i).filter((i) => folders[i].rank === rank && (step === "all" || folders[i].step === step));
      if (candidates.length) {
        let kernel = null;
        if (h.has("kernel")) {
          for (const fi of candidates) {
            const pos = findKernel(folder(fi), h.get("kernel"));
            if (pos >= 0) {
              kernel = { fi, pos };
              break;
            }
          }
          if (!kernel) note("#kernel=" + h.get("kernel") + ": no such kernel in " + rank + ", step " + stepKey(step));
        }
        return { rank, step, kernel };
      }
      note("#rank=" + rank + "&step=" + h.get("step") + ": no such folder");
    }
    const origin = markOf(data.first_nan);
    if (origin) return { rank: folders[origin.fi].rank, step: folders[origin.fi].step, kernel: origin };
    if (!folders.length) return null;
    return { rank: folders[0].rank, step: folders[0].step, kernel: null };
  }
  function start() {
    drawMeta();
    drawPartial();
    drawOverview();
    for (const r of ranks) $("rank").append(el("option", { value: r, text: r }));
    $("rank").addEventListener("change", () => {
      const r = $("rank").value;
      select(r, folders.find((f) => f.rank === r).step, null);
    });
    $("step").addEventListener("change", () => select($("rank").value, parseStep($("step").value), null));
    $("log").addEventListener("change", () => { drawSeries(); });
    let timer = null;
    const refilter = () => {
      clearTimeout(timer);
      select($("rank").value, parseStep($("step").value), null);
    };
    $("filter").addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(refilter, 250);
    });
    $("filter").addEventListener("change", refilter);  // Enter, or leaving the field: at once
    $("optype").addEventListener("change", refilter);
    $("whole").addEventListener("click", () => { unzoom(state.seriesChart); unzoom(state.diffChart); });
    drawFirstNan();
    drawAgainstStatic();
    const first = initial();
    if (first) select(first.rank, first.step, first.kernel);
    drawFlight();
    drawRaces();
    const status = $("status");
    const ms = performance.now();
    status.dataset.renderMs = ms.toFixed(1);
    status.dataset.points = String(state.drawnPoints);
    status.dataset.kernels = String(state.view ? state.view.n : 0);
    phase("done");
    phases.done = true;
    status.dataset.phases = phases.join(", ");
    status.textContent = `Drawn ${state.view ? state.view.n : 0} kernels in ${ms.toFixed(0)} ms after the page began to load.`;
    status.dataset.state = "done";
  }
  try {
    start();
  } catch (e) {
    note("error: " + (e && e.stack ? e.stack : e));
    $("status").dataset.state = "failed";
  }
})();
