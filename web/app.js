// Splash chat page: one conversation held in memory, sent to POST /v1/chat/completions on every
// turn and streamed back as SSE (fetch + ReadableStream, so Stop can abort it; the server cancels
// the request when the connection closes). Model text reaches the DOM only through textContent or
// through render_markdown, which escapes it first.
// A model without a chat template (a base model, the demo's stories15M; /v1/models says so with
// "chat_template": false) gets continuation mode: each message is a text the model continues,
// streamed from POST /v1/completions, with the same controls; the page says which mode it is in.
import { render_markdown } from './markdown.js';

const kKeyStorage = 'splash.api_key';
const $ = (id) => document.getElementById(id);

const state = {
  messages: [],        // OpenAI chat messages of this conversation (without the system prompt)
  model: null,         // id from GET /v1/models
  mode: 'chat',        // 'chat', or 'continue' for a model without a chat template
  context: 0,          // max_model_len from GET /v1/models: the prompt plus the answer fit in it
  controller: null,    // AbortController of the request in flight
  retry_after_key: false,  // the last turn failed with 401: saving a key re-sends it
  retry_text: null,    // ... and in continuation mode, the text it was to continue
  conversation: 0,     // bumped by New chat, so an answer aborted by it is not kept
};

// --- server access -----------------------------------------------------------------------------

function api_key() {
  return localStorage.getItem(kKeyStorage) || '';
}

function request_headers(json) {
  const headers = {};
  if (json) headers['Content-Type'] = 'application/json';
  const key = api_key();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

// The message of an OpenAI-shaped error body ({"error": {"message": ...}}), else the status line.
async function error_message(response) {
  const text = await response.text().catch(() => '');
  try {
    const body = JSON.parse(text);
    if (body && body.error) return typeof body.error === 'string' ? body.error : body.error.message || text;
  } catch {
    // not JSON: fall through
  }
  return `HTTP ${response.status}${response.statusText ? ' ' + response.statusText : ''}${text ? ': ' + text.slice(0, 200) : ''}`;
}

// Yields the data field of each SSE event ("data: ..." lines joined by newlines).
async function* sse_data(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) yield data;
    }
  }
}

async function load_model() {
  const label = $('model-name');
  try {
    const response = await fetch('v1/models', { headers: request_headers(false) });
    if (response.status === 401) {
      label.textContent = 'API key needed';
      ask_for_key(await error_message(response));
      return;
    }
    if (!response.ok) {
      label.textContent = `models: ${await error_message(response)}`;
      return;
    }
    const body = await response.json();
    const entry = body.data && body.data.length ? body.data[0] : null;
    state.model = entry ? entry.id : null;
    state.context = entry && entry.max_model_len > 0 ? entry.max_model_len : 0;
    label.textContent = state.model || 'no model';
    set_mode(entry && entry.chat_template === false ? 'continue' : 'chat');
  } catch (e) {
    label.textContent = `server unreachable (${e.message})`;
  }
}

// The page's mode, from the server's answer (never from an error): the notice says which and why.
function set_mode(mode) {
  state.mode = mode;
  const continuing = mode === 'continue';
  const notice = $('mode-notice');
  notice.hidden = !continuing;
  notice.textContent = continuing
    ? `Continuation mode: ${state.model || 'this model'} has no chat template, so Splash continues the text you ` +
      'type (/v1/completions) instead of answering it.'
    : '';
  $('empty-hint').textContent = continuing
    ? 'Type the beginning of a text (e.g. "Once upon a time"); Enter continues it, Shift+Enter adds a line.'
    : 'Ask anything. Enter sends, Shift+Enter adds a line.';
  $('prompt').placeholder = continuing ? 'Text to continue' : 'Message';
  $('system-prompt-row').hidden = continuing;
}

// --- views -------------------------------------------------------------------------------------

function element(tag, props = {}, children = []) {
  const el = document.createElement(tag);
  Object.assign(el, props);
  for (const c of children) el.append(c);
  return el;
}

function scroll_to_end_if_following(log, following) {
  if (following) log.scrollTop = log.scrollHeight;
}

function is_following(log) {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
}

