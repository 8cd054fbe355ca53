#!/usr/bin/env node
// End-to-end scenarios in a real VS Code (code-server) driven through Chromium: the extension from
// its .vsix, a real agent-server, the model played by the offline endpoint (the pytest side scripts it
// and checks disk and model requests). Usage: node run.mjs CONFIG.json  (see tests/vscode/).
// Writes {scenarios: {name: {ok, error?, ...}}, timings} to config.results; exits 0 when all passed.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { focusPanel, openWorkbench, panel, runCommand, startChromium, startCodeServer, stopAll, until } from "./workbench.mjs";
import { panelScenarios } from "./panel-scenarios.mjs";
import { mergeScenarios } from "./merge-scenarios.mjs";
import { planningScenarios } from "./planning-scenarios.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = { scenarios: {}, timings: {} };
const save = () => writeFileSync(config.results, JSON.stringify(results, null, 1));
mkdirSync(config.artifacts, { recursive: true });

const T = 60_000 * Number(process.env.AGENT_SERVER_TEST_HANG_SCALE || 1); // a hang guard: tests/support/timeouts.py

async function shot(page, name) {
  await page.screenshot({ path: join(config.artifacts, `${name}.png`) }).catch(() => {});
}

/** Opens `name` with Quick Open (by `path`, absolute, when given: no search index needed). */
async function quickOpen(page, name, path) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(path ?? name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor({ timeout: T });
  await page.keyboard.press("Enter");
  await page.locator(`.editor-group-container.active .tab.active[aria-label^="${name}"]`).waitFor({ timeout: T });
  await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
}

/** Text of the active (non-diff) editor from its rendered lines (small files are fully rendered). */
async function editorText(page) {
  return page.evaluate(() => {
    const editor = document.querySelector(".editor-group-container.active .editor-instance .monaco-editor:not(.original-in-monaco-diff-editor):not(.modified-in-monaco-diff-editor)");
    if (!editor) return null;
    const lines = [...editor.querySelectorAll(".view-lines .view-line")].map((n) => ({ top: parseFloat(n.style.top), text: n.textContent.replace(/\u00a0/g, " ") }));
    lines.sort((a, b) => a.top - b.top);
    return lines.map((l) => l.text).join("\n");
  });
}

async function activeTabDirty(page) {
  return page.locator(".editor-group-container.active .tab.active.dirty").count().then((n) => n > 0);
}

/** The diff that came (a proposal's, a question's): in front, or — it came while the keyboard was in
 * an editor (keyboard.ts) — in a tab behind it, opened as a user does: a click on its tab. */
async function waitDiff(page) {
  const front = page.locator(".editor-group-container.active .monaco-diff-editor");
  const behind = page.locator('.editor-group-container.active .tab:not(.active)[aria-label*="(proposal)"], .editor-group-container.active .tab:not(.active)[aria-label*="change the agent asks to make"]');
  await front.or(behind).first().waitFor({ timeout: T });
  if ((await front.count()) === 0) await behind.last().click();
  await front.waitFor({ timeout: T });
  await page.waitForTimeout(500);
}

/** The active diff editor's breadcrumb (its file path segments and symbols) and its tab's label. */
async function diffCrumbs(page) {
  const group = page.locator(".editor-group-container.active");
  await group.locator(".breadcrumbs-control .monaco-breadcrumb-item").first().waitFor({ timeout: 10_000 }).catch(() => {});
  return {
    crumbs: (await group.locator(".breadcrumbs-control .monaco-breadcrumb-item").allTextContents()).map((t) => t.trim()).filter(Boolean),
    tab: (await group.locator(".tab.active").first().getAttribute("aria-label")) ?? "",
  };
}

async function titleAction(page, label) {
  await page.locator(`.editor-group-container.active .editor-actions a.action-label[aria-label^="${label}"]`).first().click();
}

async function askAboutSelection(page, question) {
  await runCommand(page, "Agent: Ask About Selection");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(question);
  await page.keyboard.press("Enter");
}

async function promptInPanel(page, text) {
  const p = panel(page);
  await p.locator("textarea.input").fill(text);
  await p.locator("button.send").click();
}

async function waitIdle(page) {
  await panel(page).locator('#app[data-state="idle"]').waitFor({ timeout: T });
}

async function waitBusy(page) {
  await panel(page).locator('#app[data-state="busy"]').waitFor({ timeout: T });
}

/** A new session in the panel (its turns are the newest of their session), its transcript emptied. */
async function newSession(page) {
  const p = panel(page);
  await p.locator("button.new-session").click();
  await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
}

/** s.prompt sent, the proposal's diff (shot as `diffShot` when named) accepted with Accept All; the
 * applied card of s.file, once the turn's answer s.answer shows and the panel is idle. */
async function acceptedAll(page, s, diffShot) {
  const p = panel(page);
  await promptInPanel(page, s.prompt);
  await waitDiff(page);
  if (diffShot) await shot(page, diffShot);
  await titleAction(page, "Accept All");
  const card = p.locator('.proposal[data-outcome="applied"]', { hasText: s.file }).first();
  await card.waitFor({ timeout: T });
  await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
  await waitIdle(page);
  return card;
}

