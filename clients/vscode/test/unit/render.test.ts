import { describe, expect, it } from "vitest";
import { isSafeLink, renderMarkdown } from "../../webview/render";

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
