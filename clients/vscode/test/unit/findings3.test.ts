// The VS Code findings of the third newcomer (NEWCOMER3-FINDINGS.md), each named after the finding:
// the whole extension (activate) with its panel in a fake webview and a scripted ACP agent as the server,
// what the webview is sent folded as the webview folds it.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { StubDocument, Uri, commands, files, resetStub, window, workspace } from "../stub/vscode";
import { deactivate } from "../../src/extension";
import { sha256 } from "../../src/proposalModel";
import type { ChatEvent } from "../../src/protocol";
import { type ChatState, type Item, completeCommand, fold, initialState, turnChanges } from "../../webview/state";
import { memento, openPanel } from "./panelHarness";

beforeEach(() => memento.clear());
beforeEach(() => resetStub());
afterEach(async () => {
  await deactivate();
});

const proposalOf = (s: ChatState) => s.items.find((i): i is Extract<Item, { type: "proposal" }> => i.type === "proposal");

describe("finding 1", () => {
  it("finding 1: the last hunk accepted by its own button was shown (rejected) although it was applied", async () => {
    const PATH = join(process.cwd(), "multi-finding1.txt");
    const rows = Array.from({ length: 30 }, (_, i) => `row ${i + 1}\n`).join("");
    files.set(PATH, rows);
    const doc = new StubDocument(Uri.file(PATH) as never, rows, 1, false);
    workspace.textDocuments.push(doc);
    const uri = `file://${PATH}`;
    const hunk = (line: number) => ({ range: { start: { line, character: 0 }, end: { line, character: `row ${line + 1}`.length } }, newText: `ROW ${line + 1} changed` });
    const params = { sessionId: "{sessionId}", label: "Edit multi.txt", edit: { documentChanges: [{ textDocument: { uri, version: 1 }, edits: [hunk(1), hunk(14), hunk(28)] }] }, baseHashes: { [uri]: sha256(rows) } };
    const panel = await openPanel({ turns: [[{ request: "_agent_server/apply_workspace_edit", params }]] });
    panel.send({ type: "prompt", text: "change rows 2, 15 and 29" });
    await panel.until("the proposal", (s) => proposalOf(s)?.hunks.length === 3);
    const id = proposalOf(panel.state())!.proposalId;
    await commands.registered.get("agentServer.acceptHunk")!(id, 0, 0);
    await commands.registered.get("agentServer.rejectHunk")!(id, 0, 1);
    await commands.registered.get("agentServer.acceptHunk")!(id, 0, 2);
    await panel.until("the decision", (s) => proposalOf(s)?.outcome !== undefined && !s.busy);
    expect(doc.text.split("\n").filter((l) => l.endsWith("changed"))).toEqual(["ROW 2 changed", "ROW 29 changed"]);
    const card = proposalOf(panel.state())!;
    expect(card.outcome).toBe("partial");
    expect(card.hunks.map((h) => h.state)).toEqual(["accepted", "rejected", "accepted"]);
  });
});

