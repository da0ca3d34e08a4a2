// Structured output through the official OpenAI SDK against the real `splash serve` on a tiny
// random-weight Qwen3: such a model writes garbage, so every document that parses and validates is
// the grammar's doing. Outputs are validated by Ajv (npm `ajv`, JSON Schema 2020-12), independently
// of Splash's compiler; GBNF and regex outputs by JavaScript regular expressions.
//   node tests/e2e/structured_output.test.mjs [--splash build/splash] [--model X.gguf]
import assert from 'node:assert/strict';

import { parse_args, require_package, run, test } from './lib/harness.mjs';
import { kScriptedCall, make_scripted_model } from './lib/scripted_model.mjs';
import { get_json, make_tiny_model, post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '', model: '' });
const OpenAI = require_package('openai');
const Ajv2020 = require_package('ajv/dist/2020').default;
const add_formats = require_package('ajv-formats').default;
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('structured'));

const server = await start_server({ binary, model: model_path });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const ajv = new Ajv2020({ strict: false });
add_formats(ajv);

// Bounded strings and arrays, so a random model finishes a document well inside max_tokens.
const kPerson = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    role: { enum: ['admin', 'user', 'guest'] },
    born: { type: 'string', format: 'date' },
    tags: { type: 'array', items: { type: 'string', pattern: '^[a-z]{1,6}$' }, maxItems: 3 },
    home: {
      type: 'object',
      properties: { zip: { type: 'string', pattern: '^[0-9]{5}$' }, floor: { type: 'integer', minimum: -2, maximum: 40 } },
      required: ['zip'],
      additionalProperties: false,
    },
  },
  required: ['name', 'age', 'role'],
  additionalProperties: false,
};
const validate_person = ajv.compile(kPerson);
const kMessages = [{ role: 'user', content: 'Describe a person as JSON.' }];

function check_document(text, validate) {
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(text); }, `not JSON: ${text}`);
  assert.ok(validate(value), `${text}\n${JSON.stringify(validate.errors)}`);
  return value;
}

test('without a constraint the random model does not write valid JSON (the test can fail)', async () => {
  const r = await client.chat.completions.create({ model, messages: kMessages, max_tokens: 60, temperature: 1, seed: 3 });
  let ok = false;
  try { ok = validate_person(JSON.parse(r.choices[0].message.content)); } catch { ok = false; }
  assert.equal(ok, false, r.choices[0].message.content);
});

test('response_format json_schema: every finished document validates (sampled, 12 seeds)', async () => {
  let finished = 0;
  for (let seed = 1; seed <= 12; ++seed) {
    const r = await client.chat.completions.create({
      model, messages: kMessages, max_tokens: 400, temperature: 1, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: kPerson, strict: true } },
    });
    const choice = r.choices[0];
    if (choice.finish_reason !== 'stop') continue;
    ++finished;
    check_document(choice.message.content, validate_person);
  }
  assert.ok(finished >= 10, `only ${finished} of 12 documents finished in 400 tokens`);
});

test('response_format json_schema, streamed: the deltas join to a valid document', async () => {
  const stream = await client.chat.completions.create({
    model, messages: kMessages, max_tokens: 400, temperature: 0.8, seed: 21, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: kPerson } },
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  check_document(text, validate_person);
});

test('response_format json_object: an object', async () => {
  const r = await client.chat.completions.create({
    model, messages: kMessages, max_tokens: 300, temperature: 0.7, seed: 5, response_format: { type: 'json_object' },
  });
  if (r.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(r.choices[0].message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    // A document cut by max_tokens is still a prefix of an object.
    assert.ok(r.choices[0].message.content.startsWith('{'), r.choices[0].message.content);
  }
});

test('completions: a GBNF grammar and a regex constrain the text', async () => {
  const grammar = 'root ::= "answer: " ("yes" | "no") " (" [0-9] [0-9]? "%)"';
  for (let seed = 1; seed <= 4; ++seed) {
    const r = await client.completions.create({ model, prompt: 'Q: is it raining?\n', max_tokens: 30, temperature: 1, seed, grammar });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, /^answer: (yes|no) \([0-9][0-9]?%\)$/);
  }
  const r = await client.completions.create({
    model, prompt: 'Date: ', max_tokens: 30, temperature: 1, seed: 9, regex: '20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]',
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.match(r.choices[0].text, /^20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]$/);
});

const kWeather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 10 }, unit: { enum: ['c', 'f'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const kTools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: kWeather, strict: true } },
  { type: 'function', function: { name: 'get_time', description: 'Time', parameters: { type: 'object', properties: { tz: { enum: ['UTC', 'CET'] } }, required: ['tz'] } } },
];
const validate_weather = ajv.compile(kWeather);

