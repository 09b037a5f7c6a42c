// DHPT dashboard pages. Everything a study or a worker wrote (names, parameters, values,
// errors, labels) is user input: it goes into the page only as text (textContent, attribute
// values through setAttribute), never as markup. No libraries: the plots are SVG drawn here.
'use strict';

const main = document.getElementById('main');
const liveBadge = document.getElementById('live');

// --- Small helpers -------------------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'text') node.textContent = value;
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}
function svg(tag, attrs = {}) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  return node;
}
function link(path, params, text) {
  return el('a', {href: `${path}?${new URLSearchParams(params)}`, text});
}
async function getJson(url) {
  const response = await fetch(url, {headers: {Accept: 'application/json'}});
  const body = await response.json().catch(() => ({error: `${response.status} ${response.statusText}`}));
  if (!response.ok) throw new Error(body.error ?? `${response.status} ${response.statusText}`);
  return body;
}
function showError(where, error) {
  where.replaceChildren(el('p', {class: 'error', text: `Could not load: ${error.message}`}));
}
function fmt(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(4) : value.toPrecision(6).replace(/\.?0+$/, '');
  }
  return String(value);
}
function seconds(time) { return time ? Date.parse(time) / 1000 : null; }
function duration(trial) {
  const start = seconds(trial.start_time), end = seconds(trial.end_time);
  return start !== null && end !== null ? end - start : null;
}
function objectiveOf(trial) {
  if (trial.state !== 'COMPLETED') return null;
  if (trial.objective_value !== null && trial.objective_value !== undefined) return trial.objective_value;
  return trial.objective_values?.length ? trial.objective_values[0] : null;
}
function card(label, value, id) {
  const valueNode = el('div', {class: 'value', text: fmt(value)});
  if (id) valueNode.id = id;
  return el('div', {class: 'card'}, el('div', {class: 'label', text: label}), valueNode);
}
function stateCell(state) { return el('td', {class: `state-${state}`, text: state}); }

// A plot frame: axes with a few ticks, and functions mapping data to pixels.
function frame(width, height, xs, ys, xLabel, yLabel) {
  const root = svg('svg', {class: 'plot', width, height, viewBox: `0 0 ${width} ${height}`});
  const left = 60, right = 12, top = 10, bottom = 30;
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
  if (!(y1 > y0)) { const pad = Math.abs(y0) * 0.1 || 1; y0 -= pad; y1 += pad; }
  const x = (v) => left + (v - x0) / (x1 - x0) * (width - left - right);
  const y = (v) => height - bottom - (v - y0) / (y1 - y0) * (height - top - bottom);
  root.append(svg('line', {class: 'axis', x1: left, y1: height - bottom, x2: width - right, y2: height - bottom}));
  root.append(svg('line', {class: 'axis', x1: left, y1: top, x2: left, y2: height - bottom}));
  for (let i = 0; i <= 4; ++i) {
    const xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    const xt = svg('text', {x: x(xv), y: height - bottom + 14, 'text-anchor': 'middle'});
    xt.textContent = fmt(Number(xv.toPrecision(4)));
    const yt = svg('text', {x: left - 4, y: y(yv) + 3, 'text-anchor': 'end'});
    yt.textContent = fmt(Number(yv.toPrecision(4)));
    root.append(xt, yt);
  }
  const xl = svg('text', {x: (left + width - right) / 2, y: height - 2, 'text-anchor': 'middle'});
  xl.textContent = xLabel;
  const yl = svg('text', {x: 10, y: top + 8});
  yl.textContent = yLabel;
  root.append(xl, yl);
  return {root, x, y};
}

