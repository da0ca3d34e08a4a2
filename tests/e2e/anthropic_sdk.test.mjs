// The official Anthropic SDK (npm `@anthropic-ai/sdk`) against the real `splash serve` on a tiny
// random-weight Qwen3 model with the real Qwen3 tokenizer and chat template. Random weights give
// random text, so the assertions are on shapes, counts and behaviour: the stream's event order,
// streaming equals non-streaming, usage agrees with count_tokens and with the OpenAI path's count of
// the same conversation, a forced tool call and its tool_result round trip, stop sequences, errors
// in Anthropic's shape, and a second turn read from the prefix cache.
//   node tests/e2e/anthropic_sdk.test.mjs [--splash build/splash] [--model X.gguf]
import assert from 'node:assert/strict';

import { parse_args, require_package, run, test } from './lib/harness.mjs';
import { make_tiny_model, post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '', model: '' });
const Anthropic = require_package('@anthropic-ai/sdk').default;
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('anthropic'));

const server = await start_server({ binary, model: model_path });
const client = new Anthropic({ baseURL: server.url, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const model = (await (await fetch(`${server.url}/v1/models`)).json()).data[0].id;

const kHello = [{ role: 'user', content: 'Write one sentence about the sea.' }];
// Greedy and seeded: the streamed and the non-streamed run must produce the same tokens.
const kGreedy = { model, max_tokens: 24, messages: kHello, temperature: 0, seed: 7 };
const kTools = [{
  name: 'get_weather',
  description: 'Current weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

function text_of(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

function assert_usage(usage) {
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'])
    assert.ok(Number.isInteger(usage[k]) && usage[k] >= 0, `${k} in ${JSON.stringify(usage)}`);
}

// Expects an APIError of `cls` with the status and Anthropic's error type; returns it.
async function rejects_with(promise, cls, status, type) {
  let caught = null;
  await assert.rejects(promise, (e) => {
    caught = e;
    assert.ok(e instanceof cls, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
    assert.equal(e.error?.error?.type, type, JSON.stringify(e.error));
    return true;
  });
  return caught;
}

let reference = null;  // the non-streamed greedy message

test('messages.create: a message with text, stop_reason and usage that adds up to count_tokens', async () => {
  const r = await client.messages.create(kGreedy);
  assert.equal(r.type, 'message');
  assert.equal(r.role, 'assistant');
  assert.equal(r.model, model);
  assert.match(r.id, /^msg_/);
  assert.ok(['end_turn', 'max_tokens'].includes(r.stop_reason), r.stop_reason);
  assert.equal(r.stop_sequence, null);
  assert_usage(r.usage);
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 24);
  if (r.stop_reason === 'max_tokens') assert.equal(r.usage.output_tokens, 24);
  for (const b of r.content) assert.equal(b.type, 'text');  // thinking is off unless asked for
  const counted = await client.messages.countTokens({ model, messages: kHello });
  assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, counted.input_tokens);
  reference = r;
});

test('count_tokens equals the OpenAI path\'s count of the same conversation (system, tools, tool turns)', async () => {
  const anthropic_messages = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: [
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
    ] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '{"temperature_c": 21}' }] },
  ];
  const openai_messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: 'Let me look.',
      tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', tool_call_id: 'toolu_1', content: '{"temperature_c": 21}' },
  ];
  const openai_tools = kTools.map((t) => ({
    type: 'function', function: { name: t.name, description: t.description, parameters: t.input_schema },
  }));
  const counted = await client.messages.countTokens({
    model, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
    messages: anthropic_messages, tools: kTools,
  });
  const templated = await post_json(server, '/apply-template', {
    messages: openai_messages, tools: openai_tools, reasoning_effort: 'none',
  });
  assert.equal(templated.status, 200, templated.text);
  for (const needle of ['get_weather', 'Current weather of a city', '<tool_call>', 'Paris', '<tool_response>', 'temperature_c']) {
    assert.ok(templated.body.prompt.includes(needle), `${needle} missing from the prompt`);
  }
  const tokens = await post_json(server, '/tokenize', { content: templated.body.prompt, add_special: false });
  assert.equal(counted.input_tokens, tokens.body.tokens.length);
  // is_error reaches the model: the result text changes.
  const errored = structuredClone(anthropic_messages);
  errored[2].content[0].is_error = true;
  const counted_error = await client.messages.countTokens({ model, system: 'Be brief.', messages: errored, tools: kTools });
  assert.ok(counted_error.input_tokens > counted.input_tokens, `${counted_error.input_tokens} vs ${counted.input_tokens}`);
});