function add_user_view(text) {
  $('empty-hint').hidden = true;
  const log = $('conversation');
  const article = element('article', { className: 'message user' }, [
    element('div', { className: 'who', textContent: 'You' }),
    element('div', { className: 'body', textContent: text }),
  ]);
  article.setAttribute('aria-label', 'Your message');
  log.append(article);
  log.scrollTop = log.scrollHeight;
}

// One assistant answer: reasoning (collapsed), markdown body, tool calls, prefill progress, stats
// and an inline error. Re-rendering is batched to one per animation frame.
class AnswerView {
  constructor() {
    $('empty-hint').hidden = true;
    this.log = $('conversation');
    this.reasoning = element('details', { className: 'reasoning', hidden: true }, [
      element('summary', { textContent: 'Reasoning' }),
      element('div', { className: 'text' }),
    ]);
    this.body = element('div', { className: 'body' });
    this.tools = element('div', { className: 'tool-calls' });
    this.progress_bar = element('progress', { max: 1, value: 0 });
    this.progress_bar.setAttribute('aria-label', 'Prompt processing');
    this.progress_text = element('span');
    this.progress = element('div', { className: 'progress', hidden: true }, [this.progress_bar, ' ', this.progress_text]);
    this.stats = element('div', { className: 'stats', textContent: 'waiting…' });
    this.stats.setAttribute('aria-label', 'Answer statistics');
    this.error = element('div', { className: 'error', hidden: true });
    this.error.setAttribute('role', 'alert');
    this.article = element('article', { className: 'message assistant' }, [
      element('div', { className: 'who', textContent: state.model || 'Assistant' }),
      this.reasoning, this.body, this.tools, this.progress, this.stats, this.error,
    ]);
    this.article.setAttribute('aria-label', 'Assistant message');
    this.article.setAttribute('aria-busy', 'true');
    this.log.append(this.article);
    this.log.scrollTop = this.log.scrollHeight;
    this.frame = 0;
    this.data = { content: '', reasoning: '', tool_calls: [] };
  }

  show_progress(p) {
    if (!p || !(p.total > 0)) return;
    this.progress.hidden = false;
    this.progress_bar.max = p.total;
    this.progress_bar.value = Math.min(p.processed, p.total);
    const cached = p.cache > 0 ? `, ${p.cache} cached` : '';
    this.progress_text.textContent = `prompt ${p.processed} / ${p.total} tokens${cached}`;
  }

