// dhpt-dashboard in a real browser: a real scheduler (SQLite file), a real CPU worker and the
// dashboard, all on 127.0.0.1 with ports the system picks, and Debian's headless Chromium
// (tests/browser). A known EXTERNAL study is driven with `dhpt ask` / `dhpt tell`, so every
// number the pages must show is known; a FUNCTION study runs on the worker.
//   DHPT_BIN_DIR=build/bin bash tests/browser/run.sh --test ../dashboard/dashboard_test.mjs
// DHPT_SCREENSHOT_DIR=docs/images also writes the screenshots the docs show.
import assert from 'node:assert/strict';
import {spawn, execFile} from 'node:child_process';
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {after, before, test} from 'node:test';
import {promisify} from 'node:util';
import {launchBrowser, openPage, problemsOf} from '../browser/browser.mjs';

const bin = process.env.DHPT_BIN_DIR ?? 'build/bin';
const screenshots = process.env.DHPT_SCREENSHOT_DIR;
const dir = mkdtempSync(join(tmpdir(), 'dhpt-dashboard-test-'));
const children = new Set();
const run = promisify(execFile);

// Starts a binary and resolves once a line of its output matches `ready` (with the match).
function start(name, args, ready, timeoutMs = 30000) {
  const child = spawn(join(bin, name), args, {stdio: ['ignore', 'pipe', 'pipe']});
  children.add(child);
  child.on('exit', () => children.delete(child));
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start: ${output}`)), timeoutMs);
    const look = (chunk) => {
      output += chunk;
      const match = output.match(ready);
      if (match) { clearTimeout(timer); resolve({child, match}); }
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`${name} exited ${code}: ${output}`)));
  });
}
function stop(child, signal = 'SIGTERM') {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 10000);
    child.on('exit', () => { clearTimeout(kill); resolve(); });
    child.kill(signal);
  });
}
process.on('exit', () => { for (const child of children) child.kill('SIGKILL'); });

let schedulerPort, scheduler, dashboard, stoppable, browser;
const dhpt = (...args) => run(join(bin, 'dhpt'), args,
                              {env: {...process.env, DHPT_SCHEDULER: `127.0.0.1:${schedulerPort}`}});
const ask = async () => Number((await dhpt('ask', 'known-study', '--client=test')).stdout.split(' ')[0]);
const tell = (number, ...rest) => dhpt('tell', 'known-study', String(number), ...rest, '--client=test');
const HTML_VALUES = ['<img src=x onerror=alert(2)>', '<script>alert(3)</script>'];
const HTML_ERROR = '<b onmouseover=alert(4)>boom</b><script>alert(5)</script>';

async function startScheduler(port = 0) {
  const started = await start('dhpt-scheduler', [`--listen=127.0.0.1:${port}`, `--db=${join(dir, 'dhpt.db')}`,
                                                 '--heartbeat_interval=200ms'], /listening on 127\.0\.0\.1:(\d+)/);
  scheduler = started.child;
  schedulerPort = Number(started.match[1]);
}

let dashboardProcess, dashboardPort;
async function startDashboard(port) {
  const started = await start('dhpt-dashboard', [`--scheduler=127.0.0.1:${schedulerPort}`, `--listen=127.0.0.1:${port}`],
                              /dashboard at http:\/\/127\.0\.0\.1:(\d+)\//);
  dashboardProcess = started.child;
  dashboardPort = Number(started.match[1]);
  dashboard = `http://127.0.0.1:${dashboardPort}`;
}