test('tool_choice naming a function: the call is that function, its arguments validate', async () => {
  for (let seed = 1; seed <= 4; ++seed) {
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Weather in Oslo?' }], max_tokens: 200, temperature: 1, seed,
      tools: kTools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    check_document(call.function.arguments, validate_weather);
  }
});

test('tool_choice required without parallel calls: one call of an offered tool, streamed', async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Weather and time?' }], max_tokens: 300, temperature: 1, seed: 11,
    tools: kTools, tool_choice: 'required', parallel_tool_calls: false, stream: true,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[d.index] ??= { name: '', arguments: '' };
      if (d.function?.name) calls[d.index].name += d.function.name;
      if (d.function?.arguments) calls[d.index].arguments += d.function.arguments;
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  for (const c of calls) {
    assert.ok(['get_weather', 'get_time'].includes(c.name), c.name);
    const args = JSON.parse(c.arguments);
    if (c.name === 'get_weather') assert.ok(validate_weather(args), c.arguments);
    else assert.ok(['UTC', 'CET'].includes(args.tz), c.arguments);
  }
});

test('Responses text.format json_schema and a forced function call', async () => {
  const r = await client.responses.create({
    model, input: 'Describe a person as JSON.', max_output_tokens: 400, temperature: 1,
    text: { format: { type: 'json_schema', name: 'person', schema: kPerson, strict: true } },
  });
  assert.equal(r.status, 'completed', JSON.stringify(r.incomplete_details));
  check_document(r.output_text, validate_person);
  const call = await client.responses.create({
    model, input: 'Weather in Oslo?', max_output_tokens: 200, temperature: 1,
    tools: [{ type: 'function', name: 'get_weather', parameters: kWeather, strict: true }],
    tool_choice: { type: 'function', name: 'get_weather' },
  });
  const fc = call.output.filter((o) => o.type === 'function_call');
  assert.equal(fc.length, 1, JSON.stringify(call.output));
  assert.equal(fc[0].name, 'get_weather');
  check_document(fc[0].arguments, validate_weather);
});

