/* mlft report page: curves, heatmap, replies, side-by-side comparison. Offline: no request is ever made. */
(function () {
  'use strict';
  var IDX = JSON.parse(document.getElementById('index').textContent);
  var VIEWS = IDX.views;
  var NAMES = {lpr: 'LPR', wpr: 'WPR', lcpr: 'LCPR', coverage: 'coverage', degeneracy: 'degeneracy',
    validity: 'lexical validity', unknown: 'unknown lines', skipped: 'skipped replies', nll: 'fluency NLL'};
  // the reasoning trace's rows (mlft.benchmarks.lcb.traces): trace_<metric>, trace_<outcome> (share of replies)
  ['lpr', 'wpr', 'lcpr', 'coverage', 'degeneracy', 'validity', 'unknown', 'skipped'].forEach(function (m) {
    NAMES['trace_' + m] = 'trace ' + NAMES[m]; });
  ['none', 'closed', 'prefilled', 'unclosed', 'malformed', 'any'].forEach(function (x) {
    NAMES['trace_' + x] = 'trace outcome: ' + x; });
  var LOWER_IS_BETTER = {degeneracy: 1, unknown: 1, skipped: 1, nll: 1, trace_degeneracy: 1, trace_unknown: 1,
    trace_skipped: 1, trace_unclosed: 1, trace_malformed: 1};
  var MAIN_METRICS = ['lpr', 'wpr', 'lcpr', 'coverage', 'degeneracy', 'validity', 'task', 'trace_lpr', 'trace_any'];
  var COLORS = ['#2f5fd0', '#d0542f', '#1a8a5a', '#8e44ad', '#c7962c', '#16a0b5', '#d03f8a', '#5d6d7e'];
  var VERDICT = {'pass': 'LCB pass', 'line': 'LPR fail: a line in another language',
    'word': 'WPR fail: English word', 'not counted': 'not counted (no line of 5+ tokens)'};
  var PAGE_SIZE = 20;
  var cache = {};
  var prompts = null;
  var S = {task: null, lang: 'avg', more: false, hTask: null, hMetric: 'lpr',
    view: firstViewWithReplies(), rTask: '', rLang: '', rSource: '', rVerdict: '', rSearch: '', page: 0,
    cId: '', cA: firstViewWithReplies(), cB: lastViewWithReplies(), roRun: null, roStep: null};

  function firstViewWithReplies() { for (var i = 0; i < VIEWS.length; i++) if (VIEWS[i].n) return i; return -1; }
  function lastViewWithReplies() { for (var i = VIEWS.length - 1; i >= 0; i--) if (VIEWS[i].n) return i; return -1; }
  function esc(s) {
    return String(s == null ? '' : s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }
  function $(id) { return document.getElementById(id); }
  function uniq(xs) { var seen = {}, out = []; xs.forEach(function (x) { if (!(x in seen)) { seen[x] = 1; out.push(x); } }); return out; }
  function pct(v) { return v == null ? '–' : (100 * v).toFixed(1); }
  function fmt(metric, v) { return v == null ? '–' : metric === 'nll' ? v.toFixed(2) : pct(v) + ' %'; }
  function options(values, selected, labels) {
    return values.map(function (v, i) {
      return '<option value="' + esc(v) + '"' + (String(v) === String(selected) ? ' selected' : '') + '>' +
        esc(labels ? labels[i] : v) + '</option>';
    }).join('');
  }

  async function inflate(id) {
    var el = document.getElementById(id);
    if (!el) return null;
    var bin = atob(el.textContent.trim());
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return JSON.parse(await new Response(stream).text());
  }
  function replies(v) {
    if (v < 0 || !VIEWS[v] || !VIEWS[v].n) return Promise.resolve([]);
    if (!cache[v]) cache[v] = inflate('view-' + v);
    return cache[v];
  }
  async function loadPrompts() { if (prompts === null) prompts = (await inflate('prompts')) || {}; return prompts; }

  // ------------------------------------------------------------------ shell
  function shell() {
    var msgs = IDX.messages.length ? '<div class="messages"><b>Notes</b><ul>' + IDX.messages.map(function (m) {
      return '<li>' + esc(m) + '</li>'; }).join('') + '</ul></div>' : '';
    var total = VIEWS.reduce(function (a, v) { return a + v.n; }, 0);
    $('app').innerHTML =
      '<header><h1>' + esc(IDX.title) + '</h1><nav><a href="#curves">Curves</a><a href="#heatmap">Heatmap</a>' +
      '<a href="#replies">Replies</a><a href="#compare">Compare</a></nav><span class="sub">' + VIEWS.length + ' ' +
      (IDX.axis === 'step' ? 'checkpoint passes' : 'variants') + ' · ' + total + ' replies · mlft ' + esc(IDX.version) +
      ' · ' + esc(IDX.generated) + '</span></header><main>' + msgs +
      '<section id="curves"><h2>Curves <span class="hint">95 % intervals as bands; hover a point for its numbers</span></h2>' +
      '<div class="controls" id="curve-controls"></div><div class="legend" id="legend"></div><div class="charts" id="charts"></div></section>' +
      '<section id="heatmap"><h2>Per-language heatmap <span class="hint">click a cell to read its replies</span></h2>' +
      '<div class="controls" id="heat-controls"></div><div class="heatwrap" id="heat"></div></section>' +
      '<section id="replies"><h2>Replies <span class="hint">lines as the LCB scorer judged them: green = counted, ' +
      'expected language; red = counted, another language (fastText label, score); grey = not counted (under 5 tokens) ' +
      'or cut; <mark>marked</mark> = English word (WPR)</span></h2><div class="controls" id="reply-controls"></div>' +
      '<div class="pager" id="pager-top"></div><div id="reply-list"></div><div class="pager" id="pager-bottom"></div></section>' +
      '<section id="compare"><h2>Same prompt, two ' + (IDX.axis === 'step' ? 'checkpoints' : 'variants') + '</h2>' +
      '<div class="controls" id="cmp-controls"></div><div id="cmp-changes"></div><div id="cmp-body"></div></section>' +
      (IDX.rollout_steps ? '<section id="rollouts"><h2>What the reward paid <span class="hint">GRPO: per logged step, the ' +
        'highest- and lowest-reward rollouts as training scored them (each term, the weighted total, the prompt\'s group ' +
        'mean ± std), with LCB\'s verdict</span></h2><div class="controls" id="ro-controls"></div><div id="ro-list"></div></section>' : '') +
      '</main>';
    if (IDX.rollout_steps) $('app').querySelector('nav').insertAdjacentHTML('beforeend', '<a href="#rollouts">Rollouts</a>');
  }

  // ------------------------------------------------------------------ curves
  function allRows() { var out = []; VIEWS.forEach(function (v, i) { v.metrics.forEach(function (m) { out.push([i, m]); }); }); return out; }
  function tasks() { return uniq(allRows().map(function (r) { return r[1].task; })); }
  function languages(task) {
    var ls = uniq(allRows().filter(function (r) { return r[1].task === task; }).map(function (r) { return r[1].language; })).sort();
    return ['avg'].concat(ls.filter(function (l) { return l !== 'avg'; }));
  }
  function metricsPresent() {
    var have = uniq(allRows().map(function (r) { return r[1].metric; }));
    return IDX.metrics.filter(function (m) { return have.indexOf(m) >= 0; }).concat(
      have.filter(function (m) { return IDX.metrics.indexOf(m) < 0; }));
  }
  function find(v, task, lang, metric) {
    var ms = VIEWS[v].metrics;
    for (var i = 0; i < ms.length; i++) if (ms[i].task === task && ms[i].language === lang && ms[i].metric === metric) return ms[i];
    return null;
  }
  function curveControls() {
    var ts = tasks();
    if (S.task === null || ts.indexOf(S.task) < 0) S.task = ts[0] || '';
    $('curve-controls').innerHTML =
      '<label>task <select id="c-task">' + options(ts, S.task) + '</select></label>' +
      '<label>language <select id="c-lang">' + options(languages(S.task), S.lang,
        languages(S.task).map(function (l) { return l === 'avg' ? 'average (all languages)' : l; })) + '</select></label>' +
      '<label><input type="checkbox" id="c-more"' + (S.more ? ' checked' : '') + '> LID detail and fluency (unknown, skipped, NLL)</label>';
    $('c-task').onchange = function () { S.task = this.value; curveControls(); charts(); };
    $('c-lang').onchange = function () { S.lang = this.value; charts(); };
    $('c-more').onchange = function () { S.more = this.checked; charts(); };
  }
  function charts() {
    var series = uniq(VIEWS.map(function (v) { return v.series; }));
    var cats = uniq(VIEWS.map(function (v) { return v.xlabel; }));
    $('legend').innerHTML = series.map(function (s, i) {
      return '<span><i style="background:' + COLORS[i % COLORS.length] + '"></i>' + esc(s) + '</span>'; }).join('');
    var ms = metricsPresent().filter(function (m) { return S.more || MAIN_METRICS.indexOf(m) >= 0 || IDX.metrics.indexOf(m) < 0; });
    var html = ms.map(function (m) { return chart(m, series, cats); }).filter(Boolean).join('');
    $('charts').innerHTML = html || '<p class="empty">No metric rows for this task and language.</p>';
  }
  function chart(metric, series, cats) {
    var W = 360, H = 210, L = 44, R = 10, T = 10, B = 34;
    var pts = [];
    VIEWS.forEach(function (v, i) {
      var r = find(i, S.task, S.lang, metric);
      if (r) pts.push({s: series.indexOf(v.series), x: IDX.axis === 'step' ? v.x : cats.indexOf(v.xlabel), r: r, v: v});
    });
    if (!pts.length) return '';
    var xs = pts.map(function (p) { return p.x; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    if (IDX.axis !== 'step') { x0 = -0.5; x1 = cats.length - 0.5; } else if (x0 === x1) { x0 -= 1; x1 += 1; }
    var ys = []; pts.forEach(function (p) { [p.r.value, p.r.low, p.r.high].forEach(function (y) { if (y != null) ys.push(y); }); });
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var rate = metric !== 'nll';
    var pad = Math.max((y1 - y0) * 0.08, rate ? 0.02 : 0.05);
    y0 -= pad; y1 += pad;
    if (rate) {
      if (y1 - y0 < 0.1) { var mid = (y0 + y1) / 2; y0 = mid - 0.05; y1 = mid + 0.05; }
      if (y0 < 0) { y1 -= y0; y0 = 0; }
      if (y1 > 1) { y0 = Math.max(0, y0 - (y1 - 1)); y1 = 1; }
    }
    if (y1 - y0 < 1e-9) { y1 = y0 + 1; }
    var digits = rate ? ((y1 - y0) < 0.2 ? 1 : 0) : 2;
    function X(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function Y(y) { return T + (1 - (y - y0) / (y1 - y0)) * (H - T - B); }
    var out = '<div class="chart" data-metric="' + metric + '"><h3>' + esc(NAMES[metric] || metric) +
      (LOWER_IS_BETTER[metric] ? ' <span class="hint">(lower is better)</span>' : '') + '</h3>' +
      '<svg viewBox="0 0 ' + W + ' ' + H + '" role="img" aria-label="' + esc(metric) + '">';
    var g = '<g class="grid">', ax = '<g class="axis">';
    var raw = (y1 - y0) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (f) { return f * mag; }).filter(function (s) { return s >= raw; })[0];
    digits = Math.max(0, -Math.floor(Math.log10(rate ? 100 * step : step) + 1e-9) + (step / mag === 2.5 ? 1 : 0));
    for (var yv = Math.ceil(y0 / step - 1e-9) * step; yv <= y1 + 1e-9; yv += step) {
      g += '<line x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(yv).toFixed(1) + '" y2="' + Y(yv).toFixed(1) + '"/>';
      ax += '<text x="' + (L - 4) + '" y="' + (Y(yv) + 3).toFixed(1) + '" text-anchor="end">' + (rate ? (100 * yv).toFixed(digits) : yv.toFixed(digits)) + '</text>';
    }
    var xt = IDX.axis === 'step' ? uniq(xs).sort(function (a, b) { return a - b; }) : cats.map(function (c, i) { return i; });
    var every = Math.max(1, Math.ceil(xt.length / 8));
    xt.forEach(function (x, i) {
      if (i % every) return;
      var lab = IDX.axis === 'step' ? String(x) : cats[x];
      if (lab.length > 16) lab = lab.slice(0, 15) + '…';
      ax += '<text x="' + X(x).toFixed(1) + '" y="' + (H - B + 13) + '" text-anchor="middle">' + esc(lab) + '</text>';
    });
    ax += '<text x="' + ((L + W - R) / 2) + '" y="' + (H - 4) + '" text-anchor="middle">' + (IDX.axis === 'step' ? 'training step' : 'variant') + '</text>';
    ax += '<line x1="' + L + '" x2="' + L + '" y1="' + T + '" y2="' + (H - B) + '"/><line x1="' + L + '" x2="' + (W - R) + '" y1="' + (H - B) + '" y2="' + (H - B) + '"/></g>';
    out += g + '</g>' + ax;
    series.forEach(function (s, si) {
      var mine = pts.filter(function (p) { return p.s === si; }).sort(function (a, b) { return a.x - b.x; });
      if (!mine.length) return;
      var c = COLORS[si % COLORS.length];
      var off = IDX.axis === 'step' ? 0 : (si - (series.length - 1) / 2) * Math.min(0.12, 0.6 / series.length);
      var band = mine.filter(function (p) { return p.r.low != null && p.r.high != null; });
      if (IDX.axis === 'step' && band.length > 1) {
        var top = band.map(function (p) { return X(p.x).toFixed(1) + ',' + Y(p.r.high).toFixed(1); });
        var bot = band.slice().reverse().map(function (p) { return X(p.x).toFixed(1) + ',' + Y(p.r.low).toFixed(1); });
        out += '<polygon class="band" fill="' + c + '" fill-opacity="0.15" stroke="none" points="' + top.concat(bot).join(' ') + '"/>';
      }
      if (IDX.axis === 'step' && mine.length > 1) {
        var dash = /(^|· )model$/.test(series[si]) ? '' : ' stroke-dasharray="6 3"';  // variants: dashed
        out += '<path class="line" fill="none" stroke="' + c + '" stroke-width="2"' + dash + ' d="' + mine.map(function (p, i) {
          return (i ? 'L' : 'M') + X(p.x).toFixed(1) + ',' + Y(p.r.value).toFixed(1); }).join('') + '"/>';
      }
      mine.forEach(function (p) {
        var px = X(p.x + off);
        if (p.r.low != null && p.r.high != null && (IDX.axis !== 'step' || band.length < 2)) {
          out += '<line stroke="' + c + '" stroke-width="2" x1="' + px.toFixed(1) + '" x2="' + px.toFixed(1) + '" y1="' +
            Y(p.r.low).toFixed(1) + '" y2="' + Y(p.r.high).toFixed(1) + '"/>';
        }
        out += '<circle class="pt" r="3.5" fill="' + c + '" cx="' + px.toFixed(1) + '" cy="' + Y(p.r.value).toFixed(1) + '"><title>' +
          esc(p.v.label + ' · ' + (NAMES[metric] || metric) + ' ' + fmt(metric, p.r.value) +
            (p.r.low != null ? ' [' + fmt(metric, p.r.low) + ', ' + fmt(metric, p.r.high) + ']' : '') +
            (p.r.n != null ? ' · n=' + p.r.n : '')) + '</title></circle>';
      });
    });
    return out + '</svg></div>';
  }

  // ------------------------------------------------------------------ heatmap
  function heatControls() {
    var ts = tasks();
    if (S.hTask === null || ts.indexOf(S.hTask) < 0) S.hTask = ts[0] || '';
    var ms = metricsPresent();
    $('heat-controls').innerHTML = '<label>task <select id="h-task">' + options(ts, S.hTask) + '</select></label>' +
      '<label>metric <select id="h-metric">' + options(ms, S.hMetric, ms.map(function (m) { return NAMES[m] || m; })) + '</select></label>';
    $('h-task').onchange = function () { S.hTask = this.value; heat(); };
    $('h-metric').onchange = function () { S.hMetric = this.value; heat(); };
  }
  function color(metric, v) {
    if (v == null || metric === 'nll') return '#f3f4f6';
    var good = Math.max(0, Math.min(1, LOWER_IS_BETTER[metric] ? 1 - v : v));
    return 'hsl(' + (good * good * 120).toFixed(0) + ',65%,' + (good > 0.97 ? 82 : 78) + '%)';
  }
  function heat() {
    var langs = languages(S.hTask);
    var multi = uniq(VIEWS.map(function (v) { return v.series; })).length > 1;
    var h = '<table class="heat"><tr><th>language</th>' + VIEWS.map(function (v) {
      return '<th title="' + esc(v.label) + '">' + (multi ? '<span class="hint">' + esc(v.series) + '</span><br>' : '') +
        esc(IDX.axis === 'step' ? 'step ' + v.xlabel : v.xlabel) + '</th>'; }).join('') + '</tr>';
    langs.forEach(function (l) {
      h += '<tr><th>' + esc(l === 'avg' ? 'average' : l) + '</th>';
      VIEWS.forEach(function (v, i) {
        var r = find(i, S.hTask, l, S.hMetric);
        if (!r) { h += '<td class="na">–</td>'; return; }
        h += '<td data-view="' + i + '" data-lang="' + esc(l) + '" style="background:' + color(S.hMetric, r.value) + '" title="' +
          esc(v.label + ' · ' + l + ' · ' + fmt(S.hMetric, r.value) + (r.low != null ? ' [' + fmt(S.hMetric, r.low) + ', ' +
            fmt(S.hMetric, r.high) + ']' : '') + (r.n != null ? ' · n=' + r.n : '')) + '">' +
          (S.hMetric === 'nll' ? r.value.toFixed(2) : pct(r.value)) + '</td>';
      });
      h += '</tr>';
    });
    $('heat').innerHTML = h + '</table>';
    Array.prototype.forEach.call($('heat').querySelectorAll('td[data-view]'), function (td) {
      td.onclick = function () {
        var v = +td.getAttribute('data-view');
        if (!VIEWS[v].n) return;
        S.view = v; S.rTask = S.hTask; S.rLang = td.getAttribute('data-lang') === 'avg' ? '' : td.getAttribute('data-lang');
        S.page = 0; replyControls().then(list); $('replies').scrollIntoView();
      };
    });
  }

  // ------------------------------------------------------------------ replies
  function viewOptions(selected) {
    var ids = [], labels = [];
    VIEWS.forEach(function (v, i) { if (v.n) { ids.push(i); labels.push(v.label + ' (' + v.n + ')'); } });
    return options(ids, selected, labels);
  }
  function matches(r) {
    if (S.rTask && r[1] !== S.rTask) return false;
    if (S.rLang && r[2] !== S.rLang) return false;
    if (S.rSource && r[3] !== S.rSource) return false;
    var f = S.rVerdict;
    if (f === 'failed' && r[4] !== 'line' && r[4] !== 'word') return false;
    if ((f === 'line' || f === 'word' || f === 'not counted') && r[4] !== f) return false;
    if (f === 'flagged' && !r[5]) return false;
    if (f === 'passed' && r[4] !== 'pass') return false;
    if (f === 'passed-flagged' && (r[4] !== 'pass' || !r[5])) return false;
    // the task axis (r[15]: [answered, the reply's number, the answer] where the suite checks answers)
    if (f === 'answered' && !(r[15] && r[15][0])) return false;
    if (f === 'not answered' && !(r[15] && !r[15][0])) return false;
    if (f === 'passed-not-answered' && (r[4] !== 'pass' || !(r[15] && !r[15][0]))) return false;
    if (S.rSearch) {
      var q = S.rSearch.toLowerCase();
      var text = r[0] + '\n' + r[8].map(function (l) { return l[0]; }).join('\n');
      if (text.toLowerCase().indexOf(q) < 0) return false;
    }
    return true;
  }
  async function replyControls() {
    var box = $('reply-controls');
    if (S.view < 0) { box.innerHTML = ''; $('reply-list').innerHTML = '<p class="empty">No replies in this report (see the notes above).</p>'; return; }
    var rs = await replies(S.view);
    var f = [['', 'all replies'], ['failed', 'failed (LPR or WPR)'], ['line', 'failed LPR (line in another language)'],
      ['word', 'failed WPR (English word)'], ['not counted', 'not counted by LCB'], ['flagged', 'flagged by the guard'],
      ['passed', 'passed LCB'], ['passed-flagged', 'passed LCB but flagged by the guard']];
    if (rs.some(function (r) { return r[15]; })) f = f.concat([['answered', 'task: answered'],
      ['not answered', 'task: not answered'], ['passed-not-answered', 'passed LCB but did not answer']]);
    box.innerHTML = '<label>' + (IDX.axis === 'step' ? 'checkpoint' : 'variant') + ' <select id="r-view">' + viewOptions(S.view) + '</select></label>' +
      '<label>verdict <select id="r-verdict">' + options(f.map(function (x) { return x[0]; }), S.rVerdict, f.map(function (x) { return x[1]; })) + '</select></label>' +
      '<label>task <select id="r-task">' + options([''].concat(uniq(rs.map(function (r) { return r[1]; }))), S.rTask, ['all'].concat(uniq(rs.map(function (r) { return r[1]; })))) + '</select></label>' +
      '<label>language <select id="r-lang">' + options([''].concat(uniq(rs.map(function (r) { return r[2]; })).sort()), S.rLang, ['all'].concat(uniq(rs.map(function (r) { return r[2]; })).sort())) + '</select></label>' +
      '<label>source <select id="r-source">' + options([''].concat(uniq(rs.map(function (r) { return r[3]; })).sort()), S.rSource, ['all'].concat(uniq(rs.map(function (r) { return r[3]; })).sort())) + '</select></label>' +
      '<label>search <input id="r-search" type="search" placeholder="id or text" value="' + esc(S.rSearch) + '"></label>' +
      '<span class="count" id="reply-count"></span>';
    var re = function () { S.page = 0; list(); };
    $('r-view').onchange = function () { S.view = +this.value; S.page = 0; replyControls().then(list); };
    $('r-verdict').onchange = function () { S.rVerdict = this.value; re(); };
    $('r-task').onchange = function () { S.rTask = this.value; re(); };
    $('r-lang').onchange = function () { S.rLang = this.value; re(); };
    $('r-source').onchange = function () { S.rSource = this.value; re(); };
    $('r-search').oninput = function () { S.rSearch = this.value; re(); };
  }
  function card(r, p) {
    var v = r[4], cls = v === 'not counted' ? 'notcounted' : v;
    var words = r[9] || [];
    var wre = words.length ? new RegExp('(^|[^\\p{L}\\p{N}])(' + words.map(function (w) {
      return w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }).join('|') + ')(?=$|[^\\p{L}\\p{N}])', 'gu') : null;
    function judged(ls, marks) {
      return ls.map(function (l) {
        var state = ['short', 'ok', 'wrong', 'cut'][l[1]];
        if (l[1] === 0 && !l[0].trim()) return '<div class="ln blank"></div>';
        var tag = l[1] === 0 ? 'not counted' : l[1] === 3 ? 'cut (after \\nQ:)' : esc(l[2]) + ' ' + (+l[3]).toFixed(2);
        var txt = esc(l[0]);
        if (marks && l[1] === 1) txt = txt.replace(marks, function (m, a, w) { return a + '<mark>' + w + '</mark>'; });
        return '<div class="ln ' + state + '"><span class="tag">' + tag + '</span><span class="txt">' + (txt || '&nbsp;') + '</span></div>';
      }).join('');
    }
    var lines = judged(r[8], wre);
    // a reply with a reasoning trace: its lines (r[8]) are its answer's; the trace, judged apart, folds out above
    var trace = r[12] && r[12] !== 'none' ? '<details class="trace"><summary>reasoning trace: ' + esc(r[12]) +
      (r[14] ? ' · ' + esc(VERDICT[r[14]] || r[14]) : '') + '</summary><div class="lines">' +
      (r[13] ? judged(r[13], null) || '<div class="empty">(empty trace)</div>' : '<div class="empty">(markers in the wrong order, nested or several: not scored)</div>') +
      '</div></details>' : '';
    var flag = r[5] === 'degenerate' ? '<span class="badge b-flag">guard: degenerate (' + esc(r[6]) + ')</span>' :
      r[5] === 'invalid' ? '<span class="badge b-flag">guard: lexically invalid</span>' : '';
    var pid = r[0].replace(/#\d+$/, '');  // reply k of a prompt (several replies per prompt) is <id>#k
    var prompt = p && p[pid] != null ? '<details class="prompt"><summary>prompt</summary><pre>' + esc(p[pid]) + '</pre></details>' : '';
    return '<div class="reply v-' + cls + '" data-id="' + esc(r[0]) + '"><div class="meta"><b>' + esc(r[0]) + '</b>' +
      '<span>' + esc(r[1]) + ' · ' + esc(r[2]) + ' · ' + esc(r[3]) + '</span>' +
      '<span class="badge b-' + cls + '">' + esc(VERDICT[v] || v) + '</span>' + flag +
      (r[7] != null ? '<span class="badge b-info" title="share of known words; valid above ' + (100 * IDX.valid_share) + ' %">validity ' + pct(r[7]) + ' %</span>' : '') +
      (r[10] ? '<span class="badge b-info">finish: ' + esc(r[10]) + '</span>' : '') +
      (r[15] ? '<span class="badge ' + (r[15][0] ? 'b-info' : 'b-flag') + '" title="task axis: the reply\'s last number against the prompt\'s answer">task: ' +
        (r[15][0] ? 'answered' : 'not answered (' + (r[15][1] == null ? 'no number' : esc(r[15][1])) + ' vs ' + esc(r[15][2]) + ')') + '</span>' : '') +
      (r[11] != null ? '<span class="badge b-info">NLL ' + (+r[11]).toFixed(2) + '</span>' : '') +
      (words.length ? '<span class="badge b-word">English: ' + esc(words.join(', ')) + '</span>' : '') +
      '<button class="to-compare" data-id="' + esc(r[0]) + '">compare across ' + (IDX.axis === 'step' ? 'checkpoints' : 'variants') + '</button>' +
      (r[12] && r[12] !== 'none' ? '<span class="badge b-info">trace: ' + esc(r[12]) + '</span>' : '') +
      '</div>' + prompt + trace + '<div class="lines">' + (lines || '<div class="empty">(empty ' + (trace ? 'answer' : 'reply') + ')</div>') + '</div></div>';
  }
  async function list() {
    if (S.view < 0) return;
    var rs = await replies(S.view), p = await loadPrompts();
    var shown = rs.filter(matches);
    var pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
    S.page = Math.min(S.page, pages - 1);
    var slice = shown.slice(S.page * PAGE_SIZE, (S.page + 1) * PAGE_SIZE);
    $('reply-count').textContent = shown.length + ' of ' + rs.length + ' replies';
    $('reply-count').setAttribute('data-count', shown.length);
    $('reply-list').innerHTML = slice.map(function (r) { return card(r, p); }).join('') || '<p class="empty">No reply matches these filters.</p>';
    var pager = '<button class="prev"' + (S.page ? '' : ' disabled') + '>← previous</button><span class="count">page ' +
      (S.page + 1) + ' of ' + pages + '</span><button class="next"' + (S.page < pages - 1 ? '' : ' disabled') + '>next →</button>';
    ['pager-top', 'pager-bottom'].forEach(function (id) {
      $(id).innerHTML = pager;
      $(id).querySelector('.prev').onclick = function () { S.page--; list(); };
      $(id).querySelector('.next').onclick = function () { S.page++; list(); if (id === 'pager-bottom') $('replies').scrollIntoView(); };
    });
    Array.prototype.forEach.call($('reply-list').querySelectorAll('button.to-compare'), function (b) {
      b.onclick = function () {
        S.cId = b.getAttribute('data-id');
        var first = firstViewWithReplies();  // this reply against the first checkpoint / variant (or the last)
        S.cA = first;
        S.cB = S.view !== first ? S.view : (S.cB !== first ? S.cB : lastViewWithReplies());
        compare().then(function () { $('compare').scrollIntoView(); });
      };
    });
  }

  // ------------------------------------------------------------------ compare
  async function compare() {
    var box = $('cmp-controls');
    if (S.cA < 0) { box.innerHTML = '<p class="empty">No replies to compare.</p>'; return; }
    var a = await replies(S.cA), b = await replies(S.cB), p = await loadPrompts();
    var ids = a.map(function (r) { return r[0]; });
    if (!S.cId || ids.indexOf(S.cId) < 0) S.cId = ids[0] || '';
    box.innerHTML = '<label>A <select id="c-a">' + viewOptions(S.cA) + '</select></label>' +
      '<label>B <select id="c-b">' + viewOptions(S.cB) + '</select></label>' +
      '<label>prompt <select id="c-id">' + options(ids, S.cId) + '</select></label>' +
      '<button id="c-swap">swap A/B</button>';
    $('c-a').onchange = function () { S.cA = +this.value; compare(); };
    $('c-b').onchange = function () { S.cB = +this.value; compare(); };
    $('c-id').onchange = function () { S.cId = this.value; compare(); };
    $('c-swap').onclick = function () { var t = S.cA; S.cA = S.cB; S.cB = t; compare(); };
    var byB = {}; b.forEach(function (r) { byB[r[0]] = r; });
    var changed = a.filter(function (r) { var o = byB[r[0]]; return o && (o[4] !== r[4] || o[5] !== r[5]); });
    $('cmp-changes').innerHTML = '<div class="hint">' + changed.length + ' prompts whose LCB verdict or guard flag differs between A and B' +
      (changed.length > 300 ? ' (first 300)' : '') + ':</div><div class="changes">' + changed.slice(0, 300).map(function (r) {
        var o = byB[r[0]];
        return '<button data-id="' + esc(r[0]) + '" title="' + esc(r[4] + (r[5] ? ' + ' + r[5] : '') + ' → ' + o[4] + (o[5] ? ' + ' + o[5] : '')) +
          '">' + esc(r[0]) + ': ' + esc(short(r)) + '→' + esc(short(o)) + '</button>'; }).join('') + '</div>';
    Array.prototype.forEach.call($('cmp-changes').querySelectorAll('button'), function (btn) {
      btn.onclick = function () { S.cId = btn.getAttribute('data-id'); compare(); };
    });
    var ra = a.filter(function (r) { return r[0] === S.cId; })[0], rb = byB[S.cId];
    var prompt = p[S.cId] != null ? '<details class="prompt" open><summary>prompt</summary><pre>' + esc(p[S.cId]) + '</pre></details>' : '';
    $('cmp-body').innerHTML = prompt + '<div class="cmp"><div class="side" data-side="A"><h3>A: ' + esc(VIEWS[S.cA].label) + '</h3>' +
      (ra ? card(ra, null) : '<p class="empty">no reply</p>') + '</div><div class="side" data-side="B"><h3>B: ' + esc(VIEWS[S.cB].label) +
      '</h3>' + (rb ? card(rb, null) : '<p class="empty">this prompt has no reply here</p>') + '</div></div>';
    Array.prototype.forEach.call($('cmp-body').querySelectorAll('button.to-compare'), function (btn) { btn.remove(); });
  }
  function short(r) { return (r[4] === 'not counted' ? 'n/c' : r[4]) + (r[5] ? '⚑' : ''); }

  // ------------------------------------------------------------------ rollouts (GRPO)
  var rollouts = null;
  async function loadRollouts() { if (rollouts === null) rollouts = (await inflate('rollouts')) || []; return rollouts; }
  function num(v) { return v == null ? '–' : (+v).toFixed(3).replace(/\.?0+$/, ''); }
  function rolloutCard(r) {
    var v = r.verdict, cls = v === 'not counted' ? 'notcounted' : v;
    var terms = Object.keys(r.terms || {}).map(function (t) {
      return '<span class="badge b-info" data-term="' + esc(t) + '">' + esc(t) + ' ' + num(r.terms[t]) + '</span>'; }).join('');
    var g = r.group ? '<span class="badge b-info" title="the totals of this prompt\'s rollouts in the step">group ' +
      num(r.group.mean) + ' ± ' + num(r.group.std) + ' (n=' + r.group.n + ')</span>' : '';
    return '<div class="reply rollout v-' + cls + '" data-rank="' + esc(r.rank) + '"><div class="meta"><b>total ' + num(r.total) + '</b>' +
      terms + g + '<span>' + esc([r.task, r.language, r.prompt_id].filter(Boolean).join(' · ')) + '</span>' +
      '<span class="badge b-' + cls + '">' + esc(VERDICT[v] || v) + '</span></div>' +
      '<details class="prompt"><summary>prompt</summary><pre>' + esc(r.prompt) + '</pre></details>' +
      '<pre class="completion">' + (esc(r.completion) || '(empty reply)') + '</pre></div>';
  }
  async function rolloutView() {
    var all = await loadRollouts();
    if (!all.length) return;
    var runs = uniq(all.map(function (x) { return x.run; }));
    if (S.roRun == null || runs.indexOf(S.roRun) < 0) S.roRun = runs[0];
    var mine = all.filter(function (x) { return x.run === S.roRun; });
    if (S.roStep == null || !mine.some(function (x) { return x.step === S.roStep; })) S.roStep = mine[mine.length - 1].step;
    $('ro-controls').innerHTML = (runs.length > 1 ? '<label>run <select id="ro-run">' + options(runs, S.roRun) + '</select></label>' : '') +
      '<label>step <select id="ro-step">' + options(mine.map(function (x) { return x.step; }), S.roStep,
        mine.map(function (x) { return x.step + (x.reward != null ? ' (mean reward ' + num(x.reward) + ')' : ''); })) + '</select></label>';
    if ($('ro-run')) $('ro-run').onchange = function () { S.roRun = this.value; S.roStep = null; rolloutView(); };
    $('ro-step').onchange = function () { S.roStep = +this.value; rolloutView(); };
    var cur = mine.filter(function (x) { return x.step === S.roStep; })[0];
    var part = function (rank, title) {
      var rs = cur.rows.filter(function (r) { return r.rank === rank; });
      return '<h3>' + title + '</h3>' + (rs.map(rolloutCard).join('') || '<p class="empty">none recorded</p>');
    };
    $('ro-list').innerHTML = part('top', 'Highest reward') + part('bottom', 'Lowest reward');
  }

  // ------------------------------------------------------------------ start
  async function start() {
    shell();
    curveControls(); charts(); heatControls(); heat();
    await replyControls(); await list(); await compare();
    if (IDX.rollout_steps) await rolloutView();
  }
  var ready = start().then(function () { document.body.setAttribute('data-ready', '1'); },
    function (e) { document.body.setAttribute('data-ready', 'error'); throw e; });
  window.mlftPage = {ready: ready, state: S, views: VIEWS};
})();
