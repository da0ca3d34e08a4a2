// The chat page's markdown renderer (web/markdown.js), run in node: structure of the supported
// syntax, and that model text can never inject markup (it is escaped before any tag is added).
import assert from 'node:assert/strict';

import { run, test } from './lib/harness.mjs';
import { escape_html, render_markdown } from '../../web/markdown.js';

// Every tag the renderer may emit; anything else in the output came from the input.
const kAllowedTags = new Set(['p', 'br', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'strong', 'em',
  'code', 'pre', 'div', 'button', 'hr']);

function tags_of(html) {
  return [...html.matchAll(/<\/?([a-zA-Z0-9]+)/g)].map((m) => m[1].toLowerCase());
}

test('escape_html escapes the five HTML specials', () => {
  assert.equal(escape_html(`<a href="x" title='y'>&amp;</a>`),
    '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;');
});

test('headings, paragraphs and line breaks', () => {
  assert.equal(render_markdown('# Title\n## Sub ##\nline one\nline two\n\nnext'),
    '<h1>Title</h1>\n<h2>Sub</h2>\n<p>line one<br>line two</p>\n<p>next</p>');
  assert.equal(render_markdown('####### seven'), '<p>####### seven</p>');
  assert.equal(render_markdown('#nospace'), '<p>#nospace</p>');
});

test('bold, italic and inline code; markers inside code stay literal', () => {
  assert.equal(render_markdown('**bold** and *it* and __b2__ and _i2_'),
    '<p><strong>bold</strong> and <em>it</em> and <strong>b2</strong> and <em>i2</em></p>');
  assert.equal(render_markdown('use `a*b*c` and ``x ` y``'), '<p>use <code>a*b*c</code> and <code>x ` y</code></p>');
  assert.equal(render_markdown('snake_case_name and 2*3*4'), '<p>snake_case_name and 2*3*4</p>');
  assert.equal(render_markdown('a ** b ** c'), '<p>a ** b ** c</p>');
});

test('bullet and ordered lists, continuation lines', () => {
  assert.equal(render_markdown('- one\n* two\n  more\n+ three'),
    '<ul><li>one</li><li>two more</li><li>three</li></ul>');
  assert.equal(render_markdown('3. c\n4) d\n\ntext'), '<ol start="3"><li>c</li><li>d</li></ol>\n<p>text</p>');
  assert.equal(render_markdown('- a\n1. b'), '<ul><li>a</li></ul>\n<ol><li>b</li></ol>');
  assert.equal(render_markdown('- **x** `y`'), '<ul><li><strong>x</strong> <code>y</code></li></ul>');
});

test('fenced code blocks keep their text verbatim and get a copy button', () => {
  const html = render_markdown('before\n```python\nif a < b and **c**:\n    print("hi")\n```\nafter');
  assert.equal(html,
    '<p>before</p>\n<div class="code-block"><button type="button" class="copy" aria-label="Copy code">Copy</button>' +
    '<pre><code class="language-python">if a &lt; b and **c**:\n    print(&quot;hi&quot;)</code></pre></div>\n<p>after</p>');
  // ~~~ fences, and a longer closing fence.
  assert.match(render_markdown('~~~\nx\n~~~~'), /<code>x<\/code>/);
  // A ``` line inside a ~~~ block does not close it.
  assert.match(render_markdown('~~~\n```\n~~~'), /<code>```<\/code>/);
});

test('an unclosed fence (still streaming) renders as code to the end', () => {
  const html = render_markdown('text\n```js\nlet x = 1;\n# not a heading');
  assert.match(html, /<code class="language-js">let x = 1;\n# not a heading<\/code><\/pre><\/div>$/);
  assert.doesNotMatch(html, /<h1>/);
});

test('model text cannot inject markup', () => {
  const attacks = [
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '**<img src=x onerror=alert(1)>**',
    '# <iframe src="javascript:alert(1)">',
    '- <svg onload=alert(1)>',
    '`</code><script>x</script>`',
    '```"><script>x</script>\ncode\n```',
    '```\n</code></pre><script>x</script>\n```',
    '*<a href="javascript:x">y</a>*',
    'a\u0000b<b>',
  ];
  for (const text of attacks) {
    const html = render_markdown(text);
    for (const tag of tags_of(html)) assert.ok(kAllowedTags.has(tag), `tag <${tag}> from ${JSON.stringify(text)}: ${html}`);
    assert.doesNotMatch(html, /<(script|img|iframe|svg|a)\b/i, html);
    // Attributes only in the renderer's own tags: class, type, aria-label, start.
    for (const m of html.matchAll(/<[a-z0-9]+((?:\s+[a-z-]+="[^"]*")*)\s*>/g)) {
      for (const attr of m[1].matchAll(/([a-z-]+)=/g)) {
        assert.ok(['class', 'type', 'aria-label', 'start'].includes(attr[1]), `attribute ${attr[1]} in ${html}`);
      }
    }
  }
  // Nothing else between tags can be an unescaped '<'.
  assert.equal(render_markdown('x < y > z & w'), '<p>x &lt; y &gt; z &amp; w</p>');
});

test('the output is balanced for arbitrary marker soup', () => {
  const pieces = ['*', '**', '_', '__', '`', '```', '#', '- ', '1. ', '\n', '\n\n', 'a', ' ', '<', '~~~'];
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  for (let n = 0; n < 2000; n++) {
    let text = '';
    const len = 1 + Math.floor(rand() * 25);
    for (let i = 0; i < len; i++) text += pieces[Math.floor(rand() * pieces.length)];
    const html = render_markdown(text);
    const stack = [];
    for (const m of html.matchAll(/<(\/?)([a-z0-9]+)[^>]*>/g)) {
      const [, close, tag] = m;
      if (tag === 'br' || tag === 'hr') continue;
      if (!close) stack.push(tag);
      else assert.equal(stack.pop(), tag, `unbalanced </${tag}> for ${JSON.stringify(text)}: ${html}`);
    }
    assert.equal(stack.length, 0, `unclosed tags for ${JSON.stringify(text)}: ${html}`);
  }
});

await run();