test('Messages output_config.format: the text block is a valid document', async () => {
  const r = await post_json(server, '/v1/messages', {
    model, max_tokens: 400, temperature: 1, messages: kMessages,
    output_config: { format: { type: 'json_schema', schema: kPerson } },
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.stop_reason, 'end_turn', JSON.stringify(r.body));
  const text = r.body.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  check_document(text, validate_person);
});

test('greedy constrained output is the same with speculative decoding (prompt lookup) and without', async () => {
  const plain = await start_server({ binary, model: model_path, args: ['--spec', 'off'] });
  try {
    const other = new OpenAI({ baseURL: `${plain.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
    const before = (await get_json(server, '/status')).body.metrics;
    const bodies = [
      { model, messages: kMessages, max_tokens: 300, temperature: 0,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema: kPerson } } },
      // A grammar with repeats, so prompt lookup has n-grams to propose.
      { model, messages: kMessages, max_tokens: 120, temperature: 0, grammar: 'root ::= ("ab" | "cd" | " ")+' },
    ];
    for (const body of bodies) {
      const spec = await client.chat.completions.create(body);
      const off = await other.chat.completions.create(body);
      assert.equal(spec.choices[0].message.content, off.choices[0].message.content);
      assert.equal(spec.choices[0].finish_reason, off.choices[0].finish_reason);
    }
    const after = (await get_json(server, '/status')).body.metrics;
    assert.ok(after.drafted_tokens > before.drafted_tokens, `no drafts: ${JSON.stringify(after.draft_methods)}`);
    assert.ok(after.accepted_draft_tokens > before.accepted_draft_tokens, 'no draft was accepted');
    assert.equal((await get_json(plain, '/status')).body.metrics.drafted_tokens, 0);
  } finally {
    await plain.stop();
  }
});

test('strict tools under tool_choice auto: free text stays free, an opened call follows the schema', async () => {
  // The scripted model (thinking off) writes "\n\n<tool_call>" and then arguments {"city":"Paris"}.
  // Its own schema here allows only Oslo or Rome: without enforcement the call would not validate.
  const scripted = await start_server({ binary, model: make_scripted_model(binary, work_dir('structured-scripted')) });
  try {
    const c = new OpenAI({ baseURL: `${scripted.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
    const city_schema = { type: 'object', properties: { city: { enum: ['Oslo', 'Rome'] } }, required: ['city'], additionalProperties: false };
    const validate_city = ajv.compile(city_schema);
    const body = (strict) => ({
      model: 'scripted-qwen3', messages: [{ role: 'user', content: 'Weather in Paris?' }], max_tokens: 200, temperature: 0,
      reasoning_effort: 'none', parallel_tool_calls: false,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: city_schema, strict } }],
    });
    const loose = await c.chat.completions.create(body(false));
    assert.equal(loose.choices[0].message.tool_calls[0].function.arguments, kScriptedCall.arguments);
    assert.equal(validate_city(JSON.parse(kScriptedCall.arguments)), false);
    const strict = await c.chat.completions.create(body(true));
    const choice = strict.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    check_document(choice.message.tool_calls[0].function.arguments, validate_city);
    // Thinking on, the model answers in text: no call opened, so nothing is enforced and it ends as written.
    const text = await c.chat.completions.create({ ...body(true), reasoning_effort: undefined });
    assert.equal(text.choices[0].finish_reason, 'stop', JSON.stringify(text.choices[0]));
    assert.equal(text.choices[0].message.content, 'The weather is sunny.');
  } finally {
    await scripted.stop();
  }
});

test('a mask not ready within --mask-timeout fails the request with 503 mask_timeout, not a hang', async () => {
  // --test-mask-delay makes every mask 2 s late; the bound is 0.2 s. Unconstrained requests are not held up.
  const slow = await start_server({ binary, model: model_path, args: ['--mask-timeout', '0.2', '--test-mask-delay', '2'] });
  try {
    const t0 = Date.now();
    const r = await post_json(slow, '/v1/chat/completions', {
      model, messages: kMessages, max_tokens: 20,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: kPerson } },
    });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.code, 'mask_timeout', r.text);
    assert.ok(Date.now() - t0 < 1900, `took ${Date.now() - t0} ms: the request waited for the mask`);
    const plain = await post_json(slow, '/v1/chat/completions', { model, messages: kMessages, max_tokens: 4 });
    assert.equal(plain.status, 200, plain.text);
  } finally {
    await slow.stop();
  }
  // The default bound lets the same request through on the main server.
  const ok = await post_json(server, '/v1/chat/completions', {
    model, messages: kMessages, max_tokens: 20,
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema: kPerson } },
  });
  assert.equal(ok.status, 200, ok.text);
});

test('what cannot be enforced is a 400 naming it', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} } } } } }, 'patternProperties'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'hostname' } } } }, 'hostname'],
    [{ grammar: 'root ::= item\nitem ::= "a" missing' }, 'missing'],
    [{ grammar: 'root ::= root "a" | "a"' }, 'left-recursive'],
    [{ regex: 'a(?=b)' }, 'lookaround'],
    [{ regex: 'a', grammar: 'root ::= "a"' }, 'cannot be combined'],
  ];
  for (const [extra, word] of cases) {
    const r = await post_json(server, '/v1/chat/completions', { model, messages: kMessages, max_tokens: 8, ...extra });
    assert.equal(r.status, 400, r.text);
    assert.ok(r.body.error.message.includes(word), `${word} not in: ${r.body.error.message}`);
  }
});

await run({ after: () => server.stop() });