// --- Studies page --------------------------------------------------------------------------
async function studiesPage() {
  document.title = 'Studies · DHPT';
  const filter = el('input', {type: 'search', placeholder: 'filter by name, state, algorithm', id: 'study-filter'});
  const body = el('tbody');
  const columns = [['name', 'Study'], ['state', 'State'], ['done', 'Progress'], ['best', 'Best'],
                   ['algorithm', 'Algorithm'], ['model', 'Model'], ['created', 'Created']];
  let sort = {key: 'created', desc: true};
  let studies = [];
  const head = el('tr');
  const render = () => {
    const needle = filter.value.trim().toLowerCase();
    const shown = studies.filter((s) => !needle ||
        [s.name, s.state, s.algorithm, s.model].some((v) => v.toLowerCase().includes(needle)));
    shown.sort((a, b) => {
      const [p, q] = [a[sort.key], b[sort.key]];
      const order = p === q ? 0 : p === null ? 1 : q === null ? -1 : p < q ? -1 : 1;
      return sort.desc ? -order : order;
    });
    body.replaceChildren(...shown.map((s) => el('tr', {'data-study': s.name},
      el('td', {}, link('/study', {name: s.name}, s.name)),
      stateCell(s.state),
      el('td', {class: 'num', text: s.max_trials ? `${s.done} / ${s.max_trials}` : String(s.done)}),
      el('td', {class: 'num', text: fmt(s.best)}),
      el('td', {text: s.algorithm}), el('td', {text: s.model}),
      el('td', {text: s.created ? new Date(s.created).toLocaleString() : ''}))));
    for (const th of head.children) {
      th.classList.toggle('sorted', th.dataset.key === sort.key);
      th.classList.toggle('desc', sort.desc);
    }
  };
  for (const [key, label] of columns) {
    head.append(el('th', {'data-key': key, text: label, onclick: () => {
      sort = {key, desc: sort.key === key ? !sort.desc : false};
      render();
    }}));
  }
  filter.addEventListener('input', render);
  main.replaceChildren(el('h1', {text: 'Studies'}), el('div', {class: 'toolbar'}, filter),
                       el('div', {class: 'panel'}, el('table', {id: 'studies'}, el('thead', {}, head), body)));
  const load = async () => {
    try {
      studies = await getJson('/api/studies');
      render();
    } catch (error) {
      body.replaceChildren(el('tr', {}, el('td', {class: 'error', text: `Could not load: ${error.message}`})));
    }
  };
  await load();
  setInterval(load, 5000);  // One small request; the study pages are the live ones.
}

// --- Study page ----------------------------------------------------------------------------
const HISTORY_POINTS = 1000;  // The plot merges neighbouring buckets past this many.

function historyPlot(history) {
  const points = history.points;
  if (!points.length) return el('p', {class: 'muted', text: 'No completed trial yet.'});
  const xs = points.flatMap((p) => [p[0], p[1]]);
  const ys = points.flatMap((p) => [p[2], p[3]]);
  const {root, x, y} = frame(900, 260, xs, ys, 'trial number', 'objective');
  for (const [first, last, min, max, , count] of points) {
    if (count > 1 && max > min) {
      root.append(svg('line', {class: 'range', x1: x((first + last) / 2), x2: x((first + last) / 2), y1: y(min), y2: y(max)}));
    } else {
      root.append(svg('circle', {class: 'dot', cx: x(last), cy: y(min), r: 2.5}));
    }
  }
  root.append(svg('polyline', {class: 'best', points: points.map((p) => `${x(p[1])},${y(p[4])}`).join(' ')}));
  root.id = 'history-plot';
  return root;
}

// Adds a completed trial's value to the downsampled history (the server's buckets, kept
// bounded here too by merging pairs).
function addToHistory(history, number, value) {
  const points = history.points;
  const better = (a, b) => history.maximize ? a > b : a < b;
  const last = points[points.length - 1];
  if (last && number < last[0] + history.width) {
    last[1] = Math.max(last[1], number);
    last[2] = Math.min(last[2], value); last[3] = Math.max(last[3], value);
    if (better(value, last[4])) last[4] = value;
    last[5] += 1;
  } else if (last && number < last[0]) {
    return;  // An older trial finishing late: the next reload places it.
  } else {
    const best = last && !better(value, last[4]) ? last[4] : value;
    points.push([number - number % history.width, number, value, value, best, 1]);
  }
  if (points.length > HISTORY_POINTS) {
    history.width *= 2;
    const merged = [];
    for (const p of points) {
      const first = p[0] - p[0] % history.width;
      const m = merged[merged.length - 1];
      if (m && m[0] === first) {
        m[1] = p[1]; m[2] = Math.min(m[2], p[2]); m[3] = Math.max(m[3], p[3]); m[4] = p[4]; m[5] += p[5];
      } else merged.push([first, ...p.slice(1)]);
    }
    history.points = merged;
  }
}

function summaryCards(study) {
  const s = study;
  const best = s.best_trial ? objectiveOf(s.best_trial) : null;
  return el('div', {class: 'cards', id: 'summary'},
    card('State', s.state, 'summary-state'),
    card('Completed', s.trials_completed, 'summary-completed'),
    card('Running', s.trials_running, 'summary-running'),
    card('Pending', s.trials_pending, 'summary-pending'),
    card('Failed', s.trials_failed, 'summary-failed'),
    card('Pruned', s.trials_pruned, 'summary-pruned'),
    card('Max trials', s.spec.max_trials, 'summary-max'),
    card('Best', best, 'summary-best'),
    card('Algorithm', s.spec.algorithm?.name ?? '', 'summary-algorithm'));
}

