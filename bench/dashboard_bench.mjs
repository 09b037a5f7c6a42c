// Time to a usable study page in dhpt-dashboard, and the dashboard's memory, for studies of
// 1,000, 10,000 and 100,000 trials (docs/benchmarks.md). A real scheduler (SQLite file) gets
// each study through ImportStudy (`dhpt import`, completed trials with three parameters); a
// real dashboard serves it to Debian's headless Chromium. "Usable" is the study page with its
// summary, its history plot drawn and the trial table's first page shown (main[data-ready]);
// the study-insight plots come after (#plots[data-ready]).
//   bash tests/browser/run.sh ../../bench/dashboard_bench.mjs --bin=build/bin [--sizes=1000,10000,100000]
// With --compare: the first open of each size's study, by two dashboards side by side on the
// same scheduler, one reading the plots' trials in ListTrials' plot view and one reading whole
// trials (--plot_view=false, the path before it); --copies studies of each size, each opened
// first by each dashboard in turn (alternating, so the machine's load and the scheduler's
// first read of a study fall on both alike).
// With --cold: each study has left the scheduler's memory before its first open (an ended study
// not used lately, or any after a restart): the scheduler keeps no ended study but the one used
// last (--ended_study_cache_bytes=1), and a one-trial study is imported after each, so the open
// reads the study from the SQLite file.
import {spawn, execFile} from 'node:child_process';
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {parseArgs, promisify} from 'node:util';
import {launchBrowser, openPage, problemsOf} from '../tests/browser/browser.mjs';

const {values: options} = parseArgs({options: {
  bin: {type: 'string', default: 'build/bin'},
  sizes: {type: 'string', default: '1000,10000,100000'},
  repeats: {type: 'string', default: '4'},  // The first open, then three more.
  compare: {type: 'boolean', default: false},
  copies: {type: 'string', default: '2'},
  // "lean": each trial with one metric (loss), as the tables were measured with; "worker": also
  // the measurements a worker reports with each result and where it ran (what real trials hold).
  trials: {type: 'string', default: 'lean'},
  cold: {type: 'boolean', default: false},
}});
const sizes = options.sizes.split(',').map(Number);
const repeats = Number(options.repeats);
const dir = mkdtempSync(join(tmpdir(), 'dhpt-dashboard-bench-'));
const children = [];
process.on('exit', () => { for (const child of children) child.kill('SIGKILL'); });

function start(name, args, ready) {
  const child = spawn(join(options.bin, name), args, {stdio: ['ignore', 'pipe', 'pipe']});
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const look = (chunk) => {
      output += chunk;
      const match = output.match(ready);
      if (match) resolve({child, match});
    };
    child.stdout.on('data', look);
    child.stderr.on('data', look);
    child.on('exit', (code) => reject(new Error(`${name} exited ${code}: ${output}`)));
  });
}
const memory = (pid) => {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key) => Number(status.match(new RegExp(`${key}:\\s+(\\d+)`))[1]);
  return {rssMiB: kib('VmRSS') / 1024, peakMiB: kib('VmHWM') / 1024};
};
// CPU seconds a process has used (user and system), from /proc: what a cold read costs, which
// the machine's load moves less than the wall time it takes.
const cpuSeconds = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime, stime in ticks (USER_HZ 100).
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// A StudyExport (proto3 JSON) of n completed trials.
function exportOf(name, n) {
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const time = (ms) => new Date(t0 + ms).toISOString();
  const trials = [];
  for (let i = 0; i < n; ++i) {
    const x = Math.sin(i * 12.9898) * 5, y = Math.cos(i * 78.233) * 5;
    const loss = x * x + y * y + (i % 7) * 0.01;
    trials.push({study: name, number: String(i), state: 'COMPLETED', attempt: 1,
                 attempts: [{clientId: 'bench'}], clientId: 'bench', device: 'client',
                 params: {x: {doubleValue: x}, y: {doubleValue: y}, kind: {stringValue: ['a', 'b', 'c'][i % 3]}},
                 metrics: options.trials === 'worker'
                   ? {loss, mse: loss * 1.1, r2: 1 - loss / 50, wall_seconds: 0.89, cpu_seconds: 1.71,
                      cpu_utilization: 1.92, peak_rss_bytes: 2.1e8 + i, threads: 2}
                   : {loss},
                 ...(options.trials === 'worker' ? {workerId: `cpu-worker-${i % 4}`, nodeName: 'pi4-node-1'} : {}),
                 objectiveValue: loss,
                 createTime: time(i * 1000), startTime: time(i * 1000 + 10), endTime: time(i * 1000 + 900)});
  }
  return {study: {spec: {name, model: {kind: 'EXTERNAL'}, objective: {metric: 'loss', goal: 'MINIMIZE'},
                         algorithm: {name: 'RANDOM', seed: 1}, maxTrials: n,
                         parameters: [{name: 'x', doubleRange: {min: -5, max: 5}},
                                      {name: 'y', doubleRange: {min: -5, max: 5}},
                                      {name: 'kind', categorical: {values: ['a', 'b', 'c']}}]},
                  state: 'COMPLETED'},
          trials};
}