function expectEqual(what, got, want) {
  if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

/** The running code-server and Chromium (for scenarios that open a second window). */
const ctx = { windows: new Map() };

/**
 * The window a scenario runs in: the first one, or (`s.workspaceFile`) a window of the same
 * code-server and Chromium on that workspace file, opened at its first scenario and kept for the
 * next ones (a launch shared across cases).
 */
async function pageFor(s) {
  let page = ctx.ch.page;
  if (s.workspaceFile) {
    page = ctx.windows.get(s.workspaceFile);
    if (!page) {
      page = await ctx.ch.page.context().newPage();
      await page.setViewportSize({ width: 1500, height: 950 });
      const url = new URL(ctx.cs.url);
      url.searchParams.delete("folder");
      url.searchParams.set("workspace", s.workspaceFile);
      ctx.windows.set(s.workspaceFile, page);
      const opening = Date.now();
      await openWorkbench(page, url.toString());
      // Under load code-server once opened the workspace's window without its folders (the
      // extension host then had none: the session's cwd was the home folder); only a window showing
      // every folder in the Explorer is used, after one reload at most. The Explorer is shown by its
      // command (a click on its activity-bar icon hides the side bar when the Explorer is shown
      // already), and a window without folders is told by what its Explorer shows then (Add Folder),
      // not by 30 s of waiting for rows a slow window draws later (that cost a reload under load).
      for (let attempt = 0; ; attempt++) {
        await runCommand(page, "View: Show Explorer");
        const rows = page.locator(".explorer-folders-view .monaco-list-row");
        const shown = (async () => {
          for (const f of s.folders ?? []) await rows.filter({ hasText: f.split("/").pop() }).first().waitFor({ timeout: T });
          return "shown";
        })().catch(() => "neither");
        const addFolder = page.locator(".part.sidebar .monaco-button, .part.sidebar a", { hasText: "Add Folder" }).first();
        const empty = addFolder.waitFor({ timeout: T }).then(() => "empty", () => "neither");
        const seen = await Promise.race([shown, empty]);
        if (seen === "shown") break;
        if (attempt > 0) throw new Error(`the window of ${s.workspaceFile} does not show its folders (${seen})`);
        ctx.windowReloads = (ctx.windowReloads ?? 0) + 1;
        await page.reload();
        await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
      }
      await focusPanel(page);
      results.timings.second_window_s = (Date.now() - opening) / 1000; // in its first scenario's seconds
    }
  }
  await page.bringToFront();
  return page;
}

const scenarios = {
  /** Issue 27: the panel was shown at start-up (before any prompt): the server is already running and
   * initialized (the status bar says ready); a second window on another folder, which never shows the
   * panel, has the extension active (its status bar item) and no server. */
  async panel_prestarts_the_server(page, s) {
    const ready = page.locator('.statusbar [aria-label="Agent: ready"]');
    await ready.first().waitFor({ timeout: T });
    const serversBeforePrompt = agentServers(config.settings["agentServer.path"], config.workspace).length;
    const second = await page.context().newPage();
    let secondWindow;
    try {
      const url = new URL(ctx.cs.url);
      url.searchParams.set("folder", s.otherFolder);
      await openWorkbench(second, url.toString());
      await second.locator('.statusbar [aria-label="Agent: not started"]').first().waitFor({ timeout: T });
      await shot(second, "second-window");
      secondWindow = {
        extensionActive: true,
        panelShown: (await second.locator("iframe.webview.ready").count()) > 0,
        servers: agentServers(config.settings["agentServer.path"], s.otherFolder).length,
      };
    } finally {
      await second.close();
    }
    await shot(page, "prestart-statusbar");
    return { serversBeforePrompt, secondWindow };
  },

  /** Ask about a selection in a file with unsaved changes → diff → a slash command while it waits (the
   * turn's cards stay as they are) → the user edits the proposed side → Accept → exactly the user's
   * text, still unsaved. */
  async accept_in_unsaved_document(page, s) {
    await quickOpen(page, s.file);
    await page.keyboard.press("Control+End");
    await page.keyboard.type(s.typed);
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("Shift+ArrowDown");
    await page.keyboard.press("Shift+ArrowDown");
    await askAboutSelection(page, s.question);
    await waitDiff(page);
    await shot(page, "accept-diff");
    const diffShown = await diffCrumbs(page);
    const p = panel(page);
    await promptInPanel(page, s.command);
    await p.locator(".agent", { hasText: s.commandAnswer }).first().waitFor({ timeout: T });
    // The command's answer ends only its own prompt: give a wrong end of the turn (the panel idle, the
    // turn's cards unfinished) a few seconds to show before looking.
    await p.locator('#app[data-state="idle"], .tool.status-unfinished').first().waitFor({ timeout: 3000 }).catch(() => {});
    const afterCommand = {
      state: await p.locator("#app").getAttribute("data-state"),
      unfinishedCards: await p.locator(".tool.status-unfinished").count(),
      pendingProposals: await p.locator('.proposal[data-outcome="pending"]').count(),
    };
    const right = page.locator(".editor-group-container.active .monaco-diff-editor .modified-in-monaco-diff-editor .view-lines").first();
    await right.click();
    await page.keyboard.press("Control+Home");
    for (let i = 0; i < s.tweakLine; i++) await page.keyboard.press("ArrowDown");
    await page.keyboard.press("End");
    await page.keyboard.type(s.tweak);
    await page.waitForTimeout(300);
    await titleAction(page, "Accept All");
    await panel(page).locator('.proposal[data-outcome="applied"]').waitFor({ timeout: T });
    await waitIdle(page);
    await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.file}"]`).waitFor({ timeout: T });
    await shot(page, "accept-panel");
    expectEqual("document text", await editorText(page), s.expected);
    expectEqual("document still unsaved", await activeTabDirty(page), true);
    expectEqual("diff editors left open", await page.locator(".monaco-diff-editor").count(), 0);
    const outcome = (await panel(page).locator('.proposal[data-outcome="applied"] .card-outcome').first().textContent()) ?? "";
    return { selectionUriFragment: "checked by the server's request", afterCommand, diffShown, outcome };
  },

  /** The document changes after the agent read it and before the proposal is applied → stale, nothing applied. */
  async stale_proposal(page, s) {
    await quickOpen(page, s.file);
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("Shift+End");
    await askAboutSelection(page, s.question);
    await waitDiff(page);
    await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
    await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
    // on the line the change is on (typing on other lines is merged: merge-scenarios.mjs)
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("End");
    await page.keyboard.type(s.typed);
    // stale said at once: the card says so before anything is clicked, and asks the agent again
    const staleCard = panel(page).locator('.proposal[data-stale="true"]').last();
    const staleAtOnce = await staleCard.waitFor({ timeout: T }).then(() => true, () => false);
    await shot(page, "stale-at-once");
    if (staleAtOnce) await staleCard.locator("button.ask-again").click();
    else await panel(page).locator(".proposal button.accept-all").last().click(); // as before: Accept is answered stale
    await panel(page).locator('.proposal[data-outcome="stale"]').waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "stale-panel");
    expectEqual("diff editors left open", await page.locator(".monaco-diff-editor").count(), 0);
    expectEqual("document text", await editorText(page), s.expected);
    // newcomer finding F7: a file deleted (a terminal's rm) while its proposal waits is stale at once,
    // and Accept All is refused as stale — the file is not created again
    let gone;
    if (s.goneFile) {
      await promptInPanel(page, s.gonePrompt);
      await waitDiff(page);
      unlinkSync(join(config.workspace, s.goneFile));
      const goneCard = panel(page).locator('.proposal[data-stale="true"]', { hasText: s.goneFile }).last();
      const goneStaleAtOnce = await goneCard.waitFor({ timeout: T }).then(() => true, () => false);
      await shot(page, "deleted-file-stale");
      await titleAction(page, "Accept All");
      await panel(page).locator('.proposal[data-outcome="stale"]', { hasText: s.goneFile }).first().waitFor({ timeout: T });
      await panel(page).locator(".agent", { hasText: s.goneAnswer }).first().waitFor({ timeout: T });
      await waitIdle(page);
      gone = { staleAtOnce: goneStaleAtOnce, recreated: existsSync(join(config.workspace, s.goneFile)) };
    }
    return { staleAtOnce, gone };
  },

  /** Two hunks: accept the first by its CodeLens, reject the second → partial, saved (file was not open). */
  async accept_one_hunk_of_two(page, s) {
    await promptInPanel(page, s.prompt);
    await waitDiff(page);
    const lens = (t) => page.locator(".editor-group-container.active .monaco-diff-editor .codelens-decoration a", { hasText: t }).first();
    await lens("Accept change 1").waitFor({ timeout: T });
    await shot(page, "hunk-diff");
    await lens("Accept change 1").click();
    await panel(page).locator(".proposal .hunk-accepted").first().waitFor({ timeout: T });
    await lens("Reject change 2").click();
    await panel(page).locator('.proposal[data-outcome="partial"]').waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "hunk-panel");
    // N2: the Changes box of a partly applied turn (it vanished)
    const box = panel(page).locator(".changes");
    return { changesShown: !(await box.evaluate((b) => b.hidden)), changes: ((await box.textContent()) ?? "").trim() };
  },

  /** A slash command answered at once while an answer streams (`/mode`): the answer stays one message,
   * never broken mid-word around the command's answer (routed by ACP's messageId). */
  async slash_command_during_a_stream(page, s) {
    const p = panel(page);
    await promptInPanel(page, s.prompt);
    await p.locator(".agent", { hasText: "word3 " }).last().waitFor({ timeout: T });
    await promptInPanel(page, s.command);
    await p.locator(".item.user", { hasText: s.command }).last().waitFor({ timeout: T });
    await p.locator(".agent", { hasText: "Mode:" }).last().waitFor({ timeout: T });
    // what the panel showed of the answer when the command's answer came (its end not yet: else nothing was tested)
    const streamed = await p.locator(".agent", { hasText: "word0 " }).last().textContent();
    await waitIdle(page);
    await shot(page, "slash-during-stream");
    // the items after the prompt: [kind, text]
    const after = await p.locator(".transcript").evaluate((t, prompt) => {
      const items = Array.from(t.querySelectorAll(".item"));
      const from = items.findLastIndex((i) => i.classList.contains("user") && i.textContent === prompt);
      return items.slice(from + 1).map((i) => [i.classList.contains("user") ? "user" : i.classList.contains("agent") ? "agent" : "other", i.textContent.trim()]);
    }, s.prompt);
    return { streamedWhenAnswered: streamed, after };
  },

  /** A latin1 file open in VS Code (shown with U+FFFD): the agent's read and edit are refused, no diff
   * opens, the document is not changed (the pytest side checks the bytes and what the model was told). */
  async latin1_refused(page, s) {
    await quickOpen(page, s.file);
    const before = await editorText(page);
    await promptInPanel(page, s.prompt);
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "latin1-panel");
    expectEqual("diff editors open", await page.locator(".monaco-diff-editor").count(), 0);
    expectEqual("document text", await editorText(page), before);
    expectEqual("document unsaved", await activeTabDirty(page), false);
  },

  /**
   * Newcomer 4, finding 6: files whose line breaks VS Code's text model rewrites (a mix of CRLF and
   * LF, lone CRs) could neither be edited (every proposal stale "changed on disk") nor undone. In a
   * new session: an edit of mixed.txt (not open) accepted, /undo and /redo of it accepted, an edit of
   * cr.txt (lone CRs), an edit of mixedopen.txt (BOM, mixed, open in a clean editor) accepted, a file
   * created with CRLF lines, and an edit in accept-edits mode. The disk's bytes after each step (hex) go to the pytest side.
   */
  async mixed_line_endings_byte_exact(page, s) {
    const p = panel(page);
    const hex = (name) => readFileSync(join(config.workspace, name)).toString("hex");
    const steps = [];
    await runCommand(page, "Agent: New Session");
    await p.locator(".proposal").first().waitFor({ state: "detached", timeout: T });
    let cards = 0;
    /** The next proposal: Accept All in its diff (when one opens); its card's outcome and text. */
    const decide = async (file) => {
      const card = p.locator(".proposal").nth(cards++);
      await card.waitFor({ timeout: T }).catch((err) => {
        throw new Error(`no proposal ${cards} for ${file} (the steps before: ${JSON.stringify(steps)}): ${err}`);
      });
      const finished = p.locator(".proposal[data-outcome]:not([data-outcome=\"pending\"])").nth(cards - 1);
      const diff = page.locator(".editor-group-container.active .monaco-diff-editor");
      const first = await Promise.race([
        diff.waitFor({ timeout: T }).then(() => "diff"),
        finished.waitFor({ timeout: T }).then(() => "finished"),
      ]);
      if (first === "diff" && (await card.getAttribute("data-outcome")) === "pending") {
        await page.waitForTimeout(300);
        await titleAction(page, "Accept All");
      }
      await finished.waitFor({ timeout: T });
      await waitIdle(page);
      steps.push({ file, outcome: await card.getAttribute("data-outcome"), card: ((await card.textContent()) ?? "").trim().slice(0, 400), bytes: hex(file) });
    };
    const ask = async (prompt, answer, file) => {
      await promptInPanel(page, prompt);
      await decide(file);
      if (answer) await p.locator(".agent", { hasText: answer }).last().waitFor({ timeout: T });
    };
    await ask(s.mixedPrompt, s.mixedAnswer, s.mixed);
    await promptInPanel(page, "/undo");
    await decide(s.mixed);
    await promptInPanel(page, "/redo");
    await decide(s.mixed);
    await ask(s.crPrompt, s.crAnswer, s.cr);
    await quickOpen(page, s.open);
    const shownBefore = await editorText(page);
    await ask(s.openPrompt, s.openAnswer, s.open);
    await page.locator(`.editor-group-container .tab[aria-label^="${s.open}"]`).first().click();
    // the clean editor reloads from the disk the change was written to, and stays clean
    let shownAfter = await editorText(page);
    for (let i = 0; i < 100 && !shownAfter?.includes(s.openShows); i++) {
      await page.waitForTimeout(200);
      shownAfter = await editorText(page);
    }
    const cleanAfter = !(await activeTabDirty(page));
    // a file created with CRLF lines (VS Code's new document would be LF)
    await ask(s.createPrompt, s.createAnswer, s.created);
    // accept-edits: applied without review
    await promptInPanel(page, "/mode accept-edits");
    await p.locator(".agent", { hasText: "Mode: accept-edits" }).last().waitFor({ timeout: T });
    await waitIdle(page);
    await promptInPanel(page, s.autoPrompt);
    await p.locator(".agent", { hasText: s.autoAnswer }).last().waitFor({ timeout: T });
    await waitIdle(page);
    steps.push({ file: s.open, outcome: "accept-edits", bytes: hex(s.open) });
    await promptInPanel(page, "/mode workspace-write");
    await p.locator(".agent", { hasText: "Mode: workspace-write" }).last().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "mixed-line-endings");
    return { steps, shownBefore, shownAfter, cleanAfter };
  },

  /** Reject All from the diff's title → rejected (the pytest side checks the model was told). */
  async reject_tells_the_model(page, s) {
    await promptInPanel(page, s.prompt);
    await waitDiff(page);
    await shot(page, "reject-diff");
    await titleAction(page, "Reject All");
    await panel(page).locator('.proposal[data-outcome="rejected"]').waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "reject-panel");
    expectEqual("diff editors left open", await page.locator(".monaco-diff-editor").count(), 0);
  },

  /** Newcomer 5, finding 1: the user sends a prompt with Enter and types on in the panel's input
   * (the next prompt) while the proposal's diff opens: every keystroke stays in the input, the proposed
   * side holds the agent's text (nothing typed into it, the tab clean), Accept All lands the agent's
   * change (the pytest side reads the disk) and the card says no "with your changes". */
  async typing_in_the_panel_while_a_proposal_opened(page, s) {
    const p = panel(page);
    const input = p.locator("textarea.input");
    await input.click();
    await page.keyboard.type(s.prompt);
    await page.keyboard.press("Enter");
    let typed = "";
    const type = async (text) => {
      for (const ch of text) {
        await page.keyboard.type(ch);
        typed += ch;
      }
    };
    // typing on while the answer comes: before the diff editor opened, and after (when it took the focus)
    const diff = page.locator(".editor-group-container .tab[aria-label*=\"(proposal)\"]");
    while (typed.length < 40 && (await diff.count()) === 0) await type("q");
    await diff.first().waitFor({ timeout: T });
    const modified = page.locator(".monaco-diff-editor .modified-in-monaco-diff-editor .view-lines").first();
    await modified.waitFor({ timeout: T });
    await type(s.after);
    await shot(page, "typing-while-proposal-opened");
    const proposed = await modified.evaluate((n) => {
      const lines = [...n.querySelectorAll(".view-line")].map((l) => ({ top: parseFloat(l.style.top), text: l.textContent.replace(/\u00a0/g, " ") }));
      lines.sort((a, b) => a.top - b.top);
      return lines.map((l) => l.text).join("\n");
    });
    const got = { input: await input.inputValue(), typed, proposed, proposalTabDirty: (await page.locator('.tab.dirty[aria-label*="(proposal)"]').count()) > 0 };
    expectEqual("the panel's input (every key typed)", got.input, typed);
    expectEqual("the proposed side", got.proposed, s.proposed);
    expectEqual("the proposal's tab dirty", got.proposalTabDirty, false);
    await input.fill("");
    await p.locator('.proposal[data-outcome="pending"] button.accept-all').last().click();
    const card = p.locator('.proposal[data-outcome="applied"]').last();
    await card.waitFor({ timeout: T });
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    got.outcome = (await card.locator(".card-outcome").textContent()) ?? "";
    return got;
  },

  /** Newcomer 6, finding 3: the user types on in another file (calc.py) while a proposal for
   * test_calc.py arrives: its diff replaced calc.py in front and every key after it went to the
   * workbench's body. Word after word across the arrival (where the keyboard is, sampled every 5
   * words); then the proposal is reviewed from the notification and accepted; calc.py is saved. */
  async typing_in_another_file_while_a_proposal_arrived(page, s) {
    const p = panel(page);
    await quickOpen(page, s.file);
    await promptInPanel(page, s.prompt);
    await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
    await page.keyboard.press("Control+End");
    await page.keyboard.press("Enter");
    const arrived = page.locator('.editor-group-container .tab[aria-label*="(proposal)"]');
    // the front tab, and whether the keyboard is in a (non-diff) text editor of the active group
    const keyboardIn = () => page.evaluate(() => {
      const a = document.activeElement;
      const tab = document.querySelector(".editor-group-container.active .tab.active");
      const editor = a?.closest(".editor-group-container.active .monaco-editor");
      const inEditor = Boolean(editor) && !a.closest(".monaco-diff-editor");
      return `${tab?.getAttribute("aria-label")?.split(",")[0] ?? "-"}|${inEditor ? "editor" : `${a?.tagName ?? "-"}.${a?.className ?? ""}`}`;
    });
    const words = [];
    const where = [];
    let before = 0; // words typed before the proposal's tab showed
    for (let i = 0; i < 400; i++) {
      if ((await arrived.count()) === 0) before = i;
      else if (i >= before + s.after) break;
      if (i % 5 === 0) where.push(`${i}:${await keyboardIn()}`);
      // words and spaces only: an Enter could take a word-based suggestion instead of a new line
      const word = `w${i}`;
      await page.keyboard.type(`${word} `);
      words.push(word);
    }
    const text = await editorText(page);
    const frontTab = (await page.locator(".editor-group-container.active .tab.active").getAttribute("aria-label")) ?? "";
    await shot(page, "typing-in-another-file-while-a-proposal-arrived");
    // the notification's Review (its toast hides after 15 s: from the notification center) opens the
    // diff in front (no notification: its tab); Accept All
    await runCommand(page, "Notifications: Show Notifications");
    // this proposal's own notification (earlier scenarios' proposals that opened behind left theirs: the newest is first)
    const item = page.locator(".notifications-center .notification-list-item", { hasText: `"Edit ${s.other}" waits for your review` }).first();
    const notified = await item.textContent({ timeout: 10_000 }).then((t) => (t ?? "").trim(), () => null);
    await shot(page, "typing-in-another-file-notifications");
    if (notified !== null) await item.locator(".monaco-button", { hasText: "Review" }).click();
    else await arrived.first().click();
    await page.locator(".editor-group-container.active .monaco-diff-editor").waitFor({ timeout: T });
    await page.waitForTimeout(300);
    await titleAction(page, "Accept All");
    await p.locator('.proposal[data-outcome="applied"]', { hasText: s.other }).last().waitFor({ timeout: T });
    await p.locator(".agent", { hasText: s.answer }).last().waitFor({ timeout: T });
    await waitIdle(page);
    await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
    await page.keyboard.press("Control+S");
    await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).waitFor({ state: "detached", timeout: T });
    return { words, before, where, text, frontTab, notified };
  },

  /** Finding 20: while the proposal to create sub/x.txt waits, another process swaps the folder sub
   * for a link to a folder outside the workspace; Accept All is refused as stale (the pytest side checks
   * the disk and what the model was told). */
  async symlink_swapped_while_a_proposal_waits(page, s) {
    await promptInPanel(page, s.prompt);
    await waitDiff(page);
    const folder = join(config.workspace, s.folder);
    rmSync(folder, { recursive: true });
    symlinkSync(s.outside, folder);
    await titleAction(page, "Accept All");
    const card = panel(page).locator(".proposal[data-outcome]").last();
    await card.waitFor({ timeout: T });
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "symlink-swap-panel");
    return { outcome: await card.getAttribute("data-outcome"), card: ((await card.textContent()) ?? "").trim() };
  },

  /** A shell command asks; "Allow once" runs it. */
  async shell_permission_allow_once(page, s) {
    await promptInPanel(page, s.prompt);
    const card = panel(page).locator(".permission").last();
    await card.locator('button[data-option-id="allow_once"]').waitFor({ timeout: T });
    await shot(page, "permission-panel");
    const shown = await card.locator("pre.command").textContent({ timeout: 5000 }).catch(() => null);
    await card.locator('button[data-option-id="allow_once"]').click();
    await panel(page).locator(".tool.status-completed", { hasText: s.toolTitle }).first().waitFor({ timeout: T });
    await waitIdle(page);
    return { commandShown: shown };
  },

  /** Stop during a slow tool: the turn ends cancelled and the panel returns to idle. */
  async stop_during_slow_tool(page, s) {
    await promptInPanel(page, s.prompt);
    const card = panel(page).locator(".permission").last();
    await card.locator('button[data-option-id="allow_once"]').click({ timeout: T });
    await panel(page).locator(".tool.status-in_progress", { hasText: s.toolTitle }).first().waitFor({ timeout: T });
    await waitBusy(page);
    await shot(page, "stop-running");
    await panel(page).locator("button.stop").click();
    await waitIdle(page);
    await panel(page).locator(".notice", { hasText: "Stopped: cancelled" }).waitFor({ timeout: T });
    const stillRunning = await panel(page).locator(".tool.status-in_progress", { hasText: s.toolTitle }).count();
    expectEqual("tool cards still running", stillRunning, 0);
    await shot(page, "stop-panel");
  },

  /** The server is killed mid-turn: the panel says so with its stderr tail; the next prompt gets an answer. */
  async server_killed_mid_turn(page, s) {
    // the last scenario left the loaded history scrolled to its top, as a user reading it would
    const scrolledAway = await panel(page).locator(".transcript").evaluate((t) => t.scrollHeight - t.scrollTop - t.clientHeight > 1500);
    await promptInPanel(page, s.prompt);
    await panel(page).locator(".permission").last().locator('button[data-option-id="allow_once"]').click({ timeout: T });
    await panel(page).locator(".tool.status-in_progress", { hasText: s.toolTitle }).first().waitFor({ timeout: T });
    const pids = agentServers(config.settings["agentServer.path"], config.workspace, true);
    if (pids.length !== 1) throw new Error(`expected one agent-server for the workspace, found ${JSON.stringify(pids)}`);
    process.kill(-pids[0], "SIGKILL"); // the server and its shell command, as a crash of the machine would
    const notice = panel(page).locator(".notice.error", { hasText: "agent-server exited" }).last();
    await notice.waitFor({ timeout: T });
    const tail = (await notice.locator("pre.stderr-tail").textContent({ timeout: T })) ?? "";
    if (!tail.trim()) throw new Error("the exit notice has no stderr tail");
    await waitIdle(page);
    // what the panel said: the exit and what happens next, then (once it did) the session resumed
    await panel(page).locator(".notice", { hasText: "started again after it exited" }).first().waitFor({ timeout: T });
    const said = [
      await notice.evaluate((n) => [...n.childNodes].filter((c) => c.nodeName !== "PRE").map((c) => c.textContent).join("").trim()), // without the stderr tail
      (await panel(page).locator(".notice", { hasText: "started again after it exited" }).last().textContent()) ?? "",
    ];
    await shot(page, "killed-panel");
    await promptInPanel(page, s.next);
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "killed-resumed");
    // resumed, not restarted empty: no new-session divider, and the killed call is not left running
    const dividers = await panel(page).locator(".notice.divider").count();
    const runningCards = await panel(page).locator(".tool.status-in_progress, .tool.status-pending", { hasText: s.toolTitle }).count();
    return { stderrTail: tail.slice(-300), dividers, runningCards, said, scrolledAway };
  },

  /** New session, then the session picker (session/list) loads the first one (session/load replays it). */
  async session_picker_loads_history(page, s) {
    const p = panel(page);
    await p.locator("button.new-session").click();
    await p.locator(".transcript .item").first().waitFor({ state: "detached", timeout: T });
    // the panel's one way to pick a session: its session button opens the searchable QuickPick, by keyboard
    const selects = await p.locator("select").count();
    await p.locator("button.session-picker").focus();
    await p.locator("button.session-picker").press("Enter");
    const rows = page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
    await page.locator(".quick-input-widget .quick-input-title", { hasText: "Agent: Open Session" }).waitFor({ timeout: T });
    await rows.filter({ hasText: s.title }).first().waitFor({ timeout: T });
    const listed = await rows.allTextContents();
    await page.keyboard.type(s.title);
    await rows.first().filter({ hasText: s.title }).waitFor({ timeout: T });
    await page.keyboard.press("Enter");
    // the replay's first turn (its answer and card) lies far above the end the panel shows, where an item
    // is kept as its height alone (the session grew with the scenarios before this one): scrolled to the
    // top as a user would — again while the replay still arrives — it is drawn
    const answer = p.locator(".agent", { hasText: s.expect }).first();
    const deadline = Date.now() + T;
    while (!(await answer.isVisible().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`the loaded session never showed "${s.expect}" at its top`);
      await p.locator(".transcript").evaluate((t) => { t.scrollTop = 0; });
      await new Promise((r) => setTimeout(r, 200));
    }
    await p.locator(".tool", { hasText: s.expectTool }).first().waitFor({ timeout: T });
    await shot(page, "sessions-panel");
    // nothing of a replay looks live: no spinner, no running card, no working line, no Stop
    const shown = await p.locator("#app").evaluate((app) => ({
      state: app.dataset.state,
      spinners: app.querySelectorAll(".transcript .codicon-modifier-spin").length,
      running: app.querySelectorAll('.tool[data-status="in_progress"], .tool[data-status="pending"], .tool-elapsed[data-running="true"]').length,
      working: !app.querySelector(".working")?.hidden,
      stop: getComputedStyle(app.querySelector("button.stop")).display !== "none",
      sessionButton: app.querySelector("button.session-picker")?.textContent ?? "",
    }));
    return { ...shown, selects, listed };
  },

  /** Accept from the panel while typing in the document: for each proposal (each changes its own line of
   * one file) the document's tab is clicked (the diff took the focus), the cursor goes to the top,
   * Accept is clicked without taking the focus, and `zz` + Enter are typed 0-60 ms later. The
   * outcomes are recorded and the document saved at the end (pytest judges the text on disk). */
  async keystrokes_right_after_accept_never_garble(page, s) {
    const p = panel(page);
    await quickOpen(page, s.file);
    await promptInPanel(page, s.prompt);
    const tries = [];
    let previous = null;
    // the document's own editor (not a diff's side) holding the keyboard focus
    const documentFocused = page.locator(".editor-group-container.active .editor-instance .monaco-editor.focused:not(.original-in-monaco-diff-editor):not(.modified-in-monaco-diff-editor)");
    for (let i = 0; i < s.tries; i++) {
      const t0 = Date.now();
      const at = {};
      const card = p.locator('.proposal[data-outcome="pending"]').last();
      await card.waitFor({ timeout: T });
      at.card = Date.now() - t0;
      const id = await card.getAttribute("data-proposal-id");
      if (id === previous) throw new Error(`try ${i}: no new proposal after ${previous}`);
      previous = id;
      // the diff has opened (in front after the prompt typed in the panel; later ones, the keyboard in
      // the document, behind it): the document in front, at its top
      await page.locator('.editor-group-container.active .tab[aria-label*="(proposal)"]').first().waitFor({ timeout: T });
      at.diff = Date.now() - t0;
      await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
      at.clicked = Date.now() - t0;
      await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.file}"]`).waitFor({ timeout: T });
      // the keys go where the user sees the cursor: once the document's editor has the focus (under
      // load they once went elsewhere: a try's "zz" was missing from the document, no outcome wrong)
      await documentFocused.waitFor({ timeout: T });
      at.tab = Date.now() - t0;
      await page.keyboard.press("Control+Home");
      const delay = Math.round((i * 60) / Math.max(1, s.tries - 1));
      await p.locator(`.proposal[data-proposal-id="${id}"] button.accept-all`).dispatchEvent("click"); // the focus stays in the document
      if (delay > 0) await page.waitForTimeout(delay);
      await page.keyboard.type(s.typed);
      await page.keyboard.press("Enter");
      const done = p.locator(`.proposal[data-proposal-id="${id}"]:not([data-outcome="pending"])`);
      at.typed = Date.now() - t0;
      await done.waitFor({ timeout: T });
      at.done = Date.now() - t0;
      tries.push({ delay, outcome: await done.getAttribute("data-outcome"), at });
      writeFileSync(`${config.results}.progress`, JSON.stringify(tries));
      if (i === 0) await shot(page, "race-first");
    }
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    // race.py's text to disk, for pytest to judge (only it: earlier scenarios' documents stay unsaved)
    await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
    await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.file}"]`).waitFor({ timeout: T });
    await page.keyboard.press("Control+S");
    await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).waitFor({ state: "detached", timeout: T });
    await shot(page, "race-end");
    return { tries };
  },

  /** A ~200 KB answer with 60 tool calls: the transcript's DOM stays small (far items are placeholders),
   * each markdown block is rendered once, scrolling back to the top draws the first paragraph again
   * from its kept HTML. */
  async long_answer_stays_bounded(page, s) {
    const p = panel(page);
    await p.locator("button.new-session").click(); // a transcript of its own
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T });
    await promptInPanel(page, s.prompt);
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "long-answer-panel");
    const transcript = p.locator(".transcript");
    const measure = () => transcript.evaluate((t) => {
      let nodes = 0;
      const walker = document.createTreeWalker(t, NodeFilter.SHOW_ALL);
      while (walker.nextNode()) nodes++;
      const app = document.getElementById("app");
      return { nodes, mdBlocks: Number(app.dataset.mdBlocks), mdRenders: Number(app.dataset.mdRenders) };
    });
    const after = await measure();
    const toolCards = await transcript.evaluate((t) => t.querySelectorAll(".slot-tool").length);
    const lastShown = await p.locator(".agent", { hasText: s.answer }).count() > 0;
    await transcript.evaluate((t) => { t.scrollTop = 0; });
    const first = p.locator(".agent", { hasText: s.first }).first();
    const firstShownAfterScroll = await first.waitFor({ timeout: T }).then(() => true, () => false);
    const scrolled = await measure();
    await transcript.evaluate((t) => { t.scrollTop = t.scrollHeight; });
    return { ...after, toolCards, lastShown, firstShownAfterScroll, mdRendersAfterScroll: scrolled.mdRenders };
  },

  /** Newcomer 4, finding 1: a session whose history holds a 2 MB answer (made by `agent-server run` before
   * the window opened) is opened from the session picker, and a prompt is sent at once, while its replay
   * arrives. The page records (a 10 ms timer in it, never a locator polling the DOM) how many markdown
   * renders had been done when the prompt's bubble, and when the answer's end, first showed. Then the prompt's answer, the order of the slots, and the answer's first line drawn once
   * scrolled to; New at the end (the next scenarios' requests do not carry 2 MB). */
  async two_megabyte_replay_stays_usable(page, s) {
    const p = panel(page);
    const transcript = p.locator(".transcript");
    await p.locator("button.new-session").click();
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    await p.locator("button.session-picker").click();
    const rows = page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
    await page.locator(".quick-input-widget .quick-input-title", { hasText: "Agent: Open Session" }).waitFor({ timeout: T });
    await page.keyboard.type(s.title);
    await rows.first().filter({ hasText: s.title }).waitFor({ timeout: T });
    await transcript.evaluate((t, [prompt, end]) => {
      const w = /** @type {any} */ (window);
      const app = document.getElementById("app");
      const bubble = () => {
        for (let n = t.lastElementChild; n; n = n.previousElementSibling) if (n.classList.contains("slot-user") && (n.textContent ?? "").includes(prompt)) return n;
        return undefined;
      };
      const endShown = () => [...t.querySelectorAll(".slot-agent")].some((a) => (a.firstElementChild?.lastElementChild?.textContent ?? "").includes(end));
      w.__seen = new Promise((resolve) => {
        const seen = { rendersBefore: Number(app.dataset.mdRenders) };
        const timer = setInterval(() => {
          const b = bubble();
          if (b && !seen.bubble) seen.bubble = { mdRenders: Number(app.dataset.mdRenders), note: b.querySelector(".queued-note")?.textContent ?? "" };
          if (!seen.end && endShown()) seen.end = { mdRenders: Number(app.dataset.mdRenders), bubbleShown: b !== undefined };
          if (seen.bubble && seen.end) {
            clearInterval(timer);
            resolve(seen);
          }
        }, 10);
      });
    }, [s.prompt, s.end]);
    await page.keyboard.press("Enter");
    // sent at once, from inside the page (a Playwright click would wait for the page to answer first)
    await transcript.evaluate((_t, text) => {
      const input = /** @type {HTMLTextAreaElement} */ (document.querySelector("textarea.input"));
      input.value = text;
      /** @type {HTMLButtonElement} */ (document.querySelector("button.send")).click();
    }, s.prompt);
    const seen = await transcript.evaluate(() => /** @type {any} */ (window).__seen);
    await p.locator(".agent", { hasText: s.end }).first().waitFor({ timeout: T });
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "two-megabyte-replay");
    const order = await transcript.evaluate((t, [prompt, end, answer]) => {
      const slots = [...t.children];
      const at = (f) => slots.findIndex(f);
      return {
        end: at((n) => n.classList.contains("slot-agent") && (n.textContent ?? "").includes(end)),
        prompt: at((n) => n.classList.contains("slot-user") && (n.textContent ?? "").includes(prompt)),
        answer: at((n) => n.classList.contains("slot-agent") && (n.textContent ?? "").includes(answer)),
        slots: slots.length,
        note: slots.find((n) => n.classList.contains("slot-user") && (n.textContent ?? "").includes(prompt))?.querySelector(".queued-note")?.textContent ?? "",
      };
    }, [s.prompt, s.end, s.answer]);
    const mdBlocks = Number(await p.locator("#app").getAttribute("data-md-blocks"));
    await transcript.evaluate((t) => { t.scrollTop = 0; });
    const firstShown = await p.locator(".agent", { hasText: s.first }).first().waitFor({ timeout: T }).then(() => true, () => false);
    await p.locator("button.new-session").click();
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    return { seen, order, mdBlocks, firstShown };
  },

  /** bench/vscode_panel.py (not in CI): a 2 MB answer with 60 tool calls — when its last words show,
   * and the renderers' private memory idle and after it; then a second long answer stopped halfway —
   * when the click on Stop happened (the bench's tap on the server's stdin says when session/cancel
   * arrived). */
  async stream_bench(page, s) {
    const p = panel(page);
    await p.locator("button.new-session").click();
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    const idle = rendererMemory(ctx.ch.child.pid);
    await promptInPanel(page, s.prompt);
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: 900_000 });
    const lastShownAt = Date.now();
    await waitIdle(page);
    const after = rendererMemory(ctx.ch.child.pid);
    await shot(page, "bench-long-answer");
    await promptInPanel(page, s.stopPrompt);
    // halfway: the second answer's tool cards (kept as slots when far from the viewport) reach stopAtTools
    await p.locator(".slot-tool").nth(s.stopAtTools - 1).waitFor({ state: "attached", timeout: 900_000 });
    const stop = p.locator("button.stop");
    await stop.evaluate((b) => b.addEventListener("click", () => { b.dataset.clickedAt = String(Date.now()); }, { once: true }));
    await stop.click();
    const stopClickedAt = Number(await stop.getAttribute("data-clicked-at"));
    await waitIdle(page);
    return { lastShownAt, stopClickedAt, memory: { idle, after } };
  },

  /** bench/vscode_panel.py --burst (not in CI; newcomer 3, finding 4): one long answer arriving at once.
   * A 10 ms interval timer in the webview records how long its main thread was blocked between ticks
   * while the answer rendered (the longest gap − 10 ms), and when the answer's last words showed. With
   * BENCH_CPU_PROFILE=FILE / BENCH_TRACE=FILE: a CDP CPU profile / a Chromium trace of that stretch too. */
  async burst_bench(page, s) {
    const p = panel(page);
    await p.locator("button.new-session").click();
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    const transcript = p.locator(".transcript");
    // measured in the page, never polled from outside (a locator's text search reads the whole DOM)
    await transcript.evaluate(() => {
      const w = /** @type {any} */ (window);
      const app = document.getElementById("app");
      w.__gaps = [];
      let last = performance.now();
      let sawBusy = false;
      w.__done = new Promise((resolve) => {
        const timer = setInterval(() => {
          const now = performance.now();
          w.__gaps.push(now - last);
          last = now;
          if (app.dataset.state === "busy") sawBusy = true;
          // the turn ended and every queued block is drawn (a build without the queue: no data-drawing)
          if (sawBusy && app.dataset.state === "idle" && (app.dataset.drawing ?? "0") === "0") {
            clearInterval(timer);
            resolve(Date.now());
          }
        }, 10);
      });
    });
    const cpu = process.env.BENCH_CPU_PROFILE ? await page.context().newCDPSession(page) : undefined;
    if (cpu) {
      await cpu.send("Profiler.enable");
      await cpu.send("Profiler.setSamplingInterval", { interval: 2000 });
      await cpu.send("Profiler.start");
    }
    const tracing = process.env.BENCH_TRACE ? page.context().browser() : undefined;
    if (tracing) await tracing.startTracing(page, { path: process.env.BENCH_TRACE, categories: ["devtools.timeline", "blink", "disabled-by-default-devtools.timeline"] });
    const sentAt = Date.now();
    await promptInPanel(page, s.prompt);
    const lastShownAt = await transcript.evaluate(() => /** @type {any} */ (window).__done);
    if (tracing) await tracing.stopTracing();
    if (cpu) writeFileSync(process.env.BENCH_CPU_PROFILE, JSON.stringify((await cpu.send("Profiler.stop")).profile));
    const gaps = await transcript.evaluate(() => /** @type {any} */ (window).__gaps);
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    const blocked = gaps.map((g) => Math.max(0, g - 10)).sort((a, b) => a - b);
    return { sentAt, lastShownAt, maxBlockedMs: blocked.at(-1) ?? 0, p95BlockedMs: blocked[Math.floor(blocked.length * 0.95)] ?? 0, ticks: gaps.length };
  },

  /** bench/vscode_panel.py --replay (not in CI): a session/load replay of a session with many cards.
   * Two sessions are made first (a short one: the floor; the long one: many steps of text and
   * tool calls), then each is opened from the session picker in an empty panel while a 10 ms interval
   * timer in the webview records how long its main thread was blocked (the longest gap − 10 ms) until
   * the replay's last words are drawn and nothing is left queued; and the same timer over 2 s idle. */
  async replay_bench(page, s) {
    const p = panel(page);
    const transcript = p.locator(".transcript");
    const fresh = async () => {
      await p.locator("button.new-session").click();
      await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    };
    for (const [prompt, answer] of [[s.shortPrompt, s.shortAnswer], [s.prompt, s.answer]]) {
      await fresh();
      await promptInPanel(page, prompt);
      await p.locator(".agent", { hasText: answer }).first().waitFor({ timeout: 900_000 });
      await waitIdle(page);
    }
    // measured in the page (a text locator polling the panel reads the whole DOM and blocks it itself)
    // `during`: a prompt sent right after the choice (its bubble must show while the replay arrives);
    // the replay counts as drawn once its end text is in the last agent message's last part (cheap to
    // read: never the whole transcript's text) and the prompt's bubble is shown
    const gaps = (end, ms, during = "") => transcript.evaluate((t, [endText, limit, duringText]) => {
      const w = /** @type {any} */ (window);
      const app = document.getElementById("app");
      w.__gaps = [];
      w.__duringShownMs = undefined;
      let last = performance.now();
      const started = last;
      const endShown = () => { // in one of the last agent messages (the prompt's answer may follow)
        let seen = 0;
        for (let n = t.lastElementChild; n && seen < 3; n = n.previousElementSibling) {
          if (!n.classList.contains("slot-agent")) continue;
          seen++;
          const part = n.firstElementChild?.lastElementChild ?? n.lastElementChild;
          if ((part?.textContent ?? "").includes(endText)) return true;
        }
        return false;
      };
      const duringShown = () => {
        for (let n = t.lastElementChild; n; n = n.previousElementSibling) if (n.classList.contains("slot-user") && (n.textContent ?? "").includes(duringText)) return true;
        return false;
      };
      w.__done = new Promise((resolve) => {
        const timer = setInterval(() => {
          const now = performance.now();
          w.__gaps.push(now - last);
          last = now;
          if (duringText && w.__duringShownMs === undefined && duringShown()) w.__duringShownMs = now - started;
          const drawn = (app.dataset.drawing ?? "0") === "0";
          const done = endText && drawn && endShown() && (duringText ? w.__duringShownMs !== undefined : app.dataset.state === "idle");
          if (done || now - started > limit) {
            clearInterval(timer);
            resolve(now - started);
          }
        }, 10);
      });
    }, [end, ms, during]);
    const result = async () => {
      const took = await transcript.evaluate(() => /** @type {any} */ (window).__done);
      const got = await transcript.evaluate(() => /** @type {any} */ (window).__gaps);
      const duringShownMs = await transcript.evaluate(() => /** @type {any} */ (window).__duringShownMs);
      const blocked = got.map((g) => Math.max(0, g - 10)).sort((a, b) => a - b);
      return { maxBlockedMs: blocked.at(-1) ?? 0, p95BlockedMs: blocked[Math.floor(blocked.length * 0.95)] ?? 0, ticks: got.length, tookMs: took, duringShownMs: duringShownMs ?? null };
    };
    const open = async (title, end, during) => {
      await fresh();
      await p.locator("button.session-picker").click();
      const rows = page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
      await page.locator(".quick-input-widget .quick-input-title", { hasText: "Agent: Open Session" }).waitFor({ timeout: T });
      await page.keyboard.type(title);
      await rows.first().filter({ hasText: title }).waitFor({ timeout: T });
      await gaps(end, 900_000, during);
      await page.keyboard.press("Enter");
      if (during) {
        // typed and sent from inside the page: a Playwright click waits for the page to answer
        await transcript.evaluate((_t, text) => {
          const input = /** @type {HTMLTextAreaElement} */ (document.querySelector("textarea.input"));
          input.value = text;
          /** @type {HTMLButtonElement} */ (document.querySelector("button.send")).click();
        }, during);
      }
      const r = await result();
      if (during) await p.locator(".agent", { hasText: s.duringAnswer }).first().waitFor({ timeout: 900_000 });
      await waitIdle(page);
      return r;
    };
    await fresh();
    await gaps("", 2000);
    const idle = await result();
    const short = await open(s.shortPrompt, s.shortAnswer);
    const long = await open(s.prompt, s.answer, s.during);
    const cards = await p.locator(".slot-tool").count();
    await shot(page, "bench-replay");
    return { idle, short, long, cards };
  },

  /** Issue 30, item 8: a file that is not open, a proposal with trailing spaces, Accept; the save
   * (a clean document: saved) trims them (files.trimTrailingWhitespace for [ini] in the workspace's
   * settings). The pytest side checks the disk and what the model was told. */
  async format_on_save_told_to_the_model(page, s) {
    const card = await acceptedAll(page, s, "format-on-save-diff");
    await shot(page, "format-on-save-panel");
    // what the user is told: the card's outcome line (newcomer 5 finding 0.1)
    return { outcome: ((await card.locator(".card-outcome").textContent()) ?? "").trim() };
  },

  /** /undo after the user changed a file the agent changed too (far from the agent's lines): the
   * question offers "Undo the agent's change, keep the rest" (agents_change_only) first, then "Take
   * the checkpoint" and "Keep the file as it is"; the first is chosen. The file (BOM, CRLF) is open
   * and saved in the editor: the restore goes into its document and is saved (pytest judges the bytes). */
  async undo_takes_back_only_the_agents_change(page, s) {
    const p = panel(page);
    await newSession(page); // the newest turn of its session is this one
    await acceptedAll(page, s);
    // the user's own line at the end, typed in the editor and saved
    await quickOpen(page, s.file);
    await page.keyboard.press("Control+End");
    await page.keyboard.type(s.typed);
    await page.keyboard.press("Enter");
    await page.keyboard.press("Control+S");
    await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).waitFor({ state: "detached", timeout: T });
    await promptInPanel(page, "/undo");
    const card = p.locator(".permission").last();
    const only = card.locator('button[data-option-id="agents_change_only"]');
    await only.waitFor({ timeout: T });
    await shot(page, "undo-three-buttons");
    const options = await card.locator("button.option").evaluateAll((bs) => bs.map((b) => [b.dataset.optionId, b.textContent.trim()]));
    await only.click();
    await p.locator(".agent, .tool", { hasText: s.undoSays }).last().waitFor({ timeout: T });
    await waitIdle(page);
    // what the panel said after the question: the card's answer, the restore's card and the command's answer
    const said = await p.locator(".transcript").evaluate((t) => {
      const items = Array.from(t.querySelectorAll(".item"));
      const from = items.findLastIndex((i) => i.classList.contains("user") && i.textContent.trim() === "/undo");
      return items.slice(from + 1).map((i) => i.textContent.trim()).join("\n");
    });
    await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
    await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.file}"]`).waitFor({ timeout: T });
    await shot(page, "undo-agents-change-only");
    return { options, said, dirty: await activeTabDirty(page), editor: await editorText(page) };
  },

  /** Newcomer 5, finding 0.1/0.2: the user's format-on-save for JSON (code-server's built-in JSON
   * formatter) pretty-prints the whole file at the save after Accept, and again at the save of the
   * /undo's restore. What the card, the Changes box and /undo say (pytest judges them and the disk). */
  async json_format_on_save_and_undo(page, s) {
    const p = panel(page);
    await newSession(page); // the newest turn of its session is this one
    const card = await acceptedAll(page, s);
    const outcome = ((await card.locator(".card-outcome").textContent()) ?? "").trim();
    const changes = ((await p.locator(".changes").first().textContent()) ?? "").trim();
    await shot(page, "json-format-on-save");
    await promptInPanel(page, "/undo");
    await waitDiff(page);
    await titleAction(page, "Accept All");
    await p.locator(".agent", { hasText: "Undo of turn" }).last().waitFor({ timeout: T });
    await waitIdle(page);
    const undo = ((await p.locator(".agent", { hasText: "Undo of turn" }).last().textContent()) ?? "").trim();
    await shot(page, "json-format-on-save-undo");
    // newcomer 6, finding 2: the turn counts as undone — the next /undo goes past it (its session has no other)
    const answers = await p.locator(".agent").count();
    await promptInPanel(page, "/undo");
    await p.locator(".agent").nth(answers).waitFor({ timeout: T });
    await waitIdle(page);
    const next = ((await p.locator(".agent").nth(answers).textContent()) ?? "").trim();
    return { outcome, changes, undo, next };
  },

  /** A permission question that arrives while the user has scrolled up (reading the long answer
   * above while a command runs) is drawn at the end, out of sight (far enough to be kept as its height
   * alone). What the panel shows then, before anything is clicked; then the way to it is followed. */
  async question_arrives_while_scrolled_up(page, s) {
    const p = panel(page);
    await p.locator("button.new-session").click(); // a transcript of its own
    await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
    await promptInPanel(page, s.prompt);
    // the first question (a command that waits for the runner's flag), at the end: answered
    await p.locator('.permission button[data-option-id="allow_once"]').last().click({ timeout: T });
    await p.locator('.tool.kind-execute[data-status="in_progress"]').last().waitFor({ timeout: T });
    // while it runs, the user scrolls up to read the answer; then the command ends and the next question comes
    const transcript = p.locator(".transcript");
    await transcript.evaluate((t) => { t.scrollTop = 0; });
    const scrolledAway = await transcript.evaluate((t) => t.scrollHeight - t.scrollTop - t.clientHeight);
    writeFileSync(s.flag, "go\n");
    await p.locator(".slot-permission").nth(1).waitFor({ state: "attached", timeout: T });
    const look = () => transcript.evaluate(async (t) => {
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); // the paints after it settled
      const slot = t.querySelectorAll(".slot-permission")[1];
      const view = t.getBoundingClientRect();
      const box = slot.getBoundingClientRect();
      const bar = document.querySelector(".question-waiting");
      const allow = slot.querySelector('button[data-option-id="allow_once"]');
      const shown = (e) => Boolean(e) && !e.hidden && e.getClientRects().length > 0 && e.getBoundingClientRect().height > 0;
      return {
        cardInView: box.bottom > view.top && box.top < view.bottom,
        cardDrawn: slot.childElementCount > 0,
        bar: shown(bar) ? (bar.textContent ?? "").trim() : null,
        allowInView: Boolean(allow) && allow.getBoundingClientRect().top >= view.top && allow.getBoundingClientRect().bottom <= view.bottom,
        allowFocused: Boolean(allow) && document.activeElement === allow,
        scrollTop: t.scrollTop,
      };
    });
    const arrived = await look();
    await shot(page, "question-while-scrolled-up");
    const bar = p.locator("button.question-waiting");
    let followed = null;
    if (arrived.bar) {
      await bar.click();
      followed = await look();
      await shot(page, "question-followed");
    } else {
      await transcript.evaluate((t) => { t.scrollTop = t.scrollHeight; }); // as a user who found it would: the turn ends
    }
    await p.locator('.permission button[data-option-id="allow_once"]').last().click({ timeout: T });
    await p.locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    return { scrolledAway, arrived, followed, barAfter: await bar.isVisible() };
  },

  /** Issue 30, item 3, in the second window (dev -> share, opened as dev/proj): the file open with an
   * unsaved line, the agent reads and edits it by its real path (share/proj/linked.py); Accept from
   * the diff's title. The user's tab holds both texts, still unsaved (one document: none hidden). */
  async symlinked_workspace_one_document(page, s) {
    await quickOpen(page, s.file, `${s.folders[0]}/${s.file}`);
    await page.keyboard.press("Control+End");
    await page.keyboard.type(s.typed);
    await promptInPanel(page, s.prompt);
    await waitDiff(page);
    await shot(page, "symlink-diff");
    await titleAction(page, "Accept All");
    await panel(page).locator('.proposal[data-outcome="applied"]', { hasText: s.file }).first().waitFor({ timeout: T });
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await page.locator(`.editor-group-container.active .tab[aria-label^="${s.file}"]`).first().click();
    await page.locator(`.editor-group-container.active .tab.active[aria-label^="${s.file}"]`).waitFor({ timeout: T });
    await shot(page, "symlink-panel");
    expectEqual("document text", await editorText(page), s.expected);
    expectEqual("document still unsaved", await activeTabDirty(page), true);
    expectEqual("diff editors left open", await page.locator(".monaco-diff-editor").count(), 0);
  },

  /** Issue 30, item 4, in the second window: an edit to a file of the workspace's second folder is
   * proposed, accepted from the diff's title, and saved (it was not open). */
  async multi_root_edit_lands(page, s) {
    await promptInPanel(page, s.prompt);
    await waitDiff(page);
    await shot(page, "multi-root-diff");
    const diffShown = await diffCrumbs(page);
    await titleAction(page, "Accept All");
    await panel(page).locator('.proposal[data-outcome="applied"]', { hasText: s.file }).first().waitFor({ timeout: T });
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "multi-root-panel");
    return { diffShown };
  },

  /** Issue 30, item 6: Agent: Open Session… lists the workspace's sessions (titles, dates), narrows
   * them as the user types, and the row's trash button deletes one after a confirmation; opened
   * again, the picker no longer lists it. */
  async session_quickpick_searches_and_deletes(page, s) {
    const rows = page.locator(".quick-input-widget .quick-input-list .monaco-list-row");
    const open = async () => {
      await runCommand(page, "Agent: Open Session");
      await page.locator(".quick-input-widget .quick-input-title", { hasText: "Agent: Open Session" }).waitFor({ timeout: T });
      await page.locator(".quick-input-widget .quick-input-progress-bar.done, .quick-input-widget .monaco-progress-container.done").first().waitFor({ state: "attached", timeout: 5000 }).catch(() => {});
      await rows.first().waitFor({ timeout: T });
    };
    await open();
    const listed = await rows.allTextContents();
    await page.locator(".quick-input-widget input").fill(s.search);
    await rows.filter({ hasText: s.title }).first().waitFor({ timeout: T });
    const found = await rows.allTextContents();
    await shot(page, "session-quickpick");
    const row = rows.filter({ hasText: s.title }).first();
    await row.hover();
    await row.locator('.action-label[aria-label^="Delete session"], .action-label[title^="Delete session"]').first().click();
    await page.locator(".monaco-dialog-box .monaco-button", { hasText: "Delete" }).first().click({ timeout: T });
    await rows.filter({ hasText: s.title }).first().waitFor({ state: "detached", timeout: T });
    await page.keyboard.press("Escape");
    await open();
    const after = await rows.allTextContents();
    await shot(page, "session-quickpick-after-delete");
    await page.keyboard.press("Escape");
    return { listed, found, after };
  },

  /** Issue 30, item 6, in the second window: Agent: Restart Server, then a prompt — answered in the
   * same session (the pytest side checks the model saw the earlier prompts), no divider drawn. */
  async restart_server_resumes_the_session(page, s) {
    await runCommand(page, "Agent: Restart Server");
    const resumed = panel(page).locator(".notice", { hasText: "was restarted (Agent: Restart Server)" }).last();
    await resumed.waitFor({ timeout: T });
    const said = (await resumed.textContent()) ?? "";
    await page.locator('.statusbar [aria-label^="Agent: ready"]').first().waitFor({ timeout: T });
    await promptInPanel(page, s.prompt);
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "restart-resumed");
    const dividers = await panel(page).locator(".notice.divider").count();
    // Another agent-server process (a closed tab's server) takes the session over; the next
    // automatic resume (Restart Server) is refused SESSION_BUSY: the panel offers the picker's choice,
    // and Take over here brings the session back (that process lets it go).
    const other = await otherServer(s.folders);
    let takeOver;
    try {
      const [held] = (await other.request("session/list", { cwd: s.folders[0] })).sessions;
      await other.request("session/load", { sessionId: held.sessionId, cwd: s.folders[0], additionalDirectories: s.folders.slice(1), mcpServers: [], _meta: { agentServer: { takeOver: true } } });
      await runCommand(page, "Agent: Restart Server");
      const choice = panel(page).locator(".notice", { has: panel(page).locator("button", { hasText: "Take over here" }) }).last();
      await choice.waitFor({ timeout: T });
      await shot(page, "restart-busy-choice");
      const buttons = (await choice.locator("button").allTextContents()).map((t) => t.trim());
      await choice.locator("button", { hasText: "Take over here" }).click();
      // the load clears the panel (the refusal's notices go) and replays the session
      await panel(page).locator(".notice", { hasText: "another agent-server process holds it" }).first().waitFor({ state: "detached", timeout: T });
      await panel(page).locator(".item.user", { hasText: s.prompt }).first().waitFor({ timeout: T });
      await waitIdle(page);
      const released = await other.stderrHas(`released session ${held.sessionId}`, T);
      takeOver = { buttons, released, sameSession: true };
    } finally {
      await other.stop();
    }
    return { dividers, said, takeOver };
  },

  /** Issue 30, item 6, in the second window: a window reload (a new extension host, an empty panel)
   * reopens the session the window had open: its prompts and answers are drawn again (session/load). */
  async window_reload_reopens_the_session(page, s) {
    // newcomer finding F4: a proposal waits when the window reloads (its turn ends with the old host)
    const proposalTab = page.locator('.tab[aria-label*="(proposal)"]');
    let proposalTabsBefore = 0;
    if (s.proposalPrompt) {
      await promptInPanel(page, s.proposalPrompt);
      await waitDiff(page);
      proposalTabsBefore = await proposalTab.count();
    }
    // as a user reloads (the command stores the window's editors first; a browser refresh may not)
    await Promise.all([page.waitForEvent("load", { timeout: 120_000 }), runCommand(page, "Developer: Reload Window")]);
    await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
    await focusPanel(page);
    for (const text of s.users) await panel(page).locator(".item.user", { hasText: text }).first().waitFor({ timeout: T });
    await panel(page).locator(".agent", { hasText: s.answer }).first().waitFor({ timeout: T });
    await waitIdle(page);
    const reopened = panel(page).locator(".notice", { hasText: "The window was reloaded" }).last();
    const said = await reopened.waitFor({ timeout: T }).then(() => reopened.textContent(), () => null);
    await shot(page, "reload-reopened");
    const proposalTabs = await proposalTab.count();
    const brokenEditors = await page.locator(".editor-group-container", { hasText: "could not be opened" }).count();
    return { dividers: await panel(page).locator(".notice.divider").count(), said, proposalTabsBefore, proposalTabs, brokenEditors };
  },

  /** try-vscode.sh --check: the extension activates and the panel answers a prompt. */
  async panel_answers(page, s) {
    await promptInPanel(page, s.prompt);
    await panel(page).locator(".agent", { hasText: s.answerContains }).first().waitFor({ timeout: T });
    await waitIdle(page);
    await shot(page, "check-panel");
  },
};