describe("finding 4", () => {
  it("finding 4: a 750 KB answer arriving in one burst was rendered in one paint (the panel froze for seconds)", async () => {
    const { BlockSplitter, PAINT_BUDGET, blockCost, drawnFrom } = await import("../../webview/blocks");
    const paragraphs = Array.from({ length: 10_000 }, (_, i) => `Paragraph ${i}: **bold ${i}** and \`code_${i}\` and plain words to fill the line.\n\n`);
    const text = paragraphs.join("");
    expect(text.length).toBeGreaterThan(700_000);
    // the whole answer in one event (a fast provider, a session/load replay), as main.ts's paint takes it
    const splitter = new BlockSplitter();
    const blocks = [...splitter.feed(text), ...splitter.finish(text)];
    expect(blocks.map((b) => b.trimEnd())).toEqual(paragraphs.map((p) => p.trimEnd()));
    const longest = Math.max(...paragraphs.map((p) => p.length));
    // one paint draws the newest blocks within its budget (the end the panel shows), none of the rest
    const from = drawnFrom(blocks.map(blockCost), PAINT_BUDGET);
    expect(blocks.slice(from).reduce((n, b) => n + blockCost(b), 0)).toBeLessThanOrEqual(PAINT_BUDGET + longest);
    expect(from).toBeGreaterThan(blocks.length - 100);
    expect(blocks.slice(from).at(-1)).toBe(blocks.at(-1));
    expect(drawnFrom(blocks.map(blockCost), 0)).toBe(blocks.length); // a budget spent draws nothing
  });

  it("finding 4: the panel renders markdown only within the paint's budget, or a part when it comes near the viewport", async () => {
    const { readFileSync } = await import("node:fs");
    const main = readFileSync(fileURLToPath(new URL("../../webview/main.ts", import.meta.url)), "utf8");
    // renderBlock ← addBlocks (the blocks drawn now, from drawnFrom within the budget) and a chunk's fill (near the viewport)
    expect(main.match(/renderBlock\(/g)).toHaveLength(2); // its definition and addBlocks' call
    expect(main.match(/map\(renderBlock\)/g)).toHaveLength(1); // a chunk's blocks, rendered when it is first drawn
    expect(main.match(/addBlocks\(/g)).toHaveLength(2); // its definition and drain's call
    expect(main).toMatch(/function drain\(view: AgentView, blocks: string\[\], budget: number\): void \{\n\s+const costs = blocks\.map\(blockCost\);\n\s+const drawn = drawnFrom\(costs, budget\);/);
    expect(main).toMatch(/function paint\(\): void \{\n\s+frame = 0;\n\s+paintBudget = PAINT_BUDGET;/);
  });
});

describe("finding 5 and the rest of finding 21", () => {
  const update = (u: Record<string, unknown>): ChatEvent => ({ kind: "update", update: u as never });
  const edited = (id: string) => update({ sessionUpdate: "tool_call", toolCallId: id, title: "Edit bom.txt", kind: "edit", status: "completed", content: [{ type: "diff", path: "/ws/bom.txt", oldText: "a\n", newText: "b\n" }] });
  const restore = (which: "undo" | "redo", n: number, done: boolean, text: string) =>
    update({ sessionUpdate: "tool_call_update", toolCallId: `${which}-${n}`, title: `${which === "undo" ? "Undo" : "Redo"} turn 1`, status: "completed", content: [{ type: "content", content: { type: "text", text } }], _meta: { agentServer: { restore: { which, turn: 1, done, changed: [] } } } });
  const turn = (text: string, ...events: ChatEvent[]): ChatEvent[] => [{ kind: "user", text }, { kind: "turn-start", text }, ...events, { kind: "turn-end", text, stopReason: "end_turn" } as ChatEvent];

  it("finding 5: after a refused /redo, Undo this turn was offered for a turn already undone", () => {
    const events = [
      ...turn("edit bom.txt", edited("c1")),
      ...turn("/undo", update({ sessionUpdate: "tool_call", toolCallId: "undo-1", title: "Undo turn 1", kind: "edit", status: "in_progress" }), restore("undo", 1, true, "bom.txt: restored")),
      ...turn("/redo", update({ sessionUpdate: "tool_call", toolCallId: "redo-2", title: "Redo turn 1", kind: "edit", status: "in_progress" }),
        restore("redo", 2, false, "bom.txt: not restored (stale: the file changed in the editor). Nothing was redone: turn 1 stays undone (/redo offers it again).")),
    ];
    const s = events.reduce(fold, initialState());
    expect(turnChanges(s)?.undo).toBe("undone"); // the box offers Undo this turn only for undefined / declined
  });

  it("newcomer finding 3b: after /undo and /redo the Changes box's Undo this turn named turn 2's file but undid turn 1", () => {
    const wrote = (id: string, path: string) => update({ sessionUpdate: "tool_call", toolCallId: id, title: `Write ${path}`, kind: "edit", status: "completed", content: [{ type: "diff", path: `/ws/${path}`, oldText: null, newText: "x\n" }] });
    const run = (which: "undo" | "redo", n: number, turnNo: number, text: string) => [
      update({ sessionUpdate: "tool_call", toolCallId: `${which}-${n}`, title: `${which === "undo" ? "Undo" : "Redo"} turn ${turnNo}`, kind: "edit", status: "in_progress" }),
      update({ sessionUpdate: "tool_call_update", toolCallId: `${which}-${n}`, status: "completed", content: [{ type: "content", content: { type: "text", text } }], _meta: { agentServer: { restore: { which, turn: turnNo, done: true, changed: [] } } } }),
    ];
    const events = [
      ...turn("WRITE dbl1.txt", wrote("w1", "dbl1.txt")),
      ...turn("WRITE dbl2.txt", wrote("w2", "dbl2.txt")),
      ...turn("/undo", ...run("undo", 10, 2, "dbl2.txt: removed (the agent had created it)")),
      ...turn("/undo", ...run("undo", 11, 1, "dbl1.txt: removed (the agent had created it)")),
      ...turn("/redo", ...run("redo", 12, 1, "dbl1.txt: brought back")),
    ];
    const s = events.reduce(fold, initialState());
    const box = turnChanges(s)!;
    // the next /undo takes back turn 1 (brought back): the box names it, and offers to undo it
    expect(box.files.map((f) => f.path)).toEqual(["/ws/dbl1.txt"]);
    expect(box.prompt).toBe("WRITE dbl1.txt");
    expect(box.undo).toBeUndefined();
  });

  it("finding 5: a refused /redo's stale card showed text meant for the model and offered Ask the Agent Again", async () => {
    const { isRestoreProposal, proposalMessage, ASK_AGAIN_NOTE } = await import("../../webview/state");
    expect(isRestoreProposal("Redo turn 3: bom.txt")).toBe(true);
    expect(isRestoreProposal("Undo turn 12: a.py")).toBe(true);
    expect(isRestoreProposal("Edit bom.txt")).toBe(false);
    expect(proposalMessage(`bom.txt changed in the editor since the agent read it${ASK_AGAIN_NOTE}`)).toBe("bom.txt changed in the editor since the agent read it");
    // the answer to the server keeps the note (src/proposals.ts askAgain), the card drops it
    const { readFileSync } = await import("node:fs");
    const main = readFileSync(fileURLToPath(new URL("../../webview/main.ts", import.meta.url)), "utf8");
    expect(main).toContain('if (!restore) row.append(button("Ask the Agent Again"');
    expect(main).toContain("const message = proposalMessage(item.message);");
  });

  it("finding 21: a command's answer lost its line breaks (the /model TOML suggestion on one line)", async () => {
    const toml = 'Unknown model fake-2. Add it to the config file:\n[[models]]\nid = "fake-2"\nname = "fake-2"  # optional: profile, context_window, price';
    const model = (text: string) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text }, messageId: "m1" });
    const events: ChatEvent[] = [
      { kind: "user", text: "explain" }, { kind: "turn-start", text: "explain" }, model("chunk 0\n"),
      ...turn("/model fake-2", update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: toml } })),
      model("chunk 1"), { kind: "turn-end", text: "explain", stopReason: "end_turn" } as ChatEvent,
    ];
    const s = events.reduce(fold, initialState());
    const agents = s.items.filter((i): i is Extract<Item, { type: "agent" }> => i.type === "agent");
    expect(agents.map((a) => [a.text, a.command ?? false])).toEqual([["chunk 0\nchunk 1", false], [toml, true]]);
    const { readFileSync } = await import("node:fs");
    const css = readFileSync(fileURLToPath(new URL("../../media/webview.css", import.meta.url)), "utf8");
    expect(css).toMatch(/\.command-answer \{ white-space: pre-wrap; \}/);
  });

  it("finding 21: Undo this turn was offered for the running turn", async () => {
    const { readFileSync } = await import("node:fs");
    const main = readFileSync(fileURLToPath(new URL("../../webview/main.ts", import.meta.url)), "utf8");
    expect(main).toContain('if ((found.undo === undefined || found.undo === "declined") && !state.busy) {');
  });
});

