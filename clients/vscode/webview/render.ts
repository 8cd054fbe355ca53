/**
 * Markdown of model text to inert HTML: markdown-it with raw HTML off, images off (the CSP blocks
 * them anyway), and links only to http(s) and mailto (no `javascript:`, `data:`, `file:`, `vscode:`,
 * `command:` links).
 *
 * Must not: let any HTML, script, event handler or dangerous URL of model text through.
 */

import MarkdownIt from "markdown-it";

const SAFE_LINK = /^(https?:|mailto:)/i;

/** True for a link target the panel may offer to open (checked again by the host). */
export function isSafeLink(url: string): boolean {
  // Browsers ignore control characters and whitespace inside schemes: strip them before checking.
  const compact = url.replace(/[\u0000-\u0020\u007f-\u009f]/g, "");
  return SAFE_LINK.test(compact);
}

const md = new MarkdownIt({ html: false, linkify: false, typographer: false, breaks: false });
md.disable(["image"]);
md.validateLink = isSafeLink;

const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx]!.attrSet("rel", "noopener noreferrer");
  return defaultLinkOpen(tokens, idx, options, env, self);
};

/** Lines of a fenced code block one `<pre>` holds at most: a longer block is drawn as several, one after
 * the other. Chromium paints an inline box that runs over many lines (the `<code>` of a `<pre>`) at a cost
 * that grows with the square of its lines: one 30,000-line block kept the window frozen for minutes
 * (newcomer 6 finding 8). */
export const CODE_PART_LINES = 200;

/** `content` (a code block's text) in parts of at most `lines` whole lines, in order. */
export function codeParts(content: string, lines = CODE_PART_LINES): string[] {
  const parts: string[] = [];
  let from = 0;
  let count = 0;
  for (let nl = content.indexOf("\n"); nl >= 0; nl = content.indexOf("\n", nl + 1)) {
    if (++count < lines) continue;
    parts.push(content.slice(from, nl + 1));
    from = nl + 1;
    count = 0;
  }
  if (from < content.length || parts.length === 0) parts.push(content.slice(from));
  return parts;
}

const defaultFence = md.renderer.rules.fence!;
md.renderer.rules.fence = (tokens, idx, options, env, self) => {
  const token = tokens[idx]!;
  const parts = codeParts(token.content);
  if (parts.length === 1) return defaultFence(tokens, idx, options, env, self);
  const whole = token.content;
  try {
    return parts
      .map((content, i) => {
        token.content = content; // escaped by the default renderer, as the whole block would be
        const cls = `code-part${i > 0 ? " code-next" : ""}${i < parts.length - 1 ? " code-more" : ""}`;
        return defaultFence(tokens, idx, options, env, self).replace(/^<pre>/, `<pre class="${cls}">`);
      })
      .join("");
  } finally {
    token.content = whole;
  }
};

/** HTML of `markdown` (untrusted model text). */
export function renderMarkdown(markdown: string): string {
  return md.render(markdown);
}