class TrialTable {
  constructor(studyName, spec) {
    this.study = studyName;
    this.params = (spec.parameters ?? []).map((p) => p.name);
    this.query = {sort: 'number', desc: false, state: '', q: '', page: 0, size: 50};
    this.rows = new Map();  // number -> <tr>
    this.metrics = [];
    this.node = el('div');
    this.status = el('span', {class: 'muted', id: 'table-status'});
    const stateSelect = el('select', {id: 'state-filter'}, el('option', {value: '', text: 'every state'}),
      ...['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'PRUNED'].map((s) => el('option', {value: s, text: s})));
    stateSelect.addEventListener('change', () => { this.query.state = stateSelect.value; this.query.page = 0; this.load(); });
    const text = el('input', {type: 'search', id: 'trial-filter', placeholder: 'filter: worker, node, error, value'});
    let timer;
    text.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => { this.query.q = text.value.trim(); this.query.page = 0; this.load(); }, 300);
    });
    this.prev = el('button', {text: '‹ Prev', id: 'page-prev', onclick: () => { this.query.page -= 1; this.load(); }});
    this.next = el('button', {text: 'Next ›', id: 'page-next', onclick: () => { this.query.page += 1; this.load(); }});
    this.table = el('table', {id: 'trials'});
    this.node.append(el('div', {class: 'toolbar'}, stateSelect, text, this.prev, this.next, this.status),
                     el('div', {class: 'panel'}, this.table));
  }
  columns() {
    return [['number', '#'], ['state', 'State'], ['value', 'Value'],
            ...this.params.map((p) => [`param:${p}`, p]), ...this.metrics.map((m) => [`metric:${m}`, m]),
            ['worker', 'Worker'], ['node', 'Node'], ['device', 'Device'], ['start', 'Started'],
            ['duration', 'Seconds'], ['error', 'Error']];
  }
  async load() {
    const q = this.query;
    const params = {study: this.study, sort: q.sort, desc: q.desc ? '1' : '0', page: q.page, size: q.size};
    if (q.state) params.state = q.state;
    if (q.q) params.q = q.q;
    try {
      this.status.textContent = 'loading…';
      const page = await getJson(`/api/trials?${new URLSearchParams(params)}`);
      this.render(page);
    } catch (error) {
      this.status.textContent = '';
      this.table.replaceChildren(el('tr', {}, el('td', {class: 'error', text: `Could not load: ${error.message}`})));
    }
  }
  render(page) {
    const metricNames = new Set(this.metrics);
    for (const trial of page.rows) for (const name of Object.keys(trial.metrics ?? {})) metricNames.add(name);
    this.metrics = [...metricNames].sort();
    const head = el('tr');
    for (const [key, label] of this.columns()) {
      const th = el('th', {text: label, 'data-key': key, onclick: () => {
        this.query.desc = this.query.sort === key ? !this.query.desc : false;
        this.query.sort = key; this.query.page = 0; this.load();
      }});
      if (key === this.query.sort) th.classList.add('sorted');
      if (key === this.query.sort && this.query.desc) th.classList.add('desc');
      head.append(th);
    }
    this.rows.clear();
    const body = el('tbody');
    for (const trial of page.rows) body.append(this.row(trial));
    this.table.replaceChildren(el('thead', {}, head), body);
    const first = page.page * page.page_size;
    this.shown = page.rows.length;
    this.status.textContent = page.rows.length
      ? `trials ${first + 1}–${first + page.rows.length}${page.complete ? ` of ${page.total}` : ''}`
      : 'no trial matches';
    this.prev.disabled = page.page === 0;
    this.next.disabled = page.complete && first + page.rows.length >= page.total;
  }
  row(trial) {
    const cells = [el('td', {class: 'num'}, link('/trial', {study: this.study, number: trial.number}, String(trial.number))),
                   stateCell(trial.state), el('td', {class: 'num', text: fmt(objectiveOf(trial))})];
    for (const p of this.params) cells.push(el('td', {class: 'num', text: fmt(trial.params?.[p])}));
    for (const m of this.metrics) cells.push(el('td', {class: 'num', text: fmt(trial.metrics?.[m])}));
    cells.push(el('td', {text: trial.worker_id ?? ''}), el('td', {text: trial.node_name ?? ''}),
               el('td', {text: trial.device ?? ''}),
               el('td', {text: trial.start_time ? new Date(trial.start_time).toLocaleTimeString() : ''}),
               el('td', {class: 'num', text: fmt(duration(trial))}),
               el('td', {class: 'wrap error-text', text: trial.error ?? ''}));
    const tr = el('tr', {'data-number': String(trial.number)}, ...cells);
    this.rows.set(trial.number, tr);
    return tr;
  }
  // A trial changed: its row is redrawn where it is shown; in the default order, a new trial
  // that belongs on this page is added to it.
  update(trial) {
    const old = this.rows.get(trial.number);
    if (old) { old.replaceWith(this.row(trial)); return; }
    const q = this.query;
    const defaultOrder = q.sort === 'number' && !q.desc && !q.q && (!q.state || q.state === trial.state);
    const first = q.page * q.size;
    if (defaultOrder && this.shown < q.size && trial.number >= first) {
      this.table.querySelector('tbody')?.append(this.row(trial));
      this.shown += 1;
    }
  }
}

