// Load test of the real `splash serve`: N concurrent streaming clients for D seconds against a
// small admission queue. Passes when every request either completes (200, a finish_reason, usage,
// [DONE]) or is refused with 503 + Retry-After, no connection fails, the server's RSS returns to
// its post-warm-up baseline (within 10% or 20 MiB), its counters add up and it still serves.
// Prints throughput and latency percentiles (docs/PERFORMANCE.md takes them from here).
//   node tests/e2e/load.mjs [--splash build/splash] [--model X.gguf] [--clients 32] [--duration 60]
//                           [--queue-size 8] [--max-tokens 16] [--json]
import assert from 'node:assert/strict';

import { parse_args, sleep, wait_for } from './lib/harness.mjs';
import { get_json, make_tiny_model, rss_bytes, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({
  splash: '', model: '', clients: 32, duration: 60, queue_size: 8, max_tokens: 16, json: false,
});
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('load'));
const kMiB = 1024 * 1024;

function percentile(values, p) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

// One streamed chat request; resolves to what happened, never rejects.
async function one_request(server, prompt, max_tokens) {
  const started = performance.now();
  let response;
  try {
    response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        messages: [
          { role: 'system', content: 'You are a load-test assistant. Answer briefly.' },
          { role: 'user', content: prompt },
        ],
        max_tokens, stream: true, stream_options: { include_usage: true },
      }),
      signal: AbortSignal.timeout(120000),
    });
  } catch (e) {
    return { kind: 'error', error: `fetch: ${e.cause?.code || e.message}` };
  }
  if (response.status === 503) {
    const retry_after = response.headers.get('retry-after');
    const body = await response.text().catch(() => '');
    return { kind: '503', retry_after, body };
  }
  if (response.status !== 200) {
    return { kind: 'error', error: `HTTP ${response.status}: ${(await response.text().catch(() => '')).slice(0, 300)}` };
  }
  let ttft = null, finish = null, usage = null, done = false, buffer = '';
  const decoder = new TextDecoder();
  try {
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: ')) continue;  // keep-alive comments
        const data = event.slice(6);
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        const chunk = JSON.parse(data);
        if (chunk.error) return { kind: 'error', error: `stream error: ${JSON.stringify(chunk.error)}` };
        const choice = chunk.choices?.[0];
        if (ttft === null && choice?.delta?.content) ttft = performance.now() - started;
        if (choice?.finish_reason) finish = choice.finish_reason;
        if (chunk.usage) usage = chunk.usage;
      }
    }
  } catch (e) {
    return { kind: 'error', error: `stream: ${e.cause?.code || e.message}` };
  }
  const latency = performance.now() - started;
  if (!done || !finish || !usage) {
    return { kind: 'error', error: `incomplete stream (done ${done}, finish ${finish}, usage ${!!usage})` };
  }
  return { kind: 'ok', latency, ttft: ttft ?? latency, tokens: usage.completion_tokens, finish };
}

async function wait_idle(server) {
  return wait_for('the scheduler to go idle', async () => {
    const s = (await get_json(server, '/status')).body;
    const q = s.scheduler;
    return q.queued === 0 && q.prefilling === 0 && q.decoding === 0 ? s : null;
  }, 60000, 200);
}