before(async () => {
  await startScheduler();
  const address = `--scheduler=127.0.0.1:${schedulerPort}`;
  await start('dhpt-cpu-worker', [address, '--worker_id=board-1', '--labels=board=pi4', '--slots=1',
                                  '--threads_per_trial=1'], /dhpt-cpu-worker board-1:/);
  await startDashboard(0);
  stoppable = `http://127.0.0.1:${(await start('dhpt-dashboard', [address, '--listen=127.0.0.1:0', '--allow_stop'],
                                               /dashboard at http:\/\/127\.0\.0\.1:(\d+)\//)).match[1]}`;
  // The worker has connected once the scheduler lists it.
  for (const deadline = Date.now() + 30000; ;) {
    const workers = await (await fetch(`${dashboard}/api/workers`)).json();
    if (workers.some((w) => w.worker_id === 'board-1')) break;
    assert.ok(Date.now() < deadline, 'the worker did not connect within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  writeFileSync(join(dir, 'known.json'), JSON.stringify({
    name: 'known-study', model: {kind: 'EXTERNAL'}, objective: {metric: 'loss', goal: 'MINIMIZE'},
    algorithm: {name: 'RANDOM', seed: 3}, max_trials: 40,
    parameters: [{name: 'x', double_range: {min: -5, max: 5}},
                 {name: 'kind', categorical: {values: HTML_VALUES}}]}));
  writeFileSync(join(dir, 'branin.json'), JSON.stringify({
    name: 'branin-on-board', model: {kind: 'FUNCTION', function: 'branin', fixed: {seconds: 0.5}},
    objective: {metric: 'value', goal: 'MINIMIZE'}, algorithm: {name: 'RANDOM', seed: 1},
    max_trials: 1000, parallel_trials: 1,
    parameters: [{name: 'x1', double_range: {min: -5, max: 10}}, {name: 'x2', double_range: {min: 0, max: 15}}]}));
  await dhpt('submit', join(dir, 'known.json'));
  await dhpt('submit', join(dir, 'branin.json'));
  for (const loss of [5, 4, 3, 2.5, 7]) await tell(await ask(), `loss=${loss}`);
  await tell(await ask(), `--infeasible=${HTML_ERROR}`);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await Promise.all([...children].map((child) => stop(child)));
  rmSync(dir, {recursive: true, force: true});
});

async function open(path, base = dashboard) {
  const page = await openPage(browser, `${base}${path}`, {viewport: {width: 1280, height: 900}});
  await page.waitForSelector('main[data-ready]', {timeout: 20000});
  return page;
}
const texts = (page, selector) => page.$$eval(selector, (nodes) => nodes.map((n) => n.textContent));

test('the studies page lists each study with its state, progress and best', async () => {
  const page = await open('/');
  const row = await page.$eval('tr[data-study="known-study"]', (tr) => [...tr.cells].map((c) => c.textContent));
  assert.deepEqual(row.slice(0, 5), ['known-study', 'RUNNING', '6 / 40', '2.5', 'RANDOM']);
  assert.ok(await page.$('tr[data-study="branin-on-board"]'));
  await page.type('#study-filter', 'branin');
  assert.deepEqual(await page.$$eval('#studies tbody tr', (rows) => rows.map((r) => r.dataset.study)), ['branin-on-board']);
  assert.deepEqual(problemsOf(page), []);
  await page.close();
});

test('a study page shows its numbers, plot and table, with user text as text', async () => {
  const page = await open('/study?name=known-study');
  assert.equal(await page.$eval('#summary-completed', (n) => n.textContent), '5');
  assert.equal(await page.$eval('#summary-failed', (n) => n.textContent), '1');
  assert.equal(await page.$eval('#summary-best', (n) => n.textContent), '2.5');
  assert.equal(await page.$$eval('#history-plot circle', (c) => c.length), 5);
  assert.equal(await page.$$eval('#trials tbody tr', (rows) => rows.length), 6);
  // The categorical values and the error are shown as the characters they are: no element
  // was made from them and no script ran (an alert would be a recorded problem).
  const shown = new Set(await texts(page, '#trials tbody td'));
  assert.ok(HTML_VALUES.some((v) => shown.has(v)));
  assert.ok(shown.has(`infeasible: ${HTML_ERROR}`));
  assert.equal(await page.$$eval('#trials img, #trials script, #trials b', (n) => n.length), 0);
  // The study-insight plots (services/analysis): each one this study can have, drawn, the
  // categorical values on their axes as text.
  await page.waitForSelector('#plots[data-ready]', {timeout: 20000});
  assert.deepEqual(await page.$$eval('#plots .plot-box', (boxes) => boxes.map((b) => b.dataset.kind)),
                   ['history-time', 'importance', 'parallel', 'slice', 'contour', 'intermediate', 'edf', 'timeline']);
  assert.equal(await page.$$eval('.plot-box[data-kind="slice"] svg', (s) => s.length), 2);  // x and kind.
  assert.ok((await texts(page, '.plot-box[data-kind="slice"] svg text')).includes(HTML_VALUES[1]));
  assert.equal(await page.$$eval('#plots script, #plots img', (n) => n.length), 0);
  // Sorted by value, best first, then filtered to the failed trial.
  await page.click('th[data-key="value"]');
  await page.waitForFunction(() => document.querySelector('#trials tbody tr td:nth-child(3)')?.textContent === '2.5');
  await page.select('#state-filter', 'FAILED');
  await page.waitForFunction(() => document.querySelectorAll('#trials tbody tr').length === 1);
  assert.deepEqual(problemsOf(page), []);
  if (screenshots) {
    await page.select('#state-filter', '');
    await page.waitForFunction(() => document.querySelectorAll('#trials tbody tr').length === 6);
    await page.screenshot({path: join(screenshots, 'dashboard-study.png')});
    const plots = await page.$('#plots');
    await plots.screenshot({path: join(screenshots, 'dashboard-plots.png')});
  }
  await page.close();
});