async function studyPage(name) {
  document.title = `${name} · DHPT`;
  let data;
  try {
    data = await getJson(`/api/study?${new URLSearchParams({name})}`);
  } catch (error) {
    main.replaceChildren(el('h1', {text: name}), el('p', {class: 'error', text: `Could not load: ${error.message}`}));
    return;
  }
  let study = data.study;
  const title = el('h1', {id: 'study-name', text: study.spec.name});
  const reason = el('p', {class: 'muted', id: 'state-reason', text: study.state_reason ?? ''});
  let cards = summaryCards(study);
  const plotPanel = el('div', {class: 'panel', id: 'history'}, el('p', {class: 'muted', text: 'Loading the history…'}));
  const table = new TrialTable(name, study.spec);
  const spec = el('pre', {id: 'spec', text: JSON.stringify(study.spec, null, 2)});
  const actions = el('div', {class: 'toolbar'});
  if (data.allow_stop) actions.append(stopButton(name));
  const plots = el('div', {id: 'plots'}, el('p', {class: 'muted', text: 'Loading the plots…'}));
  main.replaceChildren(title, reason, cards, actions, el('h2', {text: 'History'}), plotPanel,
                       el('h2', {text: 'Trials'}), table.node, el('h2', {text: 'Plots'}), plots,
                       el('h2', {text: 'Spec'}), spec);
  let history = null;
  const redrawHistory = () => { if (history) plotPanel.replaceChildren(historyPlot(history)); };
  // The table, the history and the other plots load at once; each shows as soon as it comes.
  // The plots are read again when trials finish (see plotRefresher): a large study's from the
  // scheduler's sample of it, a part of its trials, so they need not wait for the page.
  const historyLoad = getJson(`/api/history?${new URLSearchParams({study: name})}`)
    .then((h) => { history = h; redrawHistory(); })
    .catch((error) => showError(plotPanel, error));
  const refreshPlots = plotRefresher(name, plots);
  // Live: the scheduler's WatchStudy, relayed as server-sent events. The browser reconnects
  // by itself after a drop, sending the last event id, and the dashboard resumes from there.
  // A study that has ended changes no more (a reload goes live again if it is extended).
  const ended = ['COMPLETED', 'STOPPED', 'FAILED'].includes(study.state);
  // Opened with the loads, not after them: a watch sees changes from when it starts, so a
  // trial that finished between the table's read and a watch begun later stayed RUNNING on
  // the page (hostile review: 12 s of them after a scheduler restart). A watch's first event
  // is the study as it starts; once it has come and the loads are done, the table is read
  // again (so it holds every change before the watch) and the events held meanwhile applied
  // in order (every change after it).
  const events = ended ? null : new EventSource(`/api/events?${new URLSearchParams({study: name})}`);
  const held = [];
  let apply = null;  // Set once the table holds every change before the watch.
  let watching = null;
  const watchStarted = new Promise((resolve) => { watching = resolve; });
  if (events) {
    events.onopen = () => { liveBadge.textContent = '● live'; };
    // EventSource retries a dropped stream by itself, but not one refused with an error status
    // (503 when every live page the dashboard may serve is taken): that one is closed.
    events.onerror = () => {
      liveBadge.textContent = events.readyState === EventSource.CLOSED
        ? '○ live updates refused: the dashboard serves all the live pages it may; reload to try again'
        : '○ reconnecting…';
    };
    events.onmessage = (message) => {
      if (apply) return apply(message);
      held.push(message);
      watching();
    };
    events.addEventListener('end', () => { events.close(); liveBadge.textContent = 'study ended'; });
    events.addEventListener('failure', (message) => {
      events.close();
      liveBadge.textContent = `live updates stopped: ${JSON.parse(message.data).error}`;
    });
  }
  await Promise.all([table.load(), historyLoad]);
  main.dataset.ready = 'true';
  if (ended) {
    liveBadge.textContent = 'study ended';
    return;
  }
  await watchStarted;
  await table.load();
  let pendingPlot = false;
  apply = (message) => {
    const event = JSON.parse(message.data);
    if (event.study) {
      study = event.study;
      const fresh = summaryCards(study);
      cards.replaceWith(fresh);
      cards = fresh;
      reason.textContent = study.state_reason ?? '';
    }
    if (event.trial) {
      table.update(event.trial);
      if (FINISHED.includes(event.trial.state)) refreshPlots();
      const value = objectiveOf(event.trial);
      if (history && value !== null && Number.isFinite(value)) {
        addToHistory(history, event.trial.number, value);
        if (!pendingPlot) {  // Redrawn at most once a frame however many events come.
          pendingPlot = true;
          requestAnimationFrame(() => { pendingPlot = false; redrawHistory(); });
        }
      }
    }
    main.dataset.position = String(event.position);
  };
  for (const message of held.splice(0)) apply(message);
}

