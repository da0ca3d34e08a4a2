// The llama.cpp side of compare.mjs: times prefill and decode on one GGUF file with node-llama-cpp's
// prebuilt CPU binaries (no GPU, no local build), the way `splash bench` times them, and prints one
// JSON object: {"tests": {"pp512": [tok/s per rep], ...}, "variant": ..., "release": ..., ...}.
//   node peer_bench.mjs MODEL --pp 512,2048 --tg 128 --reps 3 --threads 2 [--depth D]
// --depth D: D tokens evaluated untimed before each test ("tg128 @ d4096"), as splash bench -d.
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
  const a = {model: argv[0], pp: [512], tg: 128, reps: 3, threads: 2, depth: 0};
  for (let i = 1; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === "--pp") a.pp = v.split(",").filter(Boolean).map(Number);
    else if (k === "--tg") a.tg = Number(v);
    else if (k === "--depth") a.depth = Number(v);
    else if (k === "--reps") a.reps = Number(v);
    else if (k === "--threads") a.threads = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!a.model) throw new Error("usage: peer_bench.mjs MODEL [--pp 512,2048] [--tg 128] [--reps 3] [--threads 2]");
  return a;
}

// Fixed pseudo-random ids (an LCG, like splash bench's), skipping the first ids of the vocabulary.
function benchTokens(n, nVocab) {
  const out = [];
  let s = 0x9E3779B97F4A7C15n;
  for (let i = 0; i < n; i++) {
    s = (s * 6364136223846793005n + 1442695040888963407n) & 0xFFFFFFFFFFFFFFFFn;
    out.push(3 + Number((s >> 33n) % BigInt(nVocab - 3)));
  }
  return out;
}

// The ggml CPU variant the prebuilt build picked for this CPU (libggml-cpu-<variant>.so), read from
// this process's own memory map.
function loadedCpuVariant() {
  const maps = readFileSync("/proc/self/maps", "utf8");
  const m = maps.match(/libggml-cpu-([A-Za-z0-9_]+)\.so/);
  return m ? m[1] : "unknown";
}

const args = parseArgs(process.argv.slice(2));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
const longest = args.depth + Math.max(args.tg + 1, ...args.pp);
const ctx = await model.createContext({
  contextSize: Math.max(512, Math.ceil((longest + 64) / 256) * 256),
  batchSize: 512,  // llama-bench's default ubatch
  threads: args.threads,
  flashAttention: true,
});
const seq = ctx.getSequence();
const nVocab = model.tokens?.vocabularySize ?? model.fileInsights?.metadata?.tokenizer?.ggml?.tokens?.length ?? 32000;
const toks = benchTokens(longest + 1, Math.min(nVocab, 32000));

// The depth tokens first (untimed), then the test's own.
const d = args.depth;
async function fillDepth() {
  await seq.clearHistory();
  if (d > 0) await seq.evaluateWithoutGeneratingNewTokens(toks.slice(0, d));
}

async function prefill(n) {
  await fillDepth();
  const t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(toks.slice(d, d + n));
  return n / ((performance.now() - t0) / 1000);
}

async function decode(n) {
  await fillDepth();
  await seq.evaluateWithoutGeneratingNewTokens([toks[d]]);
  const t0 = performance.now();
  for (let i = 1; i <= n; i++) await seq.evaluateWithoutGeneratingNewTokens([toks[d + i]]);
  return n / ((performance.now() - t0) / 1000);
}
const at = d > 0 ? ` @ d${d}` : "";

const tests = {};
for (const n of args.pp) {
  if (n <= 0) continue;
  await prefill(n);  // untimed warm-up
  tests[`pp${n}${at}`] = [];
  for (let r = 0; r < args.reps; r++) tests[`pp${n}${at}`].push(await prefill(n));
}
if (args.tg > 0) {
  await decode(Math.min(args.tg, 16));
  tests[`tg${args.tg}${at}`] = [];
  for (let r = 0; r < args.reps; r++) tests[`tg${args.tg}${at}`].push(await decode(args.tg));
}
console.log(JSON.stringify({
  tests,
  variant: loadedCpuVariant(),
  release: llama.llamaCppRelease?.release ?? "unknown",
  build: llama.buildType,
  system_info: llama.systemInfo,
  threads: args.threads,
  kv: "f16, flash attention",
}));
await ctx.dispose();
await model.dispose();
process.exit(0);
