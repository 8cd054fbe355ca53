// Newcomer 4, finding 7: the user types on other lines of a file while the agent's proposal for it
// waits — the proposal is merged with their typing, not stale; typing next to its hunk stays stale.
// Finding 6's aside: a file holding U+2028 asked twice whether to remove its unusual line terminators.
// Self-contained: it writes its own file and uses only the helpers run.mjs hands it.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { panel } from "./workbench.mjs";

const T = 60_000 * Number(process.env.AGENT_SERVER_TEST_HANG_SCALE || 1); // a hang guard: tests/support/timeouts.py

export function mergeScenarios({ config, shot, quickOpen, promptInPanel, waitIdle, waitDiff, titleAction }) {
  const tab = (page, name) => page.locator(`.editor-group-container.active .tab[aria-label^="${name}"]`).first();
  /** The document's editor, focused, the cursor at the end of its line `line` (1-based). */
  const toLineEnd = async (page, file, line) => {
    await tab(page, file).click();
    await page.locator(`.editor-group-container.active .tab.active[aria-label^="${file}"]`).waitFor({ timeout: T });
    await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
    await page.keyboard.press("Control+Home");
    for (let i = 1; i < line; i++) await page.keyboard.press("ArrowDown");
    await page.keyboard.press("End");
  };
  /** The proposed side of the diff, once it shows each of `texts` (the extension merged the typing
   * into it: the last keystrokes too, typed at full speed). */
  const proposedShows = async (page, texts) => {
    await page.locator('.editor-group-container.active .tab[aria-label*="(proposal)"]').first().click();
    let lines = page.locator(".editor-group-container.active .modified-in-monaco-diff-editor .view-lines");
    for (const text of texts) lines = lines.filter({ hasText: text });
    await lines.first().waitFor({ timeout: T });
  };
  return {
    async typing_on_another_line_while_a_proposal_waited(page, s) {
      const p = panel(page);
      const file = join(config.workspace, s.file);
      writeFileSync(file, Buffer.from(s.bytes, "hex"));
      await quickOpen(page, s.file, file);
      await promptInPanel(page, s.prompt);
      await waitDiff(page);
      const card = p.locator(".proposal", { hasText: s.file }).last();
      // ` USER` at the end of line 1 (the change is on line 2), then a line above it all
      await toLineEnd(page, s.file, 1);
      await page.keyboard.type(" USER");
      await page.keyboard.press("Control+Home");
      await page.keyboard.type("zero");
      await page.keyboard.press("Enter");
      await proposedShows(page, ["zero", "USER", "TWO"]);
      const staleWhileTyping = (await card.getAttribute("data-stale")) === "true";
      await shot(page, "merge-diff");
      await titleAction(page, "Accept All");
      const done = p.locator(".proposal:not([data-outcome=\"pending\"])", { hasText: s.file }).last();
      await done.waitFor({ timeout: T });
      const outcome = await done.getAttribute("data-outcome");
      await p.locator(".agent", { hasText: s.answer }).last().waitFor({ timeout: T });
      await waitIdle(page);
      const diskBeforeSave = readFileSync(file).toString("hex");
      await tab(page, s.file).click();
      const dirty = (await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).count()) > 0;
      await page.keyboard.press("Control+S");
      await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).waitFor({ state: "detached", timeout: T });
      const saved = readFileSync(file).toString("hex");
      // the negative: typing at the end of the line the next change is on stays stale
      await promptInPanel(page, s.nextPrompt);
      await waitDiff(page);
      await toLineEnd(page, s.file, s.nextLine);
      await page.keyboard.type("X");
      const staleCard = p.locator('.proposal[data-stale="true"]', { hasText: s.file }).last();
      const nextStaleAtOnce = await staleCard.waitFor({ timeout: T }).then(() => true, () => false);
      // typed in the editor (the first keystroke's event finds the document clean: its dirty state follows)
      const staleSaysEditor = await p.locator('.proposal[data-stale="true"]', { hasText: "changed in the editor" }).last().waitFor({ timeout: T }).then(() => true, () => false);
      // its id now: once answered the card is no longer marked stale
      const id = await p.locator(".proposal", { hasText: s.file }).last().getAttribute("data-proposal-id");
      await shot(page, "merge-next-stale");
      // Accept All from the diff's title: refused, answered stale (the card offers no Accept)
      await page.locator('.editor-group-container.active .tab[aria-label*="(proposal)"]').first().click();
      await titleAction(page, "Accept All");
      const nextDone = p.locator(`.proposal[data-proposal-id="${id}"]:not([data-outcome="pending"])`);
      await nextDone.waitFor({ timeout: T });
      const nextOutcome = await nextDone.getAttribute("data-outcome");
      await p.locator(".agent", { hasText: s.nextAnswer }).last().waitFor({ timeout: T });
      await waitIdle(page);
      await tab(page, s.file).click();
      await page.keyboard.press("Control+S");
      await page.locator(`.editor-group-container.active .tab.active.dirty[aria-label^="${s.file}"]`).waitFor({ state: "detached", timeout: T });
      return { staleWhileTyping, outcome, diskBeforeSave, dirty, saved, nextStaleAtOnce, staleSaysEditor, nextOutcome, savedAfterNext: readFileSync(file).toString("hex") };
    },

    /** A proposal for a file holding U+2028 (not open): the diff shows, and is accepted, without VS Code
     * asking to remove its unusual line terminators (it asked twice: once per side). */
    async unusual_line_terminators_asked_once_at_most(page, s) {
      const p = panel(page);
      const file = join(config.workspace, s.file);
      writeFileSync(file, Buffer.from(s.bytes, "hex"));
      await promptInPanel(page, s.prompt);
      await waitDiff(page);
      // the diff has drawn both sides and its CodeLens (the dialog, when asked, comes with the editors)
      await page.locator(".editor-group-container.active .monaco-diff-editor .modified-in-monaco-diff-editor .view-lines", { hasText: "SECOND" }).first().waitFor({ timeout: T });
      await page.locator(".editor-group-container.active .monaco-diff-editor .codelens-decoration a", { hasText: "Accept change 1" }).first().waitFor({ timeout: T });
      await shot(page, "unusual-line-terminators-diff");
      const dialog = page.locator(".monaco-dialog-box", { hasText: "nusual" });
      let dialogs = 0;
      while (await dialog.count() > 0) {
        dialogs++;
        await dialog.first().locator(".monaco-button", { hasText: "Ignore" }).first().click({ timeout: T });
        await dialog.first().waitFor({ state: "detached", timeout: T }).catch(() => {});
        if (dialogs > 3) break;
      }
      await titleAction(page, "Accept All");
      const done = p.locator('.proposal:not([data-outcome="pending"])', { hasText: s.file }).last();
      await done.waitFor({ timeout: T });
      const outcome = await done.getAttribute("data-outcome");
      await p.locator(".agent", { hasText: s.answer }).last().waitFor({ timeout: T });
      await waitIdle(page);
      return { dialogs, outcome, saved: readFileSync(file).toString("hex") };
    },

    /** While the panel showed a new session (B), session A's running turn asked a question: it was
     * drawn into B's transcript and answered there. Now B shows none; a row says A waits, and its
     * "Go to it" opens A, where the question is live and answered. */
    async question_of_another_session_stays_with_it(page, s) {
      const p = panel(page);
      await p.locator("button.new-session").click(); // session A: a transcript of its own
      await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
      await promptInPanel(page, s.prompt);
      await p.locator('.permission button[data-option-id="allow_once"]').last().click({ timeout: T });
      await p.locator('.tool.kind-execute[data-status="in_progress"]').last().waitFor({ timeout: T });
      await p.locator("button.new-session").click(); // session B, while A's command runs
      await p.locator(".transcript .slot").first().waitFor({ state: "detached", timeout: T }).catch(() => {});
      writeFileSync(s.flag, "go\n"); // A's command ends: its next question comes while B is shown
      const row = p.locator(".waiting-elsewhere .waiting-row", { hasText: s.question });
      await row.waitFor({ timeout: T });
      const rowText = (await row.textContent())?.trim();
      const cardsInB = await p.locator(".permission, .proposal").count();
      await shot(page, "question-of-another-session");
      await row.locator("button.go-to-session").click();
      const allow = p.locator('.permission button[data-option-id="allow_once"]:not(:disabled)').last();
      await allow.waitFor({ timeout: T });
      const stopInA = await p.locator("button.stop:not(:disabled)").count();
      await allow.click();
      await p.locator(".agent", { hasText: s.answer }).last().waitFor({ timeout: T });
      await waitIdle(page);
      return { rowText, cardsInB, stopInA, rowAfter: await p.locator(".waiting-elsewhere .waiting-row").count() };
    },
  };
}