describe("finding 8", () => {
  it("finding 8: the take-over card showed _meta.agentServer.takeOver and session/fork", () => {
    const error = "cannot load session sess_1: it is open in another agent-server process (pid 12633) (another editor window?); close it there first, or take it over (_meta.agentServer.takeOver) or open a copy (session/fork)";
    const s = fold(initialState(), { kind: "load-refused", sessionId: "sess_1", error, busy: { pid: 12633, canTakeOver: true } } as ChatEvent);
    const notice = s.items.find((i): i is Extract<Item, { type: "notice" }> => i.type === "notice")!;
    expect(notice.text).toContain("pid 12633");
    expect(`${notice.text} ${notice.detail ?? ""}`).not.toMatch(/_meta|session\/fork|takeOver/);
    expect(notice.actions!.map((a) => a.label)).toEqual(["Take over here", "Open a copy", "Cancel"]);
  });
});

describe("finding 11", () => {
  it("finding 11: cancelling Sign in said Not signed in in the panel although a key is configured, and the set-up buttons vanished", async () => {
    const panel = await openPanel({ checkConfig: { ok: true, baseUrl: "http://127.0.0.1:9/v1", model: "m-1", keyRequired: true, keySource: "AGENT_SERVER_API_KEY" }, turns: [] });
    await panel.until("the set-up card", (s) => s.setup !== undefined);
    panel.send({ type: "action", action: "signIn" });
    const deadline = Date.now() + 15_000;
    while (window.terminals.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    window.closeTerminal(window.terminals[0]); // Ctrl-C in the login terminal: no status 0
    while (window.infos.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(window.infos).toEqual([expect.stringMatching(/^Not signed in: .* The API key from AGENT_SERVER_API_KEY is still used\.$/)]);
    expect(panel.state().items).toEqual([]); // the empty panel keeps its set-up card and buttons
  });
});

describe("slash commands before the first session", () => {
  it("slash commands could not be completed before the first session: the panel did not use initialize's list", async () => {
    const initCommands = [{ name: "undo", description: "Take back the newest turn's files" }, { name: "usage", description: "Tokens" }, { name: "mode", description: "Mode", input: { hint: "<id>" } }];
    const panel = await openPanel({ initCommands, turns: [] });
    await panel.until("the commands of initialize", (s) => s.commands.length === 3);
    const s = panel.state();
    expect(s.currentSession).toBeUndefined(); // no session was made for them
    expect(panel.agentLog()).not.toContain("session/new");
    expect(completeCommand(s.commands, "/u").map((c) => c.name)).toEqual(["undo", "usage"]);
    expect(s.commands.find((c) => c.name === "mode")?.hint).toBe("<id>");
  });
});

describe("finding 18", () => {
  it("finding 18: a one-line 2 MB file's card showed the same first 80 characters on both sides", async () => {
    const { hunkSummary } = await import("../../src/extension");
    const text = Array.from({ length: 120_000 }, (_, i) => `var a${i}=${i};`).join("");
    const start = text.indexOf("var a60000=60000;") + "var a60000=".length;
    const summary = hunkSummary(text, start, start + "60000".length, 0, 0, "6");
    const [before, after] = summary.split(" → ");
    expect(before).not.toBe(after);
    expect(summary).toMatch(/^line 1, column \d+: "…[^"]*var a60000=60000;[^"]*…" → "…[^"]*var a60000=6;var a60001[^"]*…"$/);
    expect(summary.length).toBeLessThan(220);
  });
});
