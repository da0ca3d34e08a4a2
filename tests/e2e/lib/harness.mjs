// A tiny sequential test runner for the end-to-end scripts (node:test would work too, but its
// output interleaves badly with the server's log lines that these tests print on failure).
// Exit codes: 0 all passed, 1 a test failed, 77 skipped (ctest SKIP_RETURN_CODE).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo_root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const node_require = createRequire(path.join(repo_root, 'tools/node/package.json'));

export function skip(reason) {
  console.log(`SKIP: ${reason}`);
  process.exit(77);
}

// Packages pinned in tools/node/package.json; a checkout without `npm ci` there skips.
export function require_package(name) {
  try {
    return node_require(name);
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND') skip(`${name} is not installed (run npm ci in tools/node)`);
    throw e;
  }
}

// --name value / --flag arguments.
export function parse_args(defaults) {
  const args = { ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const name = a.slice(2).replace(/-/g, '_');
    if (!(name in defaults)) throw new Error(`unknown option ${a} (known: ${Object.keys(defaults).join(', ')})`);
    if (typeof defaults[name] === 'boolean') {
      args[name] = true;
    } else {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      args[name] = typeof defaults[name] === 'number' ? Number(v) : v;
    }
  }
  return args;
}

const tests = [];
export function test(name, fn) {
  tests.push({ name, fn });
}

// Runs the registered tests in order; `after` (cleanup) runs whatever happened.
export async function run({ after, on_failure } = {}) {
  let failed = 0;
  let ran = 0;
  const only = process.env.SPLASH_E2E_ONLY;
  for (const t of tests) {
    if (only && !t.name.includes(only)) continue;
    ran++;
    const started = Date.now();
    try {
      await t.fn();
      console.log(`ok   ${t.name} (${Date.now() - started} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name} (${Date.now() - started} ms)\n     ${(e && e.stack) || e}`);
      if (on_failure) await on_failure(t.name);
    }
  }
  if (after) await after();
  console.log(failed ? `${failed} of ${ran} failed` : `all ${ran} passed`);
  process.exit(failed ? 1 : 0);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn until it returns a truthy value or the time runs out (then throws with `what`).
export async function wait_for(what, fn, timeout_ms = 10000, every_ms = 100) {
  const deadline = Date.now() + timeout_ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(every_ms);
  }
  throw new Error(`timed out after ${timeout_ms} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}