const FINISHED = ['COMPLETED', 'PRUNED', 'FAILED', 'CANCELLED'];
// Plots are read again at most once a second (PLOTS_REFRESH_MS) as trials finish, one read at
// a time, and never sooner after a read than twice what it took: each read goes through the
// whole study (seconds at 100,000 trials), so a large busy study redraws less often instead
// of keeping the dashboard and the scheduler reading it. Returns the function that asks.
const PLOTS_REFRESH_MS = 1000;
function plotRefresher(name, plots) {
  let inFlight = false, wanted = false, timer = null, nextAllowed = 0;
  const load = () => {
    timer = null;
    inFlight = true;
    wanted = false;
    const began = performance.now();
    getJson(`/api/plots?${new URLSearchParams({study: name})}`)
      .then((answer) => {
        plots.replaceChildren(...answer.plots.map(plotNode));
        if (answer.drawn_from < answer.trials) {
          plots.prepend(el('p', {class: 'muted', id: 'plots-sampled',
            text: `Drawn from ${answer.drawn_from} of the ${answer.trials} trials: evenly spread, and every one that improved on the best.`}));
        }
        plots.dataset.trials = String(answer.trials);
        plots.dataset.ready = 'true';
      })
      .catch((error) => showError(plots, error))
      .finally(() => {
        const now = performance.now();
        nextAllowed = now + Math.max(PLOTS_REFRESH_MS, 2 * (now - began));
        inFlight = false;
        if (wanted) ask();
      });
  };
  const ask = () => {
    if (inFlight) { wanted = true; return; }
    if (timer !== null) return;
    timer = setTimeout(load, Math.max(0, nextAllowed - performance.now()));
  };
  ask();
  return ask;
}

function stopButton(name) {
  const box = el('span');
  const ask = el('button', {class: 'danger', id: 'stop', text: 'Stop study…', onclick: () => {
    box.replaceChildren(el('span', {class: 'confirm'},
      el('span', {text: `Stop ${name}? Running trials are cancelled. `}),
      el('button', {class: 'danger', id: 'stop-confirm', text: 'Stop it', onclick: async () => {
        const response = await fetch(`/api/stop?${new URLSearchParams({study: name})}`,
                                     {method: 'POST', headers: {'X-DHPT-Confirm': 'stop'}});
        const body = await response.json().catch(() => ({}));
        box.replaceChildren(el('span', {class: response.ok ? 'muted' : 'error',
                                        text: response.ok ? 'Stopped.' : `Not stopped: ${body.error}`}));
      }}),
      el('button', {text: 'Cancel', onclick: () => box.replaceChildren(ask)})));
  }});
  box.append(ask);
  return box;
}

// --- Study-insight plots (services/analysis through /api/plots) ----------------------------
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const PALETTE = ['#2f6fde', '#d9822b', '#23874f', '#c23b3b', '#7a4fd0', '#8a93a5'];
function viridis(t) {
  const u = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(u)), f = u - i;
  const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