const server = await start_server({ binary, model: model_path, args: ['--queue-size', String(args.queue_size)] });
let failed = false;
try {
  // Warm-up: every client once, so lanes, KV pages and allocator arenas reach their working size
  // before the baseline is taken.
  const warm = await Promise.all(Array.from({ length: args.clients }, (_, i) =>
    one_request(server, `warm-up ${i}`, args.max_tokens)));
  assert.ok(warm.some((r) => r.kind === 'ok'), `no warm-up request completed: ${JSON.stringify(warm.slice(0, 3))}`);
  const warm_status = await wait_idle(server);
  await sleep(500);
  const baseline = rss_bytes(server.pid);

  let peak = baseline;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, rss_bytes(server.pid));
    } catch {
      // the server died: reported below
    }
  }, 250);
  const results = [];
  const started = performance.now();
  const deadline = started + args.duration * 1000;
  await Promise.all(Array.from({ length: args.clients }, async (_, client) => {
    for (let n = 0; performance.now() < deadline; n++) {
      const r = await one_request(server, `Client ${client} request ${n}: tell me about the number ${client * 1000 + n}.`,
        args.max_tokens);
      results.push(r);
      if (r.kind === '503') await sleep(1000 * (Number(r.retry_after) || 1));  // what Retry-After asks
      if (r.kind === 'error') break;
    }
  }));
  const elapsed_s = (performance.now() - started) / 1000;
  clearInterval(sampler);

  const ok = results.filter((r) => r.kind === 'ok');
  const refused = results.filter((r) => r.kind === '503');
  const errors = results.filter((r) => r.kind === 'error');
  const tokens = ok.reduce((s, r) => s + r.tokens, 0);

  // Memory back to the baseline once idle (allow the allocator a few seconds to return pages). KV
  // pages the prefix cache still holds are resident by design (kept until the pool needs them; the
  // memory plan budgeted the whole pool), so RSS may stay above the baseline by the cache's growth:
  // with a real model's 1.8 MiB pages that is hundreds of MiB, with the tiny model ~nothing.
  const idle = await wait_idle(server);
  const bound = Math.max(0.1 * baseline, 20 * kMiB);
  const cached = Math.max(0, idle.kv.pages_cache - warm_status.kv.pages_cache) * idle.kv.page_bytes;
  const off_baseline = (rss) => (rss > baseline ? Math.max(0, rss - baseline - cached) : baseline - rss);
  let after = rss_bytes(server.pid);
  for (let i = 0; i < 30 && off_baseline(after) > bound; i++) {
    await sleep(500);
    after = rss_bytes(server.pid);
  }
  const health = await get_json(server, '/health');
  const final = await one_request(server, 'one more after the load', 4);

  const report = {
    clients: args.clients, duration_s: Number(elapsed_s.toFixed(1)), queue_size: args.queue_size,
    max_tokens: args.max_tokens,
    requests_ok: ok.length, requests_503: refused.length, errors: errors.length,
    throughput_tok_s: Number((tokens / elapsed_s).toFixed(1)),
    requests_per_s: Number((ok.length / elapsed_s).toFixed(2)),
    latency_ms: { p50: Math.round(percentile(ok.map((r) => r.latency), 50)), p95: Math.round(percentile(ok.map((r) => r.latency), 95)) },
    ttft_ms: { p50: Math.round(percentile(ok.map((r) => r.ttft), 50)), p95: Math.round(percentile(ok.map((r) => r.ttft), 95)) },
    rss_mib: {
      baseline: +(baseline / kMiB).toFixed(1), peak: +(peak / kMiB).toFixed(1), after: +(after / kMiB).toFixed(1),
      prefix_cache_kv: +(cached / kMiB).toFixed(1),
    },
    server_requests: idle.requests,
  };
  console.log(`load: ${report.clients} streaming clients for ${report.duration_s} s, --queue-size ${report.queue_size}, max_tokens ${report.max_tokens}`);
  console.log(`  completed ${report.requests_ok} (${report.requests_per_s}/s), 503 ${report.requests_503}, errors ${report.errors}`);
  console.log(`  throughput ${report.throughput_tok_s} tok/s total`);
  console.log(`  request latency p50 ${report.latency_ms.p50} ms, p95 ${report.latency_ms.p95} ms`);
  console.log(`  TTFT p50 ${report.ttft_ms.p50} ms, p95 ${report.ttft_ms.p95} ms`);
  console.log(`  RSS baseline ${report.rss_mib.baseline} MiB, peak ${report.rss_mib.peak} MiB, after ${report.rss_mib.after} MiB` +
    ` (prefix cache +${(cached / kMiB).toFixed(1)} MiB of KV pages)`);
  if (args.json) console.log(JSON.stringify(report));

  assert.deepEqual(errors.map((e) => e.error).slice(0, 5), [], 'requests failed');
  assert.ok(ok.length > 0, 'no request completed under load');
  for (const r of refused) assert.equal(r.retry_after, '1', `503 without Retry-After: 1 (${r.body})`);
  for (const r of refused) assert.equal(JSON.parse(r.body).error?.type, 'server_error', r.body);
  assert.ok(off_baseline(after) <= bound,
    `RSS ${report.rss_mib.after} MiB did not return to the baseline ${report.rss_mib.baseline} MiB plus the prefix ` +
    `cache's growth ${(cached / kMiB).toFixed(1)} MiB (bound ${(bound / kMiB).toFixed(1)} MiB)`);
  assert.equal(health.status, 200);
  assert.equal(final.kind, 'ok', JSON.stringify(final));
  const q = idle.requests;
  assert.equal(q.failed, 0, JSON.stringify(q));
  assert.equal(q.submitted, q.completed + q.cancelled + q.failed, `status counters do not add up: ${JSON.stringify(q)}`);
  assert.ok(q.completed >= ok.length + warm.filter((r) => r.kind === 'ok').length, JSON.stringify(q));
  console.log('load: passed');
} catch (e) {
  failed = true;
  console.log(`load: FAILED\n${e.stack || e}\n--- server log ---\n${server.log.slice(-4000)}`);
} finally {
  const exit = await server.stop();
  if (!failed && exit.code !== 143) {
    failed = true;
    console.log(`load: the server exited with ${JSON.stringify(exit)} on SIGTERM, expected 143`);
  }
}
process.exit(failed ? 1 : 0);
