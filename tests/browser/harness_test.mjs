// The harness must see what a user would: a page that logs an error, throws, runs an injected
// alert() or asks for a missing file is reported; a clean page reports nothing.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {mkdtempSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {join} from 'node:path';
import {launchBrowser, openPage, problemsOf} from './browser.mjs';

const dir = mkdtempSync(join(tmpdir(), 'dhpt-browser-'));
function pageUrl(name, body) {
  writeFileSync(join(dir, name), `<!doctype html><html><head><title>${name}</title></head>` +
                                 `<body>${body}</body></html>`);
  return `file://${join(dir, name)}`;
}

test('a clean page reports no problem; each kind of fault is reported', async () => {
  const browser = await launchBrowser();
  try {
    const clean = await openPage(browser, pageUrl('clean.html', '<svg width="4" height="4"></svg>'));
    assert.deepEqual(problemsOf(clean), []);
    assert.equal(await clean.$$eval('svg', (e) => e.length), 1);

    const faults = {
      'console.html': ['<script>console.error("drawn wrong")</script>', /console error: drawn wrong/],
      'throws.html': ['<script>null.x</script>', /page error: .*TypeError/],
      'alert.html': ['<script>alert(1)</script>', /dialog opened: alert 1/],
      'missing.html': ['<img src="does-not-exist.png">', /failed request: .*does-not-exist/],
    };
    for (const [name, [body, expected]] of Object.entries(faults)) {
      const page = await openPage(browser, pageUrl(name, body));
      assert.match(problemsOf(page).join('\n'), expected, name);
    }
  } finally {
    await browser.close();
  }
});