test('messages.stream: events in order, text and usage equal to the non-streamed message', async () => {
  assert.ok(reference, 'needs the non-streaming test first');
  const stream = client.messages.stream(kGreedy);
  const events = [];
  for await (const e of stream) events.push(structuredClone(e));  // the SDK updates message_start's message in place
  const final = await stream.finalMessage();
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');
  // Blocks open, take deltas for their own index, and close, one at a time.
  let open = -1;
  let next = 0;
  for (const e of events.slice(1, -2)) {
    if (e.type === 'content_block_start') {
      assert.equal(open, -1, 'a block started inside another');
      assert.equal(e.index, next++);
      open = e.index;
    } else if (e.type === 'content_block_delta') {
      assert.equal(e.index, open);
    } else if (e.type === 'content_block_stop') {
      assert.equal(e.index, open);
      open = -1;
    } else {
      assert.equal(e.type, 'ping', `unexpected ${e.type}`);
    }
  }
  assert.equal(open, -1, 'a block was left open');
  assert.equal(text_of(final), text_of(reference));
  assert.equal(final.stop_reason, reference.stop_reason);
  assert.equal(final.usage.output_tokens, reference.usage.output_tokens);
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
               reference.usage.input_tokens + reference.usage.cache_read_input_tokens);
  const start = events[0].message;
  assert.equal(start.usage.input_tokens, reference.usage.input_tokens + reference.usage.cache_read_input_tokens);
});

test('stop_sequences: stop_reason stop_sequence names the sequence, the text ends before it', async () => {
  assert.ok(reference, 'needs the non-streaming test first');
  const text = text_of(reference);
  const at = text.indexOf(' ', 4);
  assert.ok(at > 0 && at + 4 <= text.length, `reference text too short: ${JSON.stringify(text)}`);
  const stop = text.slice(at, at + 4);
  const r = await client.messages.create({ ...kGreedy, stop_sequences: ['@@never@@', stop] });
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, stop);
  assert.equal(text_of(r), text.slice(0, text.indexOf(stop)));
});

let forced = null;  // a message with a forced tool call

test('tool_choice tool: a tool_use block with a toolu_ id, the tool\'s name and an input object', async () => {
  forced = await client.messages.create({
    model, max_tokens: 16, messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: kTools, tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0,
  });
  const calls = forced.content.filter((b) => b.type === 'tool_use');
  assert.equal(calls.length, 1, JSON.stringify(forced.content));
  assert.match(calls[0].id, /^toolu_/);
  assert.equal(calls[0].name, 'get_weather');
  assert.equal(typeof calls[0].input, 'object');
  assert.ok(['tool_use', 'max_tokens'].includes(forced.stop_reason), forced.stop_reason);
});

test('tool_choice tool, streamed: content_block_start tool_use, input_json_delta, the same call', async () => {
  const stream = client.messages.stream({
    model, max_tokens: 16, messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: kTools, tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0,
  });
  const events = [];
  for await (const e of stream) events.push(structuredClone(e));  // the SDK updates message_start's message in place
  const final = await stream.finalMessage();
  const start = events.find((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use');
  assert.ok(start, JSON.stringify(events.map((e) => e.type)));
  assert.equal(start.content_block.name, 'get_weather');
  assert.ok(events.some((e) => e.type === 'content_block_delta' && e.delta.type === 'input_json_delta'));
  const call = final.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(call.input, forced.content.find((b) => b.type === 'tool_use').input);
});

test('tool_result round trip: the call and its result go back and the model answers', async () => {
  assert.ok(forced, 'needs the forced tool call');
  const call = forced.content.find((b) => b.type === 'tool_use');
  const history = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: forced.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: [{ type: 'text', text: 'sunny, 21 C' }] }] },
  ];
  const r = await client.messages.create({ model, max_tokens: 8, messages: history, tools: kTools });
  assert_usage(r.usage);
  const counted = await client.messages.countTokens({ model, messages: history, tools: kTools });
  assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, counted.input_tokens);
  const first = await client.messages.countTokens({ model, messages: history.slice(0, 1), tools: kTools });
  assert.ok(counted.input_tokens > first.input_tokens + 5, `${counted.input_tokens} vs ${first.input_tokens}`);
});

