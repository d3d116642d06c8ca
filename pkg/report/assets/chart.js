// vexp report charts: line, heatmap and bar charts drawn on <canvas>, with hover
// for exact values and legends that hide series. No dependencies; vexp embeds
// this file into every report (pkg/report/embed.cmake).
//
// The page holds <script type="application/json" id="vexp-data"> with
// {charts: {ID: SPEC}, xs: {NAME: [x...]}} and one div of class "chart" with
// data-chart=ID per chart.
// Every series keeps all its points (hover reads them); drawing decimates a
// series to the lowest and highest value per pixel column once it has more
// points than the plot is pixels wide. Each chart sets data-state="drawn" and
// data-points (the points it holds); <body> gets data-report="ready" (or
// "error" with data-errors) and data-render-ms, which the browser test reads.
(function () {
  'use strict';
  var errors = [];
  var sharedX = {};  // the page's shared x arrays (data.xs)
  function recordError(msg) {
    errors.push(String(msg));
    document.body.setAttribute('data-report', 'error');
    document.body.setAttribute('data-errors', errors.join(' | '));
  }
  window.addEventListener('error', function (e) { recordError(e.message || 'error'); });

  var FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
  var SMALL = '11px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';

  // ---- numbers -------------------------------------------------------------
  function fmt(v) {  // exact value for tooltips and tables (6 significant digits)
    if (v === null || v === undefined || !isFinite(v)) return String(v === undefined ? '-' : v);
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-4 || a >= 1e7)) return v.toExponential(4);
    return String(Number(v.toPrecision(6)));
  }
  function tickText(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(0).replace('e+', 'e');
    return String(Number(v.toPrecision(4)));
  }
  // Labels for a list of ticks: tickText's, with more significant digits while two
  // different ticks would read the same (3e-4 and 3.2e-4 are not both "3e-4").
  function tickTexts(ticks) {
    var out = ticks.map(tickText), distinct = function (a) { return new Set(a).size; };
    for (var p = 2; p <= 17 && distinct(out) < distinct(ticks); p++)
      out = ticks.map(function (v) {
        var a = Math.abs(v);
        if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(p - 1).replace(/\.?0+e/, 'e').replace('e+', 'e');
        return String(Number(v.toPrecision(p)));
      });
    return out;
  }
  function niceStep(span, count) {
    var raw = span / Math.max(1, count), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
  }
  function linearTicks(lo, hi, count) {
    var step = niceStep(hi - lo, count), out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
  function logTicks(lo, hi) {
    var out = [], a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    var mults = b - a <= 2 ? [1, 2, 5] : [1], every = Math.max(1, Math.ceil((b - a) / 8));
    for (var e = a; e <= b; e += every)
      for (var i = 0; i < mults.length; i++) {
        var t = mults[i] * Math.pow(10, e);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) out.push(t);
      }
    if (out.length < 2) out = [lo, hi];
    return out;
  }
  // [lo, hi] of the finite values (positive ones on a log axis), padded.
  function range(values, log, pad) {
    var lo = Infinity, hi = -Infinity;
    for (var i = 0; i < values.length; i++) {
      var arr = values[i];
      for (var j = 0; j < arr.length; j++) {
        var v = arr[j];
        if (v === null || !isFinite(v) || (log && v <= 0)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    if (lo > hi) return log ? [1, 10] : [0, 1];
    if (log) {
      if (lo === hi) { lo /= 2; hi *= 2; }
      var f = Math.pow(hi / lo, pad);
      return [lo / f, hi * f];
    }
    if (lo === hi) { var d = lo === 0 ? 1 : Math.abs(lo) * 0.1; return [lo - d, hi + d]; }
    var p = (hi - lo) * pad;
    return [lo - p, hi + p];
  }
  function scale(lo, hi, a, b, log) {
    if (log) {
      var l0 = Math.log(lo), k = (b - a) / (Math.log(hi) - l0);
      var f = function (v) { return a + (Math.log(v) - l0) * k; };
      f.inv = function (p) { return Math.exp(l0 + (p - a) / k); };
      return f;
    }
    var g = function (v) { return a + (v - lo) * (b - a) / (hi - lo); };
    g.inv = function (p) { return lo + (p - a) * (hi - lo) / (b - a); };
    return g;
  }
  // Ticks at least `gap` pixels apart (the first kept, then each far enough from the last kept).
  function thin(ticks, sc, gap) {
    var out = [];
    ticks.forEach(function (t) { if (!out.length || Math.abs(sc(t) - sc(out[out.length - 1])) >= gap) out.push(t); });
    return out;
  }
  function lowerBound(xs, x) {  // first index with xs[i] >= x (xs ascending)
    var lo = 0, hi = xs.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (xs[m] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; });
  }

  // ---- the frame every chart shares -----------------------------------------
  function el(tag, cls, parent) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }
  function Frame(host, spec, height) {
    this.host = host;
    this.spec = spec;
    host.innerHTML = '';
    if (spec.title) el('div', 'chart-title', host).textContent = spec.title;
    this.controls = el('div', 'chart-controls', host);
    this.wrap = el('div', 'chart-canvas', host);
    this.wrap.style.height = height + 'px';
    this.canvas = el('canvas', null, this.wrap);
    this.overlay = el('canvas', 'chart-overlay', this.wrap);
    this.tip = el('div', 'chart-tip', this.wrap);
    this.legend = el('div', 'chart-legend', host);
    if (spec.note) el('div', 'chart-note', host).textContent = spec.note;
    this.height = height;
  }
  Frame.prototype.size = function () {
    var w = Math.max(200, this.wrap.clientWidth), h = this.height, r = window.devicePixelRatio || 1;
    var cs = [this.canvas, this.overlay];
    for (var i = 0; i < cs.length; i++) {
      cs[i].width = Math.round(w * r);
      cs[i].height = Math.round(h * r);
      cs[i].style.width = w + 'px';
      cs[i].style.height = h + 'px';
      cs[i].getContext('2d').setTransform(r, 0, 0, r, 0, 0);
    }
    this.w = w;
    return this.canvas.getContext('2d');
  };
  Frame.prototype.clearOverlay = function () {
    var c = this.overlay.getContext('2d');
    c.clearRect(0, 0, this.w, this.height);
    this.tip.style.display = 'none';
    return c;
  };
  Frame.prototype.showTip = function (html, px, py) {
    var t = this.tip;
    t.innerHTML = html;
    t.style.display = 'block';
    var left = px + 14, top = py + 10;
    if (left + t.offsetWidth > this.w) left = Math.max(0, px - t.offsetWidth - 14);
    if (top + t.offsetHeight > this.height) top = Math.max(0, py - t.offsetHeight - 10);
    t.style.left = left + 'px';
    t.style.top = top + 'px';
  };
  Frame.prototype.onHover = function (fn) {
    var self = this;
    this.overlay.addEventListener('mousemove', function (e) {
      var r = self.overlay.getBoundingClientRect();
      fn(e.clientX - r.left, e.clientY - r.top);
    });
    this.overlay.addEventListener('mouseleave', function () { self.clearOverlay(); });
  };
  // One legend entry per item, all shown (wrapping under the plot); a click hides
  // or shows the item, "all" / "none" act on every item.
  Frame.prototype.makeLegend = function (items, redraw) {
    var lg = this.legend;
    lg.innerHTML = '';
    if (items.length > 6) {
      var bar = el('span', 'legend-all', lg);
      ['all', 'none'].forEach(function (what) {
        var b = el('button', null, bar);
        b.type = 'button';
        b.textContent = what;
        b.addEventListener('click', function () {
          items.forEach(function (it, i) { it.hidden = what === 'none'; lg.children[i + 1].classList.toggle('off', it.hidden); });
          redraw();
        });
      });
    }
    items.forEach(function (it) {
      var e = el('span', 'legend-item', lg);
      var sw = el('i', it.dash ? 'dash' : null, e);
      sw.style.background = it.color;
      if (it.dash) sw.style.borderColor = it.color;
      el('span', null, e).textContent = it.name;
      if (it.hidden) e.classList.add('off');
      e.title = 'click to hide / show';
      e.addEventListener('click', function () {
        it.hidden = !it.hidden;
        e.classList.toggle('off', it.hidden);
        redraw();
      });
    });
  };
  function axes(ctx, box, xs, ys, xticks, yticks, xlabel, ylabel) {
    ctx.font = SMALL;
    ctx.strokeStyle = '#e3e3e3';
    ctx.fillStyle = '#444';
    ctx.lineWidth = 1;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    var xl = tickTexts(xticks), yl = tickTexts(yticks);
    xticks.forEach(function (t, i) {
      var x = Math.round(xs(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, box.t); ctx.lineTo(x, box.b); ctx.stroke();
      ctx.fillText(xl[i], x, box.b + 4);
    });
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    yticks.forEach(function (t, i) {
      var y = Math.round(ys(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(box.l, y); ctx.lineTo(box.r, y); ctx.stroke();
      ctx.fillText(yl[i], box.l - 4, y);
    });
    ctx.strokeStyle = '#888';
    ctx.strokeRect(box.l + 0.5, box.t + 0.5, box.r - box.l, box.b - box.t);
    axesLabels(ctx, box, xlabel, ylabel, 34);
  }

  // ---- line charts ----------------------------------------------------------
  // spec: {title, xmodes: ["step", "epoch"] | absent, xlabels: {mode: text} | xlabel,
  //        ylabel, xlog, ylog, stacked, series: [{name, color, dash, points, noline,
  //        x: [..] | {mode: [..]}, y: [..]}]}
  function lineChart(host, spec) {
    var modes = spec.xmodes || ['x'];
    var mode = spec.xmode || modes[0];
    var series = spec.series.map(function (s) {
      // x: an array, {mode: array}, or "xref" to a shared array of global steps whose
      // epoch positions are the shared array "xref_epoch" (epochs of clips seen), else
      // step / spe (steps per epoch).
      var x = s.xref ? sharedX[s.xref] : s.x;
      if (Array.isArray(x) && s.xref_epoch) x = {step: x, epoch: sharedX[s.xref_epoch]};
      else if (Array.isArray(x) && s.spe) x = {step: x, epoch: x.map(function (v) { return v / s.spe; })};
      else if (Array.isArray(x)) x = {x: x};
      return {name: s.name, color: s.color, dash: !!s.dash, points: !!s.points, noline: !!s.noline,
              hidden: !!s.hidden, x: x, y: s.y};
    });
    var f = new Frame(host, spec, spec.height || 300);
    var total = 0;
    var finite = 0;
    series.forEach(function (s) {
      total += s.y.length;
      s.y.forEach(function (v) { if (v !== null && isFinite(v)) finite++; });
    });
    host.__hoverable = finite > 0;  // a series of nulls only (a NaN validation) has nothing to hover
    if (modes.length > 1) {
      var sel = el('span', 'xmode', f.controls);
      el('span', null, sel).textContent = 'x axis: ';
      modes.forEach(function (m) {
        var b = el('button', m === mode ? 'on' : null, sel);
        b.type = 'button';
        b.textContent = (spec.xlabels && spec.xlabels[m]) || m;
        b.addEventListener('click', function () {
          mode = m;
          Array.prototype.forEach.call(sel.querySelectorAll('button'), function (o) { o.classList.toggle('on', o === b); });
          draw();
        });
      });
    }
    var geo = null;
    // Cumulative values for a stacked chart (series share their x).
    function stackedY() {
      var acc = null, out = [];
      series.forEach(function (s) {
        if (s.hidden) { out.push(null); return; }
        var c = s.y.map(function (v, i) { return (acc ? acc[i] : 0) + (isFinite(v) && v !== null ? v : 0); });
        out.push(c);
        acc = c;
      });
      return out;
    }
    function draw() {
      var ctx = f.size(), w = f.w, h = f.height;
      ctx.clearRect(0, 0, w, h);
      var box = {l: 62, r: w - 14, t: 10, b: h - 40};
      var vis = series.filter(function (s) { return !s.hidden && s.x[mode]; });
      var cum = spec.stacked ? stackedY() : null;
      var yarrs = spec.stacked ? cum.filter(function (c) { return c; }) : vis.map(function (s) { return s.y; });
      if (spec.stacked) yarrs.push([0]);
      var xr = range(vis.map(function (s) { return s.x[mode]; }), spec.xlog, spec.xlog ? 0.08 : 0.02);
      var yr = range(yarrs, spec.ylog, spec.stacked ? 0.02 : 0.05);
      if (spec.ymin !== undefined && !spec.ylog) yr[0] = Math.min(yr[0], spec.ymin);
      var xs = scale(xr[0], xr[1], box.l, box.r, spec.xlog), ys = scale(yr[0], yr[1], box.b, box.t, spec.ylog);
      var xt = spec.xlog ? logTicks(xr[0], xr[1]) : linearTicks(xr[0], xr[1], Math.max(3, Math.floor((box.r - box.l) / 90)));
      var yt = spec.ylog ? logTicks(yr[0], yr[1]) : linearTicks(yr[0], yr[1], Math.max(3, Math.floor((box.b - box.t) / 45)));
      // Explicit ticks (a sweep's batches and learning rates) where given.
      var within = function (r) { return function (t) { return t >= r[0] && t <= r[1]; }; };
      if (spec.xticks) xt = thin(spec.xticks.filter(within(xr)), xs, 36);
      if (spec.yticks) yt = thin(spec.yticks.filter(within(yr)), ys, 16);
      var xlabel = spec.xlabels ? spec.xlabels[mode] : spec.xlabel;
      axes(ctx, box, xs, ys, xt, yt, xlabel, spec.ylabel);
      ctx.save();
      ctx.beginPath();
      ctx.rect(box.l, box.t, box.r - box.l, box.b - box.t);
      ctx.clip();
      var prev = null;
      series.forEach(function (s, si) {
        if (s.hidden || !s.x[mode]) return;
        var ya = spec.stacked ? cum[si] : s.y;
        if (spec.stacked) fillBetween(ctx, s, s.x[mode], prev, ya, xs, ys, box);
        if (!s.noline) polyline(ctx, s, s.x[mode], ya, xs, ys, box, spec.xlog || spec.ylog);
        if (s.points) markers(ctx, s, s.x[mode], ya, xs, ys);
        if (spec.stacked) prev = ya;
      });
      ctx.restore();
      if (vis.length === 0) {
        ctx.font = FONT; ctx.fillStyle = '#777'; ctx.textAlign = 'center';
        ctx.fillText(series.length ? 'every series is hidden' : 'nothing recorded', (box.l + box.r) / 2, (box.t + box.b) / 2);
      }
      geo = {xs: xs, ys: ys, box: box, cum: cum};
      f.clearOverlay();
    }
    function fillBetween(ctx, s, xa, lower, upper, xs, ys, box) {
      ctx.beginPath();
      for (var i = 0; i < xa.length; i++) ctx.lineTo(xs(xa[i]), ys(upper[i]));
      for (var j = xa.length - 1; j >= 0; j--) ctx.lineTo(xs(xa[j]), lower ? ys(lower[j]) : box.b);
      ctx.closePath();
      ctx.globalAlpha = 0.35;
      ctx.fillStyle = s.color;
      ctx.fill();
      ctx.globalAlpha = 1;
    }
    // The polyline of a series; past 2 points per pixel column, each column is drawn
    // as its first, lowest, highest and last value (the shape stays, spikes too).
    function polyline(ctx, s, xa, ya, xs, ys, box, anyLog) {
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 1.5;
      ctx.setLineDash(s.dash ? [6, 4] : []);
      ctx.beginPath();
      var n = Math.min(xa.length, ya.length), pen = false;
      var ok = function (i) { return ya[i] !== null && isFinite(ya[i]) && !(anyLog && (ya[i] <= 0 || xa[i] <= 0)); };
      if (n <= 2 * (box.r - box.l)) {
        for (var i = 0; i < n; i++) {
          if (!ok(i)) { pen = false; continue; }
          var px = xs(xa[i]), py = ys(ya[i]);
          if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
          pen = true;
        }
      } else {
        var col = null, first, lo, hi, last;
        var flush = function () {
          if (col === null) return;
          if (pen) ctx.lineTo(col, ys(first)); else ctx.moveTo(col, ys(first));
          ctx.lineTo(col, ys(lo)); ctx.lineTo(col, ys(hi)); ctx.lineTo(col, ys(last));
          pen = true;
        };
        for (var k = 0; k < n; k++) {
          if (!ok(k)) { flush(); col = null; pen = false; continue; }
          var c = Math.round(xs(xa[k])), v = ya[k];
          if (c !== col) { flush(); col = c; first = lo = hi = last = v; continue; }
          if (v < lo) lo = v;
          if (v > hi) hi = v;
          last = v;
        }
        flush();
      }
      ctx.stroke();
      ctx.setLineDash([]);
      // A series with one drawable point (a run that stopped early) is a dot.
      var drawable = [];
      for (var q = 0; q < n && drawable.length < 2; q++) if (ok(q)) drawable.push(q);
      if (drawable.length === 1) {
        ctx.fillStyle = s.color;
        ctx.beginPath();
        ctx.arc(xs(xa[drawable[0]]), ys(ya[drawable[0]]), 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    function markers(ctx, s, xa, ya, xs, ys) {
      ctx.fillStyle = s.color;
      for (var i = 0; i < xa.length; i++) {
        if (ya[i] === null || !isFinite(ya[i])) continue;
        if ((spec.xlog && xa[i] <= 0) || (spec.ylog && ya[i] <= 0)) continue;
        ctx.beginPath();
        ctx.arc(xs(xa[i]), ys(ya[i]), s.noline ? 4 : 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    f.onHover(function (px, py) {
      var o = f.clearOverlay();
      if (!geo || px < geo.box.l - 8 || px > geo.box.r + 8) return;
      var best = null, xv = geo.xs.inv(px);
      series.forEach(function (s, si) {
        if (s.hidden || !s.x[mode]) return;
        var xa = s.x[mode], ya = geo.cum ? geo.cum[si] : s.y, k = lowerBound(xa, xv);
        for (var i = Math.max(0, k - 1); i <= Math.min(xa.length - 1, k); i++) {
          var yv = ya[i];
          if (yv === null || !isFinite(yv) || (spec.ylog && yv <= 0)) continue;
          var dx = geo.xs(xa[i]) - px, dy = geo.ys(yv) - py, d = dx * dx + dy * dy;
          if (!best || d < best.d) best = {d: d, s: s, i: i, x: xa[i], y: yv, raw: s.y[i]};
        }
      });
      if (!best || best.d > 40 * 40) return;
      var cx = geo.xs(best.x), cy = geo.ys(best.y);
      o.strokeStyle = best.s.color;
      o.lineWidth = 2;
      o.beginPath(); o.arc(cx, cy, 5, 0, 2 * Math.PI); o.stroke();
      var xl = spec.xlabels ? spec.xlabels[mode] : spec.xlabel || 'x';
      var html = '<b>' + esc(best.s.name) + '</b><br>' + esc(xl) + ': ' + fmt(best.x) + '<br>' + esc(spec.ylabel || 'y') + ': ' + fmt(best.raw);
      // The other x of the same point (step <-> epoch), where the series has both.
      modes.forEach(function (m) {
        if (m !== mode && best.s.x[m]) html += '<br>' + esc(spec.xlabels[m]) + ': ' + fmt(best.s.x[m][best.i]);
      });
      f.showTip(html, cx, cy);
    });
    f.makeLegend(series, draw);
    draw();
    host.__redraw = draw;
    return total;
  }

  // ---- heatmap ---------------------------------------------------------------
  // spec: {title, xlabel, ylabel, xs: [labels], ys: [labels], vlabel, higher,
  //        cells: [{x, y, v, sd, n, text, tip, status}], best: [x, y] | null}
  function heatmap(host, spec) {
    var f = new Frame(host, spec, spec.height || Math.max(220, 60 * spec.ys.length + 80));
    var geo = null;
    function colour(t) {  // 0 (worst) .. 1 (best): a sequential light-to-dark blue-green
      var a = [255, 247, 236], m = [65, 182, 196], b = [8, 48, 107];
      var c = t < 0.5 ? mix(a, m, t * 2) : mix(m, b, (t - 0.5) * 2);
      return 'rgb(' + c.join(',') + ')';
    }
    function mix(a, b, t) { return a.map(function (v, i) { return Math.round(v + (b[i] - v) * t); }); }
    function draw() {
      var ctx = f.size(), w = f.w, h = f.height;
      ctx.clearRect(0, 0, w, h);
      var box = {l: 70, r: w - 110, t: 10, b: h - 44};
      var nx = spec.xs.length, ny = spec.ys.length, cw = (box.r - box.l) / nx, ch = (box.b - box.t) / ny;
      var vals = spec.cells.filter(function (c) { return c.v !== null && c.v !== undefined; }).map(function (c) { return c.v; });
      var lo = Math.min.apply(null, vals.concat([Infinity])), hi = Math.max.apply(null, vals.concat([-Infinity]));
      var t = function (v) { var u = hi > lo ? (v - lo) / (hi - lo) : 1; return spec.higher ? u : 1 - u; };
      ctx.font = FONT;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      spec.cells.forEach(function (c) {
        var x0 = box.l + c.x * cw, y0 = box.b - (c.y + 1) * ch;
        var has = c.v !== null && c.v !== undefined;
        var u = has ? t(c.v) : 0;
        ctx.fillStyle = has ? colour(u) : '#d9d9d9';
        ctx.fillRect(x0 + 1, y0 + 1, cw - 2, ch - 2);
        ctx.fillStyle = has && u > 0.55 ? '#fff' : '#222';
        // Small cells show the mean only (the tooltip has the spread).
        var lines = String(c.text).split('\n');
        if (cw < 110 || ch < 40) lines = lines.slice(0, 1);
        ctx.font = cw < 60 ? SMALL : FONT;
        lines.forEach(function (line, i) { ctx.fillText(line, x0 + cw / 2, y0 + ch / 2 + (i - (lines.length - 1) / 2) * 15); });
      });
      if (spec.best) {
        var bx = box.l + spec.best[0] * cw, by = box.b - (spec.best[1] + 1) * ch;
        ctx.strokeStyle = '#d7301f';
        ctx.lineWidth = 3;
        ctx.strokeRect(bx + 2.5, by + 2.5, cw - 5, ch - 5);
        ctx.fillStyle = '#d7301f';
        ctx.font = 'bold ' + SMALL;
        ctx.textAlign = 'left';
        ctx.textBaseline = 'top';
        ctx.fillText('best', bx + 6, by + 6);
      }
      ctx.font = SMALL;
      ctx.fillStyle = '#444';
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      spec.xs.forEach(function (l, i) { ctx.fillText(l, box.l + (i + 0.5) * cw, box.b + 4); });
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      spec.ys.forEach(function (l, i) { ctx.fillText(l, box.l - 4, box.b - (i + 0.5) * ch); });
      axesLabels(ctx, box, spec.xlabel, spec.ylabel);
      // colour bar
      if (vals.length) {
        var bx0 = box.r + 20, bw = 14;
        for (var k = 0; k < 64; k++) {
          ctx.fillStyle = colour(spec.higher ? k / 63 : 1 - k / 63);
          var yy = box.b - (k + 1) * (box.b - box.t) / 64;
          ctx.fillRect(bx0, yy, bw, (box.b - box.t) / 64 + 1);
        }
        ctx.fillStyle = '#444';
        ctx.textAlign = 'left';
        ctx.fillText(tickText(hi), bx0 + bw + 4, box.t + 6);
        ctx.fillText(tickText(lo), bx0 + bw + 4, box.b - 6);
        ctx.save();
        ctx.translate(bx0 + bw + 48, (box.t + box.b) / 2);
        ctx.rotate(Math.PI / 2);
        ctx.textAlign = 'center';
        ctx.fillText(spec.vlabel || '', 0, 0);
        ctx.restore();
      }
      geo = {box: box, cw: cw, ch: ch};
      f.clearOverlay();
    }
    f.onHover(function (px, py) {
      f.clearOverlay();
      if (!geo) return;
      var xi = Math.floor((px - geo.box.l) / geo.cw), yi = Math.floor((geo.box.b - py) / geo.ch);
      var c = spec.cells.filter(function (q) { return q.x === xi && q.y === yi; })[0];
      if (!c) return;
      f.showTip(esc(spec.xlabel) + ' ' + esc(spec.xs[xi]) + ', ' + esc(spec.ylabel) + ' ' + esc(spec.ys[yi]) + '<br>' +
                esc(c.tip).replace(/\n/g, '<br>'), px, py);
    });
    f.legend.style.display = 'none';
    draw();
    host.__redraw = draw;
    return spec.cells.length;
  }
  // The axis titles: x under the plot box (`below` px under it, 38 by default), y rotated at the left.
  function axesLabels(ctx, box, xlabel, ylabel, below) {
    ctx.font = FONT;
    ctx.fillStyle = '#222';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'bottom';
    if (xlabel) ctx.fillText(xlabel, (box.l + box.r) / 2, box.b + (below || 38));
    if (ylabel) {
      ctx.save();
      ctx.translate(12, (box.t + box.b) / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.textBaseline = 'middle';
      ctx.fillText(ylabel, 0, 0);
      ctx.restore();
    }
  }

  // ---- bars ------------------------------------------------------------------
  // spec: {title, ylabel, groups: [{name, color}], bars: [{label, v, group, text, tip}]}
  function bars(host, spec) {
    var groups = spec.groups.map(function (g) { return {name: g.name, color: g.color, hidden: false}; });
    var f = new Frame(host, spec, spec.height || 280);
    var geo = null;
    function draw() {
      var ctx = f.size(), w = f.w, h = f.height;
      ctx.clearRect(0, 0, w, h);
      var shown = spec.bars.filter(function (b) { return !groups[b.group].hidden; });
      var rotate = shown.length > 16;
      var box = {l: 62, r: w - 14, t: 14, b: h - (rotate ? 64 : 44)};
      var yr = range([shown.map(function (b) { return b.v; }), [0]], false, 0.08);
      yr[0] = 0;
      var ys = scale(yr[0], yr[1], box.b, box.t, false);
      var yt = linearTicks(yr[0], yr[1], 5);
      axes(ctx, box, function () { return -10; }, ys, [], yt, null, spec.ylabel);
      var bw = (box.r - box.l) / Math.max(1, shown.length);
      ctx.font = SMALL;
      shown.forEach(function (b, i) {
        var x0 = box.l + i * bw, v = isFinite(b.v) && b.v !== null ? b.v : 0;
        ctx.fillStyle = groups[b.group].color;
        ctx.fillRect(x0 + bw * 0.15, ys(v), bw * 0.7, box.b - ys(v));
        ctx.fillStyle = '#222';
        if (bw > 26 && b.text) {
          ctx.textAlign = 'center';
          ctx.textBaseline = 'bottom';
          ctx.fillText(b.text, x0 + bw / 2, ys(v) - 2);
        }
        ctx.save();
        ctx.translate(x0 + bw / 2, box.b + 4);
        if (rotate) { ctx.rotate(-Math.PI / 3); ctx.textAlign = 'right'; ctx.textBaseline = 'middle'; }
        else { ctx.textAlign = 'center'; ctx.textBaseline = 'top'; }
        ctx.fillText(b.label, 0, 0);
        ctx.restore();
      });
      geo = {box: box, bw: bw, shown: shown, ys: ys};
      f.clearOverlay();
    }
    f.onHover(function (px, py) {
      f.clearOverlay();
      if (!geo) return;
      var i = Math.floor((px - geo.box.l) / geo.bw), b = geo.shown[i];
      if (!b || py < geo.box.t || py > geo.box.b) return;
      f.showTip('<b>' + esc(b.label) + '</b><br>' + esc(spec.ylabel) + ': ' + fmt(b.v) + '<br>' + esc(b.tip || '').replace(/\n/g, '<br>'), px, py);
    });
    f.makeLegend(groups, draw);
    draw();
    host.__redraw = draw;
    return spec.bars.length;
  }

  // ---- the page ----------------------------------------------------------------
  function renderAll() {
    var t0 = performance.now();
    var data = JSON.parse(document.getElementById('vexp-data').textContent);
    sharedX = data.xs || {};
    var hosts = document.querySelectorAll('.chart[data-chart]');
    var drawn = 0;
    Array.prototype.forEach.call(hosts, function (host) {
      var id = host.getAttribute('data-chart'), spec = data.charts[id];
      try {
        if (!spec) throw new Error('no data for chart ' + id);
        var kind = {line: lineChart, heatmap: heatmap, bars: bars}[spec.type];
        if (!kind) throw new Error('chart ' + id + ': unknown type ' + spec.type);
        var n = kind(host, spec);
        host.setAttribute('data-state', 'drawn');
        host.setAttribute('data-points', String(n));
        drawn++;
      } catch (e) {
        host.setAttribute('data-state', 'failed');
        host.textContent = 'this chart could not be drawn: ' + e.message;
        recordError(e.message);
      }
    });
    var timer = null;
    window.addEventListener('resize', function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        Array.prototype.forEach.call(hosts, function (h) { if (h.__redraw) h.__redraw(); });
      }, 100);
    });
    window.addEventListener('beforeprint', function () {
      Array.prototype.forEach.call(hosts, function (h) { if (h.__redraw) h.__redraw(); });
    });
    document.body.setAttribute('data-charts', String(drawn) + '/' + String(hosts.length));
    document.body.setAttribute('data-render-ms', String(Math.round(performance.now())));
    document.body.setAttribute('data-draw-ms', String(Math.round(performance.now() - t0)));
    document.body.setAttribute('data-height', String(document.documentElement.scrollHeight));
    if (!errors.length) document.body.setAttribute('data-report', drawn === hosts.length ? 'ready' : 'error');
  }
  // report.html#selftest (the browser test): hover across every chart until a
  // tooltip shows, and click its first legend entry off and on again; the outcome
  // goes to <body data-selftest> ("ok" or what failed).
  function selfTest() {
    var failures = [];
    Array.prototype.forEach.call(document.querySelectorAll('.chart[data-chart]'), function (host) {
      if (host.getAttribute('data-state') !== 'drawn') return;  // already reported as failed
      var id = host.getAttribute('data-chart'), ov = host.querySelector('.chart-overlay');
      var tip = host.querySelector('.chart-tip'), r = ov.getBoundingClientRect(), shown = false;
      for (var fx = 0; fx <= 1 && !shown; fx += 0.01)
        for (var fy = 0; fy <= 1 && !shown; fy += 0.04) {
          ov.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width * fx, clientY: r.top + r.height * fy}));
          shown = tip.style.display === 'block' && tip.textContent.length > 0;
        }
      if (!shown && host.__hoverable !== false) failures.push(id + ': no tooltip anywhere');
      var item = host.querySelector('.legend-item');
      if (item) {
        item.click();
        if (!item.classList.contains('off')) failures.push(id + ': a legend click did not hide its series');
        item.click();
        if (item.classList.contains('off')) failures.push(id + ': a second legend click did not show it again');
      }
    });
    document.body.setAttribute('data-selftest', failures.length ? failures.join('; ') : 'ok');
  }
  try {
    renderAll();
    if (window.location.hash === '#selftest') selfTest();
  } catch (e) {
    recordError(e.message);
    throw e;
  }
})();
