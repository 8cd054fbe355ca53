// Newcomer 4, finding 1: a session opened while its long history is still being replayed. The whole
// extension (activate) with its panel in a fake webview and a scripted ACP agent whose session/load
// replay stops halfway until the test lets it go on; what the webview is sent, folded as it folds it.
// (How fast the panel draws a replay is bench/vscode_panel.py --replay's; that it stays usable meanwhile
// is the code-server scenario's, tests/vscode/test_vscode_e2e.py.)
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { resetStub, window } from "../stub/vscode";
import { deactivate } from "../../src/extension";
import type { ChatEvent } from "../../src/protocol";
import { fold, initialState } from "../../webview/state";
import { memento, openPanel } from "./panelHarness";

beforeEach(() => memento.clear());
beforeEach(() => resetStub());
afterEach(async () => {
  await deactivate();
});

const answer = (text: string) => [{ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } }];
/** A replayed history of `n` steps after the agent's "replayed question" / "replayed answer": each a read card and a line of text. */
const history = (n: number) =>
  Array.from({ length: n }, (_, k) => [
    { sessionUpdate: "tool_call", toolCallId: `tc-${k}`, title: `Read part ${k}`, kind: "read", status: "completed" },
    { sessionUpdate: "agent_message_chunk", messageId: `msg-${k}`, content: { type: "text", text: `replayed part ${k}` } },
  ]).flat();
const paused = () => join(mkdtempSync(join(tmpdir(), "replay-")), "go-on");

describe("newcomer 4 finding 1: a long session's replay", () => {
  it("a prompt sent while a session's replay was still arriving was shown only after it, and its answer belongs after the whole history", async () => {
    const file = paused();
    const panel = await openPanel({ loadable: true, replay: history(5), replayPause: { after: 4, file }, turns: [answer("the live answer")] });
    panel.send({ type: "loadSession", sessionId: "s-long" });
    await panel.until("half the replay", (s) => s.items.some((i) => i.type === "agent" && i.text === "replayed part 1"));
    panel.send({ type: "prompt", text: "sent during the replay" });
    // shown at once, while the replay has not ended
    await panel.until("the prompt's bubble", () => panel.users().includes("sent during the replay"));
    expect(panel.sent.some((e) => e.kind === "loaded")).toBe(false);
    // sent once the replay ended: the server's answer cannot come inside the history
    expect(panel.agentLog()).not.toContain("session/prompt");
    writeFileSync(file, "go on\n");
    await panel.until("the live answer", panel.answered("the live answer"));
    const shown = panel.state().items.map((i) => (i.type === "tool" ? i.toolCallId : "text" in i ? i.text : i.type));
    expect(shown).toEqual([
      "replayed question", "replayed answer",
      "tc-0", "replayed part 0", "tc-1", "replayed part 1", "tc-2", "replayed part 2", "tc-3", "replayed part 3", "tc-4", "replayed part 4",
      "sent during the replay", "the live answer",
    ]);
    const mine = panel.state().items.find((i) => i.type === "user" && i.text === "sent during the replay");
    expect(mine).toMatchObject({ type: "user" });
    expect((mine as { afterReplay?: boolean }).afterReplay).toBeUndefined(); // an ordinary prompt once sent
  });

  it("a prompt sent right at the choice, before the replay's first update, was wiped by the replay's start", async () => {
    const file = paused();
    const panel = await openPanel({ loadable: true, replay: history(2), replayPause: { after: 0, file }, turns: [answer("the live answer")] });
    panel.send({ type: "loadSession", sessionId: "s-long" });
    panel.send({ type: "prompt", text: "sent at once" });
    await panel.until("the prompt's bubble", () => panel.users().includes("sent at once"));
    writeFileSync(file, "go on\n");
    await panel.until("the live answer", panel.answered("the live answer"));
    expect(panel.users()).toEqual(["replayed question", "sent at once"]);
    expect(panel.state().items.at(-1)).toMatchObject({ type: "agent", text: "the live answer" });
  });

  it("during a session's replay the context meter and the pickers showed the previous session's figure and mode", async () => {
    const select = (id: string, currentValue: string, values: string[]) => ({ id, name: id, category: id, type: "select", currentValue, options: values.map((v) => ({ value: v, name: v })) });
    const configOptions = [select("mode", "danger-full-access", ["read-only", "danger-full-access"]), select("model", "m-2", ["m-1", "m-2"])];
    const usage = { update: { sessionUpdate: "usage_update", used: 13_000, size: 100_000 } };
    const file = paused();
    const panel = await openPanel({ loadable: true, configOptions, replay: history(3), replayPause: { after: 1, file }, turns: [[usage, ...answer("counted")]] });
    panel.send({ type: "prompt", text: "how much?" });
    await panel.until("the answer", panel.answered("counted"));
    const status = window.statusItems[0]!;
    await panel.until("the status bar's figure", (s) => status.text.includes("· 13%") && s.usage?.used === 13_000 && s.selects.length === 2);
    panel.send({ type: "loadSession", sessionId: "s-long" });
    await panel.until("the replay under way", (s) => s.items.some((i) => i.type === "tool" && i.toolCallId === "tc-0"));
    // the loaded session's figures are unknown until it says them: none of the last session's
    const s = panel.state();
    expect(status.text).not.toContain("%");
    expect(status.tooltip).not.toContain("13,000");
    expect(s.usage).toBeUndefined();
    expect(s.selects).toEqual([]);
    expect(s.currentSession).toBe("s-long");
    writeFileSync(file, "go on\n");
    await panel.until("loaded", () => panel.sent.some((e) => e.kind === "loaded"));
    expect(existsSync(file)).toBe(true);
  });

  it("the fold keeps a prompt sent during a replay below the replayed history and above its answer", () => {
    const update = (u: Record<string, unknown>): ChatEvent => ({ kind: "update", update: u as never });
    const events: ChatEvent[] = [
      { kind: "reset", sessionId: "s", replay: true },
      update({ sessionUpdate: "user_message_chunk", messageId: "user-1", content: { type: "text", text: "old question" } }),
      { kind: "user", text: "new question" },
      update({ sessionUpdate: "agent_message_chunk", messageId: "msg-2", content: { type: "text", text: "old " } }),
      update({ sessionUpdate: "tool_call", toolCallId: "tc-1", title: "Read", kind: "read", status: "completed" }),
      update({ sessionUpdate: "agent_message_chunk", messageId: "msg-3", content: { type: "text", text: "old answer" } }),
      { kind: "loaded", sessionId: "s" },
      { kind: "turn-start", text: "new question", sessionId: "s" },
      update({ sessionUpdate: "agent_message_chunk", messageId: "msg-9", content: { type: "text", text: "new answer" } }),
      { kind: "turn-end", text: "new question", stopReason: "end_turn", sessionId: "s" },
    ];
    const s = events.reduce(fold, initialState());
    expect(s.items.map((i) => (i.type === "tool" ? i.toolCallId : "text" in i ? i.text : i.type))).toEqual(["old question", "old ", "tc-1", "old answer", "new question", "new answer"]);
    expect(s.replaying).toBeUndefined();
  });
});
