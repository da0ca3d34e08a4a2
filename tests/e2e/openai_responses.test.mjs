// The OpenAI Responses API (/v1/responses) through the official SDK (npm `openai`) against the real
// `splash serve`, on a scripted tiny Qwen3 (tests/e2e/lib/scripted_model.mjs): with thinking on it
// answers reasoning "Let me check" + text "The weather is sunny."; with thinking off (reasoning.effort
// "none") it calls get_weather({"city":"Paris"}). So function calls, function_call_output round trips,
// previous_response_id, the store, streaming event order and the prefix cache are checked on real
// output, not on shapes alone.
//   node tests/e2e/openai_responses.test.mjs [--splash build/splash]
import assert from 'node:assert/strict';

import { parse_args, require_package, run, test } from './lib/harness.mjs';
import { kScriptedCall, kScriptedReasoning, kScriptedText, make_scripted_model } from './lib/scripted_model.mjs';
import { post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '' });
const OpenAI = require_package('openai');
const binary = splash_binary(args.splash);
const model_path = make_scripted_model(binary, work_dir('responses'));

const server = await start_server({ binary, model: model_path });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0].id;

const kTools = [{
  type: 'function', name: 'get_weather', description: 'Current weather of a city', strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];
// A long system prompt, as agents send: the second turn must find it in the prefix cache.
const kInstructions = 'You are a weather assistant. Answer briefly and call tools when needed. '.repeat(40);

function assert_usage(usage) {
  assert.ok(Number.isInteger(usage.input_tokens) && usage.input_tokens > 0, JSON.stringify(usage));
  assert.ok(Number.isInteger(usage.output_tokens) && usage.output_tokens > 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
  const cached = usage.input_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= usage.input_tokens, JSON.stringify(usage));
  assert.ok(Number.isInteger(usage.output_tokens_details?.reasoning_tokens), JSON.stringify(usage));
}

async function collect(stream) {
  const events = [];
  for await (const e of stream) events.push(e);
  return events;
}

// Sequence numbers 0, 1, 2 ...; created and in_progress first; exactly one terminal event, last.
function assert_event_order(events, terminal) {
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `${e.type} at ${i}`));
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  const ends = events.filter((e) => ['response.completed', 'response.incomplete', 'response.failed'].includes(e.type));
  assert.equal(ends.length, 1, ends.map((e) => e.type).join());
  assert.equal(events[events.length - 1].type, terminal);
  // Every added item is done before the next is added, in output_index order.
  let open = null;
  let next_index = 0;
  for (const e of events) {
    if (e.type === 'response.output_item.added') {
      assert.equal(open, null, `item ${e.output_index} added while ${open} is open`);
      assert.equal(e.output_index, next_index++);
      open = e.output_index;
    } else if (e.type === 'response.output_item.done') {
      assert.equal(e.output_index, open);
      open = null;
    }
  }
  assert.equal(open, null);
}

let answer = null;  // a stored non-stream text answer

