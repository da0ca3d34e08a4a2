// Log-probabilities through the official OpenAI SDK (npm `openai`) against the real `splash serve`
// on a tiny random-weight Qwen3 model. Values are checked against facts that hold for any weights
// and that a wrong implementation breaks: at temperature 0 the chosen token is the argmax of its own
// distribution (logprob = top_logprobs[0]), the listed probabilities sum to at most 1 and come in
// descending order, streamed logprobs equal the non-streamed ones, the token bytes spell the text,
// and echo's prompt logprobs (max_tokens 0, as lm-evaluation-harness sends) equal the logprobs the
// same tokens had when the model generated them.
//   node tests/e2e/logprobs.test.mjs [--splash build/splash] [--model X.gguf]
import assert from 'node:assert/strict';

import { parse_args, require_package, run, test } from './lib/harness.mjs';
import { make_tiny_model, post_json, splash_binary, start_server, work_dir } from './lib/server.mjs';

const args = parse_args({ splash: '', model: '' });
const OpenAI = require_package('openai');
const binary = splash_binary(args.splash);
const model_path = args.model || make_tiny_model(binary, work_dir('logprobs'));

// Speculation off: this file tests the values; tests/server/spec_e2e.py checks they do not change
// with a drafter.
const server = await start_server({ binary, model: model_path, args: ['--spec', 'off'] });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
const model = (await client.models.list()).data[0].id;

const kMessages = [{ role: 'user', content: 'Name three colours of the sea.' }];
const kChat = { model, messages: kMessages, max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 5 };
const kPrompt = 'The lighthouse keeper counted the ships';
const kCompletion = { model, prompt: kPrompt, max_tokens: 12, temperature: 0, logprobs: 5 };

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// One chat entry {token, logprob, bytes, top_logprobs}: greedy and a proper distribution.
function check_chat_entry(e, top_n) {
  assert.equal(typeof e.token, 'string');
  assert.ok(typeof e.logprob === 'number' && e.logprob <= 0, JSON.stringify(e));
  assert.ok(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
  const decoded = Buffer.from(e.bytes).toString('utf8');
  if (!decoded.includes('\ufffd')) assert.equal(e.token, decoded);
  assert.equal(e.top_logprobs.length, top_n);
  let mass = 0;
  for (let i = 0; i < e.top_logprobs.length; i++) {
    const a = e.top_logprobs[i];
    assert.deepEqual(Object.keys(a).sort(), ['bytes', 'logprob', 'token']);
    if (i > 0) assert.ok(a.logprob <= e.top_logprobs[i - 1].logprob, 'top_logprobs in descending order');
    mass += Math.exp(a.logprob);
  }
  assert.ok(mass <= 1 + 1e-6, `top probabilities sum to ${mass}`);
  // Temperature 0 picks the argmax of the raw distribution: the chosen token leads its own list.
  assert.equal(e.logprob, e.top_logprobs[0].logprob, JSON.stringify(e));
  assert.deepEqual(e.bytes, e.top_logprobs[0].bytes);
}

// Completions' lists are parallel; the top dict's best value is the chosen token's (greedy).
function check_completion_logprobs(lp, n_tokens, top_n, { first_null = false } = {}) {
  for (const k of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) assert.equal(lp[k].length, n_tokens, k);
  for (let i = 0; i < n_tokens; i++) {
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    if (first_null && i === 0) {
      assert.equal(lp.token_logprobs[0], null);
      assert.equal(lp.top_logprobs[0], null);
      continue;
    }
    assert.ok(lp.token_logprobs[i] <= 0);
    const values = Object.values(lp.top_logprobs[i]);
    assert.ok(values.length === top_n, JSON.stringify(lp.top_logprobs[i]));
    assert.ok(values.reduce((s, v) => s + Math.exp(v), 0) <= 1 + 1e-6);
  }
}

let chat_reference = null;
let completion_reference = null;

test('chat, non-streaming: one entry per generated token, greedy = argmax, bytes spell the content', async () => {
  const r = await client.chat.completions.create(kChat);
  const choice = r.choices[0];
  const content = choice.logprobs.content;
  assert.equal(choice.logprobs.refusal, null);
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) check_chat_entry(e, 5);
  // Every generated token is listed (reasoning included), so the bytes spell the raw output.
  const raw = Buffer.concat(content.map((e) => Buffer.from(e.bytes))).toString('utf8');
  const shown = (choice.message.reasoning_content ?? '') + (choice.message.content ?? '');
  if (!choice.message.reasoning_content && !choice.message.tool_calls) assert.equal(raw, shown);
  chat_reference = r;
});

