// Encodes strings with the pure-JS @huggingface/tokenizers and a model directory's tokenizer.json
// (independent of our C++ tokenizer), for check_test_models.py.
// Usage: node hf_encode.mjs MODEL_DIR STRINGS.json   -> JSON array of id arrays on stdout
// Exits 77 when node_modules is missing (the caller skips the comparison).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const hf = join(root, "tools", "node", "node_modules", "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
if (!existsSync(hf)) process.exit(77);
const { Tokenizer } = await import(pathToFileURL(hf).href);
const [dir, stringsPath] = process.argv.slice(2);
const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const tc = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tj, tc);
const strings = JSON.parse(readFileSync(stringsPath, "utf8"));
const out = strings.map((s) => Array.from(tok.encode(s, { add_special_tokens: false }).ids, Number));
process.stdout.write(JSON.stringify(out));
