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

/** HTML of `markdown` (untrusted model text). */
export function renderMarkdown(markdown: string): string {
  return md.render(markdown);
}
