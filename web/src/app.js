/* cellcast dashboard — one script, no framework. Reads cellcastd's JSON API (proto/openapi.yaml)
 * from the same origin and polls it every 5 s while the tab is visible. Routes: #/ (incidents
 * and silences, the first page), #/alerts (alerts firing now), #/incidents/{id} (an incident's
 * member cells and their alerts) and #/cells/{id} (a cell's KPIs, forecast bands, past
 * forecasts, alert episodes and attention); the cell list beside them groups and filters by the
 * cells' site and region labels. Optional routes (incidents and silences with alerts off, past
 * forecasts, ranges) that answer 404 are hidden.
 * The replies it polls carry ETags (the series, and the cell, list, firing alerts and /v1/info):
 * the browser's cache asks with If-None-Match, and a refresh that finds nothing new gets 304s.
 * Actions (admin token, asked once when the daemon answers 401/403 and kept in sessionStorage):
 * a verdict on an alert (POST /v1/alerts/{id}/feedback), a silence from an incident or a cell
 * (POST /v1/silences) and expiring one (DELETE /v1/silences/{id}).
 * window.cellcast exposes the state (charts, readiness marks) to the browser test. */
'use strict';
(() => {
  const POLL_MS = 5000;
  const ROW_H = 28;
  // what the charts draw, and no more (docs/dashboard.md): the observed values and the past
  // forecasts' means (one-step; horizon-end once its series is shown) with 4 significant digits
  // (a 210 px chart shows ~3), at most two points per pixel of a chart's width
  const HISTORY_Q = 'digits=4&fields=values';
  const pastQ = () => `digits=4&fields=one_step${S.horizonEnd ? ',horizon_end' : ''},mean,scores`;
  const $ = (id) => document.getElementById(id);
  const cssv = (n) => getComputedStyle(document.documentElement).getPropertyValue(n).trim();
  const SEV_RANK = { critical: 2, warning: 1 };
  // API times are RFC 3339 strings (proto/openapi.yaml); unix seconds are accepted too
  const unixOf = (v) => (typeof v === 'string' ? Math.floor(Date.parse(v) / 1000) : v);

  const S = {
    cells: [], // from /v1/cells: {id, state, last_ts, labels, ...}
    cellById: new Map(),
    view: [], // cells after search, filters and sort, as listed; with group headers ({hdr: true}) when grouped
    groupBy: '', // '' | 'site' | 'region'
    fSite: '',
    fRegion: '',
    collapsed: new Set(), // `${groupBy}\0${name}` of the groups folded
    incidents: undefined, // from /v1/incidents (undefined: not read yet; null: the daemon has none, alerts off)
    silences: undefined, // from /v1/silences, read while the incidents page is shown
    page: null, // incidents | alerts | incident | cell (null until the route is read)
    incidentId: null,
    incView: null, // the incident view's alerts: {id, sig, episodes, missing, capped}
    alertsByCell: new Map(), // id -> {n, sev}
    firing: [],
    detail: new Map(), // id -> {t, z, kpis} from /v1/cells/{id}, for the visible rows
    kpiCols: [],
    route: null, // cell id or null
    hours: 168,
    charts: new Map(), // kpi -> uPlot
    zoomed: false,
    cell: null, // the cell view's data
    attLayer: -1,
    ready: {},
    errors: 0,
    polls: 0,
  };
  window.cellcast = S;

  /* ---- fetching ---- */

  class HttpError extends Error {
    constructor(status, detail) {
      super(`HTTP ${status}${detail ? ': ' + detail : ''}`);
      this.status = status;
    }
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: 'application/json' } });
    if (!r.ok) {
      let detail = '';
      try { detail = (await r.json()).detail || ''; } catch (e) { /* not problem+json */ }
      throw new HttpError(r.status, detail);
    }
    return r.json();
  }

  /* An optional part of a cell: null when the daemon does not have the route (404; added
   * after the page, see docs/dashboard.md), has it off (attention without
   * engine.keep_attention: 404) or has nothing yet (a cold cell's forecast: 503), so that
   * part is hidden. */
  async function getOptional(url) {
    try {
      return await getJSON(url);
    } catch (e) {
      if (e instanceof HttpError && (e.status === 404 || e.status === 400 || e.status === 503)) return null;
      throw e;
    }
  }

  async function getPaged(base, key, limit) {
    const out = [];
    let after = null;
    for (let i = 0; i < 1000; i++) {
      const sep = base.includes('?') ? '&' : '?';
      const d = await getJSON(`${base}${sep}limit=${limit}${after != null ? '&after=' + encodeURIComponent(after) : ''}`);
      for (const x of d[key]) out.push(x);
      if (d.next == null || d[key].length === 0) break;
      after = d.next;
    }
    return out;
  }

  /* ---- actions: the admin token, and writes ----
   * The token is asked for when the daemon answers 401 (none sent) or 403 "forbidden" (a wrong
   * one), kept in sessionStorage (this tab only; never in the URL or localStorage) and sent as
   * `Authorization: Bearer <token>` (daemon/auth.c). A 403 admin-disabled (no admin.token in
   * the daemon's configuration) is shown, not asked about. */
  const TOKEN_KEY = 'cellcast.admin_token';
  const USER_KEY = 'cellcast.user';
  const store = {
    get: (k) => { try { return sessionStorage.getItem(k) || ''; } catch (e) { return ''; } },
    set: (k, v) => { try { if (v) sessionStorage.setItem(k, v); else sessionStorage.removeItem(k); } catch (e) { /* private mode */ } },
  };

  function askToken(why) {
    const dlg = $('token-dlg');
    $('token-why').textContent = why;
    $('token-input').value = '';
    return new Promise((resolve) => {
      dlg.addEventListener('close', () => {
        const t = dlg.returnValue === 'ok' ? $('token-input').value.trim() : '';
        resolve(t || null);
      }, { once: true });
      dlg.returnValue = '';
      dlg.showModal();
      $('token-input').focus();
    });
  }

  async function send(method, url, body) {
    for (let tries = 0; ; tries++) {
      const headers = { Accept: 'application/json' };
      const tok = store.get(TOKEN_KEY);
      if (tok) headers.Authorization = 'Bearer ' + tok;
      if (body !== undefined) headers['Content-Type'] = 'application/json';
      const r = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      let reply = null;
      try { reply = await r.json(); } catch (e) { /* no JSON body */ }
      if (r.ok) return reply;
      const detail = (reply && reply.detail) || '';
      const type = (reply && reply.type) || '';
      if ((r.status === 401 || (r.status === 403 && !type.endsWith('/admin-disabled'))) && tries < 3) {
        store.set(TOKEN_KEY, '');
        const t = await askToken(r.status === 401
          ? 'This action needs cellcastd\'s admin token (admin.token). It is kept in this tab only (sessionStorage).'
          : 'The daemon refused the token (wrong admin token): enter it again.');
        if (t) {
          store.set(TOKEN_KEY, t);
          continue;
        }
      }
      throw new HttpError(r.status, detail);
    }
  }

  /* The outcome of an action, in a live region above the page (the daemon's own words on a
   * refusal: a 422 names the bad field, a 409 says why). */
  function say(text, err) {
    const m = $('action-msg');
    m.textContent = text;
    m.className = 'action-msg' + (err ? ' err' : '');
    m.hidden = !text;
  }

  /* ---- formatting ---- */

  function fmt(v) {
    if (v == null || !Number.isFinite(v)) return '–';
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    if (a >= 100) return v.toFixed(0);
    if (a >= 10) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    return v.toFixed(3);
  }
  const fmtInt = (v) => (v == null ? '–' : Math.abs(v) >= 1e4 ? fmt(v) : String(Math.round(v)));
  const fmtBytes = (b) => (b >= 1 << 30 ? (b / (1 << 30)).toFixed(1) + ' GiB' : (b / (1 << 20)).toFixed(0) + ' MiB');
  function fmtDur(s) {
    if (s < 120) return s.toFixed(0) + ' s';
    if (s < 7200) return (s / 60).toFixed(0) + ' min';
    if (s < 172800) return (s / 3600).toFixed(1) + ' h';
    return (s / 86400).toFixed(1) + ' d';
  }
  const tsSec = (iso) => Date.parse(iso) / 1000;
  const fmtTime = (sec) => new Date(sec * 1000).toISOString().replace('T', ' ').slice(0, 16);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  const cellHref = (id) => '#/cells/' + encodeURIComponent(id);
  const incidentHref = (id) => '#/incidents/' + encodeURIComponent(id);
  const labelOf = (c, k) => (c && c.labels && c.labels[k]) || '';

  function attribution(a) {
    const box = el('span', 'attr');
    for (const x of (a.attribution || []).slice(0, 4)) {
      const s = el('span');
      const band = x.lo != null && x.hi != null ? ` [${fmt(x.lo)}, ${fmt(x.hi)}]` : '';
      const z = x.z != null ? ` z=${fmt(x.z)}` : '';
      s.append(el('b', null, x.kpi), ` ${fmt(x.observed)} vs ${fmt(x.expected)}${band}${z}`);
      /* why the KPI is here when its z does not say it (the rules of docs/operations.md §5) */
      const why = [];
      if (x.novelty) why.push(x.novelty === 'shape' ? 'new shape' : 'new value');
      if (x.profile != null) why.push(`usual ${fmt(x.profile_expected)}`);
      if (x.cusum != null) why.push('sustained');
      if (why.length) s.append(' ', el('i', 'why', why.join(', ')));
      box.append(s, el('br'));
    }
    return box;
  }
  const reasonOf = (a) => (a.kind === 'anomaly' ? 'anomaly' : a.reason) + (a.kpi ? ' · ' + a.kpi : '');

  /* ---- health ---- */

  function renderHealth(info) {
    const box = $('health');
    box.textContent = '';
    if (!info) return;
    const tiles = [
      ['ingest', fmtInt(info.ingest?.records_per_s) + ' rec/s'],
      ['kafka lag', fmtInt(info.kafka?.lag), (info.kafka?.lag ?? 0) > 10000 ? 'bad' : (info.kafka?.lag ?? 0) > 1000 ? 'warnv' : ''],
      ['step p99', info.batching ? fmt(info.batching.step_p99_s * 1000) + ' ms' : '–',
        (info.batching?.step_p99_s ?? 0) > 1 ? 'warnv' : ''],
      ['cells', fmtInt(info.cells?.resident)],
      ['rss', info.memory ? fmtBytes(info.memory.rss_bytes) : '–'],
      ['model', info.model?.name || '–'],
      ['up', info.uptime_s != null ? fmtDur(info.uptime_s) : '–'],
    ];
    /* the trainer's validation MAE against the last value's (absent for older model files):
     * above 1.02 the model's mean lost to "no change" where it was validated */
    const vs = info.model?.val_mae_vs_last;
    if (vs != null)
      tiles.splice(tiles.length - 1, 0, ['MAE vs last', fmt(vs), vs > 1.02 ? 'warnv' : '',
        'validation MAE of the model over the last value\'s (cellcast train); below 1 = better']);
    for (const [l, v, cls, title] of tiles) {
      const t = el('div', 'tile' + (cls ? ' ' + cls : ''));
      if (title) t.title = title;
      t.append(el('span', 'l', l), el('b', null, v));
      box.append(t);
    }
    renderLearning(info.model);
  }

  /* ---- the model in service (model.source kafka: cellcastd follows `cellcast learn`) ----
   * waiting: how much data the learner has had and when its first model is due (data time);
   * serving: the learned model, its held-out scores against the baselines (the learner's
   * record), its live MASE and the last swaps and rollbacks (GET /v1/info's model.serving) */
  const shortTime = (s) => (s ? s.replace('T', ' ').replace(/:\d\dZ$/, 'Z') : '–');
  function renderLearning(model) {
    const box = $('learning');
    const sv = model?.serving;
    box.textContent = '';
    box.hidden = !sv || sv.source !== 'kafka';
    if (box.hidden) return;
    const part = (label, value, cls) => {
      if (box.childNodes.length) box.append(el('span', 'sep', '·'));
      box.append(el('span', 'l', label), el('b', cls || null, value));
    };
    const L = sv.learning || {};
    if (L.state === 'waiting') {
      part('learning:', `${fmt(L.data_hours)} hours of data, first model expected at ${shortTime(L.first_model_expected_at)} (data time)`);
      if (L.unknown_kpi_records) part('records of KPIs the model lacks', fmtInt(L.unknown_kpi_records));
      part('serving meanwhile', model.name || '–');
    } else {
      const rec = sv.record || {};
      const cand = (rec.candidates || []).find((c) => c.kind === rec.published);
      part('model in service', `${model.name || '–'} ${sv.hash || ''}`);
      const swap = (sv.history || []).find((h) => h.hash === sv.hash && h.event !== 'start');
      if (swap) part(swap.event === 'rollback' ? 'rolled back to at' : 'published', shortTime(swap.at));
      if (cand?.mase != null) {
        const b = rec.baselines || {};
        part('held-out MASE', `${fmt(cand.mase)} (${rec.published}) vs seasonal naive ${fmt(b.snaive_1d_mase)}, linear ${fmt(b.linear_mase)}`);
      }
    }
    const live = sv.live || {};
    if (live.mase != null) part('live MASE', fmt(live.mase), live.previous?.mase != null && live.mase > live.previous.mase * 1.1 ? 'bad' : '');
    if (live.verdict) box.title = live.verdict;
    const hist = (sv.history || []).filter((h) => h.event !== 'start').slice(0, 4);
    if (hist.length)
      part('history', hist.map((h) => `${h.event} ${shortTime(h.at)} ${(h.from || '').slice(0, 6)}→${h.hash.slice(0, 6)}`).join(', '),
        hist[0].event === 'rollback' ? 'bad' : '');
  }

  /* ---- the cell list (virtual: only the visible rows exist) ---- */

  /* Search (id or state) and the site/region filters, from the labels of the /v1/cells rows
   * the page holds anyway (no read per filter); then firing cells first. Grouped, each group
   * (a site, a region, or the cells without that label) is a header row with its cells and
   * how many of them have alerts firing; groups with critical alerts first, then by that count. */
  function sortAndFilter() {
    const q = $('search').value.trim().toLowerCase();
    const A = S.alertsByCell;
    const fs = S.fSite, fr = S.fRegion;
    const v = q || fs || fr
      ? S.cells.filter((c) => (!q || c.id.toLowerCase().includes(q) || (c.state || '').includes(q)) &&
        (!fs || labelOf(c, 'site') === fs) && (!fr || labelOf(c, 'region') === fr))
      : S.cells.slice();
    v.sort((a, b) => {
      const x = A.get(a.id), y = A.get(b.id);
      const rx = x ? 10 + SEV_RANK[x.sev] : 0, ry = y ? 10 + SEV_RANK[y.sev] : 0;
      if (rx !== ry) return ry - rx;
      if (x && y && x.n !== y.n) return y.n - x.n;
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    S.view = S.groupBy ? grouped(v) : v;
    const groups = S.groupBy ? S.view.filter((x) => x.hdr).length : 0;
    $('count').textContent = (q || fs || fr ? `${v.length} of ${S.cells.length}` : `${S.cells.length} cells`) +
      (groups ? ` · ${groups} ${S.groupBy === 'site' ? 'sites' : 'regions'}` : '');
    $('list-inner').style.height = S.view.length * ROW_H + 'px';
    renderRows();
  }

  function grouped(cells) {
    const key = S.groupBy, A = S.alertsByCell;
    const G = new Map();
    for (const c of cells) {
      const name = labelOf(c, key);
      let g = G.get(name);
      if (!g) G.set(name, (g = { hdr: true, name, key: key + '\0' + name, cells: [], firing: 0, crit: 0 }));
      g.cells.push(c);
      const al = A.get(c.id);
      if (al) {
        g.firing++;
        if (al.sev === 'critical') g.crit = 1;
      }
    }
    const gs = [...G.values()].sort((a, b) => b.crit - a.crit || b.firing - a.firing ||
      (a.name === '') - (b.name === '') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const out = [];
    for (const g of gs) {
      out.push(g);
      if (!S.collapsed.has(g.key)) for (const c of g.cells) out.push(c);
    }
    return out;
  }

  /* The site and region choices: the labels the cells carry (the controls stay hidden while no
   * cell has one, i.e. without a topology file). Rebuilt only when the set of labels moved. */
  let labelSig = '';
  function updateLabelChoices() {
    const sites = new Set(), regions = new Set();
    for (const c of S.cells) {
      if (!c.labels) continue;
      if (c.labels.site) sites.add(c.labels.site);
      if (c.labels.region) regions.add(c.labels.region);
    }
    const ss = [...sites].sort(), rs = [...regions].sort();
    const sig = ss.join('\n') + '\0' + rs.join('\n');
    if (sig === labelSig) return;
    labelSig = sig;
    $('topo-ctl').hidden = !ss.length && !rs.length && !S.groupBy && !S.fSite && !S.fRegion;
    const fill = (sel, names, cur) => {
      sel.textContent = '';
      sel.append(new Option('all', ''));
      if (cur && !names.includes(cur)) names = [cur, ...names]; // a choice made stays until changed
      for (const n of names) sel.append(new Option(n, n));
      sel.value = cur;
    };
    fill($('f-site'), ss, S.fSite);
    fill($('f-region'), rs, S.fRegion);
  }

  const rowPool = [];
  const hdrPool = [];
  function hdrEl(i) {
    if (hdrPool[i]) return hdrPool[i];
    const h = el('div', 'grp');
    h.append(el('span', 'tw'), el('span', 'gname'), el('span', 'badge gf'), el('span', 'gn'));
    $('list-inner').append(h);
    hdrPool[i] = h;
    return h;
  }
  function rowEl(i) {
    if (rowPool[i]) return rowPool[i];
    const r = el('a', 'row row-grid');
    r.append(el('span', 'dot'), el('span', 'id'), el('span', 'st'), el('span', 'num'), el('span', 'num'));
    for (let k = 0; k < 2; k++) r.append(el('span', 'num'));
    $('list-inner').append(r);
    rowPool[i] = r;
    return r;
  }

  function renderRows() {
    const list = $('list');
    const first = Math.max(0, Math.floor(list.scrollTop / ROW_H) - 4);
    const n = Math.min(S.view.length - first, Math.ceil(list.clientHeight / ROW_H) + 8);
    const now = Date.now();
    const stale = [];
    let used = 0, hused = 0;
    for (let i = 0; i < n; i++) {
      const c = S.view[first + i];
      if (c.hdr) {
        const h = hdrEl(hused++);
        h.hidden = false;
        h.style.top = (first + i) * ROW_H + 'px';
        h.dataset.key = c.key;
        const hs = h.children;
        hs[0].textContent = S.collapsed.has(c.key) ? '▸' : '▾';
        hs[1].textContent = c.name || `(no ${S.groupBy})`;
        hs[2].textContent = String(c.firing);
        hs[2].className = 'badge gf' + (c.crit ? ' crit' : '');
        hs[2].title = `${c.firing} of its cells with alerts firing`;
        hs[3].textContent = `${c.firing} of ${c.cells.length} cells firing`;
        continue;
      }
      const r = rowEl(used++);
      const al = S.alertsByCell.get(c.id);
      const d = S.detail.get(c.id);
      r.hidden = false;
      r.style.top = (first + i) * ROW_H + 'px';
      r.href = cellHref(c.id);
      r.classList.toggle('sel', c.id === S.route);
      const cs = r.children;
      cs[0].className = 'dot' + (al ? ' ' + al.sev : c.state === 'live' ? '' : ' idle');
      cs[1].textContent = c.id;
      cs[1].title = c.id;
      cs[2].textContent = c.state || '';
      cs[3].textContent = al ? String(al.n) : '';
      cs[4].textContent = d ? fmt(d.z) : '';
      for (let k = 0; k < 2; k++) {
        const name = S.kpiCols[k];
        cs[5 + k].textContent = d && name && d.kpis[name] ? fmt(d.kpis[name].observed) : '';
      }
      // a row's figures move with its steps only: read again when the list's last_ts moved
      if (!d || (d.last_ts !== c.last_ts && now - d.t > POLL_MS)) stale.push(c.id);
    }
    for (let i = used; i < rowPool.length; i++) rowPool[i].hidden = true;
    for (let i = hused; i < hdrPool.length; i++) hdrPool[i].hidden = true;
    if (stale.length) loadDetails(stale);
  }

  /* Last observation and score of the visible rows only: a 1,000-cell list costs ~30 reads. */
  let detailBusy = false;
  async function loadDetails(ids) {
    // a deep link's cell view comes first: these ~40 reads would queue before its own
    if (detailBusy || (S.route && !S.ready.cell && !S.cellFailed)) return;
    detailBusy = true;
    try {
      const queue = ids.slice(0, 60);
      const worker = async () => {
        while (queue.length) {
          const id = queue.shift();
          try {
            const c = await getJSON('/v1/cells/' + encodeURIComponent(id));
            const lo = c.last_observation || {};
            S.detail.set(id, { t: Date.now(), last_ts: c.last_ts, z: c.scores ? c.scores.score : null, kpis: lo.kpis || {} });
            if (!S.kpiCols.length && lo.kpis) setKpiCols(Object.keys(lo.kpis));
          } catch (e) {
            S.detail.set(id, { t: Date.now(), z: null, kpis: {} });
          }
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
    } finally {
      detailBusy = false;
    }
    renderRows();
  }

  function setKpiCols(names) {
    S.kpiCols = names.slice(0, 2);
    const head = document.querySelector('.cols');
    while (head.children.length > 5) head.lastChild.remove();
    for (const n of S.kpiCols) {
      const s = el('span', 'num', n.replace(/_/g, ' '));
      s.title = n + ' (last observed)';
      head.append(s);
    }
  }

  /* ---- alerts firing now ---- */

  function renderFiring() {
    const tb = $('firing-table').tBodies[0];
    tb.textContent = '';
    const list = S.firing.slice().sort((a, b) => (SEV_RANK[b.severity] || 0) - (SEV_RANK[a.severity] || 0) ||
      (b.score || 0) - (a.score || 0));
    for (const a of list.slice(0, 500)) {
      const tr = el('tr');
      const td = cellTd(a);
      const tdA = el('td');
      tdA.append(attribution(a));
      tr.dataset.id = a.id;
      tr.append(el('td', 'sev ' + a.severity, a.severity), td, el('td', null, a.kind), el('td', null, reasonOf(a)),
        el('td', null, fmtTime(tsSec(a.start_time))), el('td', 'num', a.score == null ? '' : fmt(a.score)), tdA,
        verdictTd({ id: a.id, a }));
      tb.append(tr);
    }
    $('firing-empty').hidden = S.firing.length > 0;
    $('firing-table').hidden = S.firing.length === 0;
  }

  /* an alert's cell: a link to its cell view, with its site (the alert's labels) beside it */
  function cellTd(a) {
    const td = el('td');
    const link = el('a', 'cell-link', a.cell_id);
    link.href = cellHref(a.cell_id);
    td.append(link);
    const site = labelOf(a, 'site');
    if (site) td.append(el('span', 'lbl', site));
    return td;
  }

  /* ---- incidents (the first page) and silences ---- */

  const INCIDENTS_LIMIT = 200; // all the firing ones first (the daemon's order), then the newest resolved
  const INC_ROWS = 200;

  /* firing before resolved; firing: critical first, then the newest start; resolved: the
   * newest end first */
  function incidentOrder(a, b) {
    const fa = a.state === 'firing' ? 1 : 0, fb = b.state === 'firing' ? 1 : 0;
    if (fa !== fb) return fb - fa;
    if (fa) {
      const r = (SEV_RANK[b.severity] || 0) - (SEV_RANK[a.severity] || 0) || tsSec(b.start_time) - tsSec(a.start_time);
      if (r) return r;
    } else {
      const r = tsSec(b.end_time || b.time) - tsSec(a.end_time || a.time);
      if (r) return r;
    }
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  }

  /* How long it lasted; a firing one up to its cells' newest record (data time, so a replay
   * or a feed behind the wall clock reads right), or its last transition. */
  function incidentSeconds(inc) {
    const t0 = tsSec(inc.start_time);
    if (inc.end_time) return tsSec(inc.end_time) - t0;
    let now = tsSec(inc.time);
    for (const id of inc.cells) {
      const c = S.cellById.get(id);
      if (c && c.last_ts) now = Math.max(now, tsSec(c.last_ts));
    }
    return Math.max(0, now - t0);
  }
  const cellsOf = (inc) => `${inc.cells.length}${inc.cells_total != null ? ' of ' + inc.cells_total : ''}`;
  const kpisOf = (inc) => (inc.kpis.length > 4 ? inc.kpis.slice(0, 4).join(', ') + ' …' : inc.kpis.join(', '));

  function renderIncidents() {
    const tb = $('inc-table').tBodies[0];
    tb.textContent = '';
    const list = S.incidents || [];
    for (const inc of list.slice(0, INC_ROWS)) {
      const tr = el('tr', 'inc-row ' + inc.state);
      tr.dataset.id = inc.id;
      const sum = el('a', 'sum', inc.summary);
      sum.href = incidentHref(inc.id);
      const tdS = el('td');
      tdS.append(sum);
      tr.append(el('td', 'sev ' + inc.severity, inc.severity), el('td', inc.state === 'firing' ? 'st-firing' : null, inc.state),
        el('td', null, inc.scope), tdS, el('td', null, fmtTime(tsSec(inc.start_time))),
        el('td', 'num', fmtDur(incidentSeconds(inc))), el('td', 'num', cellsOf(inc)), el('td', null, kpisOf(inc)));
      tb.append(tr);
    }
    $('inc-empty').hidden = list.length > 0;
    $('inc-table').hidden = list.length === 0;
    if (S.incidents && !S.ready.incidents) {
      S.ready.incidents = performance.now();
      performance.mark('cc-incidents-ready');
    }
  }

  function renderBadges() {
    const firing = (S.incidents || []).filter((i) => i.state === 'firing');
    $('inc-count').textContent = String(firing.length);
    $('inc-count').className = 'badge' + (firing.some((i) => i.severity === 'critical') ? ' crit' : '');
    $('firing-count').textContent = String(S.firing.length);
    $('firing-count').className = 'badge' + (S.firing.some((a) => a.severity === 'critical') ? ' crit' : '');
  }

  const matcherText = (m) => `${m.name}${m.isEqual === false ? (m.isRegex ? '!~' : '!=') : m.isRegex ? '=~' : '='}"${m.value.replace(/["\\]/g, '\\$&')}"`;
  /* weekly windows as the daemon lists them (one a day), the days of the same hours together:
   * "mon, wed 02:00–04:00" */
  function recurrenceText(rec) {
    if (!rec || !rec.weekly) return '';
    const byHours = new Map();
    for (const w of rec.weekly) {
      const k = `${w.start}–${w.end}`;
      byHours.set(k, [...(byHours.get(k) || []), ...(w.days || ['every day'])]);
    }
    const tz = rec.timezone && rec.timezone !== 'UTC' ? ` (${rec.timezone})` : '';
    return [...byHours].map(([h, days]) => `${days.join(', ')} ${h}`).join('; ') + tz;
  }
  const untilText = (t) => (t && t.startsWith('9999') ? 'no end' : fmtTime(tsSec(t)));
  const sinceText = (t) => (tsSec(t) <= 0 ? 'always' : fmtTime(tsSec(t))); // a configuration's default start
  function renderSilences() {
    $('silences-box').hidden = !S.silences;
    if (!S.silences) return;
    const tb = $('sil-table').tBodies[0];
    tb.textContent = '';
    const list = S.silences.filter((x) => x.status && x.status.state !== 'expired')
      .sort((a, b) => (a.status.state === 'active' ? 0 : 1) - (b.status.state === 'active' ? 0 : 1) || tsSec(a.endsAt) - tsSec(b.endsAt));
    for (const x of list.slice(0, 200)) {
      const tr = el('tr');
      tr.dataset.id = x.id;
      const nw = x.status.nextWindow;
      const tdX = el('td');
      const b = el('button', 'act small-btn', 'Expire');
      b.type = 'button';
      b.dataset.expire = x.id;
      b.setAttribute('aria-label', `Expire silence ${x.id}`);
      if (x.source === 'config') b.title = 'from the configuration (silences.file): read-only, the daemon refuses; edit the file and reload';
      tdX.append(b);
      tr.append(el('td', null, x.status.state), el('td', 'attr', x.matchers.map(matcherText).join(', ')),
        el('td', null, sinceText(x.startsAt)), el('td', null, untilText(x.endsAt)),
        el('td', null, recurrenceText(x.recurrence)), el('td', null, nw ? `${sinceText(nw.startsAt)} – ${untilText(nw.endsAt)}` : ''),
        el('td', null, x.maintenance ? 'yes' : ''), el('td', null, x.source || ''),
        el('td', null, x.createdBy || ''), el('td', null, x.comment || ''), tdX);
      tb.append(tr);
    }
    $('sil-count').textContent = String(list.length);
    $('sil-empty').hidden = list.length > 0;
    $('sil-table').hidden = list.length === 0;
  }

  /* ---- one incident: its member cells and their alerts ---- */

  const INC_MAX_CELLS = 50; // a region incident's alerts are read for its first 50 cells

  /* Each member cell's alert transitions (/v1/cells/{id}/alerts, cached per step and alert
   * transition by the daemon), as episodes, kept when the incident lists their alert id; 4
   * reads at a time. An alert no longer in the cell's history (the daemon keeps the newest
   * 10,000 transitions) but firing is taken from the firing list. */
  async function loadIncidentAlerts(inc) {
    /* evidence members (<cell>:evidence:<class>:<step>, the cells together as evidence) are
     * not alerts: counted apart, not looked for in the cells' alerts */
    const isEvidence = (id) => id.includes(':evidence:');
    const want = new Set(inc.alerts.filter((id) => !isEvidence(id)));
    const evidence = inc.alerts.length - want.size;
    const queue = inc.cells.slice(0, INC_MAX_CELLS);
    const found = new Map();
    const worker = async () => {
      while (queue.length) {
        const id = queue.shift();
        const r = await getOptional(`/v1/cells/${encodeURIComponent(id)}/alerts?limit=1000`);
        for (const ep of episodesOf(r ? r.alerts : [])) if (want.has(ep.id)) found.set(ep.id, ep);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    for (const a of S.firing)
      if (want.has(a.id) && !found.has(a.id)) found.set(a.id, { id: a.id, start: tsSec(a.start_time), end: null, a });
    return { episodes: [...found.values()], missing: want.size - found.size, evidence,
      capped: Math.max(0, inc.cells.length - INC_MAX_CELLS) };
  }

  const incidentSig = (inc) => `${inc.time}|${inc.alerts.length}|${inc.firing_alerts.join(',')}`;

  function renderIncidentHead() {
    const id = S.incidentId;
    const inc = (S.incidents || []).find((i) => i.id === id);
    $('inc-title').textContent = inc ? inc.summary : id;
    $('inc-cells').textContent = '';
    if (!inc) {
      $('inc-meta').textContent = S.incidents === undefined ? 'loading…'
        : S.incidents === null ? 'this daemon has no incidents (alerts are off)'
          : `not among the last ${INCIDENTS_LIMIT} incidents`;
      $('inc-alerts').hidden = true;
      $('inc-silence').hidden = true;
      return null;
    }
    /* a silence of the incident's group: its site, region or cell */
    const m = inc.scope === 'site' && inc.site ? ['site', inc.site] : inc.scope === 'region' && inc.region ? ['region', inc.region]
      : inc.scope === 'cell' && inc.cells.length ? ['cell', inc.cells[0]] : null;
    S.incSilence = m ? { matchers: [{ name: m[0], value: m[1], isRegex: false, isEqual: true }], what: `${m[0]} ${m[1]}` } : null;
    $('inc-silence').hidden = !m;
    const where = [inc.site && `site ${inc.site}`, inc.region && `region ${inc.region}`].filter(Boolean).join(', ');
    $('inc-meta').textContent = `${inc.severity} · ${inc.state} · scope ${inc.scope} (${inc.group})` + (where ? ` · ${where}` : '') +
      ` · since ${fmtTime(tsSec(inc.start_time))} UTC` + (inc.end_time ? ` until ${fmtTime(tsSec(inc.end_time))}` : '') +
      ` · ${fmtDur(incidentSeconds(inc))} · ${cellsOf(inc)} cells · ${inc.alerts.length} alerts (${inc.firing_alerts.length} firing)` +
      (inc.kpis.length ? ` · KPIs ${inc.kpis.join(', ')}` : '') + ` · ${inc.id}`;
    for (const c of inc.cells) {
      const a = el('a', S.alertsByCell.has(c) ? 'firing' : null, c);
      a.href = cellHref(c);
      $('inc-cells').append(a);
    }
    return inc;
  }

  function renderIncidentAlerts() {
    const v = S.incView;
    const tb = $('inc-alerts').tBodies[0];
    tb.textContent = '';
    const eps = v.episodes.slice().sort((a, b) => (a.end == null ? 0 : 1) - (b.end == null ? 0 : 1) ||
      (SEV_RANK[b.a.severity] || 0) - (SEV_RANK[a.a.severity] || 0) || b.start - a.start || (a.id < b.id ? -1 : 1));
    for (const ep of eps) {
      const a = ep.a, tr = el('tr'), tdA = el('td');
      tr.dataset.id = ep.id;
      tdA.append(attribution(a));
      tr.append(el('td', 'sev ' + a.severity, a.severity), el('td', ep.end == null ? 'st-firing' : null, ep.end == null ? 'firing' : 'resolved'),
        cellTd(a), el('td', null, a.kind), el('td', null, reasonOf(a)), el('td', null, fmtTime(ep.start)),
        el('td', null, ep.end == null ? '' : fmtTime(ep.end)), el('td', 'num', a.score == null ? '' : fmt(a.score)), tdA,
        verdictTd(ep));
      tb.append(tr);
    }
    $('inc-alerts').hidden = eps.length === 0;
    const notes = [];
    if (v.capped) notes.push(`the alerts of ${v.capped} more cells are not read here (their cell views have them)`);
    if (v.missing > 0) notes.push(`${v.missing} of its alerts are no longer in the daemon's alert history`);
    if (v.evidence > 0) notes.push(`${v.evidence} of its members joined on the cells' evidence, before an alert of their own`);
    $('inc-alerts-note').textContent = notes.join('; ');
    $('inc-alerts-note').hidden = !notes.length;
    S.ready.incidentAlerts = (S.ready.incidentAlerts || 0) + 1;
  }

  /* The incident's alerts are read again only when the incident moved (a transition, an alert
   * joined or resolved). */
  async function refreshIncident() {
    const id = S.incidentId;
    const inc = renderIncidentHead();
    if (!inc) return;
    const sig = incidentSig(inc);
    if ((S.incView && S.incView.id === id && S.incView.sig === sig) || S.incLoading === id + sig) return;
    S.incLoading = id + sig;
    try {
      const r = await loadIncidentAlerts(inc);
      if (S.incidentId !== id) return;
      S.incView = { id, sig, ...r };
      renderIncidentAlerts();
    } finally {
      if (S.incLoading === id + sig) S.incLoading = null;
    }
  }

  /* ---- actions on alerts and silences ---- */

  const VERDICT_TEXT = { false_alarm: 'false alarm', confirmed: 'confirmed' };
  /* An alert's verdict (its `feedback`: GET /v1/cells/{id}/alerts, /v1/alerts/firing) and the two buttons that
   * give one (POST /v1/alerts/{id}/feedback). */
  function verdictTd(ep) {
    const a = ep.a, fb = a.feedback, td = el('td', 'verdict');
    const v = el('span', 'fb' + (fb ? ' ' + fb.verdict : ''), fb ? VERDICT_TEXT[fb.verdict] || fb.verdict : '');
    if (fb) v.title = `${fb.user ? 'by ' + fb.user + ', ' : ''}${shortTime(fb.time)}${fb.comment ? ': ' + fb.comment : ''}`;
    td.append(v);
    for (const [verdict, label] of [['false_alarm', 'False alarm'], ['confirmed', 'Confirmed']]) {
      const b = el('button', 'act small-btn', label);
      b.type = 'button';
      b.dataset.alert = ep.id;
      b.dataset.verdict = verdict;
      b.setAttribute('aria-label', `${label}: alert ${ep.id}`);
      td.append(b);
    }
    return td;
  }

  async function onVerdict(ev) {
    const b = ev.target.closest('button[data-verdict]');
    if (!b) return;
    const id = b.dataset.alert, verdict = b.dataset.verdict;
    b.disabled = true;
    try {
      const r = await send('POST', `/v1/alerts/${encodeURIComponent(id)}/feedback`, { verdict, user: store.get(USER_KEY) || null });
      const fb = { verdict: r.verdict, comment: r.comment, user: r.user, time: r.time };
      for (const eps of [S.incView && S.incView.episodes, S.cell && S.cell.episodes])
        for (const ep of eps || []) if (ep.id === id) ep.a.feedback = fb;
      for (const a of S.firing) if (a.id === id) a.feedback = fb;
      say(`${id}: ${VERDICT_TEXT[r.verdict]} recorded` +
        (r.kpis && r.kpis.length ? ` (the bar of ${r.kpis.join(', ')} raised, ×${fmt(r.bar)})` : ''));
      if (S.page === 'incident' && S.incView) renderIncidentAlerts();
      if (S.page === 'cell' && S.cell) renderCellAlerts();
      if (S.page === 'alerts') renderFiring();
    } catch (e) {
      say(`${id}: ${e.message}`, true);
    } finally {
      b.disabled = false;
    }
  }

  const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
  function openSilence(pre) {
    $('sil-dlg-h').textContent = 'New silence of ' + pre.what;
    $('sf-matchers').value = pre.matchers.map(matcherText).join(', ');
    $('sf-for').value = '3600';
    $('sf-until-l').hidden = true;
    $('sf-comment').value = '';
    $('sf-by').value = store.get(USER_KEY);
    $('sf-maint').checked = false;
    $('sf-weekly').checked = false;
    $('sf-week').hidden = true;
    $('sf-err').hidden = true;
    $('sil-dlg').showModal();
    $('sf-comment').focus();
  }

  /* name="value", name=~"regex", name!="value", name!~"regex", separated by commas */
  function parseMatchers(text) {
    const t = text.trim().replace(/,\s*$/, '');
    const re = /\s*([A-Za-z_]+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;
    const out = [];
    while (re.lastIndex < t.length) {
      const at = re.lastIndex;
      const m = re.exec(t);
      if (!m) throw new Error(`matchers: cannot read "${t.slice(at).trim()}" (write name="value", name=~"regex", name!="value")`);
      out.push({ name: m[1], value: m[3].replace(/\\(.)/g, '$1'), isRegex: m[2].includes('~'), isEqual: !m[2].startsWith('!') });
    }
    return out;
  }

  const isoOf = (sec) => new Date(sec * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  function silenceBody() {
    const body = { matchers: parseMatchers($('sf-matchers').value), createdBy: $('sf-by').value.trim(),
      comment: $('sf-comment').value.trim(), maintenance: $('sf-maint').checked };
    const f = $('sf-for').value;
    if (f === 'custom') {
      if (!$('sf-until').value) throw new Error('until: pick when it ends (UTC)');
      body.endsAt = $('sf-until').value.slice(0, 16) + ':00Z';
    } else if (f !== 'none') {
      body.endsAt = isoOf(Math.floor(Date.now() / 1000) + Number(f));
    }
    if ($('sf-weekly').checked) {
      const w = { start: $('sf-start').value, end: $('sf-end').value };
      const days = DAYS.filter((d) => $('sf-d-' + d).checked);
      if (days.length) w.days = days; // none ticked: every day
      body.recurrence = { weekly: [w], timezone: 'UTC' };
    }
    return body;
  }

  async function onSilenceSubmit(ev) {
    ev.preventDefault();
    const err = (t) => { $('sf-err').textContent = t; $('sf-err').hidden = false; };
    let body;
    try {
      body = silenceBody();
    } catch (e) {
      err(e.message);
      return;
    }
    store.set(USER_KEY, body.createdBy);
    $('sf-ok').disabled = true;
    try {
      const r = await send('POST', '/v1/silences', body);
      $('sil-dlg').close();
      say(`silence ${r.silenceID} created: ${body.matchers.map(matcherText).join(', ')}`);
      await pollSilences();
    } catch (e) {
      err(e.message); // a 422 names the bad field
    } finally {
      $('sf-ok').disabled = false;
    }
  }

  async function onExpire(ev) {
    const b = ev.target.closest('button[data-expire]');
    if (!b) return;
    const id = b.dataset.expire;
    b.disabled = true;
    try {
      await send('DELETE', `/v1/silences/${encodeURIComponent(id)}`);
      say(`silence ${id} expired`);
      await pollSilences();
    } catch (e) {
      say(`silence ${id}: ${e.message}`, true); // a configuration's: 409 and why
      b.disabled = false;
    }
  }

  function initActions() {
    $('inc-alerts').addEventListener('click', onVerdict);
    $('cell-alerts').addEventListener('click', onVerdict);
    $('firing-table').addEventListener('click', onVerdict);
    $('sil-table').addEventListener('click', onExpire);
    $('inc-silence').addEventListener('click', () => { if (S.incSilence) openSilence(S.incSilence); });
    $('cell-silence').addEventListener('click', () => {
      if (S.route) openSilence({ matchers: [{ name: 'cell', value: S.route, isRegex: false, isEqual: true }], what: 'cell ' + S.route });
    });
    for (const d of DAYS) {
      const l = el('label', 'chk');
      const c = el('input');
      c.type = 'checkbox';
      c.id = 'sf-d-' + d;
      l.append(c, ' ' + d);
      $('sf-days').append(l);
    }
    $('sf-for').addEventListener('change', () => { $('sf-until-l').hidden = $('sf-for').value !== 'custom'; });
    $('sf-weekly').addEventListener('change', () => { $('sf-week').hidden = !$('sf-weekly').checked; });
    $('sil-form').addEventListener('submit', onSilenceSubmit);
    $('sf-cancel').addEventListener('click', () => $('sil-dlg').close());
    $('token-cancel').addEventListener('click', () => $('token-dlg').close('cancel'));
  }

  /* ---- the cell view ---- */

  function episodesOf(alerts) {
    const eps = new Map();
    for (const a of alerts) {
      let e = eps.get(a.id);
      if (!e) {
        e = { id: a.id, start: tsSec(a.start_time), end: null, a };
        eps.set(a.id, e);
      }
      if (a.state === 'resolved') e.end = tsSec(a.time);
      else e.a = a; // the latest firing transition (an escalation carries the new severity)
    }
    return [...eps.values()];
  }

  function involves(ep, kpi) {
    return ep.a.kpi === kpi || (ep.a.attribution || []).some((x) => x.kpi === kpi);
  }

  function drawEpisodes(u, kpi) {
    const eps = (S.cell && S.cell.episodes) || [];
    const { ctx } = u;
    const top = u.bbox.top, h = u.bbox.height;
    const xmin = u.scales.x.min, xmax = u.scales.x.max;
    ctx.save();
    const labels = []; // [x, y] of the labels drawn, so that episodes starting together stack
    for (const ep of eps) {
      const end = ep.end ?? S.cell.lastX ?? xmax; // an open episode ends at the last observation
      if (end < xmin || ep.start > xmax) continue;
      const x0 = u.valToPos(Math.max(ep.start, xmin), 'x', true);
      const x1 = Math.max(x0 + 2, u.valToPos(Math.min(end, xmax), 'x', true));
      const mine = involves(ep, kpi);
      const crit = ep.a.severity === 'critical';
      ctx.fillStyle = crit ? (mine ? 'rgba(248,81,73,.28)' : 'rgba(248,81,73,.10)') : (mine ? 'rgba(210,153,34,.28)' : 'rgba(210,153,34,.10)');
      ctx.fillRect(x0, top, x1 - x0, h);
      ctx.fillStyle = crit ? '#f85149' : '#d29922';
      ctx.fillRect(x0, top, x1 - x0, 3 * devicePixelRatio);
      if (mine) {
        const at = (ep.a.attribution || []).find((x) => x.kpi === kpi);
        const lh = 13 * devicePixelRatio;
        let y = top + 15 * devicePixelRatio;
        while (labels.some(([lx, ly]) => Math.abs(lx - x0) < 50 * devicePixelRatio && ly === y)) y += lh;
        labels.push([x0, y]);
        ctx.font = `${11 * devicePixelRatio}px system-ui`;
        ctx.fillText(at && at.z != null ? `z ${fmt(at.z)}` : ep.a.kind === 'anomaly' ? 'anomaly' : ep.a.reason, x0 + 3, y);
      }
    }
    ctx.restore();
  }

  function chartData(kpi, k) {
    const c = S.cell;
    const Sx = c.history.step_seconds;
    const steps = new Map(); // step -> row
    const row = (p) => {
      let r = steps.get(p);
      if (!r) {
        r = new Array(9).fill(null);
        r[0] = p * Sx;
        steps.set(p, r);
      }
      return r;
    };
    let last = null;
    for (const s of c.history.steps) {
      const r = row(s.step);
      r[1] = s.values[k];
      if (s.values[k] != null) last = s;
    }
    const fc = (f, lo, hi) => {
      if (!f) return;
      for (const s of f.forecast) {
        const v = s.values[kpi];
        if (!v) continue;
        const r = row(s.step);
        r[2] = v.mean;
        r[lo] = v.lower;
        r[hi] = v.upper;
      }
    };
    fc(c.fc80, 3, 4);
    fc(c.fc95, 5, 6);
    if (last && (c.fc80 || c.fc95)) {
      // the forecast starts from the last observation, so the line and bands join it
      const r = row(last.step);
      for (const i of [2, 3, 4, 5, 6]) r[i] = last.values[k];
    }
    if (c.past) {
      const pk = c.past.kpis.indexOf(kpi);
      for (const s of pk >= 0 ? c.past.steps : []) {
        const r = row(s.step);
        if (s.one_step) r[7] = s.one_step.mean[pk];
        if (s.horizon_end) r[8] = s.horizon_end.mean[pk];
      }
    }
    const rows = [...steps.values()].sort((a, b) => a[0] - b[0]);
    const data = [];
    for (let i = 0; i < 9; i++) data.push(rows.map((r) => r[i]));
    return data;
  }

  function chartOpts(kpi, width) {
    const muted = cssv('--muted'), line = cssv('--line'), fcc = cssv('--fc'), past = cssv('--past');
    const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 },
      font: '11px system-ui' };
    const band = { stroke: 'transparent', points: { show: false }, width: 0 };
    return {
      width, height: 210,
      cursor: { sync: { key: 'cc' }, drag: { x: true, y: false } },
      scales: { x: { time: true } },
      legend: { live: true },
      axes: [axis, { ...axis, size: 52, values: (u, vals) => vals.map(fmt) }],
      series: [
        {},
        { label: 'observed', stroke: '#6cb6ff', width: 1.5, points: { show: false } },
        { label: 'forecast', stroke: fcc, width: 2, dash: [6, 3], points: { show: false } },
        { label: 'lo 80 %', ...band },
        { label: 'hi 80 %', ...band },
        { label: 'lo 95 %', ...band },
        { label: 'hi 95 %', ...band },
        { label: 'past 1-step', stroke: past, width: 1, dash: [2, 2], points: { show: false }, show: !!S.cell.past },
        { label: 'past horizon-end', stroke: '#8b949e', width: 1, dash: [1, 3], points: { show: false }, show: !!S.horizonEnd },
      ],
      bands: [
        { series: [6, 5], fill: 'rgba(197,134,255,.13)' },
        { series: [4, 3], fill: 'rgba(197,134,255,.26)' },
      ],
      hooks: {
        draw: [(u) => drawEpisodes(u, kpi)],
        setSelect: [(u) => { if (u.select.width > 0) S.zoomed = true; }],
        setSeries: [(u, i, o) => { // the horizon-end means are read once their series is shown
          if (i !== 8 || !o.show || S.horizonEnd || !S.route) return;
          S.horizonEnd = true;
          loadCell(S.route, false).catch((e) => setStatus(e.message, true));
        }],
      },
    };
  }

  function pastScore(kpi) {
    const p = S.cell.past;
    if (!p || !p.scores || !p.scores.one_step) return '';
    const k = p.kpis.indexOf(kpi);
    const s = p.scores.one_step;
    if (k < 0 || !s.mae) return '';
    const cov = s.coverage80 && s.coverage80[k] != null ? ` · 80 % cover ${(s.coverage80[k] * 100).toFixed(0)} %` : '';
    return `1-step MAE ${fmt(s.mae[k])}${cov}`;
  }

  function chartWidth() {
    const w = $('charts').clientWidth;
    return Math.max(300, (w >= 1064 ? (w - 12) / 2 : w) - 14);
  }

  function renderCharts() {
    const box = $('charts');
    const kpis = S.cell.history.kpis;
    const width = chartWidth();
    const stale = [...S.charts.keys()].some((k) => !kpis.includes(k)) || S.charts.size !== kpis.length;
    if (stale) {
      for (const u of S.charts.values()) u.destroy();
      S.charts.clear();
      box.textContent = '';
    }
    kpis.forEach((kpi, k) => {
      const data = chartData(kpi, k);
      let u = S.charts.get(kpi);
      if (!u) {
        const wrap = el('div', 'chart' + (S.cell.past ? '' : ' nopast'));
        const title = el('div', 'chart-title');
        title.append(el('span', null, kpi), el('span', 'muted', ''));
        wrap.append(title);
        box.append(wrap);
        u = new uPlot(chartOpts(kpi, width), data, wrap);
        u.ccTitle = title.lastChild;
        u.root.addEventListener('dblclick', () => { S.zoomed = false; });
        S.charts.set(kpi, u);
      } else {
        u.setData(data, !S.zoomed);
      }
      u.ccTitle.textContent = pastScore(kpi);
    });
  }

  function renderCellAlerts() {
    const tb = $('cell-alerts').tBodies[0];
    tb.textContent = '';
    const eps = S.cell.episodes.slice().sort((a, b) => b.start - a.start);
    for (const ep of eps.slice(0, 200)) {
      const a = ep.a, tr = el('tr'), tdA = el('td');
      tdA.append(attribution(a));
      tr.append(el('td', 'sev ' + a.severity, a.severity), el('td', null, ep.end == null ? 'firing' : 'resolved'),
        el('td', null, a.kind), el('td', null, reasonOf(a)), el('td', null, fmtTime(ep.start)),
        el('td', null, ep.end == null ? '' : fmtTime(ep.end)), el('td', 'num', a.score == null ? '' : fmt(a.score)), tdA,
        verdictTd(ep));
      tr.dataset.id = ep.id;
      tb.append(tr);
    }
    $('cell-alerts-empty').hidden = eps.length > 0;
    $('cell-alerts').hidden = eps.length === 0;
  }

  /* The attention heat map: one row per (KPI, head) of the chosen layer, one column per token
   * (the cached patches, oldest first, then the current token); each row scaled to its own
   * maximum so a head's focus shows whatever its temperature. */
  const RAMP = [[13, 8, 135], [84, 2, 163], [139, 10, 165], [185, 50, 137], [219, 92, 104], [244, 136, 73],
    [254, 188, 43], [240, 249, 33]];
  function ramp(t) {
    const x = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
    const i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i, a = RAMP[i], b = RAMP[i + 1];
    return `rgb(${a[0] + (b[0] - a[0]) * f | 0},${a[1] + (b[1] - a[1]) * f | 0},${a[2] + (b[2] - a[2]) * f | 0})`;
  }

  function renderAttention() {
    const att = S.cell.attention;
    $('attention-box').hidden = !att;
    if (!att) return;
    const sel = $('att-layer');
    if (sel.options.length !== att.layers) {
      sel.textContent = '';
      for (let l = 0; l < att.layers; l++) sel.append(new Option(String(l), String(l)));
      S.attLayer = att.layers - 1;
      sel.value = String(S.attLayer);
    }
    const layer = Math.min(S.attLayer, att.layers - 1);
    const kpis = Object.keys(att.kpis);
    const toks = att.tokens || [];
    const cv = $('attention');
    const dpr = devicePixelRatio || 1;
    const labelW = 130, rowH = 12, gap = 4, axisH = 22;
    const rows = kpis.length * att.heads;
    const cssW = cv.clientWidth || 800, cssH = rows * rowH + kpis.length * gap + axisH;
    cv.style.height = cssH + 'px';
    cv.width = cssW * dpr;
    cv.height = cssH * dpr;
    const ctx = cv.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.fillStyle = cssv('--panel');
    ctx.fillRect(0, 0, cssW, cssH);
    const nt = toks.length || (att.kpis[kpis[0]]?.[layer]?.[0]?.length ?? 0);
    const cw = (cssW - labelW - 8) / Math.max(1, nt);
    ctx.font = '11px system-ui';
    ctx.textBaseline = 'middle';
    let y = 4;
    for (const kpi of kpis) {
      const L = att.kpis[kpi][layer] || [];
      for (let h = 0; h < att.heads; h++) {
        const w = L[h] || [];
        let mx = 0;
        for (const v of w) if (v > mx) mx = v;
        for (let j = 0; j < w.length; j++) {
          ctx.fillStyle = ramp(mx > 0 ? Math.sqrt(w[j] / mx) : 0);
          ctx.fillRect(labelW + j * cw, y, Math.ceil(cw), rowH - 1);
        }
        ctx.fillStyle = cssv('--muted');
        ctx.fillText(h === 0 ? `${kpi}  h${h}` : `h${h}`, h === 0 ? 6 : labelW - 24, y + rowH / 2);
        y += rowH;
      }
      y += gap;
    }
    ctx.fillStyle = cssv('--muted');
    const every = Math.max(1, Math.ceil(nt / 8));
    for (let j = 0; j < toks.length; j += every) {
      const t = toks[j];
      ctx.fillText(t.current ? 'now' : t.end_ts.slice(5, 16).replace('T', ' '), labelW + j * cw, y + 8);
    }
    S.ready.attentionDrawn = (S.ready.attentionDrawn || 0) + 1;
  }

  /* What the cell view shows moves only with the cell's steps (its last_step in the list) and
   * its alerts (data-quality alerts fire without a step): a refresh that finds both as they
   * were asks for nothing. A cell the list does not hold is read every time. */
  const firingSig = (id) => S.firing.filter((a) => a.cell_id === id).map((a) => `${a.id}:${a.severity}:${a.time}`).sort().join(',');
  function cellSig(id) {
    const known = S.cellById.get(id);
    return known ? `${known.last_step}|${firingSig(id)}` : null;
  }

  async function loadCell(id, fresh) {
    const q = encodeURIComponent(id);
    const firing = firingSig(id); // as the list knew them when the cell's reads went out
    // what needs no time range is asked for at once, beside the cell's own record
    const rest = Promise.all([
      getOptional(`/v1/cells/${q}/forecast?level=0.8`),
      getOptional(`/v1/cells/${q}/forecast?level=0.95`),
      getOptional(`/v1/cells/${q}/alerts?limit=1000`),
      getOptional(`/v1/cells/${q}/attention`),
    ]);
    rest.catch(() => {}); // awaited below; a failure of meta must not leave it unhandled
    // The range starts from the cell's last step (data time, not the wall clock). When the list
    // does not know it yet (a deep link) the 7-day view asks for everything kept (history.depth,
    // 7 days by default) rather than wait for the cell's record.
    const known = S.cellById.get(id);
    let range = '';
    const points = `&max_points=${Math.ceil(2 * chartWidth())}`;
    const ranged = () => Promise.all([
      getJSON(`/v1/cells/${q}/history?${HISTORY_Q}${points}${range}`),
      S.noPast ? null : getOptional(`/v1/cells/${q}/forecasts?${pastQ()}${points}${range}`),
    ]);
    let hp = null;
    if (known && known.last_ts != null) range = `&since=${unixOf(known.last_ts) - S.hours * 3600}`;
    if (range || S.hours >= 168) hp = ranged();
    if (hp) hp.catch(() => {}); // awaited below
    const meta = await getJSON('/v1/cells/' + q);
    if (!hp) {
      range = `&since=${(meta.last_ts != null ? unixOf(meta.last_ts) : Math.floor(Date.now() / 1000)) - S.hours * 3600}`;
      hp = ranged();
    }
    const [history, past] = await hp;
    const [fc80, fc95, alerts, attention] = await rest;
    if (past == null) S.noPast = true; // absent in this daemon: not asked again until a reload
    if (S.route !== id) return; // navigated away meanwhile
    if (fresh) {
      for (const u of S.charts.values()) u.destroy();
      S.charts.clear();
      $('charts').textContent = '';
      S.zoomed = false;
    }
    const hs = history.steps;
    // the step the view shows (the newest observed, in the history it read), as the list says it
    const sig = `${hs.length ? hs[hs.length - 1].step : meta.last_step}|${firing}`;
    S.cell = { id, sig, meta, history, fc80, fc95, past, attention, episodes: episodesOf(alerts ? alerts.alerts : []),
      lastX: hs.length ? (hs[hs.length - 1].step + 1) * history.step_seconds : null };
    $('cell-title').textContent = id;
    const c = meta.counts || {};
    $('cell-meta').textContent = `${meta.state} · last step ${meta.last_observation ? fmtTime(tsSec(meta.last_observation.ts)) : '–'} UTC · ` +
      `${fmtInt(c.steps)} steps · ${fmtInt(c.imputed)} imputed · ${history.steps.length} points shown`;
    renderCharts();
    renderCellAlerts();
    renderAttention();
    if (!S.ready.cell) {
      S.ready.cell = performance.now();
      performance.mark('cc-cell-ready');
      renderRows(); // now the list's details
    }
  }

  /* ---- routing and polling ---- */

  function setStatus(text, err) {
    $('status').textContent = text;
    $('status').className = 'status' + (err ? ' err' : '');
  }

  /* Which page shows: #/ is the incidents page, or the alerts firing now where the daemon has
   * no incidents (404: alerts off). Only the page shown is rendered at a poll. */
  function applyPage() {
    const p = S.page === 'incidents' && S.incidents === null ? 'alerts' : S.page;
    $('incidents').hidden = p !== 'incidents';
    $('overview').hidden = p !== 'alerts';
    $('incident').hidden = p !== 'incident';
    $('cell').hidden = p !== 'cell';
    $('tab-incidents').hidden = S.incidents === null;
    $('tab-incidents').classList.toggle('on', p === 'incidents' || p === 'incident');
    $('tab-alerts').classList.toggle('on', p === 'alerts');
    return p;
  }

  function renderPage() {
    renderBadges();
    const p = applyPage();
    if (p === 'incidents') {
      renderIncidents();
      renderSilences();
    } else if (p === 'alerts') {
      renderFiring();
    } else if (p === 'incident') {
      refreshIncident().catch((e) => setStatus(e.message, true));
    }
  }

  /* A part of the hash decoded, or null when its escapes are malformed (#/cells/%E0%A4, typed
   * or cut short): decodeURIComponent throws URIError, which left the page's routing undone. */
  function decodeHashPart(s) {
    try {
      return decodeURIComponent(s);
    } catch (e) {
      return null;
    }
  }

  async function showRoute() {
    const h = location.hash;
    const m = h.match(/^#\/cells\/(.+)$/);
    const mi = h.match(/^#\/incidents\/(.+)$/);
    const decoded = m ? decodeHashPart(m[1]) : null;
    const id = m ? (decoded === null ? m[1] : decoded) : null; // malformed: the text as written
    const changed = id !== S.route;
    const wasIncidents = S.page === 'incidents';
    S.route = id;
    S.page = id ? 'cell' : mi ? 'incident' : h === '#/alerts' ? 'alerts' : 'incidents';
    if (mi) { // another incident: its alerts are read (the same one back: its table is still there)
      const iid = decodeHashPart(mi[1]) ?? mi[1]; // malformed: no such incident, the page says so
      if (iid !== S.incidentId) {
        S.incView = null;
        $('inc-alerts').tBodies[0].textContent = '';
        $('inc-alerts-note').hidden = true;
      }
      S.incidentId = iid;
    }
    if (S.page === 'incidents' && !wasIncidents && S.silences === undefined) pollSilences();
    renderPage();
    renderRows();
    if (id && changed) {
      $('cell-title').textContent = id;
      if (decoded === null) { // no cell id holds '%': not asked of the daemon
        S.cellFailed = true;
        $('cell-meta').textContent = 'unknown cell (the link is malformed)';
        renderRows();
        return;
      }
      $('cell-meta').textContent = 'loading…';
      try {
        await loadCell(id, true);
      } catch (e) {
        S.cellFailed = true;
        $('cell-meta').textContent = e instanceof HttpError && e.status === 404 ? 'unknown cell' : String(e.message);
        renderRows();
      }
    }
  }

  async function poll() {
    if (S.polling) return;
    S.polling = true;
    try {
      // the incidents (a small reply: INCIDENTS_LIMIT at most) at every poll, for the first
      // page and its badge; the silences only while the incidents page shows them
      const [info, cells, firing, incidents] = await Promise.all([
        getOptional('/v1/info'),
        getPaged('/v1/cells', 'cells', 10000),
        getPaged('/v1/alerts/firing', 'alerts', 1000),
        getOptional(`/v1/incidents?limit=${INCIDENTS_LIMIT}`),
        S.page === 'incidents' ? pollSilences() : null,
      ]);
      renderHealth(info);
      S.cells = cells;
      S.firing = firing;
      S.incidents = incidents ? incidents.incidents.sort(incidentOrder) : null;
      const byId = new Map();
      for (const c of cells) byId.set(c.id, c);
      S.cellById = byId;
      updateLabelChoices();
      const A = new Map();
      for (const a of firing) {
        const x = A.get(a.cell_id) || { n: 0, sev: 'warning' };
        x.n++;
        if ((SEV_RANK[a.severity] || 0) > SEV_RANK[x.sev]) x.sev = a.severity;
        A.set(a.cell_id, x);
      }
      S.alertsByCell = A;
      sortAndFilter();
      renderPage();
      if (!S.ready.list) {
        S.ready.list = performance.now();
        performance.mark('cc-list-ready');
      }
      if (S.route && S.cell && S.cell.id === S.route && (S.cell.sig == null || cellSig(S.route) !== S.cell.sig)) {
        try {
          await loadCell(S.route, false);
        } catch (e) {
          $('cell-meta').textContent = e instanceof HttpError && e.status === 404 ? 'unknown cell (evicted?)' : e.message;
        }
      }
      S.polls++;
      setStatus('updated ' + new Date().toLocaleTimeString(), false);
    } catch (e) {
      S.errors++;
      setStatus('daemon unreachable: ' + e.message, true);
    } finally {
      S.polling = false;
    }
  }

  async function pollSilences() {
    try {
      const r = await getOptional('/v1/silences');
      S.silences = r ? r.silences : null;
    } catch (e) {
      S.silences = null;
    }
    if (S.page === 'incidents' && S.incidents !== undefined) renderSilences();
  }

  let timer = null;
  function schedule() {
    clearTimeout(timer);
    if (document.hidden) {
      setStatus('paused (tab hidden)', false);
      return;
    }
    timer = setTimeout(async () => { await poll(); schedule(); }, POLL_MS);
  }

  function init() {
    $('search').addEventListener('input', () => { $('list').scrollTop = 0; sortAndFilter(); });
    const topo = (key) => (ev) => {
      S[key] = ev.target.value;
      $('list').scrollTop = 0;
      sortAndFilter();
    };
    $('group-by').addEventListener('change', topo('groupBy'));
    $('f-site').addEventListener('change', topo('fSite'));
    $('f-region').addEventListener('change', topo('fRegion'));
    $('list-inner').addEventListener('click', (ev) => { // a group header folds or unfolds its cells
      const h = ev.target.closest('.grp');
      if (!h) return;
      if (!S.collapsed.delete(h.dataset.key)) S.collapsed.add(h.dataset.key);
      sortAndFilter();
    });
    $('inc-table').addEventListener('click', (ev) => { // the whole row opens the incident
      const tr = ev.target.closest('tr.inc-row');
      if (tr && !ev.target.closest('a')) location.hash = incidentHref(tr.dataset.id);
    });
    $('list').addEventListener('scroll', () => requestAnimationFrame(renderRows), { passive: true });
    window.addEventListener('hashchange', showRoute);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) poll();
      schedule();
    });
    $('ranges').addEventListener('click', (ev) => {
      const h = Number(ev.target.dataset.h);
      if (!h) return;
      S.hours = h;
      for (const b of $('ranges').children) b.classList.toggle('on', Number(b.dataset.h) === h);
      if (S.route) loadCell(S.route, true).catch((e) => setStatus(e.message, true));
    });
    for (const b of $('ranges').children) b.classList.toggle('on', Number(b.dataset.h) === S.hours);
    $('att-layer').addEventListener('change', (ev) => { S.attLayer = Number(ev.target.value); renderAttention(); });
    let rt = null;
    window.addEventListener('resize', () => {
      clearTimeout(rt);
      rt = setTimeout(() => {
        if (!S.cell) return;
        for (const u of S.charts.values()) u.destroy();
        S.charts.clear();
        $('charts').textContent = '';
        renderCharts();
        renderAttention();
      }, 150);
    });
    initActions();
    Promise.all([poll(), showRoute()]).then(schedule);
  }

  init();
})();