test('chat, streaming: the chunks carry the same entries as the non-streamed answer', async () => {
  assert.ok(chat_reference, 'needs the non-streaming test first');
  const chunks = await collect(await client.chat.completions.create({ ...kChat, stream: true }));
  const entries = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(entries, chat_reference.choices[0].logprobs.content);
});

test('chat: logprobs without top_logprobs lists none; logprobs off has no logprobs', async () => {
  const r = await client.chat.completions.create({ ...kChat, top_logprobs: undefined });
  for (const e of r.choices[0].logprobs.content) assert.deepEqual(e.top_logprobs, []);
  assert.deepEqual(r.choices[0].logprobs.content.map((e) => e.logprob),
                   chat_reference.choices[0].logprobs.content.map((e) => e.logprob));
  const off = await client.chat.completions.create({ ...kChat, logprobs: undefined, top_logprobs: undefined });
  assert.equal(off.choices[0].logprobs ?? null, null);
});

test('completions, non-streaming: parallel lists, greedy = argmax, tokens spell the text', async () => {
  const r = await client.completions.create(kCompletion);
  const lp = r.choices[0].logprobs;
  check_completion_logprobs(lp, r.usage.completion_tokens, 5);
  for (let i = 0; i < lp.tokens.length; i++) {
    const best = Math.max(...Object.values(lp.top_logprobs[i]));
    assert.equal(lp.token_logprobs[i], best, `token ${i}: chosen ${lp.token_logprobs[i]}, best ${best}`);
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i]);
  }
  if (!lp.tokens.join('').includes('\ufffd')) assert.equal(lp.tokens.join(''), r.choices[0].text);
  assert.equal(lp.text_offset[0], 0);
  completion_reference = r;
});

test('completions, streaming: the chunks concatenate to the non-streamed logprobs', async () => {
  assert.ok(completion_reference, 'needs the non-streaming test first');
  const chunks = await collect(await client.completions.create({ ...kCompletion, stream: true }));
  const got = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for (const c of chunks) for (const [k, v] of Object.entries(c.choices[0]?.logprobs ?? {})) got[k].push(...v);
  assert.deepEqual(got, completion_reference.choices[0].logprobs);
});

