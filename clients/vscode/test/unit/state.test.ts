// The panel's state is a fold over the host's events: a dead server is reported with its stderr tail,
// a turn's end always returns to idle and marks tool calls left open as unfinished, and replaying the
// same events (session/load) rebuilds the same chat.
import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/protocol";
import { chunk } from "./chatEvents";
import { activity, fold, initialState, isStreaming, toolReason } from "../../webview/state";

const run = (events: ChatEvent[]) => events.reduce(fold, initialState());

describe("the chat fold", () => {
  it("reports a server that died mid-turn with its stderr tail and returns to idle", () => {
    const s = run([
      { kind: "user", text: "hi" },
      { kind: "turn-start" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Run `sleep 9`", kind: "execute", status: "in_progress" } },
      { kind: "server-exited", message: "agent-server exited (killed by SIGKILL)", stderrTail: "Traceback: boom" },
      { kind: "turn-end", error: "the server died during the turn (killed by SIGKILL)" },
    ]);
    expect(s.busy).toBe(false);
    expect(s.items.find((i) => i.type === "tool")).toMatchObject({ status: "unfinished" });
    const notice = s.items.find((i) => i.type === "notice" && i.detail);
    expect(notice).toMatchObject({ level: "error", detail: "Traceback: boom" });
    expect((notice as { text: string }).text).toContain("The session is resumed when the server is back");
  });

  it("a server killed during a turn is reported by one error notice, not two", () => {
    const s = run([
      { kind: "user", text: "hi" },
      { kind: "turn-start", text: "hi" },
      { kind: "server-exited", message: "agent-server exited (killed by SIGKILL)", stderrTail: "" },
      { kind: "turn-end", text: "hi", error: "the server died during the turn (killed by SIGKILL)" },
      { kind: "user", text: "again" },
      { kind: "turn-start", text: "again" },
      { kind: "turn-end", text: "again", error: "rate limited" },
    ]);
    expect(s.items.filter((i) => i.type === "notice").map((i) => (i as { text: string }).text)).toEqual([
      "agent-server exited (killed by SIGKILL). The session is resumed when the server is back.",
      "rate limited", // a later turn's own error is still shown
    ]);
  });

  it("streams chunks into one message and folds tool updates into one card", () => {
    const s = run([
      chunk("Hel"),
      chunk("lo"),
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Read a.py", kind: "read", status: "pending" } },
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed", content: [{ type: "content", content: { type: "text", text: "x = 1" } }] } },
      chunk("!"),
    ]);
    expect(s.items.map((i) => i.type)).toEqual(["agent", "tool", "agent"]);
    expect(s.items[0]).toMatchObject({ text: "Hello" });
    expect(s.items[1]).toMatchObject({ title: "Read a.py", status: "completed", output: "x = 1" });
  });

  it("replaying the same events gives the same chat", () => {
    const events: ChatEvent[] = [
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "fix it" } } },
      { kind: "update", update: { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "hmm" } } },
      { kind: "update", update: { sessionUpdate: "plan", entries: [{ content: "read", status: "completed", priority: "high" }] } },
      { kind: "update", update: { sessionUpdate: "usage_update", used: 10, size: 100, cost: { amount: 0.01, currency: "USD" } } },
    ];
    const strip = (s: ReturnType<typeof run>) => JSON.stringify({ ...s, nextId: 0 });
    expect(strip(run(events))).toBe(strip(run(events)));
    const s = run(events);
    expect(s.plan).toEqual([{ content: "read", status: "completed" }]);
    expect(s.usage).toEqual({ used: 10, size: 100, cost: { amount: 0.01, currency: "USD" } });
  });

  it("a slash command answered while an edit proposal waits leaves the turn's tool card, question and busy state alone", () => {
    const s = run([
      { kind: "user", text: "change it" },
      { kind: "turn-start" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Run `make`", kind: "execute", status: "pending" } },
      { kind: "permission", id: "p1", title: "Run `make`", reason: "not confined", options: [], hasDiff: false },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t2", title: "Edit k.txt", kind: "edit", status: "in_progress" } },
      { kind: "proposal", id: "e1", label: "Edit k.txt", files: ["k.txt"], ops: [], hunks: [] },
      { kind: "user", text: "/checkpoints" },
      { kind: "turn-start" },
      chunk("No checkpoints yet."),
      { kind: "turn-end", stopReason: "end_turn" },
    ]);
    expect(s.busy).toBe(true); // the first turn still runs
    const tool = (id: string) => s.items.find((i) => i.type === "tool" && i.toolCallId === id);
    expect(tool("t1")).toMatchObject({ status: "pending" });
    expect(tool("t2")).toMatchObject({ status: "in_progress" });
    expect(s.items.find((i) => i.type === "permission")).not.toHaveProperty("outcome");
    fold(s, { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "t2", status: "completed" } });
    fold(s, { kind: "turn-end", stopReason: "end_turn" });
    expect(s.busy).toBe(false);
    expect(tool("t2")).toMatchObject({ status: "completed" });
    expect(tool("t1")).toMatchObject({ status: "unfinished" }); // the last answer closes what is left open
    expect(s.items.filter((i) => i.type === "tool")).toHaveLength(2);
  });

  it("after a server crash the new session's first tool call gets its own card, not an earlier session's", () => {
    const tool = (id: string, title: string, status: string): ChatEvent => ({ kind: "update", update: { sessionUpdate: "tool_call", toolCallId: id, title, kind: "edit", status } });
    const s = run([
      { kind: "session", sessionId: "sess_old" },
      { kind: "user", text: "change it" },
      { kind: "turn-start", text: "change it" },
      tool("tc-11", "Edit calc.py", "pending"),
      { kind: "server-exited", message: "agent-server exited (killed by SIGKILL)", stderrTail: "" },
      { kind: "turn-end", text: "change it", error: "the server died during the turn (killed by SIGKILL)" },
      { kind: "user", text: "run the tests" },
      { kind: "session", sessionId: "sess_new" },
      { kind: "turn-start", text: "run the tests" },
      tool("tc-11", "Run `pytest`", "in_progress"),
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "tc-11", status: "completed" } },
    ]);
    const tools = s.items.filter((i) => i.type === "tool");
    expect(tools).toMatchObject([
      { sessionId: "sess_old", title: "Edit calc.py", status: "unfinished" },
      { sessionId: "sess_new", title: "Run `pytest`", status: "completed" },
    ]);
  });

  it("a prompt sent while another turn runs is shown queued below it and placed after that turn ends", () => {
    const s = run([
      { kind: "user", text: "A" },
      { kind: "turn-start", text: "A" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Edit calc.py", kind: "edit", status: "pending" } },
      { kind: "proposal", id: "e1", label: "Edit calc.py", files: ["calc.py"], ops: [], hunks: [] },
      { kind: "user", text: "B" },
      { kind: "turn-start", text: "B" },
    ]);
    expect(s.items.map((i) => i.type)).toEqual(["user", "tool", "proposal", "user"]);
    expect(s.items[3]).toMatchObject({ text: "B", queued: true });
    for (const e of [
      { kind: "proposal-done", id: "e1", outcome: "applied" },
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed" } },
      chunk("(The tests ran in your workspace.)"),
    ] as ChatEvent[]) fold(s, e);
    // A's remaining steps land above the queued prompt
    expect(s.items.map((i) => (i.type === "user" ? `user:${i.text}${i.queued ? ":queued" : ""}` : i.type))).toEqual(["user:A", "tool", "proposal", "agent", "user:B:queued"]);
    fold(s, { kind: "turn-end", text: "A", stopReason: "end_turn" });
    fold(s, chunk("I'll read the code first."));
    fold(s, { kind: "turn-end", text: "B", stopReason: "end_turn" });
    expect(s.items.map((i) => (i.type === "user" ? `user:${i.text}${i.queued ? ":queued" : ""}` : i.type))).toEqual(["user:A", "tool", "proposal", "agent", "user:B", "agent"]);
    const agents = s.items.filter((i) => i.type === "agent").map((i) => (i as { text: string }).text);
    expect(agents).toEqual(["(The tests ran in your workspace.)", "I'll read the code first."]); // not glued
    expect(s.busy).toBe(false);
  });

  it("a prompt queued while an answer streamed split the answer mid-word (newcomer finding F2)", () => {
    const s = run([
      { kind: "user", text: "count" },
      { kind: "turn-start", text: "count" },
      chunk("word0 word1 "),
      chunk("word24 wor"),
      { kind: "user", text: "and then?" },
      { kind: "turn-start", text: "and then?" },
    ]);
    const open = s.openText;
    fold(s, chunk("d25 word26"));
    expect(s.openText).toBe(open); // still streaming: the panel draws it as one open message
    // a call of the running turn after the prompt was queued is still that turn's (the Changes box)
    fold(s, { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t9", title: "Read a.py", kind: "read", status: "completed" } });
    fold(s, chunk(" word27"));
    fold(s, { kind: "turn-end", text: "count", stopReason: "end_turn" });
    fold(s, chunk("Then more."));
    fold(s, { kind: "turn-end", text: "and then?", stopReason: "end_turn" });
    expect(s.items.map((i) => (i.type === "user" ? `user:${i.text}${i.queued ? ":queued" : ""}` : `${i.type}:${(i as { text: string }).text}`))).toEqual([
      "user:count", "agent:word0 word1 word24 word25 word26", "tool:undefined", "agent: word27", "user:and then?", "agent:Then more.",
    ]);
    expect(s.items.find((i) => i.type === "tool")).toMatchObject({ turn: 1 });
  });

  it("a slash command answered at once while an answer streamed split the answer mid-word: the message stays one open block", () => {
    const s = run([
      { kind: "session", sessionId: "s1" },
      { kind: "user", text: "count" },
      { kind: "turn-start", text: "count" },
      chunk("word0 word24 wor", "msg-7"),
      { kind: "user", text: "/mode read-only" },
      { kind: "turn-start", text: "/mode read-only" },
      chunk("Mode: read-only."),
      chunk("d25", "msg-7"), // before the command's answer
      { kind: "turn-end", text: "/mode read-only", stopReason: "end_turn" },
      chunk(" word26", "msg-7"),
    ]);
    const [answer, mode] = s.items.filter((i) => i.type === "agent");
    expect(answer).toMatchObject({ text: "word0 word24 word25 word26" });
    expect(mode).toMatchObject({ text: "Mode: read-only." });
    expect(isStreaming(s, answer!)).toBe(true); // drawn as one open message: its tail plain, never closed mid-word
    expect(isStreaming(s, mode!)).toBe(false);
    expect(activity(s)).toBeUndefined(); // the answer streams: no "Working…"
    fold(s, { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Read a.py", kind: "read", status: "pending" } });
    expect(isStreaming(s, answer!)).toBe(false); // the agent's next card ends the message
    fold(s, chunk("Next step.", "msg-9"));
    fold(s, { kind: "turn-end", text: "count", stopReason: "end_turn" });
    expect(s.items.map((i) => (i.type === "tool" ? "tool" : `${i.type}:${(i as { text: string }).text}`))).toEqual([
      "user:count", "agent:word0 word24 word25 word26", "user:/mode read-only", "agent:Mode: read-only.", "tool", "agent:Next step.",
    ]);
    expect(s.items.some((i) => isStreaming(s, i))).toBe(false);
  });

  it("after Stop, a command's reply bubble sat above the stopped answer's Stopped: cancelled line", () => {
    // newcomer 4, finding 8: /usage typed while an answer streamed, then Stop
    const s = run([
      { kind: "session", sessionId: "s1" },
      { kind: "user", text: "explain" },
      { kind: "turn-start", text: "explain" },
      chunk("A long answer", "msg-1"),
      { kind: "user", text: "/usage" },
      { kind: "turn-start", text: "/usage" },
      chunk("No model usage recorded yet in this session (1 turn).", "cmd-2"),
      { kind: "turn-end", text: "/usage", stopReason: "end_turn" },
      chunk(" goes on", "msg-1"),
      { kind: "user", text: "queued next" },
      { kind: "turn-end", text: "explain", stopReason: "cancelled" },
    ]);
    expect(s.items.map((i) => `${i.type}:${(i as { text: string }).text}`)).toEqual([
      "user:explain", "agent:A long answer goes on", "notice:Stopped: cancelled",
      "user:/usage", "agent:No model usage recorded yet in this session (1 turn).", "user:queued next",
    ]);
  });

  it("two slash command answers sent close together were joined into one block: each cmd-N answer is its own command block", () => {
    const s = run([
      { kind: "session", sessionId: "s1" },
      { kind: "user", text: "count" },
      { kind: "turn-start", text: "count" },
      chunk("word0 wor", "msg-7"),
      { kind: "user", text: "/model" },
      { kind: "turn-start", text: "/model" },
      { kind: "user", text: "/bogus" },
      { kind: "turn-start", text: "/bogus" },
      chunk("The model is m.\n[[models]]\nid = \"x\"", "cmd-9"),
      chunk("Unknown command /bogus. The commands are:\n  /mode", "cmd-10"),
      chunk("d1", "msg-7"),
      { kind: "turn-end", text: "/model", stopReason: "end_turn" },
      { kind: "turn-end", text: "/bogus", stopReason: "end_turn" },
    ]);
    const agent = s.items.filter((i) => i.type === "agent") as { text: string; command?: boolean }[];
    expect(agent.map((i) => [i.text, !!i.command])).toEqual([
      ["word0 word1", false], ["The model is m.\n[[models]]\nid = \"x\"", true], ["Unknown command /bogus. The commands are:\n  /mode", true],
    ]);
    expect(isStreaming(s, s.items.find((i) => i.type === "agent")!)).toBe(true); // the answer goes on streaming
  });

  it("an agent that interleaves text and tool calls in one message: the text after a card goes below it, in reading order", () => {
    const chunk = (t: string): ChatEvent => ({ kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: t }, messageId: "m1" } });
    const s = run([
      { kind: "user", text: "go" },
      { kind: "turn-start", text: "go" },
      chunk("I'll read a.py."),
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "t1", title: "Read a.py", kind: "read", status: "completed" } },
      chunk("It says "),
      { kind: "notice", level: "info", text: "a notice of the panel" },
      chunk("x = 1."),
    ]);
    expect(s.items.map((i) => (i.type === "tool" ? "tool" : `${i.type}:${(i as { text: string }).text}`))).toEqual([
      "user:go", "agent:I'll read a.py.", "tool", "agent:It says x = 1.", "notice:a notice of the panel",
    ]);
    expect(isStreaming(s, s.items[3]!)).toBe(true);
  });

  it("a retried request keeps its step's messageId: its answer follows the retry notice, not glued to the failed try's text", () => {
    const chunk = (t: string, meta?: object): ChatEvent => ({ kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: t }, ...(meta ? { _meta: meta } : { messageId: "msg-3" }) } });
    const s = run([
      { kind: "user", text: "go" },
      { kind: "turn-start", text: "go" },
      chunk("Hel"),
      chunk("\n\n[agent-server] The model's answer broke off; retrying in 3 s (attempt 2 of 4)…\n\n", { agentServer: { retry: { seq: 4, attempt: 1, code: "STREAM_CLOSED", delaySeconds: 3 } } }),
      chunk("Hello!"),
    ]);
    expect(s.items.map((i) => `${i.type}:${(i as { text: string }).text}`)).toEqual([
      "user:go", "agent:Hel", "notice:[agent-server] The model's answer broke off; retrying in 3 s (attempt 2 of 4)…", "agent:Hello!",
    ]);
  });

  it("a slash command sent while a turn runs is answered in place, not queued", () => {
    const s = run([
      { kind: "user", text: "A" },
      { kind: "turn-start", text: "A" },
      { kind: "user", text: "/mode read-only" },
      { kind: "turn-start", text: "/mode read-only" },
      { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Mode: read-only." } } },
      { kind: "turn-end", text: "/mode read-only", stopReason: "end_turn" },
      { kind: "user", text: "/init" },
    ]);
    expect(s.items.map((i) => (i.type === "user" ? `${i.text}${i.queued ? ":queued" : ""}` : i.type))).toEqual(["A", "/mode read-only", "agent", "/init:queued"]);
  });

  it("a refused session load keeps the panel's session and says so", () => {
    const s = run([
      { kind: "session", sessionId: "sess_mine" },
      { kind: "load-refused", sessionId: "sess_ed02", error: "cannot load session sess_ed02: it is open in another agent-server process", current: "sess_mine" },
    ]);
    expect(s.currentSession).toBe("sess_mine");
    expect(s.items[0]).toMatchObject({ type: "notice", level: "error" });
    expect((s.items[0] as { text: string }).text).toContain("The panel stays on session sess_mine");
  });

  it("a loaded session's rejected edit replays as a failed card that shows why, as the Neovim chat does", () => {
    const s = run([
      { kind: "reset", sessionId: "sess_old" },
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "change it" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-3", title: "Edit calc.py", kind: "edit", status: "failed",
        content: [{ type: "content", content: { type: "text", text: "\nNot written: the user rejected the change to calc.py.\nMore." } }] } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-4", title: "Edit calc.py", kind: "edit", status: "completed",
        content: [{ type: "content", content: { type: "text", text: "Edited calc.py" } }] } },
    ]);
    const [rejected, applied] = s.items.filter((i) => i.type === "tool") as Extract<(typeof s.items)[number], { type: "tool" }>[];
    expect(toolReason(rejected!)).toBe("Not written: the user rejected the change to calc.py.");
    expect(toolReason(applied!)).toBe("");
  });
  it("loaded sessions show chips as live: a call replayed still open is drawn unfinished once the replay is over", () => {
    const s = run([
      { kind: "reset", sessionId: "sess_old" },
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "run it" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-1", title: "Run tests", kind: "execute", status: "in_progress", rawInput: { command: "pytest" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-2", title: "Read a.py", kind: "read", status: "completed" } },
      { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Running the tests" } } },
      { kind: "loaded", sessionId: "sess_old" },
    ]);
    const tools = s.items.filter((i) => i.type === "tool") as Extract<(typeof s.items)[number], { type: "tool" }>[];
    expect(tools.map((t) => t.status)).toEqual(["unfinished", "completed"]);
    expect(s.busy).toBe(false);
    expect(activity(s)).toBeUndefined();
    expect(s.openText).toBeUndefined(); // the replayed answer is not streaming
  });

  it("a prompt after New while another session's turn ran was shown queued, its answer above it", () => {
    const s = run([
      { kind: "session", sessionId: "sess_a" },
      { kind: "user", text: "long task" },
      { kind: "turn-start", text: "long task", sessionId: "sess_a" },
      { kind: "reset" },
      { kind: "session", sessionId: "sess_c" },
      { kind: "user", text: "meanwhile" },
      { kind: "turn-start", text: "meanwhile", sessionId: "sess_c" },
      { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "answered at once" } } },
    ]);
    expect(s.items.map((i) => (i.type === "user" ? `${i.text}${i.queued ? ":queued" : ""}` : i.type))).toEqual(["meanwhile", "agent"]);
    fold(s, { kind: "turn-end", text: "long task", sessionId: "sess_a", stopReason: "end_turn" });
    expect(s.busy).toBe(true); // this transcript's turn still runs
    fold(s, { kind: "turn-end", text: "meanwhile", sessionId: "sess_c", stopReason: "end_turn" });
    expect(s.busy).toBe(false);
  });

  it("a session loaded while another session's turn ran looked live (busy, Stop, Working…) and that turn's end marked nothing", () => {
    const s = run([
      { kind: "session", sessionId: "sess_a" },
      { kind: "user", text: "long task" },
      { kind: "turn-start", text: "long task", sessionId: "sess_a" },
      { kind: "reset", sessionId: "sess_b" },
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "old question" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-1", title: "Edit b.py", kind: "edit", status: "completed" } },
      { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "old answer" } } },
      { kind: "loaded", sessionId: "sess_b" },
    ]);
    expect(s.busy).toBe(false);
    expect(activity(s)).toBeUndefined();
    fold(s, { kind: "turn-end", text: "long task", sessionId: "sess_a", stopReason: "cancelled" });
    expect(s.busy).toBe(false);
    expect(s.items.map((i) => i.type)).toEqual(["user", "tool", "agent"]); // no "Stopped: cancelled" of another session
    fold(s, { kind: "user", text: "next" });
    fold(s, { kind: "turn-start", text: "next", sessionId: "sess_b" });
    expect(s.busy).toBe(true);
    fold(s, { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "next answer" } } });
    expect(s.items.slice(-2).map((i) => i.type === "user" ? `${i.text}${i.queued ? ":queued" : ""}` : i.type)).toEqual(["next", "agent"]);
    fold(s, { kind: "turn-end", text: "next", sessionId: "sess_b", stopReason: "end_turn" });
    expect(s.busy).toBe(false);
  });
});