// Pixel mapping and ticks of one axis: categories at their indices, log axes in log space.
function axisScale(axis, values, from, to) {
  const cats = axis.categories ?? [];
  let lo = axis.min, hi = axis.max;
  if (!(hi > lo)) {
    const finite = values.filter(Number.isFinite);
    lo = finite.length ? Math.min(...finite) : 0; hi = finite.length ? Math.max(...finite) : 1;
    if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
  }
  const log = axis.log && lo > 0;
  const t = (v) => log ? Math.log10(v) : v;
  const map = (v) => from + (t(v) - t(lo)) / (t(hi) - t(lo)) * (to - from);
  let ticks;
  if (cats.length) {
    const step = Math.ceil(cats.length / 12);
    ticks = cats.map((c, i) => [i, c]).filter(([i]) => i % step === 0);
  } else {
    ticks = [0, 1, 2, 3, 4].map((i) => {
      const v = log ? 10 ** (t(lo) + (t(hi) - t(lo)) * i / 4) : lo + (hi - lo) * i / 4;
      return [v, fmt(Number(v.toPrecision(3)))];
    });
  }
  return {map, ticks, lo, hi};
}
function svgText(x, y, text, anchor = 'middle') {
  const node = svg('text', {x, y, 'text-anchor': anchor});
  node.textContent = text;
  return node;
}
function drawPanel(plot, panel, width, height) {
  const left = 90, right = 14, top = 12, bottom = 34;
  const root = svg('svg', {class: 'plot', width, height, viewBox: `0 0 ${width} ${height}`});
  const all = (key) => panel.series.flatMap((s) => s[key]);
  const parallel = plot.kind === 'parallel';
  const xs = plot.kind === 'timeline' ? [...all('x'), ...all('z')] : all('x');
  const xAxis = parallel ? {label: '', categories: plot.axes.map((a) => a.label), min: -0.3, max: plot.axes.length - 0.7}
                         : panel.x;
  const sx = axisScale(xAxis, xs, left, width - right);
  const sy = axisScale(parallel ? {label: '', min: 0, max: 1} : panel.y, all('y'), height - bottom, top);
  root.append(svg('line', {class: 'axis', x1: left, y1: height - bottom, x2: width - right, y2: height - bottom}));
  root.append(svg('line', {class: 'axis', x1: left, y1: top, x2: left, y2: height - bottom}));
  for (const [v, label] of sx.ticks) root.append(svgText(sx.map(v), height - bottom + 13, label));
  if (!parallel) for (const [v, label] of sy.ticks) root.append(svgText(left - 4, sy.map(v) + 3, label, 'end'));
  root.append(svgText((left + width - right) / 2, height - 4, xAxis.label ?? ''));
  root.append(svgText(4, top + 2, parallel ? '' : panel.y.label ?? '', 'start'));
  const zAxis = panel.z ?? {};
  const zs = all('z').filter(Number.isFinite);
  const zlo = zAxis.max > zAxis.min ? zAxis.min : Math.min(...zs), zhi = zAxis.max > zAxis.min ? zAxis.max : Math.max(...zs);
  const zColour = (z) => viridis(zhi > zlo ? (z - zlo) / (zhi - zlo) : 0.5);
  if (parallel) {
    plot.axes.forEach((axis, i) => {
      const x = sx.map(i);
      root.append(svg('line', {class: 'axis', x1: x, y1: top, x2: x, y2: height - bottom}));
      const range = axis.categories?.length ? [axis.categories[0], axis.categories[axis.categories.length - 1]]
                                            : [fmt(Number(axis.min.toPrecision(3))), fmt(Number(axis.max.toPrecision(3)))];
      root.append(svgText(x, height - bottom - 2, range[0]), svgText(x, top + 8, range[1]));
    });
  }
  panel.series.forEach((series, index) => {
    const colour = PALETTE[index % PALETTE.length];
    const n = series.x.length;
    if (plot.kind === 'importance') {
      const band = Math.abs(sy.map(1) - sy.map(0)) * 0.7;
      for (let i = 0; i < n; ++i) {
        root.append(svg('rect', {x: sx.map(0), y: sy.map(series.y[i]) - band / 2, height: band,
                                 width: Math.max(1, sx.map(series.x[i]) - sx.map(0)), fill: colour}));
      }
    } else if (plot.kind === 'timeline') {
      const band = Math.max(2, Math.abs(sy.map(1) - sy.map(0)) * 0.6);
      for (let i = 0; i < n; ++i) {
        root.append(svg('rect', {x: sx.map(series.x[i]), y: sy.map(series.y[i]) - band / 2, height: band,
                                 width: Math.max(1, sx.map(series.z[i]) - sx.map(series.x[i])), fill: colour, opacity: 0.8}));
      }
    } else if (plot.kind === 'contour' && index === 0) {
      const w = (width - left - right) / 24, h = (height - top - bottom) / 24;
      for (let i = 0; i < n; ++i) {
        root.append(svg('rect', {x: sx.map(series.x[i]) - w / 2, y: sy.map(series.y[i]) - h / 2, width: w, height: h,
                                 fill: zColour(series.z[i]), opacity: 0.85}));
      }
    } else if (series.line) {
      const points = [];
      for (let i = 0; i < n; ++i) if (Number.isFinite(series.y[i])) points.push(`${sx.map(series.x[i])},${sy.map(series.y[i])}`);
      const stroke = series.z.length ? zColour(series.z[0]) : colour;
      root.append(svg('polyline', {class: 'curve', points: points.join(' '), stroke, 'stroke-opacity': 0.7}));
    } else {
      for (let i = 0; i < n; ++i) {
        if (!Number.isFinite(series.y[i])) continue;
        root.append(svg('circle', {cx: sx.map(series.x[i]), cy: sy.map(series.y[i]), r: 2.5,
                                   fill: series.z.length ? zColour(series.z[i]) : colour,
                                   stroke: plot.kind === 'contour' ? '#fff' : 'none'}));
      }
    }
  });
  // Legend: the series' names (states of a timeline, best so far, pruned...).
  const names = [...new Set(panel.series.filter((s) => !s.line).map((s) => s.name))].slice(0, 6);
  if (names.length > 1 && plot.kind !== 'contour') {
    names.forEach((name, i) => {
      const index = panel.series.findIndex((s) => s.name === name);
      root.append(svg('rect', {x: width - 150, y: top + 12 * i, width: 8, height: 8, fill: PALETTE[index % PALETTE.length]}));
      root.append(svgText(width - 138, top + 12 * i + 8, name, 'start'));
    });
  }
  return root;
}
function plotNode(plot) {
  const box = el('div', {class: 'panel plot-box', 'data-kind': plot.kind});
  box.append(el('h3', {text: plot.title}));
  if (plot.empty_reason) {
    box.append(el('p', {class: 'muted', text: plot.empty_reason}));
    return box;
  }
  const slices = plot.panels.length > 1;
  for (const panel of plot.panels) {
    const wrap = el('div', {class: slices ? 'small-multiple' : ''});
    if (panel.title) wrap.append(el('div', {class: 'muted', text: panel.title}));
    wrap.append(drawPanel(plot, panel, slices ? 420 : 900, slices ? 220 : 280));
    box.append(wrap);
  }
  if (plot.downsampled) box.append(el('p', {class: 'muted', text: `${plot.points_total} points, drawn downsampled`}));
  return box;
}