test('responses.create: reasoning item, message, output_text, usage', async () => {
  const r = await client.responses.create({ model, input: 'What is the weather in Paris?', max_output_tokens: 64 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed');
  assert.equal(r.model, model);
  assert.equal(r.output.length, 2, JSON.stringify(r.output));
  const [reasoning, message] = r.output;
  assert.equal(reasoning.type, 'reasoning');
  assert.match(reasoning.id, /^rs_/);
  assert.equal(reasoning.content[0].type, 'reasoning_text');
  assert.equal(reasoning.content[0].text, kScriptedReasoning);
  assert.equal(message.type, 'message');
  assert.match(message.id, /^msg_/);
  assert.equal(message.role, 'assistant');
  assert.equal(message.status, 'completed');
  assert.equal(message.content[0].type, 'output_text');
  assert.equal(message.content[0].text, kScriptedText);
  assert.equal(r.output_text, kScriptedText);
  assert_usage(r.usage);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  assert.equal(r.store, true);
  assert.equal(r.max_output_tokens, 64);
  assert.equal(r.temperature, 1);  // the defaults, echoed as written (not 0.949999988)
  assert.equal(r.top_p, 0.95);
  answer = r;
});

test('streamed: event order, sequence numbers, deltas add up to the stored response', async () => {
  const events = await collect(await client.responses.create({
    model, input: 'What is the weather in Paris?', max_output_tokens: 64, stream: true,
  }));
  assert_event_order(events, 'response.completed');
  const types = events.map((e) => e.type);
  for (const t of ['response.reasoning_text.delta', 'response.reasoning_text.done', 'response.content_part.added',
                   'response.output_text.delta', 'response.output_text.done', 'response.content_part.done']) {
    assert.ok(types.includes(t), `no ${t} in ${types.join(' ')}`);
  }
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, kScriptedText);
  const reasoning = events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('');
  assert.equal(reasoning, kScriptedReasoning);
  const done = events[events.length - 1].response;
  assert.equal(done.status, 'completed');
  assert_usage(done.usage);
  // The stored copy is the completed response.
  const stored = await client.responses.retrieve(done.id);
  assert.equal(stored.id, done.id);
  assert.deepEqual(stored.output, done.output);
  assert.deepEqual(stored.usage, done.usage);
  assert.equal(stored.output_text, kScriptedText);
  // The SDK's stream helper accumulates the same response from the events.
  const helper = client.responses.stream({ model, input: 'What is the weather in Paris?', max_output_tokens: 64 });
  const final = await helper.finalResponse();
  assert.equal(final.output_text, kScriptedText);
  assert.equal(final.output[0].content[0].text, kScriptedReasoning);
});

let call_turn = null;
let continued = null;  // the turn after call_turn, by previous_response_id

test('function call: a function_call item with call_id, name and JSON arguments', async () => {
  const r = await client.responses.create({
    model, instructions: kInstructions, input: 'What is the weather in Paris?', tools: kTools,
    reasoning: { effort: 'none' }, max_output_tokens: 64,
  });
  assert.equal(r.status, 'completed');
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  const call = calls[0];
  assert.match(call.id, /^fc_/);
  assert.match(call.call_id, /^call_/);
  assert.equal(call.name, kScriptedCall.name);
  assert.equal(call.arguments, kScriptedCall.arguments);
  assert.equal(call.status, 'completed');
  assert.equal(r.output_text, '');
  assert.equal(r.tools[0].name, 'get_weather');
  call_turn = r;
});

test('streamed function call: arguments deltas, .done, and the call in response.output_item.done', async () => {
  const events = await collect(await client.responses.create({
    model, instructions: kInstructions, input: 'What is the weather in Paris?', tools: kTools,
    reasoning: { effort: 'none' }, max_output_tokens: 64, stream: true,
  }));
  assert_event_order(events, 'response.completed');
  const added = events.find((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
  assert.ok(added, 'no function_call item added');
  const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta');
  assert.equal(deltas.map((e) => e.delta).join(''), kScriptedCall.arguments);
  for (const d of deltas) assert.equal(d.item_id, added.item.id);
  const args_done = events.find((e) => e.type === 'response.function_call_arguments.done');
  assert.equal(args_done.arguments, kScriptedCall.arguments);
  const item_done = events.find((e) => e.type === 'response.output_item.done' && e.item.type === 'function_call');
  assert.equal(item_done.item.name, kScriptedCall.name);
  assert.equal(item_done.item.arguments, kScriptedCall.arguments);
  assert.equal(item_done.item.call_id, added.item.call_id);
  assert.equal(item_done.item.status, 'completed');
});

test('function_call_output round trip through previous_response_id hits the prefix cache', async () => {
  assert.ok(call_turn, 'needs the function call test first');
  const call = call_turn.output.find((o) => o.type === 'function_call');
  const r = await client.responses.create({
    model, instructions: kInstructions, previous_response_id: call_turn.id, tools: kTools, max_output_tokens: 64,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 21, "sky": "clear"}' }],
  });
  assert.equal(r.status, 'completed');
  assert.equal(r.previous_response_id, call_turn.id);
  assert.equal(r.output_text, kScriptedText);
  assert_usage(r.usage);
  assert.ok(r.usage.input_tokens > call_turn.usage.input_tokens);
  const cached = r.usage.input_tokens_details.cached_tokens;
  const first = call_turn.usage.input_tokens;
  assert.ok(cached > 0.9 * first, `cached_tokens ${cached} <= 90% of the first turn's ${first} input tokens`);
  continued = r;
});

test('the same round trip with the whole history as items (store: false) renders the same prompt', async () => {
  const call = call_turn.output.find((o) => o.type === 'function_call');
  const items = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 21, "sky": "clear"}' },
  ];
  const r = await client.responses.create({
    model, instructions: kInstructions, input: items, tools: kTools, max_output_tokens: 64, store: false,
  });
  assert.equal(r.output_text, kScriptedText);
  // The stored conversation and the items render the same prompt: same size, and all of it cached
  // but the last page or so (the previous_response_id turn just processed the same tokens).
  assert.equal(r.usage.input_tokens, continued.usage.input_tokens);
  assert.ok(r.usage.input_tokens_details.cached_tokens >= r.usage.input_tokens - 32, JSON.stringify(r.usage));
  const counted = await client.responses.inputTokens.count({ model, instructions: kInstructions, input: items, tools: kTools });
  assert.equal(counted.object, 'response.input_tokens');
  assert.equal(counted.input_tokens, r.usage.input_tokens);
  // Not stored: not retrievable, not continuable.
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
});

