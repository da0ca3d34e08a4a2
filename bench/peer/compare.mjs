// Side-by-side benchmark: `splash bench` against llama.cpp (node-llama-cpp's prebuilt CPU build, via
// peer_bench.mjs) on the same GGUF files, run alternately A B B A so slow drifts of a shared machine
// hit both equally. Prints one table per run: medians of every sample, ratio, the load average seen
// around the runs, and which llama.cpp build and CPU variant the peer used. A benchmark, not a test.
//   node compare.mjs --splash build/splash [--pp 512,2048] [--tg 128] [--reps 3] [--threads 2] [--depth D]
//                    [--rounds 1] [--json out.json] MODEL.gguf...
import {execFileSync} from "node:child_process";
import {readFileSync, writeFileSync} from "node:fs";
import {dirname, basename, join} from "node:path";
import {fileURLToPath} from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const a = {splash: "build/splash", pp: "512,2048", tg: 128, reps: 3, threads: 2, rounds: 1, depth: 0, json: "", models: []};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (!k.startsWith("--")) { a.models.push(k); continue; }
    const v = argv[++i];
    if (v === undefined) throw new Error(`${k} needs a value`);
    const key = k.slice(2);
    if (!(key in a)) throw new Error(`unknown option ${k}`);
    a[key] = ["tg", "reps", "threads", "rounds", "depth"].includes(key) ? Number(v) : v;
  }
  if (a.models.length === 0) throw new Error("usage: compare.mjs [--splash PATH] [--pp 512,2048] [--tg 128] [--reps 3] [--threads 2] [--rounds 1] [--depth D] MODEL.gguf...");
  return a;
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).map(Number);
const median = (xs) => {
  const v = [...xs].sort((p, q) => p - q);
  return v.length === 0 ? NaN : v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

function runSplash(a, model) {
  const out = execFileSync(a.splash, ["bench", "-m", model, "-p", a.pp, "-n", String(a.tg), "-r", String(a.reps),
    "-t", String(a.threads), "-d", String(a.depth), "--json"], {encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 24});
  const rows = JSON.parse(out);
  const tests = {};
  for (const r of rows) tests[r.test] = r.tok_s;
  const decode = rows.find((r) => r.decode_bytes_per_token !== undefined);
  return {tests, info: rows[0] ?? {}, decodeBytes: decode?.decode_bytes_per_token};
}

function runPeer(a, model) {
  const out = execFileSync(process.execPath, [join(here, "peer_bench.mjs"), model, "--pp", a.pp, "--tg", String(a.tg),
    "--reps", String(a.reps), "--threads", String(a.threads), "--depth", String(a.depth)],
    {encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 24});
  return JSON.parse(out.trim().split("\n").pop());
}

const a = parseArgs(process.argv.slice(2));
const results = [];
for (const model of a.models) {
  const ours = {}, peer = {};
  const loads = [];
  let peerInfo = null, ourInfo = null, decodeBytes;
  const add = (into, tests) => { for (const [t, xs] of Object.entries(tests)) (into[t] ??= []).push(...xs); };
  for (let round = 0; round < a.rounds; round++) {
    for (const who of ["ours", "peer", "peer", "ours"]) {  // A B B A
      loads.push(loadavg()[0]);
      process.stderr.write(`[${basename(model)}] round ${round + 1}/${a.rounds}: ${who === "ours" ? "splash" : "llama.cpp"} (load ${loads.at(-1)})\n`);
      if (who === "ours") {
        const r = runSplash(a, model);
        add(ours, r.tests);
        ourInfo = r.info;
        decodeBytes = r.decodeBytes;
      } else {
        const r = runPeer(a, model);
        add(peer, r.tests);
        peerInfo = r;
      }
    }
  }
  loads.push(loadavg()[0]);
  const tests = Object.keys(ours).filter((t) => t in peer);
  results.push({model, tests: tests.map((t) => ({test: t, ours: median(ours[t]), peer: median(peer[t]),
    ours_samples: ours[t], peer_samples: peer[t]})), load_min: Math.min(...loads), load_max: Math.max(...loads),
    peer_variant: peerInfo?.variant, peer_release: peerInfo?.release, peer_build: peerInfo?.build,
    peer_system_info: peerInfo?.system_info, ours_model: ourInfo?.weights, ours_kv: ourInfo?.kv_format,
    ours_rss_peak_bytes: ourInfo?.rss_peak_bytes, ours_decode_bytes_per_token: decodeBytes, threads: a.threads});
}

console.log(`| model | test | splash tok/s | llama.cpp tok/s | ratio | load avg (1 min) |`);
console.log(`| --- | --- | ---: | ---: | ---: | --- |`);
for (const r of results) {
  for (const t of r.tests) {
    console.log(`| ${basename(r.model)} | ${t.test} | ${t.ours.toFixed(1)} | ${t.peer.toFixed(1)} | ${(t.ours / t.peer).toFixed(2)}x | ${r.load_min.toFixed(2)}-${r.load_max.toFixed(2)} |`);
  }
}
console.log("");
for (const r of results) {
  console.log(`${basename(r.model)}: ${r.threads} threads; splash KV ${r.ours_kv}; llama.cpp ${r.peer_release} (${r.peer_build}), ` +
    `CPU variant libggml-cpu-${r.peer_variant}.so, KV f16 + flash attention`);
}
if (results[0]?.peer_system_info) console.log(`llama.cpp system info: ${results[0].peer_system_info.trim()}`);
if (a.json) writeFileSync(a.json, JSON.stringify(results, null, 2));