test('echo + max_tokens 0: the prompt scored, first token null, equal to the logprobs it had when generated', async () => {
  assert.ok(completion_reference, 'needs the non-streaming test first');
  // Prompt + the greedy continuation as token ids, so the scoring request sees exactly the tokens
  // that were generated: each generated token's text, tokenized alone, is that one token (checked).
  const prompt_ids = (await post_json(server, '/tokenize', { content: kPrompt, add_special: true })).body.tokens;
  const gen = completion_reference.choices[0];
  const gen_ids = [];
  for (const t of gen.logprobs.tokens) {
    const ids = (await post_json(server, '/tokenize', { content: t, add_special: false })).body.tokens;
    assert.equal(ids.length, 1, `generated token ${JSON.stringify(t)} tokenizes alone to ${JSON.stringify(ids)}`);
    gen_ids.push(ids[0]);
  }
  const r = await client.completions.create({ model, prompt: [...prompt_ids, ...gen_ids], max_tokens: 0, echo: true,
                                              logprobs: 1, temperature: 0 });
  const lp = r.choices[0].logprobs;
  assert.equal(r.usage.completion_tokens, 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  check_completion_logprobs(lp, prompt_ids.length + gen_ids.length, 1, { first_null: true });
  assert.equal(r.choices[0].text, kPrompt + gen.text);
  assert.deepEqual(lp.tokens.slice(prompt_ids.length), gen.logprobs.tokens);
  // The prefill's rows and the decode steps' rows give the same distribution for the same token.
  const scored = lp.token_logprobs.slice(prompt_ids.length);
  for (let i = 0; i < scored.length; i++)
    assert.ok(Math.abs(scored[i] - gen.logprobs.token_logprobs[i]) < 1e-4,
              `token ${i}: scored ${scored[i]} vs generated ${gen.logprobs.token_logprobs[i]}`);
  // The prompt's own tokens are scored as well (any weights give them a finite logprob).
  for (const v of lp.token_logprobs.slice(1, prompt_ids.length)) assert.ok(v < 0 && v > -9999);
});

test('echo scoring over several prefill chunks and past the prefix cache: a prefix scores the same', async () => {
  // ~600 tokens: three scoring passes of at most 256 rows; sent twice, so the second could find the
  // first's pages in the prefix cache (it must not use them: their logits were never kept).
  const words = [];
  for (let i = 0; i < 150; i++) words.push(`ship ${i} sailed north;`);
  const long_text = words.join(' ');
  const ids = (await post_json(server, '/tokenize', { content: long_text, add_special: true })).body.tokens;
  assert.ok(ids.length > 520, `${ids.length} tokens`);
  const score = async (prompt) => {
    const r = await client.completions.create({ model, prompt, max_tokens: 0, echo: true, logprobs: 0 });
    const lp = r.choices[0].logprobs;
    check_completion_logprobs(lp, prompt.length, 0, { first_null: true });
    return { r, lp };
  };
  const full = await score(ids);
  const again = await score(ids);
  assert.equal(again.r.usage.prompt_tokens_details.cached_tokens, 0);
  assert.deepEqual(again.lp.token_logprobs, full.lp.token_logprobs);
  // A causal model scores a prefix's tokens as it scores them inside the longer prompt.
  const half = await score(ids.slice(0, 300));
  const got = half.lp.token_logprobs.slice(1);
  const want = full.lp.token_logprobs.slice(1, 300);
  for (let i = 0; i < got.length; i++) assert.ok(Math.abs(got[i] - want[i]) < 1e-4, `position ${i + 1}: ${got[i]} vs ${want[i]}`);
});

test('echo with max_tokens > 0 (streamed): the prompt chunk comes first, then the completion', async () => {
  const chunks = await collect(await client.completions.create({ ...kCompletion, echo: true, stream: true }));
  const text = chunks.map((c) => c.choices[0]?.text ?? '').join('');
  assert.equal(text, kPrompt + completion_reference.choices[0].text);
  assert.equal(chunks[0].choices[0].text, kPrompt);
  const first = chunks[0].choices[0].logprobs;
  assert.equal(first.token_logprobs[0], null);
  const tokens = chunks.flatMap((c) => c.choices[0]?.logprobs?.tokens ?? []);
  const n_prompt = first.tokens.length;
  assert.deepEqual(tokens.slice(n_prompt), completion_reference.choices[0].logprobs.tokens);
  const values = chunks.flatMap((c) => c.choices[0]?.logprobs?.token_logprobs ?? []);
  assert.deepEqual(values.slice(n_prompt), completion_reference.choices[0].logprobs.token_logprobs);
});

test('echo without logprobs: the prompt text comes back, logprobs null', async () => {
  const r = await client.completions.create({ model, prompt: kPrompt, max_tokens: 0, echo: true });
  assert.equal(r.choices[0].text, kPrompt);
  assert.equal(r.choices[0].logprobs, null);
});

test('refusals name the field: logit_bias, top_logprobs > 20, logprobs > 5, max_tokens 0 without echo', async () => {
  const cases = [
    [() => client.chat.completions.create({ ...kChat, logit_bias: { 15: 5 } }), 'logit_bias'],
    [() => client.chat.completions.create({ ...kChat, top_logprobs: 21 }), 'top_logprobs'],
    [() => client.chat.completions.create({ ...kChat, logprobs: false }), 'top_logprobs'],
    [() => client.completions.create({ ...kCompletion, logprobs: 6 }), 'logprobs'],
    [() => client.completions.create({ ...kCompletion, max_tokens: 0 }), 'max_tokens'],
  ];
  for (const [call, field] of cases) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${e.constructor.name}: ${e.message}`);
      assert.match(e.message, new RegExp(`'${field}'`));
      return true;
    });
  }
});

await run({
  on_failure: () => console.log(`--- server log (${server.command}) ---\n${server.log.slice(-4000)}`),
  after: () => server.stop(),
});
