// Reference ids for the Llama-2 form of tokenizer.json: Splash exports the llama2.c demo vocabulary
// (~/.cache/splash/demo/tokenizer.bin) as tokenizer.json with splash_export_tokenizer, and the
// independent pure-JS @huggingface/tokenizers encodes every string of strings.jsonl with it, one JSON
// object per line: {"text": <string>, "ids": [<int>...]} (no BOS; special tokens in the text parsed).
// test_tokenizer checks that Splash's SentencePiece encoder, run on tokenizer.bin itself, gives these ids.
// Usage (from the repository root, after building splash_export_tokenizer):
//   node tests/tokenizer/make_llama2_expected.mjs <dir with the exported tokenizer.json> > tests/tokenizer/llama2_expected.jsonl
//   node tests/tokenizer/make_llama2_expected.mjs <dir> --check   (ctest: fails if the stored file is stale;
//   exits 77 = skipped when node_modules or the exported files are missing)
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const hf = join(root, "tools", "node", "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
const check = process.argv.includes("--check");
const dir = process.argv.slice(2).find((a) => !a.startsWith("--"));
if (!existsSync(hf)) {
  console.error(`skipped: ${hf} is missing (run npm ci in tools/node)`);
  process.exit(77);
}
if (!dir || !existsSync(join(dir, "tokenizer.json"))) {
  console.error(`skipped: no exported tokenizer.json in '${dir ?? ""}' (is ~/.cache/splash/demo/tokenizer.bin present?)`);
  process.exit(77);
}
const { Tokenizer } = await import(pathToFileURL(hf).href);
const tokenizerJson = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tokenizerJson, tokenizerConfig);

const here = join(root, "tests", "tokenizer");
const lines = readFileSync(join(here, "strings.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.length > 0);
let out = "";
for (const line of lines) {
  const text = JSON.parse(line);
  const ids = Array.from(tok.encode(text, { add_special_tokens: false }).ids, Number);
  out += JSON.stringify({ text, ids }) + "\n";
}
if (check) {
  const stored = readFileSync(join(here, "llama2_expected.jsonl"), "utf8");
  if (stored !== out) {
    console.error("tests/tokenizer/llama2_expected.jsonl is stale: regenerate it with make_llama2_expected.mjs");
    process.exit(1);
  }
  console.log(`llama2_expected.jsonl matches @huggingface/tokenizers on ${lines.length} strings`);
} else {
  process.stdout.write(out);
}
