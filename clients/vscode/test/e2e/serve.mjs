#!/usr/bin/env node
// scripts/try-vscode.sh's driver: starts code-server on 127.0.0.1 with the extension installed from
// its .vsix on a workspace and prints the URL; runs until Ctrl-C (then kills code-server's process
// group). With "check": true in the config it instead opens the workbench in Chromium, checks that
// the extension activated (its panel loads) and that the panel answers a prompt, and exits 0/1.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { focusPanel, openWorkbench, panel, startChromium, startCodeServer, stopAll } from "./workbench.mjs";
import { readFileSync } from "node:fs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const tmp = mkdtempSync(join(config.tmp, "try-vscode-"));
const cs = await startCodeServer({ node: config.node, entry: config.codeServerEntry, vsix: config.vsix, tmp, workspace: config.workspace, settings: config.settings, env: config.env ?? {} });

if (!config.check) {
  console.log(`\n  VS Code (code-server) with the agent-server extension: ${cs.url}\n  Open it in a browser; the Agent panel is in the activity bar. Ctrl-C stops it.\n`);
  const stop = async () => {
    await stopAll(cs.child);
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  cs.child.on("exit", () => process.exit(1));
} else {
  let ch;
  let ok = false;
  try {
    ch = await startChromium({ executable: config.chromium, tmp });
    await openWorkbench(ch.page, cs.url);
    await focusPanel(ch.page); // the webview loads only when the extension activated and resolved it
    console.log("check: the extension activated and its panel loaded");
    const p = panel(ch.page);
    await p.locator("textarea.input").fill(config.prompt);
    await p.locator("button.send").click();
    await p.locator(".agent", { hasText: config.answerContains }).first().waitFor({ timeout: 120_000 });
    console.log(`check: the panel answered ("${config.answerContains}")`);
    if ((await p.locator('#app[data-state="busy"]').count()) > 0) await p.locator("button.stop").click();
    await p.locator('#app[data-state="idle"]').waitFor({ timeout: 60_000 });
    if (config.artifacts) await ch.page.screenshot({ path: join(config.artifacts, "try-vscode-check.png") });
    ok = true;
  } catch (err) {
    console.error(`check failed: ${err?.stack ?? err}\n--- code-server log ---\n${cs.log.join("").slice(-3000)}`);
    if (ch && config.artifacts) await ch.page.screenshot({ path: join(config.artifacts, "try-vscode-check-failure.png") }).catch(() => {});
  } finally {
    await ch?.browser.close().catch(() => {});
    const gone = await stopAll(ch?.child, cs.child);
    if (!gone) console.error("check: a process group survived");
    process.exit(ok && gone ? 0 : 1);
  }
}
