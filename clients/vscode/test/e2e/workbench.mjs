// Launching and driving a real VS Code (code-server) in a real Chromium for the end-to-end tests and
// scripts/try-vscode.sh: code-server and Chromium run as their own process groups with their own
// --user-data-dir, Chromium is driven through the DevTools protocol by playwright-core (system
// Chromium, no browser download), and both groups are killed at the end.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--window-size=1500,950",
];

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Waits until `re` matches the process's output; rejects on exit or timeout. */
function waitFor(child, stream, re, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`${what}: no ${re} within ${timeoutMs} ms; output:\n${seen.slice(-3000)}`)), timeoutMs);
    const onData = (chunk) => {
      seen += chunk.toString();
      const m = seen.match(re);
      if (m) {
        clearTimeout(timer);
        stream.off("data", onData);
        resolve(m);
      }
    };
    stream.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}) before it was ready; output:\n${seen.slice(-3000)}`));
    });
  });
}

export function killGroup(child, signal = "SIGKILL") {
  if (!child?.pid) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to the group, SIGKILL after 500 ms, then waits (up to 10 s) until the group is empty. */
async function stopGroup(child) {
  if (!child?.pid) return true;
  killGroup(child, "SIGTERM");
  await new Promise((r) => setTimeout(r, 500));
  killGroup(child, "SIGKILL");
  for (let i = 0; i < 100 && groupAlive(child.pid); i++) await new Promise((r) => setTimeout(r, 100));
  return !groupAlive(child.pid);
}

/** The extension's machine-scoped settings: in code-server (a remote window) only the Machine settings
 * hold them; a copy in the User settings is greyed out and has no effect (newcomer 3, finding 16). */
export const MACHINE_SCOPED = ["agentServer.path", "agentServer.args", "agentServer.baseUrl", "agentServer.model"];

/** User settings that keep the workbench quiet and deterministic for the scenarios (`extra` without
 * the machine-scoped settings, which go to the Machine settings). */
export function userSettings(extra) {
  const rest = Object.fromEntries(Object.entries(extra ?? {}).filter(([k]) => !MACHINE_SCOPED.includes(k)));
  return {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "security.workspace.trust.enabled": false,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "files.autoSave": "off",
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoIndent": "none",
    "editor.quickSuggestions": { other: false, comments: false, strings: false },
    "editor.suggestOnTriggerCharacters": false,
    "editor.acceptSuggestionOnEnter": "off",
    "editor.minimap.enabled": false,
    "diffEditor.codeLens": true,
    "diffEditor.renderSideBySide": true,
    "diffEditor.hideUnchangedRegions.enabled": false,
    "diffEditor.experimental.useTrueInlineView": false,
    "chat.commandCenter.enabled": false,
    "chat.disableAIFeatures": true,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    ...rest,
  };
}

/**
 * Installs the .vsix and starts code-server on 127.0.0.1 for `workspace`.
 * Returns {url, child, userDataDir}. `node` is Node 24's binary, `entry` code-server's out/node/entry.js;
 * `onSpawn(child)`, if given, is called as soon as code-server is spawned.
 */
export async function startCodeServer({ node, entry, vsix, tmp, workspace, settings, env, onSpawn }) {
  const userDataDir = join(tmp, "code-server-data");
  const extensionsDir = join(tmp, "code-server-extensions");
  mkdirSync(join(userDataDir, "User"), { recursive: true });
  writeFileSync(join(userDataDir, "User", "settings.json"), JSON.stringify(userSettings(settings), null, 1));
  // code-server's window is a remote one: a machine-scoped setting (agentServer.path, args, baseUrl,
  // model) is read from the remote machine's settings only, never from a workspace's.
  mkdirSync(join(userDataDir, "Machine"), { recursive: true });
  writeFileSync(join(userDataDir, "Machine", "settings.json"), JSON.stringify(settings ?? {}, null, 1));
  const common = ["--user-data-dir", userDataDir, "--extensions-dir", extensionsDir, "--config", join(tmp, "code-server.yaml")];
  writeFileSync(join(tmp, "code-server.yaml"), "auth: none\ncert: false\n");
  // The extension gallery points at a closed local port: code-server reaches nothing outside 127.0.0.1.
  const gallery = JSON.stringify({ serviceUrl: "http://127.0.0.1:9/gallery", itemUrl: "http://127.0.0.1:9/items" });
  const fullEnv = { ...process.env, ...env, EXTENSIONS_GALLERY: gallery, XDG_CONFIG_HOME: join(tmp, "xdg-config"), XDG_DATA_HOME: join(tmp, "xdg-data") };
  const install = spawnSync(node, [entry, ...common, "--install-extension", vsix, "--force"], { env: fullEnv, encoding: "utf8", timeout: 180_000 });
  if (install.status !== 0) throw new Error(`installing ${vsix} failed (${install.status}):\n${install.stdout}\n${install.stderr}`);
  const port = await freePort();
  const child = spawn(
    node,
    [entry, ...common, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override", "--ignore-last-opened", workspace],
    { env: fullEnv, detached: true, stdio: ["ignore", "pipe", "pipe"] },
  );
  onSpawn?.(child); // before it is ready: a caller stopped meanwhile can stop it
  const log = [];
  child.stdout.on("data", (d) => log.push(d.toString()));
  child.stderr.on("data", (d) => log.push(d.toString()));
  await waitFor(child, child.stdout, /HTTP server listening on/, 120_000, "code-server");
  return { url: `http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`, child, userDataDir, log };
}

/** Starts the system Chromium (own process group and --user-data-dir) and connects over CDP. */
export async function startChromium({ executable, tmp }) {
  const userDataDir = join(tmp, "chromium-data");
  mkdirSync(userDataDir, { recursive: true });
  const child = spawn(executable, [...CHROMIUM_FLAGS, `--user-data-dir=${userDataDir}`, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"], {
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const [, ws] = await waitFor(child, child.stderr, /DevTools listening on (ws:\/\/\S+)/, 60_000, "chromium");
  const browser = await chromium.connectOverCDP(ws);
  const context = browser.contexts()[0] ?? (await browser.newContext());
  const page = context.pages()[0] ?? (await context.newPage());
  await page.setViewportSize({ width: 1500, height: 950 });
  return { browser, page, child };
}

/** Stops every group; true when all are gone. */
export async function stopAll(...children) {
  return (await Promise.all(children.map((c) => stopGroup(c)))).every(Boolean);
}

/** Waits until `check()` is true (a process appearing or going: polls /proc), at most `ms`; false if not. */
export async function until(check, ms) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** The panel's webview document (two nested iframes in the workbench). */
export function panel(page) {
  return page.frameLocator("iframe.webview.ready").frameLocator("iframe#active-frame");
}

/** Opens the workbench and waits for it and for our extension's panel. */
export async function openWorkbench(page, url) {
  await page.goto(url);
  await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
  await page.locator(".statusbar").waitFor({ timeout: 60_000 });
}

export async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(`>${title}`);
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
  await row.waitFor({ timeout: 20_000 });
  await page.keyboard.press("Enter");
}

/** Shows the Agent panel. Its activity-bar icon toggles: a window (re)opened with the panel already
 * restored is closed by a click, so the click is repeated until the panel shows (at most 3 times). */
export async function focusPanel(page) {
  const app = panel(page).locator("#app");
  for (let i = 0; i < 3; i++) {
    if (await app.isVisible().catch(() => false)) return;
    await page.locator('.activitybar .action-item a[aria-label^="Agent"]').first().click();
    if (await app.waitFor({ timeout: 20_000 }).then(() => true, () => false)) return;
  }
  await app.waitFor({ timeout: 60_000 });
}
