// Opens one page in headless Chromium and prints what a test needs as JSON: the problems the
// page recorded (see browser.mjs), how many elements match each --count selector, and the text
// of each --text selector. Optionally waits for a selector and writes a PNG screenshot.
//   node tests/browser/check_page.mjs --url=file:///tmp/report/index.html \
//     --wait-for='svg' --count='svg' --count='table tr' --screenshot=/tmp/report.png
// Exit status: 0 with the JSON on stdout (the caller asserts on it), 1 when the browser could
// not open the page or the awaited selector never came.
import {parseArgs} from 'node:util';
import {launchBrowser, openPage, problemsOf} from './browser.mjs';

const {values: options} = parseArgs({options: {
  url: {type: 'string'},
  'wait-for': {type: 'string'},
  count: {type: 'string', multiple: true, default: []},
  text: {type: 'string', multiple: true, default: []},
  screenshot: {type: 'string'},
  width: {type: 'string', default: '1280'},
  height: {type: 'string', default: '900'},
  'timeout-ms': {type: 'string', default: '20000'},
}});
if (!options.url) {
  console.error('usage: check_page.mjs --url=URL [--wait-for=SEL] [--count=SEL]... ' +
                '[--text=SEL]... [--screenshot=FILE.png]');
  process.exit(2);
}

const timeoutMs = Number(options['timeout-ms']);
const browser = await launchBrowser();
try {
  const page = await openPage(browser, options.url, {
    timeoutMs,
    viewport: {width: Number(options.width), height: Number(options.height)},
  });
  if (options['wait-for']) await page.waitForSelector(options['wait-for'], {timeout: timeoutMs});
  const counts = {};
  for (const selector of options.count) {
    counts[selector] = await page.$$eval(selector, (elements) => elements.length);
  }
  const texts = {};
  for (const selector of options.text) {
    texts[selector] = await page.$$eval(selector, (elements) => elements.map((e) => e.textContent));
  }
  if (options.screenshot) await page.screenshot({path: options.screenshot, fullPage: true});
  console.log(JSON.stringify({title: await page.title(), problems: problemsOf(page), counts, texts},
                             null, 1));
} catch (error) {
  console.error(`check_page: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
