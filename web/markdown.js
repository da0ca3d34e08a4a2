// A small markdown renderer for model answers: headings, lists, bold/italic, inline code and fenced
// code blocks. Model text is untrusted, so every piece of it is HTML-escaped before any markup is
// added; the only tags in the output are the ones written below. Pure functions (no DOM), so the
// node tests can check them directly.

export function escape_html(text) {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

// **bold** / __bold__ / *italic* / _italic_ in one regex, so matches never overlap, and the inside
// of each match is processed again: the tags always nest. Single markers must not touch a letter
// or digit outside (2*3*4, snake_case_name stay as they are).
const kEmphasis = new RegExp(
  [
    /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,
    /(?<![\w_])__(?=\S)([\s\S]*?\S)__(?![\w_])/.source,
    /(?<![\w*])\*(?=[^\s*])([\s\S]*?[^\s*])\*(?![\w*])/.source,
    /(?<![\w_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w_])/.source,
  ].join('|'),
  'g',
);

function emphasis(s) {
  return s.replace(kEmphasis, (_, b1, b2, i1, i2) =>
    b1 !== undefined || b2 !== undefined ? `<strong>${emphasis(b1 ?? b2)}</strong>` : `<em>${emphasis(i1 ?? i2)}</em>`);
}

// Inline spans of one line (already escaped). Code spans are cut out first so that `*` or `_`
// inside them stay literal; NUL marks their places (NUL was removed from the input).
function render_inline(escaped) {
  const codes = [];
  let s = escaped.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, _ticks, body) => {
    codes.push(`<code>${body}</code>`);
    return `\u0000${codes.length - 1}\u0000`;
  });
  s = emphasis(s);
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => codes[Number(i)]);
}

function code_block(lines, lang) {
  const cls = lang ? ` class="language-${escape_html(lang)}"` : '';
  return (
    '<div class="code-block"><button type="button" class="copy" aria-label="Copy code">Copy</button>' +
    `<pre><code${cls}>${escape_html(lines.join('\n'))}</code></pre></div>`
  );
}

const kFence = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const kHeading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const kBullet = /^ {0,3}[-*+]\s+(.*)$/;
const kOrdered = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
const kRule = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;

// Renders a whole answer; called again on every streamed delta, so an unclosed fence (the model is
// still writing the block) renders as a code block up to the end of the text.
export function render_markdown(text) {
  const lines = String(text).replace(/\u0000/g, '').replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let paragraph = [];
  let list = null;  // {tag: 'ul' | 'ol', start, items: [string]}

  const flush_paragraph = () => {
    if (paragraph.length) out.push(`<p>${paragraph.map((l) => render_inline(escape_html(l))).join('<br>')}</p>`);
    paragraph = [];
  };
  const flush_list = () => {
    if (!list) return;
    const start = list.tag === 'ol' && list.start !== 1 ? ` start="${list.start}"` : '';
    const items = list.items.map((i) => `<li>${render_inline(escape_html(i))}</li>`).join('');
    out.push(`<${list.tag}${start}>${items}</${list.tag}>`);
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = kFence.exec(line);
    if (fence) {
      flush_paragraph();
      flush_list();
      const marker = fence[1];
      const closes = (l) => {
        const m = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(l);
        return m !== null && m[1][0] === marker[0] && m[1].length >= marker.length;
      };
      const body = [];
      let j = i + 1;
      while (j < lines.length && !closes(lines[j])) body.push(lines[j++]);
      out.push(code_block(body, fence[2]));
      i = j;  // the closing fence (or the end of the text)
      continue;
    }
    if (line.trim() === '') {
      flush_paragraph();
      flush_list();
      continue;
    }
    const heading = kHeading.exec(line);
    if (heading) {
      flush_paragraph();
      flush_list();
      const level = heading[1].length;
      out.push(`<h${level}>${render_inline(escape_html(heading[2]))}</h${level}>`);
      continue;
    }
    if (kRule.test(line)) {
      flush_paragraph();
      flush_list();
      out.push('<hr>');
      continue;
    }
    const bullet = kBullet.exec(line);
    const ordered = bullet ? null : kOrdered.exec(line);
    if (bullet || ordered) {
      flush_paragraph();
      const tag = bullet ? 'ul' : 'ol';
      if (list && list.tag !== tag) flush_list();
      if (!list) list = { tag, start: ordered ? Number(ordered[1]) : 1, items: [] };
      list.items.push(bullet ? bullet[1] : ordered[2]);
      continue;
    }
    if (list && /^\s+\S/.test(line)) {
      // An indented line continues the current list item.
      list.items[list.items.length - 1] += ' ' + line.trim();
      continue;
    }
    flush_list();
    paragraph.push(line);
  }
  flush_paragraph();
  flush_list();
  return out.join('\n');
}