  update(data) {
    this.data = data;
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  render() {
    this.frame = 0;
    const following = is_following(this.log);
    const { content, reasoning, tool_calls } = this.data;
    if (content || reasoning || tool_calls.length) this.progress.hidden = true;
    if (reasoning) {
      this.reasoning.hidden = false;
      this.reasoning.querySelector('.text').textContent = reasoning;
      this.reasoning.querySelector('summary').textContent = content ? 'Reasoning' : 'Thinking…';
    }
    this.body.innerHTML = render_markdown(content);
    this.tools.replaceChildren(
      ...tool_calls.map((c) =>
        element('div', { className: 'tool-call', textContent: `${c.name}(${c.arguments})` })),
    );
    scroll_to_end_if_following(this.log, following);
  }

  show_error(message) {
    this.error.hidden = false;
    this.error.textContent = message;
  }

  finish(stats_text) {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.render();
    this.progress.hidden = true;
    this.stats.textContent = stats_text;
    this.article.setAttribute('aria-busy', 'false');
  }
}

// "TTFT 120 ms · 41.3 tok/s · 57 tokens · 12 of 40 prompt tokens cached". Server timings (spec 2.6)
// when the stream got that far; the page's own clock for a stopped answer.
function stats_text(r) {
  const parts = [];
  const ttft = r.timings && Number.isFinite(r.timings.prompt_ms) ? r.timings.prompt_ms : r.client_ttft_ms;
  if (ttft != null) parts.push(`TTFT ${Math.round(ttft)} ms`);
  let tps = r.timings && Number.isFinite(r.timings.predicted_per_second) ? r.timings.predicted_per_second : null;
  const completion = r.usage ? r.usage.completion_tokens : r.timings ? r.timings.predicted_n : r.pieces;
  if (tps == null && r.client_decode_ms > 0 && r.pieces > 1) tps = ((r.pieces - 1) * 1000) / r.client_decode_ms;
  if (tps != null) parts.push(`${tps.toFixed(1)} tok/s`);
  if (completion != null) parts.push(`${completion} tokens`);
  const cached = r.usage && r.usage.prompt_tokens_details ? r.usage.prompt_tokens_details.cached_tokens
                : r.timings ? r.timings.cache_n : null;
  const prompt = r.usage ? r.usage.prompt_tokens : r.timings ? r.timings.prompt_n + (r.timings.cache_n || 0) : null;
  if (cached != null) parts.push(prompt != null ? `${cached} of ${prompt} prompt tokens cached` : `${cached} cached`);
  if (r.stopped) parts.push('stopped');
  else if (r.finish && r.finish !== 'stop') parts.push(`finish: ${r.finish}`);
  return parts.join(' · ');
}

// --- one turn ----------------------------------------------------------------------------------

// Continuation mode: the typed text is the prompt. Without a Max tokens setting the page asks for up
// to 256 tokens, fewer when the prompt leaves less room in the context (the demo's is 256 tokens; the
// prompt is counted with POST /tokenize). OpenAI's completions default, 16 tokens, reads as nothing.
async function continuation_max_tokens(text, signal) {
  const set = parseInt($('max-tokens').value, 10);
  if (set > 0) return set;
  let room = state.context > 0 ? Math.floor(state.context / 2) : 256;
  try {
    const response = await fetch('tokenize', {
      method: 'POST', headers: request_headers(true), body: JSON.stringify({ content: text, add_special: true }), signal,
    });
    if (response.ok && state.context > 0) room = state.context - (await response.json()).tokens.length;
  } catch (e) {
    if (e.name === 'AbortError') throw e;
  }
  return Math.max(1, Math.min(256, room));
}

function completion_body(text, max_tokens) {
  const body = { prompt: text, stream: true, stream_options: { include_usage: true }, return_progress: true };
  if (state.model) body.model = state.model;
  body.max_tokens = max_tokens;
  const temperature = parseFloat($('temperature').value);
  if (Number.isFinite(temperature)) body.temperature = temperature;
  return body;
}

function request_body() {
  const messages = [];
  const system = $('system-prompt').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...state.messages);
  const body = {
    messages,
    stream: true,
    stream_options: { include_usage: true },
    return_progress: true,
  };
  if (state.model) body.model = state.model;
  const max_tokens = parseInt($('max-tokens').value, 10);
  if (max_tokens > 0) body.max_tokens = max_tokens;
  const temperature = parseFloat($('temperature').value);
  if (Number.isFinite(temperature)) body.temperature = temperature;
  return body;
}

function merge_tool_call(calls, delta) {
  const i = Number.isInteger(delta.index) ? delta.index : calls.length;
  if (!calls[i]) calls[i] = { id: '', name: '', arguments: '' };
  if (delta.id) calls[i].id = delta.id;
  if (delta.function) {
    if (delta.function.name) calls[i].name += delta.function.name;
    if (delta.function.arguments) calls[i].arguments += delta.function.arguments;
  }
}