const scheduler = await start('dhpt-scheduler', ['--listen=127.0.0.1:0', `--db=${join(dir, 'dhpt.db')}`,
                                                 `--max_message_bytes=${512 << 20}`,
                                                 ...(options.cold ? ['--ended_study_cache_bytes=1'] : [])], /listening on 127\.0\.0\.1:(\d+)/);
const schedulerAddress = `127.0.0.1:${scheduler.match[1]}`;
const dashboardStarted = await start('dhpt-dashboard', [`--scheduler=${schedulerAddress}`, '--listen=127.0.0.1:0'],
                                     /dashboard at (http:\/\/127\.0\.0\.1:\d+)\//);
const dashboard = dashboardStarted.match[1];
const dashboardPid = dashboardStarted.child.pid;
const browser = await launchBrowser();
const rows = [];
if (options.compare) {
  const wholeStarted = await start('dhpt-dashboard', [`--scheduler=${schedulerAddress}`, '--listen=127.0.0.1:0',
                                                      '--plot_view=false'],
                                   /dashboard at (http:\/\/127\.0\.0\.1:\d+)\//);
  const paths = {plot_view: dashboard, whole: wholeStarted.match[1]};
  const pids = {plot_view: dashboardPid, whole: wholeStarted.child.pid};
  const timings = [];
  try {
    for (const n of sizes) {
      for (let copy = 0; copy < Number(options.copies); ++copy) {
        const name = `bench-${n}-${copy}`;
        const file = join(dir, `${name}.json`);
        writeFileSync(file, JSON.stringify(exportOf(name, n)));
        await promisify(execFile)(join(options.bin, 'dhpt'), ['import', file, `--scheduler=${schedulerAddress}`],
                                  {maxBuffer: 1 << 20});
        const order = copy % 2 === 0 ? ['plot_view', 'whole'] : ['whole', 'plot_view'];
        for (const path of order) {
          const load = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
          const cpuBefore = {scheduler: cpuSeconds(scheduler.child.pid), dashboard: cpuSeconds(pids[path])};
          const begin = performance.now();
          const page = await openPage(browser, `${paths[path]}/study?name=${name}`, {viewport: {width: 1280, height: 900}});
          try {
            await page.waitForSelector('main[data-ready]', {timeout: 60000});
          } catch (error) {  // What the page shows and met, to say why.
            console.error(problemsOf(page), await page.$eval('main', (m) => m.innerText.slice(0, 2000)));
            throw error;
          }
          const usable = performance.now() - begin;
          await page.waitForSelector('#plots[data-ready]', {timeout: 120000});
          const plots = performance.now() - begin;
          const schedulerCpu = cpuSeconds(scheduler.child.pid) - cpuBefore.scheduler;
          const dashboardCpu = cpuSeconds(pids[path]) - cpuBefore.dashboard;
          await page.close();
          timings.push({n, copy, path, first: path === order[0], usable, plots, schedulerCpu, dashboardCpu, load});
          console.error(JSON.stringify(timings[timings.length - 1]));
        }
      }
    }
  } finally {
    await browser.close();
    for (const child of children) child.kill('SIGTERM');
    rmSync(dir, {recursive: true, force: true});
  }
  console.log('| trials | plots read | opened | usable study page, first open (ms) | every plot drawn, first open (ms) | ' +
              'CPU until drawn: scheduler, dashboard (s) | load (1 min) |');
  console.log('|---:|---|---|---:|---:|---:|---:|');
  for (const t of timings) {
    console.log(`| ${t.n.toLocaleString('en')} | ${t.path === 'whole' ? 'whole trials' : 'plot view'} | ` +
                `${t.first ? 'first' : 'second'} | ${t.usable.toFixed(0)} | ${t.plots.toFixed(0)} | ` +
                `${t.schedulerCpu.toFixed(2)}, ${t.dashboardCpu.toFixed(2)} | ${t.load} |`);
  }
  process.exit(0);
}
try {
  for (const n of sizes) {
    const name = `bench-${n}`;
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(exportOf(name, n)));
    const importStart = performance.now();
    await promisify(execFile)(join(options.bin, 'dhpt'), ['import', file, `--scheduler=${schedulerAddress}`],
                              {maxBuffer: 1 << 20});
    const importSeconds = (performance.now() - importStart) / 1000;
    if (options.cold) {  // Now the ended study used last: `name` leaves memory.
      const other = join(dir, `${name}-after.json`);
      writeFileSync(other, JSON.stringify(exportOf(`${name}-after`, 1)));
      await promisify(execFile)(join(options.bin, 'dhpt'), ['import', other, `--scheduler=${schedulerAddress}`]);
    }
    const api = async (path) => {
      const begin = performance.now();
      const response = await fetch(`${dashboard}${path}`);
      const body = await response.text();
      if (!response.ok) throw new Error(`${path}: ${body}`);
      return {ms: performance.now() - begin, bytes: body.length};
    };
    const pageMs = [], plotsMs = [], history = [], firstPage = [], sorted = [], lastTrial = [];
    let heapMiB = 0, points = 0;
    for (let r = 0; r < repeats; ++r) {
      const begin = performance.now();
      const page = await openPage(browser, `${dashboard}/study?name=${name}`, {viewport: {width: 1280, height: 900}});
      await page.waitForSelector('main[data-ready]', {timeout: 60000});
      pageMs.push(performance.now() - begin);
      await page.waitForSelector('#plots[data-ready]', {timeout: 120000});
      plotsMs.push(performance.now() - begin);
      // (A study that ends closes its event stream: the page's own abort is no problem.)
      const problems = problemsOf(page).filter((p) => !/api\/events.*ERR_ABORTED/.test(p));
      if (problems.length) throw new Error(problems.join('\n'));
      points = await page.$$eval('#history-plot line.range, #history-plot circle', (nodes) => nodes.length);
      heapMiB = (await page.metrics()).JSHeapUsedSize / (1 << 20);
      await page.close();
      history.push(await api(`/api/history?study=${name}`));
      firstPage.push(await api(`/api/trials?study=${name}&size=50`));
      sorted.push(await api(`/api/trials?study=${name}&size=50&sort=value`));
      lastTrial.push(await api(`/api/trial?study=${name}&number=${n - 1}`));
    }
    const ms = (xs) => median(xs.map((x) => x.ms ?? x)).toFixed(0);
    // The first open reads the whole history (the dashboard had not seen the study); later
    // ones read only from where the study still moves (a finished study: its last page).
    rows.push({n, importSeconds: importSeconds.toFixed(1), cold: pageMs[0].toFixed(0), page: ms(pageMs.slice(1)), plotsCold: plotsMs[0].toFixed(0), plots: ms(plotsMs.slice(1)), history: ms(history),
               historyKiB: (history[0].bytes / 1024).toFixed(0), firstPage: ms(firstPage), sorted: ms(sorted),
               lastTrial: ms(lastTrial), points, heapMiB: heapMiB.toFixed(1), ...memory(dashboardPid),
               load: readFileSync('/proc/loadavg', 'utf8').split(' ')[0]});
    console.error(JSON.stringify(rows[rows.length - 1]));
  }
} finally {
  await browser.close();
  for (const child of children) child.kill('SIGTERM');
  rmSync(dir, {recursive: true, force: true});
}
console.log('| trials | import (s) | usable study page, first open (ms) | then (ms) | every plot drawn, first open (ms) | then (ms) | /api/history (ms, KiB) | table page 1 (ms) | ' +
            'sorted by value (ms) | last trial page (ms) | plot marks | page JS heap (MiB) | dashboard RSS / peak (MiB) | load (1 min) |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.n.toLocaleString('en')} | ${r.importSeconds} | ${r.cold} | ${r.page} | ${r.plotsCold} | ${r.plots} | ${r.history}, ${r.historyKiB} | ` +
              `${r.firstPage} | ${r.sorted} | ${r.lastTrial} | ${r.points} | ${r.heapMiB} | ` +
              `${r.rssMiB.toFixed(0)} / ${r.peakMiB.toFixed(0)} | ${r.load} |`);
}