Object.assign(scenarios, panelScenarios({ config, shot, promptInPanel, waitIdle }));
Object.assign(scenarios, mergeScenarios({ config, shot, quickOpen, promptInPanel, waitIdle, waitDiff, titleAction }));
Object.assign(scenarios, planningScenarios({ config, shot, quickOpen, promptInPanel, waitIdle, waitDiff, titleAction }));

/**
 * Another agent-server process on the same state folder, driven over ACP (JSON lines on stdio), as
 * a closed tab's server would be: `request(method, params)`, `stderrHas(text, ms)`, `stop()`.
 */
async function otherServer(folders) {
  const env = { ...process.env, ...(config.env ?? {}), AGENT_SERVER_BASE_URL: config.settings["agentServer.baseUrl"] };
  const child = spawn(config.settings["agentServer.path"], [], { cwd: folders[0], env, stdio: ["pipe", "pipe", "pipe"], detached: true });
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d.toString(); });
  const waiting = new Map();
  let next = 1;
  createInterface({ input: child.stdout }).on("line", (line) => {
    let m;
    try { m = JSON.parse(line); } catch { return; }
    if (m.id !== undefined && m.method) child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "not here" } }) + "\n");
    else if (m.id !== undefined && waiting.has(m.id)) {
      const { resolve, reject } = waiting.get(m.id);
      waiting.delete(m.id);
      if (m.error) reject(new Error(`${JSON.stringify(m.error)}\n${stderr.slice(-2000)}`));
      else resolve(m.result);
    }
  });
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = next++;
    waiting.set(id, { resolve, reject });
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  });
  await request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  return {
    request,
    stderrHas: async (text, ms) => until(() => stderr.includes(text), ms),
    stop: async () => {
      child.stdin.end();
      const gone = await until(() => child.exitCode !== null || child.signalCode !== null, 5000);
      if (!gone) try { process.kill(-child.pid, "SIGKILL"); } catch { /* gone */ }
    },
  };
}

