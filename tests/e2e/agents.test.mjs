// Real coding agents, offline, against the real `splash serve` through the launchers (issue 38):
// `splash codex -- exec ...` (Codex CLI 0.171.0, OpenAI Responses API) and `splash claude -- -p ...`
// (Claude Code 2.1.332, Anthropic Messages API), both from tools/agents (scripts/test installs it;
// without it this test skips).
//
// Both run without a network: no login (the launcher gives Claude Code a Bearer token and Codex a
// provider of its own with an env_key), telemetry, error reports and update checks off. Each agent
// gets its own HOME / CODEX_HOME and project folder, empty before its first run. The model is the scripted tiny Qwen3
// (tests/e2e/lib/scripted_model.mjs) with a 32K window, because each agent's first request is a 10-15K
// token system prompt with its tools: with thinking on it answers "The weather is sunny." and stops, so
// the agent's final message is known text that can only have come through the API.
// Also the launcher's errors and `--model`, which starts a server for the agent and stops it after.
// Checks per agent: exit code 0, the launcher's `Starting <agent>: <model> · 32,768 context tokens`,
// the model's text in the agent's output, the usage the agent reports (its prompt is thousands of
// tokens), the server's /status counting the requests; and a second run with the same prompt, whose
// shared prefix (system prompt and tools) must come from the prefix cache: cached tokens > 90% of the
// first run's prompt, as the agent itself reports them.
//   node tests/e2e/agents.test.mjs [--splash build/splash]
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { parse_args, repo_root, run, skip, test } from './lib/harness.mjs';
import { kScriptedText, make_scripted_model } from './lib/scripted_model.mjs';
import { free_port, splash_binary, start_server, work_dir } from './lib/server.mjs';

const kAgentsBin = path.join(repo_root, 'tools/agents/node_modules/.bin');
for (const agent of ['codex', 'claude'])
  if (!fs.existsSync(path.join(kAgentsBin, agent)))
    skip(`tools/agents/node_modules/.bin/${agent} is missing (scripts/test runs npm ci in tools/agents)`);

const args = parse_args({ splash: '' });
const binary = splash_binary(args.splash);
const work = work_dir('agents');
const model_path = make_scripted_model(binary, work);
const kKey = 'agents-e2e-key';
const server = await start_server({ binary, model: model_path, args: ['--api-key', kKey, '--threads', '2'] });
const kPrompt = 'What is the weather like?';

async function status() {
  const r = await fetch(`${server.url}/status`, { headers: { Authorization: `Bearer ${kKey}` } });
  assert.equal(r.status, 200);
  return r.json();
}

// Runs `splash <agent> --port P -- <agent_args>` with HOME and the working folder named by `name`
// (a second run in the same ones is the same user in the same project: its prompt differs from the
// first one's only in the session's ids).
function launch(agent, agent_args, name, { port = server.port, key = kKey, path_dirs = kAgentsBin, launcher_args = [] } = {}) {
  const home = path.join(work, `${name}-home`);
  const cwd = path.join(work, `${name}-project`);
  fs.mkdirSync(home, { recursive: true });
  fs.mkdirSync(cwd, { recursive: true });
  const env = { ...process.env, HOME: home, CODEX_HOME: path.join(home, '.codex'), SPLASH_API_KEY: key,
                PATH: `${path_dirs}:${process.env.PATH}` };
  delete env.SPLASH_PORT;
  for (const v of ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL']) delete env[v];
  fs.mkdirSync(env.CODEX_HOME, { recursive: true });
  const r = spawnSync(binary, [agent, '--port', String(port), ...launcher_args, '--', ...agent_args],
                      { cwd, env, encoding: 'utf8', timeout: 240000 });
  const report = `splash ${agent} exit ${r.status} signal ${r.signal}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
  return { ...r, report };
}

function starting_line(stdout, agent) {
  const line = stdout.split('\n').find((l) => l.startsWith(`Starting ${agent}: `));
  assert.ok(line, `no Starting line:\n${stdout}`);
  assert.match(line, /^Starting \w+: scripted-qwen3 · 32,768 context tokens$/);
}

// codex exec --json: one JSON event a line; the final agent message and the turn's usage.
function codex_result(stdout) {
  const events = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const messages = events.filter((e) => e.type === 'item.completed' && e.item?.type === 'agent_message');
  const turns = events.filter((e) => e.type === 'turn.completed');
  assert.ok(turns.length === 1, `one turn.completed expected:\n${stdout}`);
  return { text: messages.map((m) => m.item.text).join('\n'), usage: turns[0].usage };
}

test('codex exec answers through /v1/responses, second run from the prefix cache', async () => {
  const before = await status();
  const codex_args = ['exec', '--json', '--skip-git-repo-check', '--sandbox', 'read-only', kPrompt];
  const first = launch('codex', codex_args, 'codex');
  assert.equal(first.status, 0, first.report);
  starting_line(first.stdout, 'codex');
  const a = codex_result(first.stdout);
  assert.ok(a.text.includes(kScriptedText), `the model's text in codex's answer: ${a.text}\n${first.report}`);
  assert.ok(a.usage.input_tokens > 2000, `codex sends its system prompt and tools: ${JSON.stringify(a.usage)}`);
  const mid = await status();
  assert.ok(mid.requests.completed > before.requests.completed, 'the server completed the requests');

  const second = launch('codex', codex_args, 'codex');
  assert.equal(second.status, 0, second.report);
  const b = codex_result(second.stdout);
  assert.ok(b.text.includes(kScriptedText), b.text);
  console.log(`     codex: first prompt ${a.usage.input_tokens} tokens (${a.usage.cached_input_tokens} cached), ` +
              `second ${b.usage.input_tokens} (${b.usage.cached_input_tokens} cached)`);
  assert.ok(b.usage.cached_input_tokens > 0.9 * a.usage.input_tokens,
            `second run's cached tokens ${b.usage.cached_input_tokens} vs first prompt ${a.usage.input_tokens}`);
});

