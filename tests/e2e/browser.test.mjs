// The chat page in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core) against
// the real `splash serve` on a tiny random-weight model: the page is served from the binary, a
// message streams in over several DOM updates, Stop ends a long generation (and the server cancels
// it), errors show inline, with --api-key the page asks for the key and works once it is given, and
// on the demo model (no chat template) the page is in continuation mode and streams a story.
//   node tests/e2e/browser.test.mjs [--splash build/splash] [--model X.gguf] [--chromium PATH]
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { parse_args, repo_root, require_package, run, skip, sleep, test, wait_for } from './lib/harness.mjs';
import { get_json, make_tiny_model, post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '', model: '', chromium: process.env.SPLASH_CHROMIUM || '/usr/bin/chromium' });
if (!fs.existsSync(args.chromium)) skip(`no Chromium at ${args.chromium} (apt-get install chromium)`);
const { chromium } = require_package('playwright-core');
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('browser'));

const server = await start_server({ binary, model: model_path });
const model = (await get_json(server, '/v1/models')).body.data[0].id;
const browser = await chromium.launch({
  executablePath: args.chromium,
  headless: true,
  // Chromium's sandbox cannot start as root (CI containers).
  args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [],
});
const context = await browser.newContext();
await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
const page_errors = [];
const page = await open_page(context, server.url, page_errors);