// --- Trial page ----------------------------------------------------------------------------
async function trialPage(studyName, number) {
  document.title = `${studyName} #${number} · DHPT`;
  let data;
  try {
    data = await getJson(`/api/trial?${new URLSearchParams({study: studyName, number})}`);
  } catch (error) {
    main.replaceChildren(el('h1', {text: `${studyName} #${number}`}), el('p', {class: 'error', text: `Could not load: ${error.message}`}));
    return;
  }
  const t = data.trial;
  const kv = (entries) => el('table', {}, el('tbody', {}, ...entries.map(([k, v]) =>
    el('tr', {}, el('th', {text: k}), el('td', {class: 'wrap', text: fmt(v)})))));
  const parts = [
    el('h1', {}, link('/study', {name: studyName}, studyName), document.createTextNode(` · trial ${t.number}`)),
    el('div', {class: 'cards'}, card('State', t.state), card('Value', objectiveOf(t)),
       card('Attempts', t.attempt), card('Seconds', duration(t))),
  ];
  if (t.error) parts.push(el('h2', {text: 'Error'}), el('pre', {id: 'trial-error', class: 'error', text: t.error}));
  parts.push(el('h2', {text: 'Parameters'}), el('div', {class: 'panel', id: 'trial-params'}, kv(Object.entries(t.params ?? {}))),
             el('h2', {text: 'Measurements'}), el('div', {class: 'panel', id: 'trial-metrics'}, kv(Object.entries(t.metrics ?? {}).sort())));
  parts.push(el('h2', {text: 'Where it ran'}), el('div', {class: 'panel'}, kv([
    ['worker', t.worker_id], ['node', t.node_name], ['device', t.device], ['origin', t.origin],
    ['created', t.create_time], ['started', t.start_time], ['ended', t.end_time]])));
  if (t.attempts?.length) {
    parts.push(el('div', {class: 'panel'}, el('table', {id: 'attempts'},
      el('thead', {}, el('tr', {}, el('th', {text: 'Attempt'}), el('th', {text: 'Worker'}), el('th', {text: 'Client'}))),
      el('tbody', {}, ...t.attempts.map((a, i) => el('tr', {}, el('td', {text: String(i + 1)}),
        el('td', {text: a.worker_id ?? ''}), el('td', {text: a.client_id ?? ''})))))));
  }
  parts.push(el('h2', {text: 'Progress'}));
  const curves = data.curves.filter((c) => c.steps?.length);
  if (curves.length) {
    const {root, x, y} = frame(700, 240, curves.flatMap((c) => c.steps), curves.flatMap((c) => c.values), 'step', 'intermediate value');
    const colours = ['#2f6fde', '#d9822b', '#23874f', '#c23b3b'];
    curves.forEach((c, i) => root.append(svg('polyline', {class: 'curve', stroke: colours[i % colours.length],
      points: c.steps.map((s, j) => `${x(s)},${y(c.values[j])}`).join(' ')})));
    root.id = 'progress-plot';
    parts.push(el('div', {class: 'panel'}, root));
  } else {
    parts.push(el('p', {class: 'muted', text: 'No intermediate values reported.'}));
  }
  main.replaceChildren(...parts);
  main.dataset.ready = 'true';
}