// claude -p --output-format json: one JSON result with the answer and summed usage.
function claude_result(stdout) {
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  assert.ok(line, `no JSON result:\n${stdout}`);
  return JSON.parse(line);
}

test('claude -p answers through /v1/messages, second run from the prefix cache', async () => {
  const before = await status();
  const claude_args = ['-p', kPrompt, '--output-format', 'json'];
  const first = launch('claude', claude_args, 'claude');
  assert.equal(first.status, 0, first.report);
  starting_line(first.stdout, 'claude');
  const a = claude_result(first.stdout);
  assert.equal(a.is_error, false, first.report);
  assert.ok(a.result.includes(kScriptedText), `the model's text in Claude Code's answer: ${a.result}`);
  const prompt_a = a.usage.input_tokens + a.usage.cache_read_input_tokens + a.usage.cache_creation_input_tokens;
  assert.ok(prompt_a > 2000, `Claude Code sends its system prompt and tools: ${JSON.stringify(a.usage)}`);
  const mid = await status();
  assert.ok(mid.requests.completed > before.requests.completed, 'the server completed the requests');

  const second = launch('claude', claude_args, 'claude');
  assert.equal(second.status, 0, second.report);
  const b = claude_result(second.stdout);
  assert.ok(b.result.includes(kScriptedText), b.result);
  console.log(`     claude: first prompt ${prompt_a} tokens, second reads ${b.usage.cache_read_input_tokens} ` +
              `from the cache and ${b.usage.input_tokens} new`);
  assert.ok(b.usage.cache_read_input_tokens > 0.9 * prompt_a,
            `second run's cache reads ${b.usage.cache_read_input_tokens} vs first prompt ${prompt_a}: ${JSON.stringify(b.usage)}`);
});

test('launcher errors: no server, wrong key, agent not on PATH', async () => {
  const closed = await free_port();
  const none = launch('codex', ['exec', 'x'], 'err1', { port: closed });
  assert.equal(none.status, 1, none.report);
  assert.ok(none.stderr.startsWith(`No ready Splash server at http://127.0.0.1:${closed}. `), none.report);
  const bad_key = launch('claude', ['-p', 'x'], 'err2', { key: 'wrong' });
  assert.equal(bad_key.status, 1, bad_key.report);
  assert.ok(bad_key.stderr.startsWith('Splash authentication failed; set SPLASH_API_KEY'), bad_key.report);
  // PATH without tools/agents (the system's own directories only).
  const env = { ...process.env, PATH: '/usr/bin:/bin' };
  const missing = spawnSync(binary, ['codex', '--port', String(server.port)], { env, encoding: 'utf8' });
  assert.equal(missing.status, 1);
  assert.equal(missing.stderr.trim(),
               'codex is not installed or is not on PATH; install Codex CLI with: npm install -g @openai/codex');
});

test('--model starts a server for the agent and stops it afterwards', async () => {
  const port = await free_port();
  const r = launch('codex', ['exec', '--json', '--skip-git-repo-check', kPrompt], 'child', {
    port, launcher_args: ['--model', model_path] });
  assert.equal(r.status, 0, r.report);
  assert.ok(r.stdout.includes(`Starting splash serve --model ${model_path} --port ${port}`), r.report);
  starting_line(r.stdout, 'codex');
  assert.ok(codex_result(r.stdout).text.includes(kScriptedText), r.report);
  // The launcher waited for its server to stop: the port is free again.
  const probe = await fetch(`http://127.0.0.1:${port}/health`).then(() => 'answered', () => 'refused');
  assert.equal(probe, 'refused');
});

await run({
  after: async () => {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  },
  on_failure: async () => console.log(`--- server log\n${server.log.slice(-4000)}`),
});
