// redlimit dashboard. It reads snapshots of the service's counters from
// api/events (server-sent events, one a second), or polls api/stats when
// event streams fail, and draws them. Plain JavaScript, no libraries, no
// build step.
//
// Keys, rules and errors come from requests and files: they are always set
// as text (textContent), never as HTML.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const jsonPath = document.body.dataset.jsonPath || '/json';
  const SEP = '\u0000'; // joins domain and rule in the chart selector

  let last = null;    // the last snapshot, to redraw on resize
  let selected = '';  // the series charted: '' for all, else domain SEP rule

  // ---- formatting and DOM helpers ----

  const fmtInt = (n) => Math.round(n).toLocaleString('en-US');
  const fmtRate = (x) => (x >= 100 ? fmtInt(x) : x.toFixed(1));
  const fmtMs = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  const pct = (part, whole) => (whole > 0 ? (100 * part / whole).toFixed(1) : '0.0');

  function fmtDuration(s) {
    s = Math.max(0, Math.floor(s));
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm';
  }

  // el makes an element holding text (or child nodes), with a class.
  function el(tag, content, cls) {
    const e = document.createElement(tag);
    if (content instanceof Node) e.append(content);
    else if (content !== undefined && content !== null) e.textContent = String(content);
    if (cls) e.className = cls;
    return e;
  }

  // fillRows replaces a table body's rows; each row is a list of cells,
  // a cell being a value or an element; numeric columns get class "num".
  function fillRows(tbody, rows, numCols = [], empty = '') {
    const out = rows.map((cells) => {
      const tr = el('tr');
      cells.forEach((c, i) => {
        tr.append(c instanceof Node && c.tagName === 'TD' ? c : el('td', c, numCols.includes(i) ? 'num' : ''));
      });
      return tr;
    });
    if (!out.length && empty) {
      const td = el('td', empty, 'muted');
      td.colSpan = tbody.parentElement.tHead.rows[0].cells.length;
      out.push(el('tr', td));
    }
    tbody.replaceChildren(...out);
  }

  const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

  // ---- charts ----

  // niceCeil rounds up to a round number: 1, 2, 3, 4, 5, 6 or 8 times a
  // power of ten.
  function niceCeil(x) {
    if (x <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    for (const m of [1, 2, 3, 4, 5, 6, 8, 10]) if (m * p >= x) return m * p;
    return 10 * p;
  }

  // lineChart draws lines on a canvas: each line is {values, color}, and a
  // null value is a gap. The x axis is the last values.length seconds.
  function lineChart(canvas, lines, fmt) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = Number(canvas.dataset.height);
    canvas.style.height = h + 'px';
    canvas.width = w * dpr;
    canvas.height = h * dpr;
    const g = canvas.getContext('2d');
    g.scale(dpr, dpr);
    g.font = '11px system-ui, sans-serif';

    const pad = { l: 48, r: 8, t: 8, b: 18 };
    const pw = w - pad.l - pad.r, ph = h - pad.t - pad.b;
    const n = Math.max(...lines.map((l) => l.values.length), 2);
    const top = niceCeil(Math.max(0, ...lines.flatMap((l) => l.values.filter((v) => v !== null))));
    const x = (i) => pad.l + pw * i / (n - 1);
    const y = (v) => pad.t + ph * (1 - v / top);

    // Grid and labels: four steps up the y axis, three marks on the x axis.
    g.strokeStyle = cssVar('--line');
    g.fillStyle = cssVar('--muted');
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let k = 0; k <= 4; k++) {
      const v = top * k / 4, yy = Math.round(y(v)) + 0.5;
      g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
      g.fillText(fmt(v), pad.l - 6, yy);
    }
    g.textBaseline = 'top';
    [[0, '−' + n + 's'], [(n - 1) / 2, '−' + Math.round(n / 2) + 's'], [n - 1, 'now']].forEach(([i, t]) => {
      g.textAlign = i === 0 ? 'left' : i === n - 1 ? 'right' : 'center';
      g.fillText(t, x(i), h - pad.b + 4);
    });

    // The lines, broken at gaps.
    g.lineWidth = 2;
    g.lineJoin = 'round';
    for (const line of lines) {
      g.strokeStyle = cssVar(line.color);
      g.beginPath();
      let drawing = false;
      line.values.forEach((v, i) => {
        if (v === null) { drawing = false; return; }
        if (drawing) g.lineTo(x(i), y(v)); else g.moveTo(x(i), y(v));
        drawing = true;
      });
      g.stroke();
    }
  }

  // ---- rendering a snapshot ----

  function render(s) {
    last = s;
    const t = s.totals;
    $('total-decisions').textContent = fmtInt(t.allowed + t.denied + t.shadow_denied);
    $('rate-allowed').textContent = fmtRate(s.rates.allowed);
    $('rate-denied').textContent = fmtRate(s.rates.denied);
    $('denied-pct').textContent = pct(s.rates.denied, s.rates.allowed + s.rates.denied + s.rates.shadow_denied);
    document.querySelectorAll('.rate-seconds').forEach((e) => { e.textContent = s.rate_seconds; });
    $('uptime').textContent = fmtDuration((Date.parse(s.time) - Date.parse(s.started)) / 1000);

    renderSeries(s);
    renderTopKeys(s.top_keys);
    renderSources(s.sources);
    renderLatency(s.latency);
    renderBreaker(s.breaker, s.time);
    renderErrors(s.backend_errors);
  }

  // ruleLabel is how the page names a rule: the name its file gives it,
  // else its path.
  function ruleLabel(v) {
    return v.name || v.rule;
  }

  // period is a rule's period as redlimit check writes it: "hour",
  // "6 hours" for a unit_multiplier, "calendar month Europe/Berlin".
  function period(r) {
    if (r.time_zone) return 'calendar ' + r.unit + ' ' + r.time_zone;
    if (r.unit_multiplier > 1) return r.unit_multiplier + ' ' + r.unit + 's';
    return r.unit;
  }

  function renderSeries(s) {
    // The selector lists every series; keep the choice across updates.
    const select = $('series-select');
    const ids = s.series.map((v) => v.domain + SEP + v.rule);
    if (select.options.length !== ids.length + 1 || ids.some((id, i) => select.options[i + 1].value !== id)) {
      select.replaceChildren(el('option', 'all rules'), ...s.series.map((v, i) => {
        const o = el('option', v.domain + ' / ' + ruleLabel(v));
        o.value = ids[i];
        return o;
      }));
      select.options[0].value = '';
      if (!ids.includes(selected)) selected = '';
      select.value = selected;
    }

    const chosen = s.series.find((v) => v.domain + SEP + v.rule === selected);
    const ps = chosen ? chosen.per_second : s.per_second;
    lineChart($('rate-chart'), [
      { values: ps.allowed, color: '--ok' },
      { values: ps.denied, color: '--bad' },
      { values: ps.shadow_denied, color: '--warn' },
    ], fmtInt);

    const tbody = $('series-table').tBodies[0];
    fillRows(tbody, s.series.map((v) => [
      v.domain, ruleLabel(v), fmtRate(v.rates.allowed), fmtRate(v.rates.denied), fmtRate(v.rates.shadow_denied),
      pct(v.rates.denied + v.rates.shadow_denied, v.rates.allowed + v.rates.denied + v.rates.shadow_denied) + '%',
      fmtInt(v.totals.allowed), fmtInt(v.totals.denied + v.totals.shadow_denied),
    ]), [2, 3, 4, 5, 6, 7], 'no decisions yet');
    [...tbody.rows].forEach((tr, i) => {
      if (!s.series[i]) return;
      tr.dataset.id = ids[i];
      tr.classList.toggle('selected', ids[i] === selected);
    });
  }

  function renderTopKeys(keys) {
    fillRows($('top-keys').tBodies[0], keys.map((k, i) => {
      const count = el('td', (k.error ? '≈' : '') + fmtInt(k.count), 'num');
      if (k.error) count.title = 'may overestimate by up to ' + fmtInt(k.error);
      return [i + 1, k.key === '' ? '(empty)' : k.key, k.domain + ' / ' + ruleLabel(k), count];
    }), [0], 'no denials in the last minutes');
  }

  const sourceLabels = {
    store: 'store (Redis or memory)', deny_cache: 'deny cache', local: 'local fallback',
    fail_open: 'fail-open', fail_closed: 'fail-closed',
  };

  function renderSources(sources) {
    const all = sources.reduce((a, v) => a + v.rate, 0);
    fillRows($('sources').tBodies[0], sources.map((v) => {
      const bar = el('div', null, 'bar');
      bar.style.width = pct(v.rate, all) + '%';
      return [sourceLabels[v.source] || v.source, fmtRate(v.rate), fmtInt(v.total), el('td', bar)];
    }), [1, 2]);
  }

  function renderLatency(l) {
    $('latency-seconds').textContent = l.seconds;
    $('latency-summary').textContent = l.count ? fmtMs(l.p50_ms) + ' / ' + fmtMs(l.p99_ms) : '–';
    const gap = (vals) => vals.map((v, i) => (l.count_per_second[i] ? v : null));
    lineChart($('latency-chart'), [
      { values: gap(l.p50_per_second_ms), color: '--accent' },
      { values: gap(l.p99_per_second_ms), color: '--warn' },
    ], fmtMs);
  }

  function renderBreaker(b, now) {
    const e = $('breaker');
    e.textContent = b.state || 'n/a';
    e.className = 'value ' + ({ closed: 'ok', open: 'bad', 'half-open': 'warn' }[b.state] || 'muted');
    $('breaker-since').textContent = b.since
      ? 'for ' + fmtDuration((Date.parse(now) - Date.parse(b.since)) / 1000) : b.state ? '' : 'no breaker reported';
  }

  function renderErrors(e) {
    $('errors-total').textContent = fmtInt(e.total);
    $('errors-total').className = 'value ' + (e.rate > 0 ? 'bad' : '');
    const last = $('errors-last');
    last.textContent = e.last ? new Date(e.last_at).toLocaleTimeString() + ': ' + e.last : 'none';
    last.title = e.last || '';
  }

  // ---- live updates: server-sent events, else polling ----

  function setConn(text, cls) {
    const c = $('conn');
    c.textContent = text;
    c.className = 'badge ' + cls;
  }

  function connect() {
    if (!window.EventSource) { poll(); return; }
    const es = new EventSource('api/events');
    let failures = 0;
    es.onmessage = (m) => {
      failures = 0;
      setConn('live', 'ok');
      render(JSON.parse(m.data));
    };
    es.onerror = () => {
      // EventSource retries by itself; after a few failures in a row, or if
      // it gave up (a 503 when too many dashboards are open), poll instead.
      if (++failures >= 3 || es.readyState === EventSource.CLOSED) {
        es.close();
        poll();
      } else {
        setConn('reconnecting…', 'warn');
      }
    };
  }

  function poll() {
    const tick = async () => {
      try {
        const r = await fetch('api/stats', { cache: 'no-store' });
        if (!r.ok) throw new Error('HTTP ' + r.status);
        render(await r.json());
        setConn('polling', 'warn');
      } catch (err) {
        setConn('offline', 'bad');
      }
      setTimeout(tick, 1000);
    };
    tick();
  }

  // ---- loaded rules ----

  async function loadRules() {
    const box = $('rules');
    try {
      const r = await fetch('api/rules', { cache: 'no-store' });
      if (!r.ok) throw new Error('HTTP ' + r.status);
      showRules(box, await r.json());
    } catch (err) {
      box.replaceChildren(el('span', 'could not load the rules: ' + err.message, 'bad'));
    }
  }

  function showRules(box, data) {
    if (data === null) {
      box.replaceChildren(el('span', 'no rules available', 'muted'));
      return;
    }
    const rules = Array.isArray(data) ? data : data && Array.isArray(data.rules) ? data.rules : null;
    if (!rules || !rules.every((r) => r && typeof r === 'object' && 'path' in r)) {
      box.replaceChildren(el('pre', JSON.stringify(data, null, 2))); // a shape we do not know
      return;
    }
    const table = el('table');
    table.createTHead().append(el('tr'));
    ['Domain', 'Path', 'Name', 'Limit', 'Algorithm', 'On failure', 'Shadow', 'Replaces', 'File'].forEach((h) => {
      table.tHead.rows[0].append(el('th', h));
    });
    const tbody = table.createTBody();
    fillRows(tbody, rules.map((r) => [
      r.domain, r.path, r.name || '',
      r.unlimited ? 'unlimited' : r.requests_per_unit + ' / ' + period(r) + (r.burst ? ', burst ' + r.burst : ''),
      r.algorithm || '', r.failure_policy || '', r.shadow_mode ? 'yes' : '',
      (r.replaces || []).join(', '), r.file ? r.file + (r.line ? ':' + r.line : '') : '',
    ]), [], 'no rules loaded');
    const note = data.global_shadow_mode ? [el('p', 'Global shadow mode is on: nothing is denied.', 'warn')] : [];
    box.className = '';
    box.replaceChildren(...note, table);
  }

  // ---- the try form: POST a RateLimitRequest to the service's /json ----

  // parseDescriptors reads "key=value" lines; a blank line starts another
  // descriptor, and a line without "=" is a key with an empty value.
  function parseDescriptors(text) {
    const descriptors = [];
    let entries = [];
    for (const raw of text.split('\n').concat([''])) {
      const line = raw.trim();
      if (line === '') {
        if (entries.length) descriptors.push({ entries });
        entries = [];
        continue;
      }
      const i = line.indexOf('=');
      entries.push(i < 0 ? { key: line, value: '' } : { key: line.slice(0, i).trim(), value: line.slice(i + 1).trim() });
    }
    return descriptors;
  }

  let trySeq = 0;

  async function submitTry(ev) {
    ev.preventDefault();
    const req = {
      domain: $('try-domain').value.trim(),
      descriptors: parseDescriptors($('try-entries').value),
      hitsAddend: Number($('try-hits').value || 0),
    };
    const body = JSON.stringify(req, null, 2);
    const result = $('try-result');
    const started = performance.now();
    let status = '', text = '', headers = [];
    $('try-submit').disabled = true;
    try {
      const r = await fetch(jsonPath, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      status = r.status + ' ' + r.statusText;
      r.headers.forEach((v, k) => headers.push([k, v, 'HTTP']));
      text = await r.text();
    } catch (err) {
      status = 'failed: ' + err.message;
    } finally {
      $('try-submit').disabled = false;
    }
    let resp = null;
    try { resp = JSON.parse(text); } catch (err) { /* not JSON: shown raw below */ }
    showDecision(resp, status, headers);
    $('try-time').textContent = Math.round(performance.now() - started) + ' ms';
    $('try-bodies').textContent = 'POST ' + jsonPath + '\n' + body + '\n\n' + status + '\n' + text;
    result.hidden = false;
    result.dataset.seq = String(++trySeq); // lets tests wait for each answer
  }

  // showDecision shows a RateLimitResponse in protojson (field names in
  // lowerCamelCase, or as in the .proto; fields at their zero value are
  // left out), or a problem+json error.
  function showDecision(resp, status, headers) {
    const r = resp || {};
    const f = (camel, snake) => (r[camel] !== undefined ? r[camel] : r[snake]);
    const overall = f('overallCode', 'overall_code') || (r.title ? 'error: ' + (r.detail || r.title) : 'UNKNOWN');
    $('try-status').textContent = status;
    const o = $('try-overall');
    o.textContent = overall;
    o.className = overall === 'OK' ? 'ok' : 'bad';

    const statuses = r.statuses || [];
    fillRows($('try-statuses').tBodies[0], statuses.map((st, i) => {
      const lim = st.currentLimit || st.current_limit;
      const remaining = st.limitRemaining ?? st.limit_remaining ?? 0;
      // A protojson Duration is a string of seconds, such as "59.5s".
      const reset = st.durationUntilReset ?? st.duration_until_reset;
      const resetText = reset === undefined ? '0s' : /^[\d.]+s$/.test(reset) ? fmtDuration(Math.ceil(parseFloat(reset))) : reset;
      const code = el('td', st.code || 'UNKNOWN', st.code === 'OK' ? 'ok' : st.code === 'OVER_LIMIT' ? 'bad' : '');
      return [i, code, lim ? (lim.requestsPerUnit ?? lim.requests_per_unit ?? 0) + ' / ' + String(lim.unit || '').toLowerCase() : 'no limit',
        fmtInt(remaining), resetText];
    }), [3], 'no statuses');

    const added = (f('responseHeadersToAdd', 'response_headers_to_add') || []).map((hv) => [hv.key, hv.value, 'response_headers_to_add']);
    fillRows($('try-headers').tBodies[0], headers.concat(added), [], 'no headers');
  }

  // ---- start ----

  $('try-path').textContent = jsonPath;
  $('try-form').addEventListener('submit', submitTry);
  $('series-select').addEventListener('change', (e) => { selected = e.target.value; if (last) render(last); });
  $('series-table').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-id]');
    if (!tr) return;
    selected = tr.dataset.id === selected ? '' : tr.dataset.id;
    $('series-select').value = selected;
    if (last) render(last);
  });
  window.addEventListener('resize', () => { if (last) render(last); });
  connect();
  loadRules();
  setInterval(loadRules, 15000); // the service reloads rules on change
})();