async function open_page(ctx, url, errors) {
  const p = await ctx.newPage();
  p.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  p.on('console', (m) => {
    // A refused request (401 before the key is entered, 400 on purpose) is logged by Chromium itself.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  const response = await p.goto(url + '/');
  assert.equal(response.status(), 200);
  return p;
}

const last_answer = (p) => p.getByRole('article', { name: 'Assistant message' }).last();

async function set_max_tokens(p, value) {
  const field = p.getByLabel('Max tokens');
  if (!(await field.isVisible())) await p.getByRole('button', { name: 'Settings' }).click();
  await field.fill(String(value));
}

async function send(p, text) {
  const box = p.getByRole('textbox', { name: 'Message' });
  await box.fill(text);
  await box.press('Enter');
}

async function wait_answer_done(p, timeout = 60000) {
  await p.waitForFunction(() => {
    const a = [...document.querySelectorAll('article[aria-label="Assistant message"]')].pop();
    return a && a.getAttribute('aria-busy') === 'false';
  }, null, { timeout });
}

async function cancelled_count(s) {
  return (await get_json(s, '/status')).body.requests.cancelled;
}

test('the page and its assets come from the binary, byte for byte, with caching headers', async () => {
  for (const [route, file, type] of [['/', 'index.html', /^text\/html/], ['/assets/app.js', 'app.js', /^text\/javascript/],
    ['/assets/markdown.js', 'markdown.js', /^text\/javascript/], ['/assets/style.css', 'style.css', /^text\/css/]]) {
    const r = await fetch(server.url + route);
    assert.equal(r.status, 200, route);
    assert.match(r.headers.get('content-type'), type, route);
    const body = Buffer.from(await r.arrayBuffer());
    assert.ok(body.equals(fs.readFileSync(path.join(repo_root, 'web', file))), `${route} differs from web/${file}`);
    const etag = r.headers.get('etag');
    const cache = r.headers.get('cache-control') ?? '';
    assert.ok(etag || /no-cache/.test(cache), `${route}: neither ETag nor Cache-Control: no-cache`);
    if (etag) {
      const again = await fetch(server.url + route, { headers: { 'If-None-Match': etag } });
      assert.equal(again.status, 304, `${route} with If-None-Match ${etag}`);
    }
  }
  assert.equal((await fetch(server.url + '/assets/nope.js')).status, 404);
  await page.getByText(model, { exact: true }).first().waitFor({ timeout: 10000 });
  assert.equal(await page.title(), 'Splash');
});

test('a message streams in over several DOM updates; user text is not markup', async () => {
  // Long enough that the stream spans many animation frames even on a loaded machine (24 tokens of
  // the tiny model once arrived within one frame and rendered in a single update).
  await set_max_tokens(page, 200);
  // Record every distinct text of the answer body as the page changes it.
  await page.evaluate(() => {
    window.__bodies = [];
    new MutationObserver(() => {
      const a = [...document.querySelectorAll('article[aria-label="Assistant message"]')].pop();
      const text = a ? a.querySelector('.body').textContent : '';
      if (text && window.__bodies[window.__bodies.length - 1] !== text) window.__bodies.push(text);
    }).observe(document.getElementById('conversation'), { subtree: true, childList: true, characterData: true });
  });
  const typed = 'Hello <b>there</b> **friend**';
  await send(page, typed);
  const user = page.getByRole('article', { name: 'Your message' }).last();
  assert.equal(await user.locator('.body').textContent(), typed);
  assert.equal(await user.locator('b, strong').count(), 0);
  assert.equal(await page.getByRole('textbox', { name: 'Message' }).inputValue(), '');
  await wait_answer_done(page);
  const bodies = await page.evaluate(() => window.__bodies);
  assert.ok(bodies.length >= 2, `answer rendered in ${bodies.length} DOM update(s): ${JSON.stringify(bodies)}`);
  for (let i = 1; i < bodies.length; i++) assert.ok(bodies[i].length >= bodies[i - 1].length, 'text shrank');
  const stats = await last_answer(page).getByLabel('Answer statistics').textContent();
  assert.match(stats, /^TTFT \d+ ms · \d+\.\d tok\/s · \d+ tokens · \d+ of \d+ prompt tokens cached/);
  assert.ok(await page.getByRole('button', { name: 'Send' }).isEnabled());
  assert.ok(await page.getByRole('button', { name: 'Stop' }).isDisabled());
});

test('Shift+Enter adds a line instead of sending', async () => {
  const before = await page.getByRole('article').count();
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill('line one');
  await box.press('Shift+Enter');
  await box.pressSequentially('line two');
  assert.equal(await box.inputValue(), 'line one\nline two');
  assert.equal(await page.getByRole('article').count(), before);
  await box.fill('');
});

test('Stop ends a long generation and the server cancels it', async () => {
  await set_max_tokens(page, '');  // to the end of the context: far longer than this test
  const cancelled = await cancelled_count(server);
  await send(page, 'Tell me a very long story.');
  const stop = page.getByRole('button', { name: 'Stop' });
  await wait_for('streamed text', async () => (await last_answer(page).locator('.body').textContent()).length > 0, 30000);
  assert.ok(await stop.isEnabled());
  await stop.click();
  await wait_answer_done(page, 5000);
  assert.ok(await stop.isDisabled());
  assert.match(await last_answer(page).getByLabel('Answer statistics').textContent(), /stopped/);
  const text = await last_answer(page).locator('.body').textContent();
  await sleep(1500);
  assert.equal(await last_answer(page).locator('.body').textContent(), text, 'text still growing after Stop');
  await wait_for('the server to count the cancellation', async () => {
    const s = (await get_json(server, '/status')).body;
    return s.requests.cancelled === cancelled + 1 && s.scheduler.decoding === 0;
  }, 5000);
  // The conversation goes on after a stopped answer.
  await set_max_tokens(page, 4);
  await send(page, 'Shorter, please.');
  await wait_answer_done(page);
  assert.doesNotMatch(await last_answer(page).getByLabel('Answer statistics').textContent(), /stopped/);
});

test('a server error shows inline with its message', async () => {
  await set_max_tokens(page, 10_000_000);  // over the context: 400 context_length_exceeded
  await send(page, 'too long');
  await wait_answer_done(page);
  const alert = last_answer(page).getByRole('alert');
  await alert.waitFor();
  assert.match(await alert.textContent(), /context/i);
  await set_max_tokens(page, 8);
});

test('markdown, code copy, reasoning and progress render from a canned stream', async () => {
  const chunk = (o) => `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 0, model, ...o })}\n\n`;
  const delta = (d) => chunk({ choices: [{ index: 0, delta: d, finish_reason: null }] });
  const sse = [
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: null }], prompt_progress: { total: 10, cache: 3, processed: 10, time_ms: 5 } }),
    delta({ role: 'assistant', content: '' }),
    delta({ reasoning_content: 'Let me think.' }),
    delta({ content: '# Title\n\n**bold** and `code`\n\n' }),
    delta({ content: '```js\nlet a = 1 < 2;\n```\n<img src=x onerror="window.__xss=1">' }),
    delta({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q":' } }] }),
    delta({ tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] }),
    chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
      timings: { prompt_n: 7, cache_n: 3, prompt_ms: 12.4, prompt_per_second: 560, predicted_n: 7, predicted_ms: 200, predicted_per_second: 34.54 } }),
    chunk({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 7, total_tokens: 17, prompt_tokens_details: { cached_tokens: 3 } } }),
    'data: [DONE]\n\n',
  ].join('');
  await page.route('**/v1/chat/completions', (route) =>
    route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body: sse }));
  try {
    await send(page, 'render test');
    await wait_answer_done(page);
  } finally {
    await page.unroute('**/v1/chat/completions');
  }
  const answer = last_answer(page);
  assert.equal(await answer.getByRole('heading', { level: 1 }).textContent(), 'Title');
  assert.equal(await answer.locator('.body strong').textContent(), 'bold');
  assert.equal(await answer.locator('.body pre code').textContent(), 'let a = 1 < 2;');
  assert.equal(await answer.locator('img').count(), 0);
  assert.match(await answer.locator('.body').textContent(), /<img src=x onerror="window.__xss=1">/);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const reasoning = answer.locator('details.reasoning');
  assert.equal(await reasoning.getAttribute('open'), null, 'reasoning starts collapsed');
  assert.equal(await reasoning.locator('summary').textContent(), 'Reasoning');
  assert.equal(await reasoning.locator('.text').textContent(), 'Let me think.');
  assert.equal(await answer.locator('.tool-call').textContent(), 'lookup({"q":"x"})');
  assert.equal(await answer.getByLabel('Answer statistics').textContent(),
    'TTFT 12 ms · 34.5 tok/s · 7 tokens · 3 of 10 prompt tokens cached');
  await answer.getByRole('button', { name: 'Copy code' }).click();
  await wait_for('Copied', async () => (await answer.getByRole('button', { name: 'Copy code' }).textContent()) === 'Copied');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'let a = 1 < 2;');
});

