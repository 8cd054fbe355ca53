// Newcomer 5, finding 9a: a prompt whose turn failed (the endpoint unreachable) or was cancelled before
// the agent answered was not put back in the panel's prompt box: the user had to type it again.
import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/protocol";
import { type ChatState, fold, initialState, promptToGiveBack } from "../../webview/state";

/** Folds `events` and returns what the prompt box is given back at the last one. */
function givenBack(events: ChatEvent[]): string | undefined {
  let s: ChatState = initialState();
  let back: string | undefined;
  for (const e of events) {
    s = fold(s, e);
    back = promptToGiveBack(s, e);
  }
  return back;
}

const sent = (text: string): ChatEvent[] => [{ kind: "user", text }, { kind: "turn-start", text }];

describe("a failed or unanswered prompt comes back to the prompt box", () => {
  it("a failed prompt (endpoint unreachable) was not put back in the prompt box", () => {
    expect(givenBack([...sent("SAY hello wrong url"), { kind: "turn-end", text: "SAY hello wrong url", error: "cannot reach http://127.0.0.1:18999/v1/chat/completions", errorKind: "connection" }]))
      .toBe("SAY hello wrong url");
  });

  it("a prompt cancelled before any answer (a hanging endpoint) was not put back in the prompt box", () => {
    expect(givenBack([...sent("SAY hello"), { kind: "turn-end", text: "SAY hello", stopReason: "cancelled" }])).toBe("SAY hello");
    // the server's "no answer from the model yet" notices are not an answer (shown apart, as a notice)
    const waiting: ChatEvent = { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "\n\n[agent-server] No answer from the model yet (15 s); still waiting — stop the turn to give up.\n\n" }, _meta: { agentServer: { waiting: { seq: 1, attempt: 1, seconds: 15 } } } } };
    expect(givenBack([...sent("SAY hello"), waiting, { kind: "turn-end", text: "SAY hello", stopReason: "cancelled" }])).toBe("SAY hello");
  });

  it("a prompt answered (text, a tool call) and then cancelled, or ended normally, stays sent", () => {
    const chunk: ChatEvent = { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Working on it" } } };
    expect(givenBack([...sent("fix it"), chunk, { kind: "turn-end", text: "fix it", stopReason: "cancelled" }])).toBeUndefined();
    const tool: ChatEvent = { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Read a.py", kind: "read", status: "completed" } };
    expect(givenBack([...sent("read it"), tool, { kind: "turn-end", text: "read it", stopReason: "cancelled" }])).toBeUndefined();
    expect(givenBack([...sent("hi"), chunk, { kind: "turn-end", text: "hi", stopReason: "end_turn" }])).toBeUndefined();
  });

  it("a slash command is never given back", () => {
    expect(givenBack([...sent("/compact"), { kind: "turn-end", text: "/compact", error: "nothing to compact" }])).toBeUndefined();
  });
});