test('a trial page shows the failed trial, its parameters and its error as text', async () => {
  const page = await open('/trial?study=known-study&number=5');
  assert.equal(await page.$eval('#trial-error', (n) => n.textContent), `infeasible: ${HTML_ERROR}`);
  assert.ok((await texts(page, '#trial-params th')).includes('kind'));
  assert.deepEqual(problemsOf(page), []);
  await page.close();
});

test('the workers page shows the board, its labels and slots', async () => {
  const page = await open('/workers');
  const row = await page.$eval('tr[data-worker="board-1"]', (tr) => [...tr.cells].map((c) => c.textContent));
  assert.equal(row[2], 'board=pi4');
  assert.equal(row[5], '1');
  // Its heartbeats' utilisation (every 200 ms here), as text; the page reloads every 3 s.
  const headers = await texts(page, '#workers th');
  const column = headers.indexOf('Utilisation');
  assert.ok(column >= 0, `no Utilisation column in ${headers}`);
  const utilisation = await page.waitForFunction((i) => {
    const text = document.querySelector('tr[data-worker="board-1"]')?.cells[i]?.textContent ?? '';
    return /^\d+\.\d\d cores · [1-9]\d* MiB$/.test(text) && text;
  }, {timeout: 10000}, column);
  assert.match(await utilisation.jsonValue(), / MiB$/);  // Not marked stale.
  assert.deepEqual(problemsOf(page), []);
  if (screenshots) await page.screenshot({path: join(screenshots, 'dashboard-workers.png')});
  await page.close();
});

test('a study named <script>alert(1)</script> is refused by the scheduler and shown as text', async () => {
  const name = '<script>alert(1)</script>';
  writeFileSync(join(dir, 'xss.json'), JSON.stringify({name, model: {kind: 'EXTERNAL'},
    objective: {metric: 'loss', goal: 'MINIMIZE'}, parameters: [{name: 'x', double_range: {min: 0, max: 1}}]}));
  await assert.rejects(dhpt('submit', join(dir, 'xss.json')), /name: .* must be 1-128 letters/);
  const page = await openPage(browser, `${dashboard}/study?${new URLSearchParams({name})}`);
  await page.waitForSelector('p.error');
  assert.equal(await page.$eval('h1', (n) => n.textContent), name);
  assert.equal(await page.title(), `${name} · DHPT`);
  // The one problem is the API's answer, no study of that name: no script ran.
  assert.deepEqual(problemsOf(page).filter((p) => !p.includes('404')), []);
  await page.close();
});

test('a trial that completes shows within a second, without reloading', async () => {
  const page = await open('/study?name=known-study');
  await page.waitForFunction(() => document.getElementById('live').textContent === '● live');
  await page.waitForSelector('#plots[data-ready]', {timeout: 20000});
  const trialsPlotted = Number(await page.$eval('#plots', (p) => p.dataset.trials));
  const xSlice = '.plot-box[data-kind="slice"] svg circle';
  const sliceMarks = await page.$$eval(xSlice, (c) => c.length);
  const number = await ask();
  await page.waitForSelector(`tr[data-number="${number}"]`, {timeout: 5000});
  await tell(number, 'loss=1.25');
  const told = Date.now();
  await page.waitForFunction((n) => document.querySelector(`tr[data-number="${n}"] td:nth-child(2)`)?.textContent === 'COMPLETED' &&
                                    document.getElementById('summary-best')?.textContent === '1.25',
                             {timeout: 1000, polling: 'mutation'}, number);
  const elapsed = Date.now() - told;
  assert.ok(elapsed < 1000, `${elapsed} ms`);
  assert.equal(await page.$eval('#summary-completed', (n) => n.textContent), '6');
  assert.equal(await page.$$eval('#history-plot circle', (c) => c.length), 6);
  // The other plots follow from the same events, throttled to one read a second: the new
  // trial is in the slice plots (x and kind) within a few seconds.
  await page.waitForFunction((n) => document.getElementById('plots').dataset.trials === String(n),
                             {timeout: 5000}, trialsPlotted + 1);
  assert.equal(await page.$$eval(xSlice, (c) => c.length), sliceMarks + 2);
  assert.deepEqual(problemsOf(page), []);
  await page.close();
});