test('a stream that ends without [DONE] or an error event is reported', async () => {
  const sse = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant', content: 'partial' } }] })}\n\n`;
  await page.route('**/v1/chat/completions', (route) =>
    route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body: sse }));
  try {
    await send(page, 'cut short');
    await wait_answer_done(page);
  } finally {
    await page.unroute('**/v1/chat/completions');
  }
  assert.equal(await last_answer(page).locator('.body').textContent(), 'partial');
  assert.match(await last_answer(page).getByRole('alert').textContent(), /closed the stream/);
});

test('New chat clears the conversation', async () => {
  assert.ok((await page.getByRole('article').count()) > 0);
  await page.getByRole('button', { name: 'New chat' }).click();
  assert.equal(await page.getByRole('article').count(), 0);
  assert.ok(await page.getByText('Ask anything.').isVisible());
});

test('works at a narrow width (360 px): no horizontal scroll, controls on screen', async () => {
  await page.setViewportSize({ width: 360, height: 640 });
  await set_max_tokens(page, 4);
  await send(page, 'narrow');
  await wait_answer_done(page);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 360, `page is ${width} px wide`);
  for (const name of ['Send', 'Stop', 'New chat']) {
    const box = await page.getByRole('button', { name }).boundingBox();
    assert.ok(box && box.x >= 0 && box.x + box.width <= 360 && box.y + box.height <= 640, `${name} at ${JSON.stringify(box)}`);
  }
  await page.setViewportSize({ width: 1280, height: 720 });
});

test('with --api-key the page asks for the key, then works (and remembers it)', async () => {
  const keyed = await start_server({ binary, model: model_path, args: ['--api-key', 'browser-secret-2'] });
  const errors = [];
  const ctx = await browser.newContext();
  try {
    const p = await open_page(ctx, keyed.url, errors);
    await p.getByText(/This server needs an API key/).waitFor({ timeout: 10000 });
    assert.equal(await p.locator('#model-name').textContent(), 'API key needed');
    await set_max_tokens(p, 6);
    await send(p, 'hello with a key');
    await wait_answer_done(p);
    assert.match(await last_answer(p).getByRole('alert').textContent(), /./);  // the 401's message
    await p.getByLabel('API key').fill('browser-secret-2');
    await p.getByRole('button', { name: 'Save key' }).click();
    await p.getByText(model, { exact: true }).first().waitFor({ timeout: 10000 });
    // Saving the key re-sends the refused turn.
    await wait_for('a second answer', async () => (await p.getByRole('article', { name: 'Assistant message' }).count()) === 2, 10000);
    await wait_answer_done(p);
    assert.equal(await last_answer(p).getByRole('alert').isVisible(), false);
    assert.match(await last_answer(p).getByLabel('Answer statistics').textContent(), /tokens/);
    await p.reload();
    await p.getByText(model, { exact: true }).first().waitFor({ timeout: 10000 });
    assert.equal(await p.getByText(/This server needs an API key/).isVisible(), false);
    assert.deepEqual(errors, []);
  } finally {
    await ctx.close();
    await keyed.stop();
  }
});