test('input_tokens counts what create processes', async () => {
  const counted = await client.responses.inputTokens.count({ model, input: 'What is the weather in Paris?' });
  assert.equal(counted.object, 'response.input_tokens');
  assert.equal(counted.input_tokens, answer.usage.input_tokens);
  const raw = await post_json(server, '/v1/responses/input_tokens', { input: 'x', previous_response_id: 'resp_nope' });
  assert.equal(raw.status, 404);
  assert.equal(raw.body.error.code, 'previous_response_not_found');
});

test('GET and DELETE of a stored response; a deleted one cannot be continued', async () => {
  const got = await client.responses.retrieve(answer.id);
  assert.equal(got.id, answer.id);
  assert.deepEqual(got.output, answer.output);
  assert.deepEqual(got.usage, answer.usage);
  const del = await fetch(`${server.url}/v1/responses/${answer.id}`, { method: 'DELETE' });
  assert.equal(del.status, 200);
  assert.deepEqual(await del.json(), { id: answer.id, object: 'response.deleted', deleted: true });
  await client.responses.delete(answer.id).then(
    () => assert.fail('second delete succeeded'), (e) => assert.equal(e.status, 404));
  await assert.rejects(client.responses.retrieve(answer.id), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.error?.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.responses.create({ model, input: 'again', previous_response_id: answer.id }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'previous_response_not_found');
    assert.match(e.message, new RegExp(answer.id));
    return true;
  });
});

test('max_output_tokens cuts: status incomplete, reason max_output_tokens (body and stream)', async () => {
  const r = await client.responses.create({ model, input: 'weather?', max_output_tokens: 3 });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 3);
  const events = await collect(await client.responses.create({ model, input: 'weather?', max_output_tokens: 3, stream: true }));
  assert_event_order(events, 'response.incomplete');
  const last = events[events.length - 1].response;
  assert.equal(last.incomplete_details.reason, 'max_output_tokens');
  assert.equal(last.output[last.output.length - 1].status, 'incomplete');
});

test('errors: 400 naming the field, 404 for an unknown model', async () => {
  const cases = [
    [{ model, input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: { type: 'object', not: {} } } } }, 'not'],
    [{ model, input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ model, input: 'x', background: true }, 'background'],
    [{ model, input: 'x', truncation: 'auto' }, 'truncation'],
    [{ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AA' }] }] }, 'input[0].content[0].type'],
    [{ model }, 'input'],
  ];
  for (const [body, field] of cases) {
    await assert.rejects(client.responses.create(body), (e) => {
      assert.equal(e.status, 400, JSON.stringify(body));
      assert.equal(e.error?.type, 'invalid_request_error');
      assert.ok(e.message.includes(`'${field}'`), `${e.message} does not name '${field}'`);
      return true;
    });
  }
  await assert.rejects(client.responses.create({ model: 'no-such-model', input: 'x' }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  const wrong = await fetch(`${server.url}/v1/responses/resp_x`, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } });
  assert.equal(wrong.status, 405);
  const items = await fetch(`${server.url}/v1/responses/resp_x/input_items`);
  assert.equal(items.status, 501);
  assert.equal((await items.json()).error.code, 'not_implemented');
});

test('return_progress: response.in_progress events carry monotone prompt_progress', async () => {
  const events = await collect(await client.responses.create({
    model, input: 'progress '.repeat(300), max_output_tokens: 2, stream: true, return_progress: true,
  }));
  assert_event_order(events, 'response.incomplete');
  const progress = events.filter((e) => e.type === 'response.in_progress' && e.prompt_progress).map((e) => e.prompt_progress);
  assert.ok(progress.length >= 1, 'no prompt_progress');
  let last = -1;
  for (const p of progress) {
    assert.ok(p.processed >= last && p.processed <= p.total, JSON.stringify(p));
    last = p.processed;
  }
  assert.equal(progress[progress.length - 1].processed, events[events.length - 1].response.usage.input_tokens);
});

await run({
  after: async () => { await server.stop(); },
  on_failure: async () => { console.log(server.log.split('\n').slice(-20).join('\n')); },
});