// --- Workers page --------------------------------------------------------------------------
// A worker's last heartbeat utilisation as text ("1.50 cores · 300 MiB · GPU 42%"), marked stale
// once it is older than three of its intervals (at least 15 s) by this browser's clock: a worker
// whose figures were refused, or a stuck one, keeps its old value on the scheduler.
function utilisationText(w) {
  const u = w.utilisation;
  if (!u || !w.utilisation_time) return {text: '-', stale: false};
  const parts = [`${Number(u.cpu_cores ?? 0).toFixed(2)} cores`, `${Math.round(Number(u.memory_bytes ?? 0) / 1048576)} MiB`];
  if (u.gpu_percent != null) parts.push(`GPU ${Math.round(Number(u.gpu_percent))}%`);
  const age = Date.now() - Date.parse(w.utilisation_time);
  const stale = age > Math.max(15000, 3 * Number(u.interval_ms ?? 0));
  return {text: parts.join(' · ') + (stale ? ` (stale, ${Math.round(age / 1000)} s old)` : ''), stale};
}

async function workersPage() {
  document.title = 'Workers · DHPT';
  const body = el('tbody');
  main.replaceChildren(el('h1', {text: 'Workers and boards'}), el('div', {class: 'panel'}, el('table', {id: 'workers'},
    el('thead', {}, el('tr', {}, ...['Worker', 'Node', 'Labels', 'Device', 'Arch', 'Slots', 'Running (trial ids)', 'Busy slots', 'Utilisation', 'Version']
      .map((h) => el('th', {text: h})))), body)));
  const load = async () => {
    try {
      const workers = await getJson('/api/workers');
      body.replaceChildren(...workers.map((w) => {
        const c = w.capabilities ?? {};
        const labels = Object.entries(c.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');
        const running = w.running_trials ?? [];
        const use = utilisationText(w);
        return el('tr', {'data-worker': w.worker_id},
          el('td', {text: w.worker_id}), el('td', {text: c.node_name ?? ''}), el('td', {class: 'wrap', text: labels}),
          el('td', {text: [c.device_kind, c.device_name].filter(Boolean).join(' ')}), el('td', {text: c.arch ?? ''}),
          el('td', {class: 'num', text: fmt(c.slots)}), el('td', {text: running.join(', ')}),
          el('td', {class: 'num', text: c.slots ? `${Math.round(100 * running.length / c.slots)}%` : ''}),
          el('td', {class: use.stale ? 'utilisation muted' : 'utilisation', text: use.text}),
          el('td', {text: c.version ?? ''}));
      }));
      if (!workers.length) body.append(el('tr', {}, el('td', {class: 'muted', text: 'No worker is connected.'})));
      main.dataset.ready = 'true';
    } catch (error) {
      body.replaceChildren(el('tr', {}, el('td', {class: 'error', text: `Could not load: ${error.message}`})));
    }
  };
  await load();
  setInterval(load, 3000);
}

// --- Routing: each page has its own URL, so a link shows the same page to whoever opens it.
const query = new URLSearchParams(location.search);
if (location.pathname === '/study' && query.get('name')) studyPage(query.get('name'));
else if (location.pathname === '/trial' && query.get('study')) trialPage(query.get('study'), query.get('number') ?? '0');
else if (location.pathname === '/workers') workersPage();
else studiesPage().then(() => { main.dataset.ready = 'true'; });