test('an open study page keeps updating across a scheduler restart', async () => {
  const page = await open('/study?name=known-study');
  await page.waitForFunction(() => document.getElementById('live').textContent === '● live');
  await stop(scheduler);
  await startScheduler(schedulerPort);
  const number = await ask();
  await tell(number, 'loss=0.5');
  await page.waitForFunction((n) => document.querySelector(`tr[data-number="${n}"] td:nth-child(2)`)?.textContent === 'COMPLETED' &&
                                    document.getElementById('summary-best')?.textContent === '0.5',
                             {timeout: 30000}, number);
  assert.equal(await page.$eval('#summary-completed', (n) => n.textContent), '7');
  // The browser's own stream did not drop: only the dashboard's watch was resumed.
  assert.deepEqual(problemsOf(page), []);
  const reloaded = await open('/study?name=known-study');
  assert.equal(await reloaded.$eval('#summary-completed', (n) => n.textContent), '7');
  await Promise.all([page.close(), reloaded.close()]);
});

test('a page whose dashboard restarts gets the events it missed, without reloading', async () => {
  const page = await open('/study?name=known-study');
  await page.waitForFunction(() => document.getElementById('live').textContent === '● live');
  const number = await ask();
  await page.waitForSelector(`tr[data-number="${number}"]`, {timeout: 5000});
  await stop(dashboardProcess);
  await tell(number, 'loss=0.25');  // While no dashboard runs: only a resumed watch sees it.
  await startDashboard(dashboardPort);
  // The browser reconnects by itself with the last event id it saw; the dashboard resumes the
  // scheduler's watch after it, so the trial's change comes, not only the study's new summary.
  await page.waitForFunction((n) => document.querySelector(`tr[data-number="${n}"] td:nth-child(2)`)?.textContent === 'COMPLETED',
                             {timeout: 20000}, number);
  assert.equal(await page.$eval('#summary-best', (n) => n.textContent), '0.25');
  // While the dashboard was down Chromium logged refused reconnections (their URL is in the
  // failed requests); no stream was cut off mid-answer, and nothing else went wrong.
  const {consoleErrors, pageErrors, failedRequests} = page.problems;
  assert.deepEqual(consoleErrors.filter((m) => !m.endsWith('net::ERR_CONNECTION_REFUSED')), []);
  assert.deepEqual(failedRequests.filter((m) => !m.includes('/api/events?study=known-study: net::ERR_CONNECTION_REFUSED')), []);
  assert.deepEqual(pageErrors, []);
  await page.close();
});

// Imports a running study `name` of `n` trials (of `maxTrials`) of one parameter x, each
// completed with lossOf(i) but `pending`, which waits for `dhpt ask`.
async function importWithOnePending(name, n, pending, lossOf, maxTrials = n) {
  const trials = [];
  for (let i = 0; i < n; ++i) {
    const trial = {study: name, number: String(i), state: i === pending ? 'PENDING' : 'COMPLETED',
                   params: {x: {doubleValue: (i % 97) / 10}}};
    if (i !== pending) Object.assign(trial, {metrics: {loss: lossOf(i)}, objectiveValue: lossOf(i),
                                             attempt: 1, attempts: [{clientId: 'test'}], clientId: 'test'});
    trials.push(trial);
  }
  writeFileSync(join(dir, `${name}.json`), JSON.stringify({
    study: {spec: {name, model: {kind: 'EXTERNAL'}, objective: {metric: 'loss', goal: 'MINIMIZE'},
                   algorithm: {name: 'RANDOM', seed: 1}, maxTrials,
                   parameters: [{name: 'x', doubleRange: {min: 0, max: 10}}]}, state: 'RUNNING'},
    trials}));
  await dhpt('import', join(dir, `${name}.json`));
}

