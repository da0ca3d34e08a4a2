// The official OpenAI SDK (npm `openai`) against the real `splash serve` on a tiny random-weight
// Qwen3 model. Random weights give random text, so the assertions are on shapes, counts and
// behaviour: usage adds up, streaming equals non-streaming, progress is monotone, errors arrive as
// the SDK's typed errors, a client that goes away cancels its request.
//   node tests/e2e/openai_sdk.test.mjs [--splash build/splash] [--model X.gguf]
import assert from 'node:assert/strict';

import { parse_args, require_package, run, test, wait_for } from './lib/harness.mjs';
import { get_json, make_tiny_model, post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '', model: '' });
const OpenAI = require_package('openai');  // the CommonJS entry exports the client class
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('sdk'));

const server = await start_server({ binary, model: model_path });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const models = await client.models.list();
const model = models.data[0].id;

const kHello = [{ role: 'user', content: 'Write one sentence about the sea.' }];
// Greedy and seeded: the streamed and the non-streamed run must produce the same tokens.
const kGreedy = { model, messages: kHello, max_tokens: 24, temperature: 0, seed: 7 };

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

function assert_usage(usage) {
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0, JSON.stringify(usage));
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  const cached = usage.prompt_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= usage.prompt_tokens, `cached_tokens ${cached}`);
}

let reference = null;  // the non-streamed greedy completion

test('models: the Ready line names the listed model', async () => {
  assert.ok(models.data.length >= 1);
  assert.equal(models.data[0].owned_by, 'splash');
  assert.ok(server.ready_line.includes(model), `${server.ready_line} vs ${model}`);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
  assert.ok(one.max_model_len > 0 && one.context_length === one.max_model_len, JSON.stringify(one));
});

test('non-streaming chat: content string, usage consistent', async () => {
  const r = await client.chat.completions.create(kGreedy);
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.id, 'string');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  const choice = r.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
  assert_usage(r.usage);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 24);
  if (choice.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 24);
  assert.equal(typeof r.usage.completion_tokens_details?.reasoning_tokens, 'number');
  // prompt_tokens is the templated prompt, counted independently through /apply-template + /tokenize.
  const templated = await post_json(server, '/apply-template', { messages: kHello });
  assert.equal(templated.status, 200, templated.text);
  const tokens = await post_json(server, '/tokenize', { content: templated.body.prompt, add_special: false });
  assert.equal(tokens.status, 200, tokens.text);
  assert.equal(r.usage.prompt_tokens, tokens.body.tokens.length);
  reference = r;
});

test('streaming chat: chunks arrive and concatenate to the non-streamed text; usage with include_usage', async () => {
  assert.ok(reference, 'needs the non-streaming test first');
  const chunks = await collect(await client.chat.completions.create({
    ...kGreedy, stream: true, stream_options: { include_usage: true },
  }));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.equal(text, reference.choices[0].message.content);
  const content_chunks = chunks.filter((c) => c.choices[0]?.delta?.content);
  if (reference.usage.completion_tokens > 2) {
    assert.ok(content_chunks.length >= 2, `${content_chunks.length} content chunks for ${reference.usage.completion_tokens} tokens`);
  }
  const finals = chunks.filter((c) => c.choices[0]?.finish_reason);
  assert.equal(finals.length, 1);
  assert.equal(finals[0].choices[0].finish_reason, reference.choices[0].finish_reason);
  // The usage chunk comes last (before [DONE]) with an empty choices list.
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert_usage(last.usage);
  assert.equal(last.usage.prompt_tokens, reference.usage.prompt_tokens);
  assert.equal(last.usage.completion_tokens, reference.usage.completion_tokens);
  // Spec 2.6 timings on the final chunk.
  const timings = finals[0].timings ?? last.timings;
  assert.ok(timings, 'timings on the final chunk');
  assert.equal(timings.predicted_n, reference.usage.completion_tokens);
  assert.ok(timings.prompt_ms >= 0 && timings.predicted_ms >= 0);
});

test('streaming without include_usage sends no usage chunk', async () => {
  const chunks = await collect(await client.chat.completions.create({ ...kGreedy, max_tokens: 4, stream: true }));
  assert.ok(chunks.length >= 2);
  for (const c of chunks) assert.ok(c.usage == null, `usage in ${JSON.stringify(c)}`);
});

test('return_progress: monotone prompt_progress chunks ending at the prompt size', async () => {
  const long = [{ role: 'user', content: 'progress '.repeat(300) }];
  const chunks = await collect(await client.chat.completions.create({
    model, messages: long, max_tokens: 2, stream: true, stream_options: { include_usage: true }, return_progress: true,
  }));
  const progress = chunks.map((c) => c.prompt_progress).filter(Boolean);
  assert.ok(progress.length >= 1, 'no prompt_progress chunk');
  const usage = chunks[chunks.length - 1].usage;
  let last = -1;
  for (const p of progress) {
    assert.equal(p.total, usage.prompt_tokens);
    assert.ok(p.processed >= last && p.processed <= p.total && p.cache <= p.processed, JSON.stringify(p));
    assert.ok(p.time_ms >= 0);
    last = p.processed;
  }
  assert.equal(last, usage.prompt_tokens);
});

