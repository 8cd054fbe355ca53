// The panel's own scenarios (issue 30 items 5, 9 and 10): the first-run page, an authentication
// error's buttons, execute cards (command, live output, elapsed time), a tool card opening its file,
// slash-command completion and the Undo button, an `@` mention, the Changes view and "Undo this turn".
// Several checks share one scenario (one code-server run for all: the suite's time budget).
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { panel, runCommand, until } from "./workbench.mjs";

const T = 60_000 * Number(process.env.AGENT_SERVER_TEST_HANG_SCALE || 1); // a hang guard: tests/support/timeouts.py

/** Closes the settings editor (a modal editor in this VS Code: Escape, else its close button). */
async function closeSettings(page) {
  const modal = page.locator(".monaco-modal-editor-block");
  for (let i = 0; i < 2 && (await modal.count()) > 0; i++) await page.keyboard.press("Escape");
  if ((await modal.count()) > 0) await modal.locator(".codicon-close, .codicon-chrome-close").first().click().catch(() => {});
  await modal.waitFor({ state: "detached", timeout: 5000 }).catch(() => {});
  if ((await page.locator(".editor-group-container.active .tab.active[aria-label^='Settings']").count()) > 0) await runCommand(page, "View: Close Editor").catch(() => {});
}

/** Whether an `agent-server login` started from `command` runs (not the shell that started it). */
function loginRunning(command) {
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (argv.includes(command) && argv.includes("login") && !/(^|\/)(ba|da)?sh$/.test(argv[0])) return true;
    } catch {
      // gone
    }
  }
  return false;
}