test('a history read again from where the study still moves equals one read whole', async () => {
  // 2,500 trials (pages of 1,000 for the history), trial 1,500 still pending: a first read keeps
  // the first page and reads from the second on the next time.
  const name = 'resumed-history';
  await importWithOnePending(name, 2500, 1500, (i) => 50 + (i * 37) % 101);
  const history = async (base) => (await fetch(`${base}/api/history?study=${name}`)).json();
  const before = await history(dashboard);
  assert.equal(before.points.reduce((sum, p) => sum + p[5], 0), 2499);
  const asked = (await dhpt('ask', name, '--client=test')).stdout.split(' ')[0];
  assert.equal(asked, '1500');
  await dhpt('tell', name, '1500', 'loss=-1', '--client=test');
  const after = await history(dashboard);  // The first page from before, the rest read again.
  assert.equal(after.points.reduce((sum, p) => sum + p[5], 0), 2500);
  assert.equal(after.points[after.points.length - 1][4], -1);
  const fresh = await history(stoppable);  // Never read this study before: read whole.
  assert.deepEqual(after, fresh);
});

test('the plots read a study once, then only from where it still moves, then not at all', async () => {
  // 12,000 trials (the plots read pages of 10,000), trial 11,000 still pending. The work of each
  // answer is bounded, not timed: `read` is how many trials it read from the scheduler.
  const name = 'resumed-plots';
  await importWithOnePending(name, 12000, 11000, (i) => 50 + (i * 37) % 101);
  const plots = async (base) => {
    const response = await fetch(`${base}/api/plots?study=${name}`);
    assert.equal(response.status, 200);
    return response.json();
  };
  const first = await plots(dashboard);
  assert.equal(first.read, 12000);
  assert.equal(first.trials, 12000);
  // Read in ListTrials' plot view: each trial's id, number, state, x, loss, client and times
  // (about 40 bytes), not the whole trial, which also holds the study's name, its metrics and
  // its attempts (over 80 bytes).
  assert.ok(first.read_bytes > 0 && first.read_bytes < 60 * first.read, `${first.read_bytes} bytes`);
  const again = await plots(dashboard);  // The first page kept; the one with trial 11,000 read.
  assert.equal(again.read, 2000);
  assert.deepEqual({...again, read: 0, read_bytes: 0}, {...first, read: 0, read_bytes: 0});
  assert.equal((await dhpt('ask', name, '--client=test')).stdout.split(' ')[0], '11000');
  await dhpt('tell', name, '11000', 'loss=-1', '--client=test');
  const told = await plots(dashboard);
  assert.equal(told.read, 2000);
  const fresh = await plots(stoppable);  // Never read this study before: read whole.
  assert.equal(fresh.read, 12000);
  assert.deepEqual({...told, read: 0, read_bytes: 0}, {...fresh, read: 0, read_bytes: 0});
  // Nothing pending or running: the answer stands until the study's counts change.
  assert.equal((await plots(dashboard)).read, 0);
  assert.deepEqual({...(await plots(dashboard)), read: 0, read_bytes: 0}, {...told, read: 0, read_bytes: 0});
});

test('a study of over 20,000 trials is drawn from the scheduler\'s sample, which keeps what may still change', async () => {
  // 25,000 trials: every second one, each that improved on the best before it and the pending
  // trial 21,001 come to the dashboard; the rest are neither built nor sent.
  const name = 'sampled-plots', pending = 21001;
  const lossOf = (i) => 50 + (i * 37) % 101 - i / 500;
  await importWithOnePending(name, 25000, pending, lossOf);
  const sampleSize = (loss) => {
    let best = Infinity, kept = 0;
    for (let i = 0; i < 25000; ++i) {
      const value = loss(i);
      const improves = value !== null && value < best;
      if (improves) best = value;
      if (improves || value === null || i % 2 === 0) ++kept;
    }
    return kept;
  };
  const plots = async (base) => {
    const response = await fetch(`${base}/api/plots?study=${name}`);
    assert.equal(response.status, 200);
    return response.json();
  };
  const before = sampleSize((i) => (i === pending ? null : lossOf(i)));
  assert.ok(before > 12500 + 50, `${before}: the improving trials show in the sample`);
  const first = await plots(dashboard);
  assert.deepEqual([first.trials, first.drawn_from, first.read], [25000, before, before]);
  // The pending trial completes with the best value: those after it no longer improve.
  assert.equal((await dhpt('ask', name, '--client=test')).stdout.split(' ')[0], String(pending));
  await dhpt('tell', name, String(pending), 'loss=-60', '--client=test');
  const after = sampleSize((i) => (i === pending ? -60 : lossOf(i)));
  assert.ok(after < before, `${after} against ${before}`);
  const told = await plots(dashboard);  // Read again from the page that held trial 21,001.
  assert.equal(told.drawn_from, after);
  assert.ok(told.read < 10000, `${told.read} trials read again`);
  const fresh = await plots(stoppable);  // Never read this study before: its whole sample.
  assert.equal(fresh.read, after);
  assert.deepEqual({...told, read: 0, read_bytes: 0}, {...fresh, read: 0, read_bytes: 0});
  const page = await open(`/study?name=${name}`);
  await page.waitForSelector('#plots[data-ready]', {timeout: 20000});
  assert.equal(await page.$eval('#plots-sampled', (p) => p.textContent),
               `Drawn from ${after} of the 25000 trials: evenly spread, and every one that improved on the best.`);
  await page.close();
});