const kTools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
const kToolTurns = [
  { role: 'user', content: 'What is the weather in Paris?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temperature_c": 21}' },
];

test('tool call: the server accepts and renders an assistant tool_calls turn and a tool result', async () => {
  const plain = await client.chat.completions.create({ model, messages: kToolTurns.slice(0, 1), max_tokens: 4 });
  const r = await client.chat.completions.create({ model, messages: kToolTurns, tools: kTools, tool_choice: 'auto', max_tokens: 8 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert_usage(r.usage);
  // The tool definition, the call and the result are all in the prompt.
  const templated = await post_json(server, '/apply-template', { messages: kToolTurns, tools: kTools });
  assert.equal(templated.status, 200, templated.text);
  const prompt = templated.body.prompt;
  for (const needle of ['get_weather', 'Current weather of a city', '<tool_call>', 'Paris', '<tool_response>', 'temperature_c']) {
    assert.ok(prompt.includes(needle), `rendered prompt lacks ${needle}:\n${prompt}`);
  }
  const tokens = await post_json(server, '/tokenize', { content: prompt, add_special: false });
  assert.equal(r.usage.prompt_tokens, tokens.body.tokens.length);
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 20);
  // Whatever the random model wrote, a tool call it made must have the OpenAI shape.
  for (const call of r.choices[0].message.tool_calls ?? []) {
    assert.equal(call.type, 'function');
    assert.equal(typeof call.function.name, 'string');
    assert.equal(typeof call.function.arguments, 'string');
  }
  // Streamed, the same request works too.
  const chunks = await collect(await client.chat.completions.create({
    model, messages: kToolTurns, tools: kTools, max_tokens: 4, stream: true,
  }));
  assert.ok(chunks.some((c) => c.choices[0]?.finish_reason));
});

test('errors: unknown model is NotFoundError, n=2 and an over-long output are BadRequestError', async () => {
  await assert.rejects(client.chat.completions.create({ ...kGreedy, model: 'no-such-model' }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ ...kGreedy, n: 2 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, 400);
    assert.ok(/\bn\b/.test(e.message), e.message);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ ...kGreedy, max_tokens: 10_000_000 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.code, 'context_length_exceeded');
    return true;
  });
  // The same errors streamed: raised before any chunk.
  await assert.rejects(client.chat.completions.create({ ...kGreedy, model: 'no-such-model', stream: true }),
    (e) => e instanceof OpenAI.NotFoundError);
});

test('a client that aborts a stream cancels its request on the server', async () => {
  const before = (await get_json(server, '/status')).body;
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: kHello, max_tokens: 1500, stream: true }, { signal: controller.signal });
  let seen = 0;
  // Depending on timing the SDK ends the iteration quietly or raises its abort error.
  try {
    for await (const chunk of stream) {
      // Stop reading at once: chunks the SDK had already buffered would otherwise still be yielded
      // after abort() (seen under load), which says nothing about the server.
      if (chunk.choices[0]?.delta?.content && ++seen === 3) { controller.abort(); break; }
    }
  } catch (e) {
    if (!(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError)) throw e;
  }
  assert.equal(seen, 3);
  const after = await wait_for('requests.cancelled to grow', async () => {
    const s = (await get_json(server, '/status')).body;
    return s.requests.cancelled > before.requests.cancelled && s.scheduler.decoding === 0 ? s : null;
  }, 5000);
  assert.equal(after.requests.cancelled, before.requests.cancelled + 1);
});

test('the server is still healthy and stops with 143 on SIGTERM', async () => {
  assert.equal((await get_json(server, '/health')).status, 200);
  const exit = await server.stop('SIGTERM');
  assert.equal(exit.code, 143, `exit ${JSON.stringify(exit)}\n${server.log}`);
});

test('with --api-key: a missing or wrong key is AuthenticationError, the right one works', async () => {
  const keyed = await start_server({ binary, model: model_path, args: ['--api-key', 'sdk-secret-1'] });
  try {
    const base = { baseURL: `${keyed.url}/v1`, maxRetries: 0 };
    await assert.rejects(new OpenAI({ ...base, apiKey: 'wrong' }).models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, `${e.constructor.name}: ${e.message}`);
      assert.equal(e.status, 401);
      assert.match(e.headers.get('www-authenticate') ?? '', /^Bearer/i);
      return true;
    });
    const ok = new OpenAI({ ...base, apiKey: 'sdk-secret-1' });
    const r = await ok.chat.completions.create({ model, messages: kHello, max_tokens: 2 });
    assert_usage(r.usage);
    assert.equal((await get_json(keyed, '/health')).status, 200);  // public without a key
  } finally {
    await keyed.stop();
  }
});

await run({
  on_failure: () => console.log(`--- server log (${server.command}) ---\n${server.log.slice(-4000)}`),
  after: () => server.stop(),
});
