// Renders every case of cases.json with the reference renderer (@huggingface/jinja) and writes
// expected.json next to it. With --check, renders again and fails (exit 1) if expected.json is
// not current; exits 77 (ctest "skipped") when the node packages are not installed.
//
// Usage: node tests/template/make_expected.mjs [--check]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const jinjaPath = path.join(root, "tools/node/node_modules/@huggingface/jinja/dist/index.js");
if (!fs.existsSync(jinjaPath)) {
  console.log(`skipped: ${jinjaPath} is missing (run npm ci in tools/node)`);
  process.exit(77);
}
const { Template } = await import(pathToFileURL(jinjaPath).href);

const { cases } = JSON.parse(fs.readFileSync(path.join(here, "cases.json"), "utf8"));
const results = [];
for (const c of cases) {
  const source = typeof c.template === "string"
    ? fs.readFileSync(path.join(here, "templates", `${c.template}.jinja`), "utf8")
    : c.template.inline;
  try {
    results.push({ name: c.name, output: new Template(source).render(c.context) });
  } catch (e) {
    results.push({ name: c.name, error: String(e.message ?? e) });
  }
}
const text = JSON.stringify({ generator: "@huggingface/jinja", results }, null, 1) + "\n";
const outPath = path.join(here, "expected.json");
if (process.argv.includes("--check")) {
  const stored = fs.existsSync(outPath) ? fs.readFileSync(outPath, "utf8") : "";
  if (stored !== text) {
    console.error("tests/template/expected.json is stale: re-run node tests/template/make_expected.mjs");
    process.exit(1);
  }
  console.log(`expected.json is current (${results.length} cases)`);
} else {
  fs.writeFileSync(outPath, text);
  console.log(`wrote ${outPath} (${results.length} cases, ${results.filter((r) => r.error).length} errors)`);
}