test('a running study with a large budget is drawn from all the trials it has, not sampled by its budget', async () => {
  // 300 trials run of 1,000,000 allowed: the budget not yet begun counts as pending in the
  // study's summary, and the plots sampled every 64th trial of the 300 for it.
  const name = 'large-budget';
  await importWithOnePending(name, 300, 299, (i) => 50 + (i * 37) % 101, 1000000);
  const answer = await (await fetch(`${dashboard}/api/plots?study=${name}`)).json();
  assert.deepEqual([answer.trials, answer.drawn_from, answer.read], [300, 300, 300]);
  assert.doesNotMatch(answer.plots.find((p) => p.kind === 'intermediate').empty_reason, /studies of up to/);
});

test('stopping a study: refused by a read-only dashboard, asked first on one that may', async () => {
  const refused = await fetch(`${dashboard}/api/stop?study=branin-on-board`, {method: 'POST', headers: {'X-DHPT-Confirm': 'stop'}});
  assert.equal(refused.status, 403);
  const readOnly = await open('/study?name=branin-on-board');
  assert.equal(await readOnly.$('#stop'), null);
  await readOnly.close();
  const forged = await fetch(`${stoppable}/api/stop?study=branin-on-board`, {method: 'POST'});
  assert.equal(forged.status, 403);
  // A body must not choose what is stopped (cpp-httplib reads a form's fields as parameters).
  const fromBody = await fetch(`${stoppable}/api/stop`, {method: 'POST', body: 'study=branin-on-board',
    headers: {'X-DHPT-Confirm': 'stop', 'Content-Type': 'application/x-www-form-urlencoded'}});
  assert.equal(fromBody.status, 400);
  assert.match((await fromBody.json()).error, /in the query \(\?study=NAME\) and no body/);
  const parts = new FormData();  // Multipart: cpp-httplib keeps its parts out of the body.
  parts.append('study', 'known-study');
  const fromParts = await fetch(`${stoppable}/api/stop?study=branin-on-board`,
                                {method: 'POST', body: parts, headers: {'X-DHPT-Confirm': 'stop'}});
  assert.equal(fromParts.status, 400);
  const page = await open('/study?name=branin-on-board', stoppable);
  await page.click('#stop');
  assert.equal(await page.$eval('#summary-state', (n) => n.textContent), 'RUNNING');  // Asked, not done.
  await page.click('#stop-confirm');
  await page.waitForFunction(() => document.getElementById('summary-state')?.textContent === 'STOPPED', {timeout: 10000});
  // The study ended, so the page closed its event stream: that abort is the page's own doing.
  assert.deepEqual(problemsOf(page).filter((p) => !/api\/events\?study=branin-on-board: net::ERR_ABORTED$/.test(p)), []);
  await page.close();
});

test('a trial that finishes after the table is read and before the watch starts shows finished', async () => {
  // Hostile review: the page opened its event stream only once the table had loaded, and a
  // watch sees changes from when it starts, so a trial that finished in between stayed
  // RUNNING (12 s of them after a scheduler restart). Here the stream is held back by the
  // browser until the trial has finished.
  const number = await ask();
  const page = await browser.newPage();
  await page.setRequestInterception(true);
  let releaseEvents = null;
  const eventsReleased = new Promise((resolve) => { releaseEvents = resolve; });
  page.on('request', (request) => {
    if (request.url().includes('/api/events')) eventsReleased.then(() => request.continue());
    else request.continue();
  });
  await page.goto(`${dashboard}/study?name=known-study`, {waitUntil: 'load', timeout: 20000});
  await page.waitForSelector('main[data-ready]', {timeout: 20000});
  assert.equal(await page.$eval(`tr[data-number="${number}"] td:nth-child(2)`, (n) => n.textContent), 'RUNNING');
  await tell(number, 'loss=3');
  releaseEvents();
  await page.waitForFunction((n) => document.querySelector(`tr[data-number="${n}"] td:nth-child(2)`)?.textContent === 'COMPLETED',
                             {timeout: 10000}, number);
  await page.close();
});