/** `h`: the runner's helpers ({config, shot, promptInPanel, waitIdle}). */
export function panelScenarios(h) {
  const { config, shot, promptInPanel, waitIdle } = h;
  /** A picture of the panel alone (the Agent view's webview), for clients/vscode/README.md. */
  const panelShot = async (page, name) => {
    await page.locator(".part.sidebar").screenshot({ path: join(config.artifacts, `${name}.png`) }).catch(() => {});
  };
  return {
    /** The window's first look at the panel (no prompt yet): the endpoint and model in use — here
     * the offline endpoint, said to be a script — and Set API Key, Sign in, Open Settings, Show Server
     * Log, each doing what it says. */
    async first_run_empty_state(page, s) {
      const p = panel(page);
      const empty = p.locator(".empty-state");
      await empty.locator(".setup-endpoint").waitFor({ timeout: T });
      // the endpoint is asked whether it answers (--check-config --probe): its row settles
      const reach = await empty.locator('.setup-reach:not([data-state="checking"])').first().textContent({ timeout: T }).then((t) => (t ?? "").trim(), () => null);
      await panelShot(page, "view-first-run");
      const facts = {
        endpoint: (await empty.locator(".setup-endpoint .setup-value").textContent()) ?? "",
        model: (await empty.locator(".setup-model .setup-value").textContent()) ?? "",
        offline: (await empty.locator(".setup-offline").count()) > 0,
        buttons: await empty.locator(".setup-actions button").allTextContents(),
        reach,
        // the mode and model pickers, there before any prompt (they came only with a session)
        pickers: await p.locator("button.picker").evaluateAll((b) => b.map((x) => `${x.dataset.configId}=${x.dataset.value}`)),
      };
      // the icons are VS Code's codicons: the font (packaged in the .vsix) loaded under the webview's
      // CSP, whose font-src names only the extension's resource origin, and a glyph drawn with it
      const codicons = await p.locator("#app").evaluate(async () => {
        await document.fonts.ready;
        await document.fonts.load("16px codicon").catch(() => []);
        const face = [...document.fonts].find((f) => f.family.replace(/["']/g, "") === "codicon");
        const glyph = document.querySelector(".setup-actions .codicon");
        const before = glyph ? getComputedStyle(glyph, "::before") : null;
        const csp = document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute("content") ?? "";
        const directive = (name) => (csp.split(";").map((d) => d.trim()).find((d) => d.startsWith(`${name} `)) ?? "").split(/\s+/).slice(1);
        const fontSrc = directive("font-src");
        const link = document.querySelector("link#codicons");
        return {
          fontStatus: face?.status ?? "none",
          glyphFont: before?.fontFamily ?? "",
          glyphWidth: glyph ? glyph.getBoundingClientRect().width : 0,
          glyphContent: before?.content ?? "",
          fontSrc,
          styleSrc: directive("style-src"),
          cssFromExtension: Boolean(link && new URL(link.href).pathname.endsWith("/dist/codicons/codicon.css")),
          emoji: /[✓✗×▾▸○🖼]/u.test(document.body.innerText),
        };
      });
      // Show Server Log: the output channel is shown
      await empty.locator("button.show-log").click();
      const log = await page.locator('.part.panel .monaco-editor[data-uri^="output:"], .part.panel .output-view, .part.panel [id="workbench.panel.output"]').first().waitFor({ timeout: T }).then(() => true, () => false);
      // Open Settings: the settings editor, on our settings
      await empty.locator("button.open-settings").click();
      const settings = await page.locator(".settings-editor").first().waitFor({ timeout: T }).then(() => true, () => false);
      // newcomer finding F8: where path, baseUrl and model live (the user's settings), the endpoint shown
      const baseUrlRow = page.locator('.settings-editor [data-key="agentServer.baseUrl"]').first();
      const endpointShown = await baseUrlRow.waitFor({ timeout: T }).then(() => true, () => false);
      const settingsShown = {
        endpointShown,
        endpointValue: endpointShown ? await baseUrlRow.locator("input").first().inputValue({ timeout: 5000 }).catch(() => null) : null,
        tab: ((await page.locator(".settings-editor .settings-tabs-widget .action-label.checked").first().textContent({ timeout: 5000 }).catch(() => "")) ?? "").trim(),
        query: ((await page.locator(".settings-editor .settings-header .monaco-editor .view-lines").first().textContent({ timeout: 5000 }).catch(() => "")) ?? "").replace(/\u00a0/g, " "),
      };
      await shot(page, "open-settings");
      await closeSettings(page);
      // Set API Key: the hidden input box (dismissed: nothing stored)
      await empty.locator("button.set-api-key").click();
      const keyBox = await page.locator('.quick-input-widget input[type="password"]').waitFor({ timeout: T }).then(() => true, () => false);
      await page.keyboard.press("Escape");
      // Sign in: `agent-server login` in a terminal (closed again: nothing signed in)
      await empty.locator("button.sign-in").click();
      const terminal = await page.locator('.part.panel [aria-label*="agent-server login"], .part.panel .terminal-tabs-entry:has-text("agent-server login"), .part.panel .title-label:has-text("agent-server login")').first().waitFor({ timeout: T }).then(() => true, () => false);
      // newcomer finding F11: Ctrl-C in the login terminal once the login runs — no error toast, the panel says so
      const loginRan = await until(() => loginRunning(config.settings["agentServer.path"]), T);
      await page.locator(".part.panel .xterm").first().click();
      await page.keyboard.press("Control+c");
      // newcomer 3's finding 11: an information message, so the empty panel keeps its set-up card
      const notSigned = page.locator(".notifications-toasts .notification-toast", { hasText: "Not signed in" }).last();
      const said = await notSigned.waitFor({ timeout: T }).then(() => notSigned.textContent(), () => null);
      const setupKept = await empty.locator("button.sign-in").isVisible().catch(() => false);
      const exitToasts = await page.locator(".notifications-toasts .notification-toast", { hasText: "terminated with exit code" }).count();
      await shot(page, "login-cancelled");
      if (loginRunning(config.settings["agentServer.path"])) await runCommand(page, "Terminal: Kill the Active Terminal Instance").catch(() => {});
      await runCommand(page, "View: Close Panel").catch(() => {});
      return { facts, log, settings, settingsShown, keyBox, terminal, codicons, loginCancelled: { loginRan, said, exitToasts, setupKept } };
    },

    /** The endpoint refuses the key (HTTP 401): the error card offers the same ways forward. */
    async auth_error_offers_the_way_forward(page, s) {
      const p = panel(page);
      await p.locator("button.new-session").click(); // a session of its own
      await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
      // the mode picked on the empty panel, before the first prompt: the session that prompt makes has it
      await p.locator('button.picker-mode[data-value="workspace-write"]').waitFor({ timeout: T });
      await p.locator("button.picker-mode").click();
      await page.locator(".quick-input-list .monaco-list-row", { hasText: s.pickMode }).first().click({ timeout: T });
      const modeBeforePrompt = await p.locator(`button.picker-mode[data-value="${s.pickModeId}"]`).waitFor({ timeout: T }).then(() => true, () => false);
      await promptInPanel(page, s.prompt);
      const notice = panel(page).locator('.notice[data-error-kind="auth"]').last();
      const shown = await notice.waitFor({ timeout: T }).then(() => true, () => false);
      await waitIdle(page);
      await panelShot(page, "view-auth-error");
      const got = {
        shown,
        text: shown ? (await notice.textContent()) ?? "" : "",
        buttons: shown ? await notice.locator(".setup-actions button").allTextContents() : [],
        modeBeforePrompt,
        modeAfter: await p.locator("button.picker-mode").getAttribute("data-value"),
      };
      if (!shown) return got;
      // the error's own Set API Key: the key applies to this session (restarted with it, resumed)
      const setKey = async (key) => {
        const box = page.locator('.quick-input-widget input[type="password"]');
        await box.waitFor({ timeout: T });
        await box.fill(key);
        await page.keyboard.press("Enter");
      };
      await notice.locator(".setup-actions button", { hasText: "Set API Key" }).click();
      await setKey(s.newKey);
      const resumedNotice = p.locator(".notice", { hasText: "restarted with the new API key" }).last();
      const resumed = await resumedNotice.waitFor({ timeout: T }).then(() => resumedNotice.textContent(), () => null);
      await promptInPanel(page, s.retry);
      const answered = await p.locator(".transcript", { hasText: s.retryAnswer }).waitFor({ timeout: T }).then(() => true, () => false);
      await waitIdle(page);
      const newSessionOnly = await p.locator(".notice", { hasText: "apply from the next new session" }).count();
      await panelShot(page, "view-auth-key-set");
      // cleared again: the scenarios after this one use the server's own key
      await runCommand(page, "Agent: Set API Key");
      await setKey("");
      await p.locator(".notice", { hasText: "restarted without the API key" }).last().waitFor({ timeout: T }).catch(() => {});
      return { ...got, keyFix: { resumed, answered, newSessionOnly } };
    },

    /** One turn: a shell command that prints, then waits for a file the runner writes (its output
     * is on the card while it runs), a read of app.py at line 3 (its card opens the file there), a
     * new file (accepted); then the Changes view (its diff, "Undo this turn"), slash completion, an
     * `@` mention of a file, and status words. */
    async execute_cards_and_daily_features(page, s) {
      const p = panel(page);
      // the New Session shortcut (Ctrl+Alt+N) from the editor area
      await page.locator(".part.editor").click({ position: { x: 200, y: 200 } });
      await page.keyboard.press("Control+Alt+N");
      const shortcutNew = await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).then(() => true, () => false);
      if (!shortcutNew) await p.locator("button.new-session").click();
      // the mode and model pickers are QuickPicks; full access is confirmed first (cancelled here)
      await p.locator("button.picker-model").waitFor({ timeout: T }).catch(() => {});
      let modelQuickPick = false;
      if ((await p.locator("button.picker-model").count()) > 0) {
        await p.locator("button.picker-model").click();
        modelQuickPick = await page.locator(".quick-input-list .monaco-list-row", { hasText: "offline-model" }).first().waitFor({ timeout: T }).then(() => true, () => false);
        await page.keyboard.press("Escape");
      }
      await p.locator("button.picker-mode").click();
      await page.locator(".quick-input-list .monaco-list-row", { hasText: "Full access" }).first().click({ timeout: T });
      const dialog = page.locator(".monaco-dialog-box", { hasText: "no sandbox" });
      const fullAccessConfirm = await dialog.waitFor({ timeout: T }).then(() => true, () => false);
      if (fullAccessConfirm) await dialog.locator(".monaco-button", { hasText: "Cancel" }).click();
      const modeAfter = await p.locator("button.picker-mode").getAttribute("data-value");
      const pickers = { modelQuickPick, fullAccessConfirm, modeAfter };
      await promptInPanel(page, s.prompt);
      const perm = p.locator(".permission").last();
      await perm.locator('button[data-option-id="allow_once"]').click({ timeout: T });
      const card = p.locator(".tool.kind-execute").last();
      // the live output, while the command still runs
      await card.locator(".tool-terminal", { hasText: s.liveText }).waitFor({ timeout: T });
      const whileRunning = {
        status: await card.getAttribute("data-status"),
        statusWord: (await card.locator(".tool-status").textContent()) ?? "",
        elapsedRunning: (await card.locator('.tool-elapsed[data-running="true"]').count()) > 0,
      };
      await panelShot(page, "view-execute-card");
      writeFileSync(s.flag, "go\n"); // an absolute path outside the workspace
      await p.locator('.tool.kind-execute[data-status="completed"]').last().waitFor({ timeout: T });
      const done = p.locator('.tool.kind-execute[data-status="completed"]').last();
      const execute = {
        ...whileRunning,
        command: (await done.locator("pre.tool-command").textContent()) ?? "",
        terminal: (await done.locator(".tool-terminal").textContent()) ?? "",
        elapsed: (await done.locator(".tool-elapsed").textContent()) ?? "",
        statusDone: (await done.locator(".tool-status").textContent()) ?? "",
      };
      // the new file's proposal: accepted with the shortcut (Ctrl+Alt+Enter) in its diff
      await p.locator('.proposal[data-outcome="pending"]').last().waitFor({ timeout: T });
      await page.locator(".editor-group-container.active .monaco-diff-editor").waitFor({ timeout: T });
      // newcomer F1a: while the proposal waits nothing changed: the Changes box does not list the file
      const rowWhilePending = await p.locator(`.changes .change-file[data-path$="${s.newFile}"]`).count();
      await page.locator(".editor-group-container.active .monaco-diff-editor .modified-in-monaco-diff-editor .view-lines").first().click();
      await page.keyboard.press("Control+Alt+Enter");
      const shortcutAccept = await p.locator('.proposal[data-outcome="applied"]').last().waitFor({ timeout: T }).then(() => true, () => false);
      if (!shortcutAccept) await p.locator('.proposal[data-outcome="pending"] button.accept-all').last().click({ timeout: 5000 }).catch(() => {});
      await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
      await waitIdle(page);
      // a long token (the answer ends with one) wraps: nothing runs past the panel's edge
      const overflow = await p.locator(".transcript").evaluate((t) => ({
        transcript: t.scrollWidth - t.clientWidth,
        items: [...t.querySelectorAll(".item")].filter((i) => i.scrollWidth > i.clientWidth + 1).length,
      }));
      // the created file opened on accept
      const createdOpened = await page.locator(`.tab[aria-label^="${s.newFile}"]`).first().waitFor({ timeout: T }).then(() => true, () => false);
      // the read card opens app.py at line 3
      await p.locator(".tool.kind-read a.tool-title").last().click();
      await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.readFile}"]`).waitFor({ timeout: T });
      // the status bar follows the active editor a moment later: wait for the line (or give up and report it)
      const selection = page.locator(".statusbar-item[id$='status.editor.selection']").first();
      await selection.filter({ hasText: `Ln ${s.readLine},` }).waitFor({ timeout: 10_000 }).catch(() => {});
      const cursor = (await selection.textContent({ timeout: 10_000 }).catch(() => "")) ?? "";
      // the Changes view: the new file, its diff, Undo this turn
      const changes = p.locator(".changes");
      await changes.locator(`.change-file[data-path$="${s.newFile}"]`).waitFor({ timeout: T });
      await panelShot(page, "view-changes");
      const changeRow = (await changes.locator(`.change-file[data-path$="${s.newFile}"]`).textContent()) ?? "";
      await changes.locator(`.change-file[data-path$="${s.newFile}"] a.change-name`).click();
      const diff = await page.locator(`.editor-group-container.active .tab.active[aria-label*="${s.newFile} (the turn's change"]`).waitFor({ timeout: T }).then(() => true, () => false);
      // slash completion from available_commands_update; the Undo button
      const input = p.locator("textarea.input");
      await input.click();
      await input.pressSequentially("/un");
      const offered = await p.locator(".completions .completion").evaluateAll((rows) => rows.map((r) => r.dataset.command));
      await panelShot(page, "view-slash-completion");
      await page.keyboard.press("Tab");
      const completed = await input.inputValue();
      await input.fill("");
      const undoButton = await p.locator("button.undo").isVisible();
      // Undo this turn: /undo takes the new file back
      await changes.locator("button.undo-turn").click();
      await p.locator(".agent, .tool", { hasText: s.undoSays }).first().waitFor({ timeout: T });
      await waitIdle(page);
      const undoneShown = await changes.getAttribute("data-undone");
      // an @ mention of a file: typed `@`, picked in the QuickPick, sent as an embedded resource
      await input.click();
      await input.pressSequentially("@");
      const qp = page.locator(".quick-input-widget input");
      await qp.waitFor({ timeout: T });
      await qp.fill("File");
      await page.keyboard.press("Enter");
      // the file picker with the workspace's files (it shows the first ~16: the file is found by typing its name)
      await page.locator(".quick-input-widget .quick-input-title", { hasText: "Add a file" }).waitFor({ timeout: T });
      await page.locator(".quick-input-list .monaco-list-row").first().waitFor({ timeout: T });
      await qp.fill(s.mentionFile);
      await page.locator(".quick-input-list .monaco-list-row", { hasText: s.mentionFile }).first().waitFor({ timeout: T });
      await page.keyboard.press("Enter");
      await p.locator(".attachments .chip-file", { hasText: s.mentionFile }).waitFor({ timeout: T });
      await panelShot(page, "view-mention");
      await input.fill(s.mentionPrompt);
      await p.locator("button.send").click();
      await p.locator(".agent", { hasText: s.mentionAnswer }).first().waitFor({ timeout: T });
      await waitIdle(page);
      const chipsLeft = await p.locator(".attachments .chip").count();
      await shot(page, "daily-features");
      return { execute, createdOpened, cursor, rowWhilePending, changeRow, diff, offered, completed, undoButton, undoneShown, chipsLeft, pickers, overflow, shortcuts: { newSession: shortcutNew, accept: shortcutAccept } };
    },
  };
}