// One answer: a chat turn over the conversation, or (continuation mode, `continue_text` set) the
// continuation of that text.
async function run_turn(continue_text = null) {
  state.retry_after_key = false;
  const conversation = state.conversation;
  const view = new AnswerView();
  const controller = new AbortController();
  state.controller = controller;
  set_busy(true);
  const data = { content: '', reasoning: '', tool_calls: [] };
  const result = { pieces: 0, stopped: false, finish: null, usage: null, timings: null, done: false, failed: false };
  const started = performance.now();
  let first_at = null;
  try {
    const continuing = continue_text !== null;
    const body = continuing
      ? completion_body(continue_text, await continuation_max_tokens(continue_text, controller.signal))
      : request_body();
    const response = await fetch(continuing ? 'v1/completions' : 'v1/chat/completions', {
      method: 'POST',
      headers: request_headers(true),
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) {
      const message = await error_message(response);
      view.show_error(message);
      if (response.status === 401) {
        state.retry_after_key = true;
        state.retry_text = continue_text;
        ask_for_key(message);
      }
      return;
    }
    for await (const event of sse_data(response)) {
      if (event === '[DONE]') {
        result.done = true;
        break;
      }
      let chunk;
      try {
        chunk = JSON.parse(event);
      } catch {
        continue;  // a keep-alive or something this page does not know
      }
      if (chunk.error) {
        result.failed = true;
        view.show_error(chunk.error.message || JSON.stringify(chunk.error));
        continue;
      }
      if (chunk.prompt_progress) view.show_progress(chunk.prompt_progress);
      if (chunk.timings) result.timings = chunk.timings;
      if (chunk.usage) result.usage = chunk.usage;
      for (const choice of chunk.choices || []) {
        // A completions chunk carries its piece in choice.text.
        const delta = choice.delta || (typeof choice.text === 'string' ? { content: choice.text } : {});
        const text = (delta.content || '') + (delta.reasoning_content || '');
        if (delta.content) data.content += delta.content;
        if (delta.reasoning_content) data.reasoning += delta.reasoning_content;
        for (const call of delta.tool_calls || []) merge_tool_call(data.tool_calls, call);
        if (text || delta.tool_calls) {
          result.pieces++;
          if (first_at == null) first_at = performance.now();
        }
        if (choice.finish_reason) result.finish = choice.finish_reason;
      }
      view.update(data);
    }
    if (!result.done && !result.failed) view.show_error('the server closed the stream before the answer was complete');
  } catch (e) {
    if (e.name === 'AbortError') result.stopped = true;
    else view.show_error(`connection failed: ${e.message}`);
  } finally {
    if (state.controller === controller) state.controller = null;
    set_busy(state.controller !== null);
    if (first_at != null) {
      result.client_ttft_ms = first_at - started;
      result.client_decode_ms = performance.now() - first_at;
    }
    view.update(data);
    view.finish(stats_text(result));
    if (continue_text === null && conversation === state.conversation && (data.content || data.tool_calls.length)) {
      const message = { role: 'assistant', content: data.content };
      if (data.tool_calls.length) {
        message.tool_calls = data.tool_calls.map((c, i) => ({
          id: c.id || `call_${i}`, type: 'function', function: { name: c.name, arguments: c.arguments },
        }));
      }
      state.messages.push(message);
    }
  }
}

// --- controls ----------------------------------------------------------------------------------

function set_busy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
}

function show_settings(show) {
  $('settings').hidden = !show;
  $('settings-toggle').setAttribute('aria-expanded', String(show));
}

function ask_for_key(message) {
  show_settings(true);
  const notice = $('key-notice');
  notice.hidden = false;
  notice.textContent = `This server needs an API key${message ? ` (${message})` : ''}. Enter it to continue.`;
  $('api-key').focus();
}

function send() {
  const prompt = $('prompt');
  const text = prompt.value;
  if (!text.trim() || state.controller) return;
  prompt.value = '';
  add_user_view(text);
  if (state.mode === 'continue') {
    run_turn(text);
    return;
  }
  state.messages.push({ role: 'user', content: text });
  run_turn();
}

function new_chat() {
  if (state.controller) state.controller.abort();
  state.conversation++;
  state.messages = [];
  state.retry_after_key = false;
  const log = $('conversation');
  log.querySelectorAll('article').forEach((a) => a.remove());
  $('empty-hint').hidden = false;
  $('prompt').focus();
}

async function copy_text(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain http on a LAN address is not a secure context: the old selection-based copy still works.
  const area = element('textarea', { value: text });
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

function init() {
  $('api-key').value = api_key();
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('stop').addEventListener('click', () => {
    if (state.controller) state.controller.abort();
  });
  $('new-chat').addEventListener('click', new_chat);
  $('settings-toggle').addEventListener('click', () => show_settings($('settings').hidden));
  $('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const key = $('api-key').value.trim();
    if (key) localStorage.setItem(kKeyStorage, key);
    else localStorage.removeItem(kKeyStorage);
    $('key-notice').hidden = true;
    load_model().then(() => {
      if (!state.retry_after_key || state.controller) return;
      if (state.retry_text != null) run_turn(state.retry_text);
      else if (state.messages.length) run_turn();
    });
  });
  $('conversation').addEventListener('click', async (e) => {
    const button = e.target.closest('button.copy');
    if (!button) return;
    const code = button.parentElement.querySelector('pre code');
    try {
      await copy_text(code ? code.textContent : '');
      button.textContent = 'Copied';
    } catch {
      button.textContent = 'Copy failed';
    }
    setTimeout(() => (button.textContent = 'Copy'), 1500);
  });
  load_model();
  $('prompt').focus();
}

init();