// The demo model (stories15M: no chat template), from scripts/setup's cache: the converted Q8_0
// file, else the llama2.c checkpoint that scripts/setup --deps-only fetches.
function demo_model() {
  const dir = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'splash', 'demo');
  const gguf = path.join(dir, 'stories15M-Q8_0.gguf');
  if (fs.existsSync(gguf)) return { model: gguf, args: [] };
  const bin = path.join(dir, 'stories15M.bin');
  if (fs.existsSync(bin)) return { model: bin, args: ['--tokenizer', path.join(dir, 'tokenizer.bin')] };
  return null;
}

test('the demo model (no chat template): continuation mode streams a story from /v1/completions', async () => {
  const demo = demo_model();
  // scripts/test fetches it (scripts/setup --deps-only), so CI always runs this one.
  if (!demo) {
    console.log('     skipped: no demo model in ~/.cache/splash/demo (scripts/fetch-demo-model)');
    return;
  }
  const base = await start_server({ binary, model: demo.model, args: demo.args });
  const errors = [];
  const ctx = await browser.newContext();
  try {
    const p = await open_page(ctx, base.url, errors);
    const urls = [];
    p.on('request', (r) => urls.push(new URL(r.url()).pathname));
    // The mode comes from /v1/models before anything is sent.
    const notice = p.getByRole('status');
    await notice.getByText(/Continuation mode/).waitFor({ timeout: 10000 });
    assert.match(await notice.textContent(), /no chat template/);
    assert.match(await p.locator('#empty-hint').textContent(), /continues it/);
    // Max tokens left empty: the page picks what fits the demo's 256-token context.
    await p.getByRole('button', { name: 'Settings' }).click();
    await p.getByLabel('Temperature').fill('0');
    await p.evaluate(() => {
      window.__bodies = [];
      new MutationObserver(() => {
        const a = [...document.querySelectorAll('article[aria-label="Assistant message"]')].pop();
        const text = a ? a.querySelector('.body').textContent : '';
        if (text && window.__bodies[window.__bodies.length - 1] !== text) window.__bodies.push(text);
      }).observe(document.getElementById('conversation'), { subtree: true, childList: true, characterData: true });
    });
    const prompt = 'Once upon a time, there was a little girl named Mia. She loved to';
    await send(p, prompt);
    await wait_answer_done(p);
    const answer = last_answer(p);
    const alert = answer.locator('.error');
    assert.ok(await alert.isHidden(), `error shown: ${await alert.textContent()}`);
    const bodies = await p.evaluate(() => window.__bodies);
    assert.ok(bodies.length >= 2, `continuation rendered in ${bodies.length} DOM update(s)`);
    const stats = await answer.getByLabel('Answer statistics').textContent();
    const n = Number((stats.match(/\b(\d+) tokens\b/) || [])[1]);
    assert.ok(n >= 16, `a continuation of ${n} tokens (${stats})`);
    assert.ok(urls.includes('/v1/completions'), urls.join(' '));
    assert.ok(!urls.includes('/v1/chat/completions'), urls.join(' '));
    // Greedy: the page shows exactly what /v1/completions continues the prompt with (whitespace
    // aside: the markdown renderer turns line breaks into paragraphs).
    const direct = await post_json(base, '/v1/completions', { prompt, max_tokens: n, temperature: 0 });
    const squash = (x) => x.replace(/\s+/g, '');
    assert.equal(squash(await answer.locator('.body').textContent()), squash(direct.body.choices[0].text));
    // New clears it; the mode stays.
    await p.getByRole('button', { name: 'New chat' }).click();
    assert.equal(await p.getByRole('article').count(), 0);
    assert.ok(await notice.isVisible());
    assert.deepEqual(errors, []);
  } finally {
    await ctx.close();
    await base.stop();
  }
});

test('a model with a chat template shows no continuation notice', async () => {
  assert.equal(await page.locator('#mode-notice').isVisible(), false);
});

test('no script errors on the page', async () => {
  assert.deepEqual(page_errors, []);
});

await run({
  on_failure: async (name) => {
    console.log(`--- server log ---\n${server.log.slice(-3000)}`);
    const shot = path.join(work_dir('browser-failure'), `${name.replace(/\W+/g, '_').slice(0, 60)}.png`);
    await page.screenshot({ path: shot, fullPage: true }).then(() => console.log(`screenshot: ${shot}`), () => {});
  },
  after: async () => {
    await browser.close();
    await server.stop();
  },
});
