// The panel's icons are VS Code's codicons (issue 30 item 10: "plain HTML widgets", ✓ ✗ ▾ × 🖼 ○ ▸ as
// icons): every icon the webview names exists in the packaged @vscode/codicons, no character or emoji
// stands in for one, and the build copies the font and its CSS where the webview loads them from.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const main = readFileSync(root("webview/main.ts"), "utf8");
const css = readFileSync(root("node_modules/@vscode/codicons/dist/codicon.css"), "utf8");

/** The icon names main.ts uses: icon("…") arguments, the *_ICONS tables' values, a button's last argument. */
function iconNames(): string[] {
  const names = new Set<string>();
  // in icon(…): the first argument when a literal, else the branches of a conditional (`? "a" : "b"`)
  for (const m of main.matchAll(/icon\(([^;\n]*)/g)) {
    for (const n of m[1]!.split(/\)\s*[,;]/)[0]!.matchAll(/(?:^|\?\s*|:\s*)"([a-z][a-z-]*)(?:~spin)?"/g)) names.add(n[1]!);
  }
  for (const m of main.matchAll(/const \w+_ICONS[^=]*= (\{[^}]*\})/g)) for (const v of [...m[1]!.matchAll(/:\s*"([^"]+)"/g)]) names.add(v[1]!.split("~")[0]!);
  for (const line of main.split("\n")) {
    if (!line.includes("button(")) continue;
    const last = /, "([a-z][a-z-]*)"\)[,;]?\s*$/.exec(line);
    if (last) names.add(last[1]!);
  }
  return [...names].sort();
}

describe("the panel's icons (test_the_panel_drew_icons_as_characters_and_emoji_not_codicons)", () => {
  it("are codicons the packaged @vscode/codicons has", () => {
    const names = iconNames();
    expect(names.length).toBeGreaterThan(25);
    const missing = names.filter((n) => !css.includes(`.codicon-${n}:before`) && n !== "spin");
    expect(missing).toEqual([]);
  });

  it("no character or emoji stands in for an icon", () => {
    const literals = [...main.matchAll(/(["'`])((?:\\.|(?!\1).)*)\1/g)].map((m) => m[2]!);
    const glyphs = literals.filter((t) => /[✓✔✗✘×▾▸▶○●◦⏹⟳↻🖼📎🗑⚠ℹ]/u.test(t));
    expect(glyphs).toEqual([]);
  });

  it("the build copies the font and its CSS into dist/codicons, which the .vsix carries", () => {
    const build = readFileSync(root("scripts/build.mjs"), "utf8");
    expect(build).toContain("node_modules/@vscode/codicons/dist/");
    const ignore = readFileSync(root(".vscodeignore"), "utf8").split("\n");
    expect(ignore).toEqual(expect.arrayContaining(["!dist/codicons/codicon.css", "!dist/codicons/codicon.ttf"]));
    const view = readFileSync(root("src/chatView.ts"), "utf8");
    expect(view).toMatch(/joinPath\(this\.extensionUri, "dist", "codicons", "codicon\.css"\)/);
    expect(view).toContain("`font-src ${webview.cspSource}`"); // the font from the extension's resource roots only
  });
});
