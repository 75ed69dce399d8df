"""The report's own style sheet and script, inlined in the page: the script draws each run's
timeline (one row of per-frame times per stage, drops and damage marked, a frame's times on
pointing) and latency histogram as SVG from the records the page carries."""

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; color: #222; background: #fafafa; margin: 0; }
main { max-width: 1040px; margin: 0 auto; padding: 16px 24px 40px; }
h1 { font-size: 24px; margin: 8px 0 12px; } h2 { font-size: 19px; margin: 28px 0 8px; }
h3 { font-size: 16px; margin: 22px 0 6px; }
section.run { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 4px 18px 16px;
  margin: 18px 0; }
.outcome { font-weight: 600; padding: 6px 10px; border-radius: 4px; display: inline-block; }
.outcome.ok { background: #e6f4ea; color: #1e6b34; }
.outcome.bad { background: #fdecea; color: #9b1c1c; }
ul.facts { list-style: none; padding: 0; margin: 8px 0; display: flex; flex-wrap: wrap;
  gap: 4px 18px; }
table.stages { border-collapse: collapse; margin: 8px 0; min-width: 480px; }
table.stages caption { text-align: left; color: #555; padding-bottom: 4px; }
table.stages th, table.stages td { padding: 3px 12px; border-bottom: 1px solid #eee;
  text-align: right; }
table.stages th:first-child { text-align: left; }
pre { background: #f2f2f2; padding: 8px 12px; border-radius: 4px; overflow-x: auto;
  font-size: 13px; }
pre.command { white-space: pre-wrap; overflow-wrap: anywhere; }
ul.facts li.warn { color: #b3261e; font-weight: 600; }
.note { color: #555; margin: 4px 0 8px; max-width: 80ch; }
.chart svg { width: 100%; height: auto; display: block; }
.chart text { font-size: 12px; fill: #444; }
.chart .stage-name { font-weight: 600; font-size: 13px; }
.chart rect.row { fill: #f7f7f7; } .chart .axis { stroke: #999; stroke-width: 1; }
.chart polyline.series { fill: none; stroke-width: 1.2; stroke-linejoin: round; }
.chart .median { stroke: #888; stroke-dasharray: 4 3; stroke-width: 1; }
.chart .drop { stroke: #d62728; stroke-width: 1.5; opacity: 0.8; }
.chart .damage { stroke: #e6a100; stroke-width: 2; opacity: 0.9; }
.chart .cursor { stroke: #000; stroke-width: 1; opacity: 0.5; }
.chart rect.bar { fill: #4e79a7; } .chart .mark { stroke: #333; stroke-dasharray: 3 3; }
ul.damage li { color: #8a5a00; }
#tooltip { position: absolute; background: #fff; border: 1px solid #888; border-radius: 4px;
  padding: 6px 9px; font-size: 13px; pointer-events: none; box-shadow: 0 2px 6px #0003;
  white-space: pre; font-variant-numeric: tabular-nums; }
footer { color: #777; font-size: 13px; margin-top: 30px; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const ORDER = ["read", "upload", "kernel", "download", "write", "latency"];
  const COLOURS = {read: "#4e79a7", upload: "#f28e2b", kernel: "#59a14f", download: "#b07aa1",
                   write: "#76b7b2", latency: "#222222"};
  const tooltip = document.getElementById("tooltip");
  const runs = JSON.parse(document.getElementById("runs").textContent);

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function text(parent, x, y, content, attrs) {
    const node = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
    node.textContent = content;
    return node;
  }
  function ms(value) {
    if (value === null || value === undefined) return "-";
    return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1)
         : value >= 1 ? value.toFixed(2) : value.toFixed(3);
  }
  function largest(values) {
    let top = 0;
    for (const v of values) if (v !== null && v > top) top = v;
    return top;
  }
  function frameTicks(first, last, count) {
    const span = Math.max(last - first, 1), raw = span / count;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= raw) || raw;
    const ticks = [];
    for (let t = Math.ceil(first / step) * step; t <= last; t += step) ticks.push(t);
    return ticks;
  }
  function stagesOf(run) {
    const samples = run.samples_ms || {};
    const known = ORDER.filter(s => samples[s] && samples[s].length);
    return known.concat(Object.keys(samples).filter(s => !ORDER.includes(s) && samples[s].length));
  }
  function marks(run, first) {
    const found = [];
    let dropped = 0, damaged = 0;
    for (const [frame, drops, damage] of ((run.timeline || {}).events || [])) {
      if (drops > dropped && frame >= first)
        found.push({frame: frame, kind: "drop", count: drops - dropped});
      if (damage > damaged && frame >= first)
        found.push({frame: frame, kind: "damage", count: damage - damaged});
      dropped = drops;
      damaged = damage;
    }
    return found;
  }

  function drawTimeline(box, run) {
    const samples = run.samples_ms || {}, stages = stagesOf(run);
    if (!stages.length) { box.textContent = "No frame was written."; return; }
    const frames = run.frames, kept = Math.max(...stages.map(s => samples[s].length));
    const first = frames - kept, last = frames - 1;
    const W = 960, left = 118, right = 16, rowH = 62, gap = 16, top = 8, bottom = 44;
    const H = top + stages.length * (rowH + gap) + bottom, plotW = W - left - right;
    const x = f => left + (kept > 1 ? (f - first) / (kept - 1) * plotW : plotW / 2);
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "data-first": first,
                           "data-last": last}, box);
    el("title", {}, svg).textContent = `Time per frame in each stage, frames ${first} to ${last}`;
    stages.forEach((stage, row) => {
      const values = samples[stage], offset = frames - values.length;
      const bottomY = top + row * (rowH + gap) + rowH, max = largest(values) || 1;
      const y = v => bottomY - v / max * rowH;
      el("rect", {x: left, y: bottomY - rowH, width: plotW, height: rowH, class: "row"}, svg);
      text(svg, 8, bottomY - rowH / 2 + 4, stage, {class: "stage-name", fill: COLOURS[stage]});
      text(svg, left - 6, bottomY - rowH + 10, ms(max) + " ms", {"text-anchor": "end"});
      text(svg, left - 6, bottomY, "0", {"text-anchor": "end"});
      const median = ((run.stages_ms || {})[stage] || {}).p50;
      if (median !== undefined)
        el("line", {x1: left, x2: left + plotW, y1: y(median), y2: y(median), class: "median"},
           svg);
      const points = values.map((v, i) => `${x(offset + i).toFixed(1)},${y(v || 0).toFixed(1)}`);
      el("polyline", {points: points.join(" "), class: "series", stroke: COLOURS[stage] || "#555",
                      "data-stage": stage, "data-points": values.length}, svg);
      if (offset !== first)
        text(svg, left + plotW, bottomY - rowH - 3, `timed on the last ${values.length} frames`,
             {"text-anchor": "end"});
    });
    const floor = top + stages.length * (rowH + gap) - gap;
    for (const mark of marks(run, first)) {
      const line = el("line", {x1: x(mark.frame), x2: x(mark.frame), y1: top, y2: floor,
                               class: mark.kind, "data-frame": mark.frame,
                               "data-count": mark.count}, svg);
      el("title", {}, line).textContent = mark.kind === "drop"
        ? `${mark.count} frame(s) dropped before frame ${mark.frame}`
        : `${mark.count} damaged packet(s) or frame(s) found by frame ${mark.frame}`;
    }
    el("line", {x1: left, x2: left + plotW, y1: floor + 2, y2: floor + 2, class: "axis"}, svg);
    const starts = (run.timeline || {}).start_s || [];
    for (const tick of frameTicks(first, last, 8)) {
      const anchor = {"text-anchor": x(tick) > W - right - 30 ? "end" : "middle"};  // in view
      el("line", {x1: x(tick), x2: x(tick), y1: floor + 2, y2: floor + 7, class: "axis"}, svg);
      text(svg, x(tick), floor + 20, `frame ${tick}`, anchor);
      const at = starts[tick - first];
      if (at !== undefined && at !== null)
        text(svg, x(tick), floor + 35, `${at.toFixed(2)} s`, anchor);
    }
    hover(svg, run, {first: first, kept: kept, left: left, plotW: plotW, top: top, floor: floor,
                     stages: stages});
  }

  function hover(svg, run, at) {
    const cursor = el("line", {y1: at.top, y2: at.floor, class: "cursor", visibility: "hidden"},
                      svg);
    const area = el("rect", {x: at.left, y: at.top, width: at.plotW, height: at.floor - at.top,
                             fill: "transparent"}, svg);
    area.addEventListener("mousemove", event => {
      const box = svg.getBoundingClientRect(), scale = 960 / box.width;
      const offset = (event.clientX - box.left) * scale - at.left;
      const index = Math.round(offset / Math.max(at.plotW, 1) * Math.max(at.kept - 1, 0));
      const frame = at.first + Math.min(Math.max(index, 0), at.kept - 1);
      const px = at.left + (at.kept > 1 ? (frame - at.first) / (at.kept - 1) * at.plotW : 0);
      cursor.setAttribute("x1", px); cursor.setAttribute("x2", px);
      cursor.setAttribute("visibility", "visible");
      const start = ((run.timeline || {}).start_s || [])[frame - at.first];
      const lines = [`frame ${frame}` + (start != null ? `, read at ${start.toFixed(3)} s` : "")];
      for (const stage of at.stages) {
        const values = run.samples_ms[stage], i = frame - (run.frames - values.length);
        lines.push(`${stage.padEnd(9)}${i >= 0 ? ms(values[i]) + " ms" : "-"}`);
      }
      tooltip.textContent = lines.join("\n");
      tooltip.hidden = false;
      tooltip.style.left = (event.pageX + 14) + "px";
      tooltip.style.top = (event.pageY + 14) + "px";
    });
    area.addEventListener("mouseleave", () => {
      cursor.setAttribute("visibility", "hidden");
      tooltip.hidden = true;
    });
  }

  function drawHistogram(box, run) {
    const values = ((run.samples_ms || {}).latency || []).filter(v => v !== null);
    if (!values.length) { box.textContent = "No frame was written."; return; }
    const W = 960, H = 250, left = 60, right = 20, top = 22, bottom = 40, bins = 40;
    const plotW = W - left - right, plotH = H - top - bottom;
    const low = Math.max(Math.min(...values.filter(v => v > 0)), 1e-3), high = largest(values);
    const ratio = Math.max(high / low, 1.0001), counts = new Array(bins).fill(0);
    for (const v of values) {
      const k = v <= low ? 0 : Math.floor(Math.log(v / low) / Math.log(ratio) * bins);
      counts[Math.min(k, bins - 1)] += 1;
    }
    const x = v => left + Math.log(Math.max(v, low) / low) / Math.log(ratio) * plotW;
    const most = Math.max(...counts);
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "data-frames": values.length},
                   box);
    el("title", {}, svg).textContent = `Latency of ${values.length} frames, log scale`;
    counts.forEach((count, k) => {
      if (!count) return;
      const from = low * Math.pow(ratio, k / bins), to = low * Math.pow(ratio, (k + 1) / bins);
      const height = Math.max(count / most * plotH, 1);
      const bar = el("rect", {x: x(from) + 0.5, width: Math.max(x(to) - x(from) - 1, 1),
                              y: top + plotH - height, height: height, class: "bar",
                              "data-count": count}, svg);
      el("title", {}, bar).textContent = `${count} frame(s): ${ms(from)} to ${ms(to)} ms`;
    });
    el("line", {x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, class: "axis"}, svg);
    for (let power = Math.floor(Math.log10(low)); power <= Math.ceil(Math.log10(high)); power++)
      for (const m of [1, 2, 5]) {
        const tick = m * Math.pow(10, power);
        if (tick < low || tick > high * 1.0001) continue;
        el("line", {x1: x(tick), x2: x(tick), y1: top + plotH, y2: top + plotH + 5, class: "axis"},
           svg);
        text(svg, x(tick), top + plotH + 18, `${+tick.toPrecision(2)} ms`,
             {"text-anchor": "middle"});
      }
    text(svg, left - 6, top + 8, `${most}`, {"text-anchor": "end"});
    text(svg, left - 6, top + plotH, "0", {"text-anchor": "end"});
    text(svg, left, top - 8, "frames");
    const row = (run.stages_ms || {}).latency || {};
    ["p50", "p95", "p99"].forEach((name, n) => {
      if (row[name] === undefined) return;
      const px = x(row[name]), leftward = px > W - 160;  // a label near the edge goes left
      el("line", {x1: px, x2: px, y1: top, y2: top + plotH, class: "mark"}, svg);
      text(svg, leftward ? px - 3 : px + 3, top + 12 + 14 * n, `${name} ${ms(row[name])} ms`,
           {"text-anchor": leftward ? "end" : "start"});
    });
    if (values.length < run.frames)
      text(svg, W - right, H - 4, `the last ${values.length} of ${run.frames} frames`,
           {"text-anchor": "end"});
  }

  runs.forEach((run, number) => {
    const section = document.querySelector(`section[data-run="${number}"]`);
    drawTimeline(section.querySelector(".timeline"), run);
    drawHistogram(section.querySelector(".histogram"), run);
  });
  document.body.setAttribute("data-drawn", runs.length);
})();
"""
