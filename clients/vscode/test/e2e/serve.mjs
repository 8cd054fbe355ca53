#!/usr/bin/env node
// scripts/try-vscode.sh's driver: starts code-server on 127.0.0.1 with the extension installed from
// its .vsix on a workspace and prints the URL; runs until Ctrl-C (then kills code-server's process
// group; so does closing the terminal, SIGHUP). With "check": true in the config it instead opens the
// workbench in Chromium, checks that the extension activated (its panel loads), then drives the
// whole demo task as a user would — allows each shell command once, accepts the proposed fix — and
// passes only when the screen showed the permission question (its command), the diff of the fix
// (a diff editor) and the final answer, the turn ended with that answer (not cancelled, no error) and
// the fix is on disk; exits 0/1. A screenshot of each of those steps goes to the artifacts.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { focusPanel, openWorkbench, panel, startChromium, startCodeServer, stopAll } from "./workbench.mjs";

/** Drive one demo turn to its end: answer every permission card "Allow once", accept every pending
 * proposal, until the answer containing `finalContains` shows and the panel is idle. Throws on a
 * stop that is not end_turn, an error notice, or after `timeoutMs`. Returns what the screen showed
 * on the way: `permission` (the first question's title and command, as shown), `diff` (the diff
 * editor's tab title, while the first proposal waited). */
async function driveDemoTurn(page, p, { finalContains, timeoutMs, shot }) {
  const deadline = Date.now() + timeoutMs;
  const seen = { permission: null, diff: null };
  const final = p.locator(".agent", { hasText: finalContains });
  for (;;) {
    if (Date.now() > deadline) throw new Error(`no answer containing "${finalContains}" within ${timeoutMs / 1000} s`);
    const stopped = p.locator(".notice", { hasText: "Stopped:" });
    if ((await stopped.count()) > 0) throw new Error(`the turn ended early: ${await stopped.last().textContent()}`);
    const failed = p.locator(".notice.error");
    if ((await failed.count()) > 0) throw new Error(`the panel shows an error: ${await failed.last().textContent()}`);
    if ((await final.count()) > 0 && (await p.locator('#app[data-state="idle"]').count()) > 0) return seen;
    // A card may be drawn again (or the panel reloaded) while it is clicked: a short try, then look again.
    const allow = p.locator('.permission button[data-option-id="allow_once"]');
    if ((await allow.count()) > 0) {
      const card = p.locator(".permission", { has: p.locator('button[data-option-id="allow_once"]') }).first();
      if (!seen.permission && (await card.isVisible().catch(() => false))) {
        const title = await card.locator(".card-title").textContent({ timeout: 5000 }).catch(() => null);
        const command = await card.locator("pre.command").textContent({ timeout: 2000 }).catch(() => null);
        if (title) {
          seen.permission = { title, command };
          await shot("try-vscode-check-permission");
        }
      }
      await allow.first().click({ timeout: 5000 }).catch(() => {});
      continue;
    }
    const accept = p.locator('.proposal[data-outcome="pending"] button.accept-all');
    if ((await accept.count()) > 0) {
      if (!seen.diff) {
        // the proposal opens its diff editor in the workbench: seen before it is accepted
        const diff = page.locator(".editor-group-container.active .monaco-diff-editor").first();
        if (await diff.waitFor({ timeout: 15_000 }).then(() => true, () => false)) {
          const tab = await page.locator(".editor-group-container.active .tab.active").getAttribute("aria-label", { timeout: 5000 }).catch(() => null);
          seen.diff = tab ?? "a diff editor";
          await shot("try-vscode-check-diff");
        }
      }
      await accept.first().click({ timeout: 5000 }).catch(() => {});
      continue;
    }
    await page.waitForTimeout(250);
  }
}

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const tmp = mkdtempSync(join(config.tmp, "try-vscode-"));
// Serving: Ctrl-C, SIGTERM or SIGHUP (the terminal closed) stop code-server's process group — from
// the start, not once it is ready: a signal before its handler was installed killed this driver
// outright and left code-server (a process group of its own) running. try-vscode.sh stops whatever
// is left after this driver ended (it marks every process of the run).
let spawned; // code-server's main process, once spawned
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await stopAll(spawned); // SIGTERM, then SIGKILL to the whole group: its helpers too
  process.exit(0);
};
if (!config.check) for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, stop);
let cs;
try {
  cs = await startCodeServer({
    node: config.node, entry: config.codeServerEntry, vsix: config.vsix, tmp, workspace: config.workspace, settings: config.settings, env: config.env ?? {},
    onSpawn: (child) => {
      spawned = child;
      // code-server leads a process group of its own: try-vscode.sh stops it too if this driver dies first
      writeFileSync(join(config.tmp, "code-server.pgid"), String(child.pid));
    },
  });
} catch (err) {
  if (stopping) await new Promise(() => {}); // stopped while starting: stop() exits
  throw err;
}

if (!config.check) {
  console.log(`\n  VS Code (code-server) with the agent-server extension: ${cs.url}\n  Open it in a browser; the Agent panel is in the activity bar. Ctrl-C stops it.\n`);
  // code-server died by itself; while stopping, its main process exits first and this must not
  // end us before the group's slower helpers are gone
  cs.child.on("exit", () => { if (!stopping) process.exit(1); });
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
    if (config.finalContains) {
      const shot = async (name) => { if (config.artifacts) await ch.page.screenshot({ path: join(config.artifacts, `${name}.png`) }).catch(() => {}); };
      const seen = await driveDemoTurn(ch.page, p, { finalContains: config.finalContains, timeoutMs: 180_000, shot });
      const fixed = readFileSync(join(config.workspace, config.fixedFile), "utf8");
      if (!fixed.includes(config.fixedContains)) throw new Error(`${config.fixedFile} on disk lacks "${config.fixedContains}" after the turn`);
      console.log(`check: the demo task ran to its end ("${config.finalContains}"), the fix is on disk`);
      // what a user saw: the question (with its command), the diff, the final answer on screen
      if (!seen.permission) throw new Error("the screen never showed a permission question");
      console.log(`check: the screen showed the permission question "${seen.permission.title}"${seen.permission.command ? ` with its command ${JSON.stringify(seen.permission.command)}` : ""}`);
      if (!seen.diff) throw new Error("the screen never showed the diff of the proposed fix");
      console.log(`check: the screen showed the diff of the fix (${seen.diff})`);
      const answer = p.locator(".agent", { hasText: config.finalContains }).last();
      await answer.scrollIntoViewIfNeeded({ timeout: 10_000 });
      if (!(await answer.isVisible())) throw new Error("the final answer is not on screen");
      console.log(`check: the screen shows the final answer ("${config.finalContains}")`);
    } else {
      if ((await p.locator('#app[data-state="busy"]').count()) > 0) await p.locator("button.stop").click();
      await p.locator('#app[data-state="idle"]').waitFor({ timeout: 60_000 });
    }
    // the workspace is outside any Git work tree: VS Code's Git never asks about a parent folder's repository
    const parentRepo = ch.page.locator(".notification-toast, .notifications-center .notification-list-item", { hasText: "parent folders" });
    if ((await parentRepo.count()) > 0) throw new Error(`VS Code says: ${await parentRepo.first().textContent()}`);
    console.log("check: no \"git repository in the parent folders\" notification");
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
