// The interactive front of a dse page (dse/results/interactive.py writes the data block it reads).
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("dse-front-data").textContent);
  var objs = D.objectives, details = D.details || {}, byColumn = {};
  D.metrics.forEach(function (m) { byColumn[m.column] = m; });
  var ax = {x: 0, y: Math.min(1, objs.length - 1)};
  var plot = document.getElementById("dse-front");
  var LINK_SCALE = [[0, "#ffffcc"], [0.5, "#fd8d3c"], [1, "#800026"]];

  function fmt(v) {
    if (v === null || v === undefined) return "n/a";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }
  function el(tag, text) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; return e; }

  D.groups.forEach(function (g) {
    var cols = g.front ? D.metrics.map(function (m) { return m.column; }) : objs.map(function (o) { return o.column; });
    g.text = g.ids.map(function (id, i) {
      var lines = ["<b>" + id + "</b> (" + g.name + ")"];
      cols.forEach(function (c) {
        if (!(c in g.values)) return;
        var m = byColumn[c] || {label: c, factor: 1}, v = g.values[c][i];
        lines.push(m.label + ": " + (v === null ? "n/a" : fmt(v * m.factor)));
      });
      if (g.front && D.groups.length && Object.keys(details).length && !(id in details))
        lines.push("<i>floorplan not embedded in this page (cap)</i>");
      return lines.join("<br>");
    });
  });

  function axis(g, k) {
    var o = objs[ax[k]], vals = g.values[o.column] || [];
    return vals.map(function (v) { return v === null ? null : v * o.factor; });
  }
  var selected = null;
  function traces() {
    var t = D.groups.map(function (g, gi) {
      return {type: "scatter", mode: "markers", name: g.name + " (" + g.ids.length + ")", x: axis(g, "x"),
              y: axis(g, "y"), text: g.text, hovertemplate: "%{text}<extra></extra>",
              customdata: g.ids.map(function (id) { return [gi, id]; }),
              marker: {color: g.colour, symbol: g.symbol, size: g.size,
                       line: {width: g.front ? 0.5 : 0, color: "white"}}};
    });
    var sx = [], sy = [];
    if (selected) {
      var g = D.groups[selected[0]], i = g.ids.indexOf(selected[1]);
      sx = [axis(g, "x")[i]]; sy = [axis(g, "y")[i]];
    }
    t.push({type: "scatter", mode: "markers", name: "selected", x: sx, y: sy, hoverinfo: "skip",
            marker: {symbol: "star", size: 18, color: "#f1c40f", line: {width: 1, color: "black"}}});
    return t;
  }
  function layout() {
    return {title: {text: D.title}, hovermode: "closest", margin: {t: 40},
            xaxis: {title: {text: objs[ax.x].label}}, yaxis: {title: {text: objs[ax.y].label}},
            legend: {orientation: "h", y: -0.18}};
  }
  function redraw() { Plotly.react(plot, traces(), layout(), {displaylogo: false, responsive: true}); }

  var axes = document.getElementById("dse-axes");
  ["x", "y"].forEach(function (k) {
    var label = el("label", k + " axis: "), sel = el("select");
    sel.id = "dse-axis-" + k;
    objs.forEach(function (o, i) { var opt = el("option", o.label); opt.value = i; sel.appendChild(opt); });
    sel.value = ax[k];
    sel.addEventListener("change", function () { ax[k] = +sel.value; redraw(); });
    label.appendChild(sel); axes.appendChild(label); axes.appendChild(document.createTextNode(" "));
  });

  function colourAt(t) {
    t = Math.max(0, Math.min(1, t));
    var lo = LINK_SCALE[0], hi = LINK_SCALE[LINK_SCALE.length - 1];
    for (var i = 1; i < LINK_SCALE.length; i++) if (t <= LINK_SCALE[i][0]) { lo = LINK_SCALE[i - 1]; hi = LINK_SCALE[i]; break; }
    var f = hi[0] > lo[0] ? (t - lo[0]) / (hi[0] - lo[0]) : 0, out = "#";
    for (var c = 1; c < 7; c += 2) {
      var a = parseInt(lo[1].substr(c, 2), 16), b = parseInt(hi[1].substr(c, 2), 16);
      out += ("0" + Math.round(a + f * (b - a)).toString(16)).slice(-2);
    }
    return out;
  }

  function drawFloorplan(id, d) {
    var pitch = 1.45, shapes = [], notes = [], hx = [], hy = [], ht = [];
    d.chiplets.forEach(function (c) {
      var x0 = c.col * pitch, y0 = -c.row * pitch;
      shapes.push({type: "rect", x0: x0, y0: y0, x1: x0 + 1, y1: y0 + 1, line: {color: "black", width: 1.2},
                   fillcolor: (D.kind_colours || {})[c.kind] || "#dddddd", layer: "below"});
      notes.push({x: x0 + 0.5, y: y0 + 0.5, showarrow: false, font: {size: 10},
                  text: "<b>" + c.slot + ": " + c.kind + "</b><br>busy " + fmt(c.busy_pct) + "%<br>" +
                        (c.hbm_stacks ? "HBM x" + c.hbm_stacks : "no HBM") + "<br>" + c.n_units + " units"});
      hx.push(x0 + 0.5); hy.push(y0 + 0.5);
      ht.push("<b>chiplet " + c.slot + "</b> (" + c.row + ", " + c.col + "): " + c.kind + "<br>units: " +
              (c.units || "none") + "<br>stored / HBM: " + fmt(c.stored_GiB) + " / " +
              (c.hbm_GiB ? fmt(c.hbm_GiB) : "no HBM") + " GiB, to DDR " + fmt(c.spill_GiB) + " GiB<br>busy " +
              fmt(c.busy_pct) + "% of the step, compute " + fmt(c.compute_pct) + "%<br>sent / received: " +
              fmt(c.sent_MB) + " / " + fmt(c.received_MB) + " MB per step");
    });
    var peak = 0, lx = [], ly = [], lt = [], lu = [];
    d.links.forEach(function (l) { if (l[2] !== null && l[2] > peak) peak = l[2]; });
    d.links.forEach(function (l) {
      var r1 = Math.floor(l[0] / d.cols), c1 = l[0] % d.cols, r2 = Math.floor(l[1] / d.cols), c2 = l[1] % d.cols;
      var x1 = c1 * pitch + 0.5, y1 = -r1 * pitch + 0.5, x2 = c2 * pitch + 0.5, y2 = -r2 * pitch + 0.5;
      var near = Math.abs(r2 - r1) + Math.abs(c2 - c1) === 1, off = (c2 - c1 + r2 - r1) > 0 ? 0.12 : -0.12;
      if (near) {
        var dx = x2 - x1, dy = y2 - y1, edge = 0.5 / pitch;     // from one chiplet's edge to the next's
        if (r1 === r2) { y1 += off; y2 += off; } else { x1 += off; x2 += off; }
        x1 += dx * edge; x2 -= dx * edge; y1 += dy * edge; y2 -= dy * edge;
      }
      var u = l[2] === null ? 0 : l[2];
      shapes.push({type: "line", x0: x1, y0: y1, x1: x2, y1: y2, layer: near ? "above" : "below",
                   line: {color: colourAt(peak > 0 ? u / peak : 0), width: near ? 4 : 2}});
      lx.push((x1 + x2) / 2); ly.push((y1 + y2) / 2); lu.push(u);
      lt.push("link " + l[0] + " \u2192 " + l[1] + ": busy " + fmt(u) + "% of the step");
    });
    var data = [{type: "scatter", mode: "markers", x: hx, y: hy, text: ht, hovertemplate: "%{text}<extra></extra>",
                 marker: {size: 30, opacity: 0}, showlegend: false},
                {type: "scatter", mode: "markers", x: lx, y: ly, text: lt, hovertemplate: "%{text}<extra></extra>",
                 showlegend: false, marker: {size: 7, color: lu, cmin: 0, cmax: peak > 0 ? peak : 1,
                 colorscale: LINK_SCALE, showscale: lu.length > 0, line: {width: 0.5, color: "black"},
                 colorbar: {title: {text: "link busy [% of step]"}}}}];
    var w = Math.max(360, 170 * d.cols + 160), h = Math.max(300, 150 * d.rows + 90);
    Plotly.react("dse-floorplan", data, {
      title: {text: id + ": " + d.rows + " x " + d.cols + " " + d.topology + ", " + fmt(d.step_ms) +
                    " ms per step, " + d.ddr_channels + " DDR channels, " + d.link + " links" +
                    (d.system ? " (package 0 of the system)" : ""), font: {size: 12}},
      shapes: shapes, annotations: notes, width: w, height: h, margin: {t: 40, l: 10, r: 10, b: 10},
      xaxis: {visible: false, range: [-0.3, d.cols * pitch]},
      yaxis: {visible: false, scaleanchor: "x", range: [-(d.rows - 1) * pitch - 0.3, 1.3]},
      hovermode: "closest"}, {displayModeBar: false});
  }

  function drawBreakdown(d) {
    var box = document.getElementById("dse-breakdown");
    box.textContent = "";
    box.appendChild(el("p", "Per chiplet (busy = compute or memory-bound time of the units it holds; the rest " +
                            "of the step it waits for other chiplets, the network or DDR):"));
    var t = el("table"), head = el("tr");
    ["slot (row, col)", "kind", "units held", "stored / HBM [GiB]", "to DDR [GiB]", "busy [% of step]",
     "compute [% of step]", "sent / received [MB per step]"].forEach(function (h) { head.appendChild(el("th", h)); });
    t.appendChild(head);
    d.chiplets.forEach(function (c) {
      var r = el("tr");
      [c.slot + " (" + c.row + ", " + c.col + ")", c.kind, c.units || "-",
       fmt(c.stored_GiB) + " / " + (c.hbm_GiB ? fmt(c.hbm_GiB) : "no HBM"), fmt(c.spill_GiB), fmt(c.busy_pct),
       fmt(c.compute_pct), fmt(c.sent_MB) + " / " + fmt(c.received_MB)].forEach(function (v) { r.appendChild(el("td", v)); });
      t.appendChild(r);
    });
    box.appendChild(t);
  }

  function show(gi, id) {
    selected = [gi, id];
    redraw();
    var g = D.groups[gi], d = details[id], info = document.getElementById("dse-detail");
    info.textContent = "";
    var p = el("p"), b = el("b", id);
    b.id = "dse-selected";
    p.appendChild(b);
    p.appendChild(document.createTextNode(
      !g.front ? ": a feasible design off the front (no design file)" :
      d ? ": its floorplan and per-chiplet breakdown (design file designs/" + id + ".yaml)" :
      g.folder ? " of " + g.name + ": design file " + g.folder + "/designs/" + id + ".yaml" :
      ": not embedded in this page (see the caps above); dse evaluate gives its breakdown from designs/" + id + ".yaml"));
    info.appendChild(p);
    if (d) { drawFloorplan(id, d); drawBreakdown(d); }
    else { Plotly.purge("dse-floorplan"); document.getElementById("dse-breakdown").textContent = ""; }
  }

  redraw();
  plot.on("plotly_click", function (ev) {
    var p = ev.points && ev.points[0];
    if (p && p.customdata) show(p.customdata[0], p.customdata[1]);
  });
  var wanted = decodeURIComponent((location.hash || "").slice(1)), first = null;
  D.groups.forEach(function (g, gi) {
    if (first === null && g.front && wanted && g.ids.indexOf(wanted) >= 0) first = [gi, wanted];
  });
  if (first === null) {
    var ids = Object.keys(details);
    D.groups.forEach(function (g, gi) { if (first === null && ids.length && g.ids.indexOf(ids[0]) >= 0) first = [gi, ids[0]]; });
  }
  if (first !== null) show(first[0], first[1]);
  document.body.setAttribute("data-dse-front", "drawn");
})();
