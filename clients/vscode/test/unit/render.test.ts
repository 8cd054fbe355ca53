import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CODE_PART_LINES, codeParts, isSafeLink, renderMarkdown } from "../../webview/render";

describe("the markdown renderer keeps model text inert", () => {
  it("escapes raw HTML: no element, no event handler", () => {
    const html = renderMarkdown('hi <img src=x onerror="alert(1)"> and <script>alert(2)</script>');
    expect(html).not.toMatch(/<img|<script/i);
    expect(html).toContain("&lt;img src=x onerror=");
    expect(html).toContain("&lt;script&gt;");
  });

  it("does not link javascript:, data:, vbscript: or file: URLs (also obfuscated)", () => {
    for (const url of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", "vbscript:x", "file:///etc/passwd", "command:workbench.action.quit"]) {
      const html = renderMarkdown(`[click](${url})`);
      expect(html, url).not.toMatch(/<a /);
    }
    expect(renderMarkdown("<javascript:alert(1)>")).not.toMatch(/<a /);
  });

  it("renders no images (the CSP blocks them too)", () => {
    expect(renderMarkdown("![x](https://example.com/a.png)")).not.toMatch(/<img/);
  });

  it("keeps ordinary markdown and https links", () => {
    const html = renderMarkdown("**bold** `code` [docs](https://example.com/a)");
    expect(html).toContain("<strong>bold</strong>");
    expect(html).toContain("<code>code</code>");
    expect(html).toContain('<a href="https://example.com/a" rel="noopener noreferrer">docs</a>');
    expect(isSafeLink("https://x")).toBe(true);
    expect(isSafeLink(" javascript:alert(1)")).toBe(false);
  });
});

describe("newcomer 6 finding 8: one long fenced code block froze the window", () => {
  const codeOf = (html: string) => [...html.matchAll(/<pre(?: class="([^"]*)")?><code class="language-python">([^]*?)<\/code><\/pre>/g)];
  const unescape = (s: string) => s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&amp;/g, "&");

  it("a 30,000-line code block was one <pre> whose <code> ran over all its lines (painted at a cost growing with their square): parts of at most CODE_PART_LINES lines", () => {
    const lines = Array.from({ length: 30_000 }, (_, n) => `def f${n}(x):  return x * ${n} + len('<b>${n}</b>')  # c\n`);
    const html = renderMarkdown(`Here:\n\n\`\`\`python\n${lines.join("")}\`\`\`\n\nend of code.\n`);
    const parts = codeOf(html);
    // what one inline box (a <code>) lays out and paints: never more than CODE_PART_LINES lines
    expect(Math.max(...parts.map((m) => m[2]!.split("\n").length - 1))).toBe(CODE_PART_LINES);
    expect(parts.length).toBe(30_000 / CODE_PART_LINES);
    expect(html.match(/<pre/g)!.length).toBe(parts.length); // nothing else became a pre
    expect(unescape(parts.map((m) => m[2]!).join(""))).toBe(lines.join("")); // every line, in order, escaped
    expect(html).not.toContain("<b>");
    // they read as one block: the first has no gap below, the last none above, the middle ones neither
    expect(parts[0]![1]).toBe("code-part code-more");
    expect(parts[1]![1]).toBe("code-part code-next code-more");
    expect(parts.at(-1)![1]).toBe("code-part code-next");
    expect(html).toMatch(/^<p>Here:<\/p>\n<pre class="code-part code-more">/);
    expect(html).toMatch(/<\/code><\/pre>\n<p>end of code\.<\/p>\n$/);
    // and no <code> of a code block paints a background of its own (VS Code's default styles give code one)
    const css = readFileSync(fileURLToPath(new URL("../../media/webview.css", import.meta.url)), "utf8");
    expect(css).toMatch(/^\.agent pre code \{ background: none; padding: 0; border-radius: 0; \}$/m);
  });

  it("a code block of CODE_PART_LINES lines or fewer is rendered as markdown-it renders it; the parts cut only after a line's end", () => {
    expect(renderMarkdown("```js\na < b\n```\n")).toBe('<pre><code class="language-js">a &lt; b\n</code></pre>\n');
    expect(codeParts("a\nb\nc\nd\ne", 2)).toEqual(["a\nb\n", "c\nd\n", "e"]);
    expect(codeParts("a\nb\n", 2)).toEqual(["a\nb\n"]);
    expect(codeParts("", 2)).toEqual([""]);
  });
});
