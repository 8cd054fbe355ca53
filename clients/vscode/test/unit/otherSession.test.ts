// Questions of another session (VS Code panel): while the panel showed session B, a permission question
// or an edit proposal of session A's running turn was drawn into B's transcript and answered there, and
// Stop then cancelled only B. Now A's question stays with A: B's transcript is untouched, the panel
// says A waits and goes there in one click, where the question is live and Stop stops A.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { files, resetStub } from "../stub/vscode";
import { deactivate } from "../../src/extension";
import { sha256 } from "../../src/proposalModel";
import { type ChatState, waitingElsewhere } from "../../webview/state";
import { memento, openPanel } from "./panelHarness";

beforeEach(() => memento.clear());
beforeEach(() => resetStub());
afterEach(async () => {
  await deactivate();
});

const answer = (text: string) => [{ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } }];
const toolCall = { toolCallId: "c1", title: "Read .env", kind: "read", status: "pending" };
const options = [{ optionId: "allow", name: "Allow once", kind: "allow_once" }, { optionId: "reject", name: "Reject", kind: "reject_once" }];
const questions = (s: ChatState) => s.items.filter((i) => i.type === "permission" || i.type === "proposal");
const PEND = "/ws/pend2.txt";
const proposal = {
  sessionId: "{sessionId}",
  toolCallId: "c2",
  label: "Edit pend2.txt",
  edit: { documentChanges: [{ textDocument: { uri: `file://${PEND}`, version: null }, edits: [{ range: { start: { line: 1, character: 0 }, end: { line: 1, character: 2 } }, newText: "Q2" }] }] },
  baseHashes: { [`file://${PEND}`]: sha256("q1\nq2\n") },
};

describe("a question of another session than the one shown", () => {
  it("a question from session A's running turn was posted into session B's transcript, answerable there; Stop then cancelled only B", async () => {
    const panel = await openPanel({
      loadable: true,
      // A's turn waits until B's prompt (played first), then asks
      turns: [[{ awaitPrompt: true }, { request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }, ...answer("first answer")], answer("b answer")],
    });
    panel.send({ type: "prompt", text: "READ .env" });
    await panel.until("A's turn", (s) => s.busy && s.currentSession !== undefined);
    const a = panel.state().currentSession!;
    panel.send({ type: "loadSession", sessionId: "s-old" });
    await panel.until("session B", (s) => s.currentSession === "s-old" && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    panel.send({ type: "prompt", text: "hello B" });
    await panel.until("A's question (said to wait elsewhere, or drawn here)", (s) => (waitingElsewhere(s).length === 1 || questions(s).length > 0) && s.items.some((i) => i.type === "agent" && i.text.includes("b answer")));
    const inB = panel.state();
    expect(questions(inB)).toEqual([]); // B's transcript untouched
    expect(inB.busy).toBe(false); // nothing of B runs: Stop is not offered here
    expect(waitingElsewhere(inB)).toEqual([{ sessionId: a, text: `Session “${a.slice(0, 8)}” waits for your answer: Read .env` }]);
    // one click: session A, its question live there, its turn running (Stop stops A)
    panel.send({ type: "loadSession", sessionId: a });
    await panel.until("the question in A", (s) => s.currentSession === a && s.items.some((i) => i.type === "permission" && !i.outcome));
    const inA = panel.state();
    expect(inA.busy).toBe(true);
    expect(waitingElsewhere(inA)).toEqual([]);
    panel.send({ type: "cancel" });
    await panel.until("session/cancel sent", () => panel.agentLog().includes("session/cancel"));
    const q = inA.items.find((i) => i.type === "permission" && !i.outcome) as { permId: string };
    panel.send({ type: "permission", id: q.permId, optionId: "allow" });
    await panel.until("A's answer", panel.answered("first answer"));
    expect(panel.state().waiting).toEqual([]);
  });

  it("an edit proposal of session A: switched away and back while it waited, it is live there with working buttons (1b's proposal path)", async () => {
    files.set(PEND, "q1\nq2\n");
    const panel = await openPanel({
      loadable: true,
      turns: [[{ request: "_agent_server/apply_workspace_edit", params: proposal }, ...answer("edit answered")], answer("b answer")],
    });
    panel.send({ type: "prompt", text: "EDIT pend2.txt" });
    await panel.until("the proposal", (s) => s.items.some((i) => i.type === "proposal" && !i.outcome));
    const a = panel.state().currentSession!;
    panel.send({ type: "loadSession", sessionId: "s-old" });
    await panel.until("session B", (s) => s.currentSession === "s-old" && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")) && (waitingElsewhere(s).length === 1 || questions(s).length > 0));
    expect(questions(panel.state())).toEqual([]);
    expect(waitingElsewhere(panel.state())[0]!.text).toContain("Edit pend2.txt");
    panel.send({ type: "loadSession", sessionId: a });
    await panel.until("the proposal in A", (s) => s.currentSession === a && s.items.some((i) => i.type === "proposal" && !i.outcome));
    const card = panel.state().items.find((i) => i.type === "proposal" && !i.outcome) as { proposalId: string; hunks: { state: string }[] };
    expect(card.hunks.map((h) => h.state)).toEqual(["pending"]);
    expect(panel.state().busy).toBe(true);
    panel.send({ type: "proposal", id: card.proposalId, action: "accept" });
    await panel.until("the edit's answer", panel.answered("edit answered"));
    expect(files.get(PEND)).toBe("q1\nQ2\n");
    const done = panel.state().items.find((i) => i.type === "proposal") as { outcome?: string };
    expect(done.outcome).toBe("applied");
  });
});