test('errors: Anthropic\'s shape and the SDK\'s typed errors', async () => {
  const no_max = await rejects_with(client.messages.create({ model, messages: kHello }), Anthropic.BadRequestError, 400,
                                    'invalid_request_error');
  assert.match(no_max.error.error.message, /max_tokens/);
  const unknown = await rejects_with(client.messages.create({ ...kGreedy, model: 'no-such-model' }),
                                     Anthropic.NotFoundError, 404, 'not_found_error');
  assert.match(unknown.error.error.message, /no-such-model/);
  const image = await rejects_with(client.messages.create({
    ...kGreedy, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
  }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  assert.match(image.error.error.message, /messages\[0\]\.content\[0\]\.type/);
  const prefill = await rejects_with(client.messages.create({
    ...kGreedy, messages: [...kHello, { role: 'assistant', content: 'The sea' }],
  }), Anthropic.BadRequestError, 400, 'invalid_request_error');
  assert.match(prefill.error.error.message, /messages\[1\]/);
  await rejects_with(client.messages.countTokens({ model: 'no-such-model', messages: kHello }), Anthropic.NotFoundError, 404,
                     'not_found_error');
});

test('a second turn with the same prefix reads > 90% of the first turn\'s prompt from the prefix cache', async () => {
  const system = 'You are a careful assistant who answers questions about the weather. '.repeat(60);
  const turn1 = [{ role: 'user', content: 'Describe the weather at sea today.' }];
  const first = await client.messages.create({ model, max_tokens: 8, system, messages: turn1, temperature: 0 });
  const first_prompt = first.usage.input_tokens + first.usage.cache_read_input_tokens;
  assert.ok(first_prompt > 600, `first prompt ${first_prompt} tokens`);
  const turn2 = [...turn1, { role: 'assistant', content: first.content }, { role: 'user', content: 'And tomorrow?' }];
  const second = await client.messages.create({ model, max_tokens: 8, system, messages: turn2, temperature: 0 });
  console.log(`     second turn: cache_read_input_tokens ${second.usage.cache_read_input_tokens} of a ${first_prompt}-token first prompt`);
  assert.ok(second.usage.cache_read_input_tokens > 0.9 * first_prompt,
            `cache_read_input_tokens ${second.usage.cache_read_input_tokens} of a ${first_prompt}-token first prompt`);
  assert.equal(second.usage.cache_creation_input_tokens, 0);
});

test('with --api-key: x-api-key is accepted, a wrong key is authentication_error', async () => {
  const keyed = await start_server({ binary, model: model_path, args: ['--api-key', 'sdk-secret-2'] });
  try {
    const wrong = new Anthropic({ baseURL: keyed.url, apiKey: 'wrong', maxRetries: 0 });
    await rejects_with(wrong.messages.create({ ...kGreedy, max_tokens: 2 }), Anthropic.AuthenticationError, 401,
                       'authentication_error');
    const ok = new Anthropic({ baseURL: keyed.url, apiKey: 'sdk-secret-2', maxRetries: 0 });
    const r = await ok.messages.create({ ...kGreedy, max_tokens: 2 });
    assert_usage(r.usage);
  } finally {
    await keyed.stop();
  }
});

await run({
  on_failure: () => console.log(`--- server log (${server.command}) ---\n${server.log.slice(-4000)}`),
  after: () => server.stop(),
});