/** Private memory (kB: Private_Clean + Private_Dirty) of each Chromium renderer process of the
 * browser whose process group is `pgid`, by pid. */
function rendererMemory(pgid) {
  const out = {};
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) !== pgid) continue;
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--type=renderer")) continue;
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
      const kb = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(rollup)?.[1] ?? 0);
      out[pid] = kb("Private_Clean") + kb("Private_Dirty");
    } catch {
      // gone
    }
  }
  return out;
}

/** Pids of the agent-server processes started from `command` whose working folder is `cwd`
 * (`leaders`: only those leading their process group — the servers, not a child forked from one). */
function agentServers(command, cwd, leaders = false) {
  const out = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const leader = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === Number(pid);
      if (argv.includes(command) && (leader || !leaders) && realpathSync(`/proc/${pid}/cwd`) === realpathSync(cwd)) out.push(Number(pid));
    } catch {
      // gone or not ours
    }
  }
  return out;
}

const tmp = mkdtempSync(join(config.tmp, "vscode-e2e-"));
let cs;
let ch;
const t0 = Date.now();
try {
  cs = await startCodeServer({ node: config.node, entry: config.codeServerEntry, vsix: config.vsix, tmp, workspace: config.workspace, settings: config.settings, env: config.env ?? {} });
  ctx.cs = cs;
  ch = await startChromium({ executable: config.chromium, tmp });
  ctx.ch = ch;
  results.pids = { codeServer: cs.child.pid, chromium: ch.child.pid };
  await openWorkbench(ch.page, cs.url);
  await focusPanel(ch.page);
  results.timings.startup_s = (Date.now() - t0) / 1000;
  for (const s of config.scenarios) {
    const started = Date.now();
    let page = ch.page;
    try {
      page = await pageFor(s);
      const extra = await scenarios[s.name](page, s);
      results.scenarios[s.name] = { ok: true, seconds: (Date.now() - started) / 1000, ...(extra ?? {}) };
    } catch (err) {
      await shot(page, `${s.name}-failure`);
      results.scenarios[s.name] = { ok: false, seconds: (Date.now() - started) / 1000, error: String(err?.stack ?? err) };
      if (s.stopOnFailure !== false && config.stopOnFailure) break;
    }
    save();
  }
} catch (err) {
  results.error = String(err?.stack ?? err);
  if (ch) await shot(ch.page, "startup-failure");
} finally {
  results.timings.total_s = (Date.now() - t0) / 1000;
  if (cs) results.codeServerLogTail = cs.log.join("").slice(-4000);
  for (const page of ctx.windows.values()) await page.close().catch(() => {});
  await ch?.browser.close().catch(() => {});
  results.groupsGone = await stopAll(ch?.child, cs?.child);
  // the window is gone: no server of ours is left for any of its folders (each ends at its stdin's end)
  const folders = [config.workspace, ...config.scenarios.flatMap((s) => [s.otherFolder, ...(s.folders ?? [])]).filter(Boolean)];
  const left = () => folders.flatMap((f) => agentServers(config.settings["agentServer.path"], f));
  await until(() => left().length === 0, T); // asserted empty by tests/vscode: T only when one never exits
  results.serversLeft = left();
  results.windowReloads = ctx.windowReloads ?? 0;
  save();
}
const ok = !results.error && config.scenarios.every((s) => results.scenarios[s.name]?.ok);
process.exit(ok ? 0 : 1);
