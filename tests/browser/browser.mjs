// One way to open a page in a real browser for the tests: Debian's Chromium, headless, driven
// over the DevTools protocol by puppeteer-core (pinned in package-lock.json). Every page a test
// opens records what a user would notice went wrong: console errors, uncaught exceptions and
// failed requests, so a test can assert that a page rendered cleanly, not only that it parsed.
import puppeteer from 'puppeteer-core';

export const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

export async function launchBrowser() {
  return puppeteer.launch({
    executablePath: chromiumPath,
    headless: true,
    // --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
    // No network is needed or wanted: DHPT's pages must open offline. Every request goes to
    // a proxy that is not there, except loopback ones (Chromium's implicit bypass), which reach
    // the services a test starts on 127.0.0.1 (the dashboard).
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           '--proxy-server=127.0.0.1:9'],
  });
}

// Opens `url` in a new page whose problems are collected in `page.problems`.
export async function openPage(browser, url, {timeoutMs = 20000, viewport} = {}) {
  const page = await browser.newPage();
  if (viewport) await page.setViewport(viewport);
  const problems = {consoleErrors: [], pageErrors: [], failedRequests: []};
  page.on('console', (message) => {
    if (message.type() === 'error') problems.consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => problems.pageErrors.push(String(error)));
  page.on('requestfailed', (request) => {
    problems.failedRequests.push(`${request.url()}: ${request.failure()?.errorText}`);
  });
  page.on('dialog', (dialog) => {
    // An alert() would be a script a page should not have run (an escaping bug): record it.
    problems.pageErrors.push(`dialog opened: ${dialog.type()} ${dialog.message()}`);
    dialog.dismiss();
  });
  page.problems = problems;
  await page.goto(url, {waitUntil: 'load', timeout: timeoutMs});
  return page;
}

// Every problem the page recorded, one per line; empty when it rendered cleanly.
export function problemsOf(page) {
  const {consoleErrors, pageErrors, failedRequests} = page.problems;
  return [...consoleErrors.map((m) => `console error: ${m}`),
          ...pageErrors.map((m) => `page error: ${m}`),
          ...failedRequests.map((m) => `failed request: ${m}`)];
}
