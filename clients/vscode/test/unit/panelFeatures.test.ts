// Issue 30 items 5, 9 and 10 in the panel's pure logic: execute cards (command, live output, elapsed
// time, locations), status words, the Changes view, slash-command completion, the first-run facts,
// error kinds and the `@` mentions' resource blocks.
import { describe, expect, it } from "vitest";
import * as acp from "@agentclientprotocol/sdk";
import type { ChatEvent } from "../../src/protocol";
import { activity, completeCommand, fold, formatElapsed, initialState, lineCounts, outcomeWord, shortCommand, statusWord, turnChanges } from "../../webview/state";
import { errorKind } from "../../src/client";
import { hunkSummary } from "../../src/extension";
import { isLoopback, parseCheckConfig, setupView } from "../../src/setup";
import { fileMention, folderMention, problemsMention, stripAnsi, terminalMention } from "../../src/mentions";

const run = (events: ChatEvent[]) => events.reduce(fold, initialState());
const tool = (s: ReturnType<typeof run>, id: string) => s.items.find((i) => i.type === "tool" && i.toolCallId === id) as Extract<ReturnType<typeof run>["items"][number], { type: "tool" }>;

describe("execute cards", () => {
  it("keep the command, the live output pieces, the exit and the elapsed time", () => {
    const s = run([
      { kind: "turn-start", text: "go" },
      { kind: "update", at: 1000, update: { sessionUpdate: "tool_call", toolCallId: "b1", title: "Run tests", kind: "execute", status: "pending", rawInput: { command: "pytest -q", description: "Run tests" }, content: [{ type: "terminal", terminalId: "b1" }] } },
      { kind: "update", at: 1500, update: { sessionUpdate: "tool_call_update", toolCallId: "b1", status: "in_progress" } },
      { kind: "update", at: 1600, update: { sessionUpdate: "tool_call_update", toolCallId: "b1", _meta: { terminal_output_delta: { terminal_id: "b1", data: "collected 3\n" } } } },
      { kind: "update", at: 1700, update: { sessionUpdate: "tool_call_update", toolCallId: "b1", _meta: { terminal_output: { terminal_id: "b1", data: "3 passed\n" } } } },
      { kind: "update", at: 4000, update: { sessionUpdate: "tool_call_update", toolCallId: "b1", status: "failed", content: [{ type: "terminal", terminalId: "b1" }], _meta: { terminal_exit: { terminal_id: "b1", exit_code: 1, signal: null } } } },
    ]);
    const card = tool(s, "b1");
    expect(card).toMatchObject({ command: "pytest -q", terminal: "collected 3\n3 passed\n", exitCode: 1, startedAt: 1000, endedAt: 4000 });
    expect(formatElapsed(card.endedAt! - card.startedAt!)).toBe("3.0 s");
  });

  it("a loaded session's calls carry no time (their updates are not live)", () => {
    const s = run([{ kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "r1", title: "Read a.py", kind: "read", status: "completed", locations: [{ path: "/ws/a.py", line: 3 }] } }]);
    expect(tool(s, "r1").startedAt).toBeUndefined();
    expect(tool(s, "r1").locations).toEqual([{ path: "/ws/a.py", line: 3 }]);
  });

  it("shorten a long command on a card that asks nothing, and say so", () => {
    expect(shortCommand("ls -la")).toEqual({ text: "ls -la", shortened: false });
    expect(shortCommand("echo a\necho b")).toEqual({ text: "echo a…", shortened: true });
    const long = shortCommand("x".repeat(300));
    expect(long.shortened).toBe(true);
    expect(long.text).toBe(`${"x".repeat(120)}…`);
  });

  it("status words, never the wire's enum names", () => {
    expect(["pending", "in_progress", "completed", "failed", "unfinished"].map(statusWord)).toEqual(["Pending", "Running", "Done", "Failed", "Unfinished"]);
    // a decided proposal said "partial: …" and "stale: …", the wire's outcome names
    expect(["applied", "partial", "rejected", "stale", "failed", "cancelled"].map(outcomeWord)).toEqual(["Applied", "Partly applied", "Rejected", "Not applied: the file changed", "Failed", "Cancelled"]);
    expect(formatElapsed(400)).toBe("0.4 s");
    expect(formatElapsed(42_000)).toBe("42 s");
    expect(formatElapsed(185_000)).toBe("3 min 05 s");
  });
});

describe("the Changes view", () => {
  const edit = (id: string, path: string, oldText: string, newText: string, status = "completed"): ChatEvent => ({
    kind: "update",
    update: { sessionUpdate: "tool_call", toolCallId: id, title: `Edit ${path}`, kind: "edit", status, content: [{ type: "diff", path, oldText, newText }] },
  });
  it("shows per file what the newest turn that edited changed: before its first edit, after its last", () => {
    const s = run([
      { kind: "turn-start", text: "one" },
      edit("e1", "/ws/old.py", "a\n", "b\n"),
      { kind: "turn-end", text: "one", stopReason: "end_turn" },
      { kind: "turn-start", text: "two" },
      edit("e2", "/ws/a.py", "x = 1\n", "x = 2\n"),
      edit("e3", "/ws/a.py", "x = 2\n", "x = 3\ny = 1\n"),
      edit("e4", "/ws/b.py", "", "new\n"),
      edit("e5", "/ws/c.py", "c\n", "d\n", "failed"),
      { kind: "turn-end", text: "two", stopReason: "end_turn" },
      { kind: "turn-start", text: "three: no edits" },
      { kind: "turn-end", text: "three: no edits", stopReason: "end_turn" },
    ]);
    const changes = turnChanges(s)!;
    expect(changes.files.map((f) => [f.path, f.oldText, f.newText, f.added, f.removed])).toEqual([
      ["/ws/a.py", "x = 1\n", "x = 3\ny = 1\n", 2, 1],
      ["/ws/b.py", "", "new\n", 1, 0],
    ]);
    expect(lineCounts("a\nb\n", "a\nc\n")).toEqual({ added: 1, removed: 1 });
    expect(changes.undone).toBe(false);
    fold(s, { kind: "user", text: "/undo" });
    expect(turnChanges(s)!.undone).toBe(true);
  });
  it("is empty before any edit", () => {
    expect(turnChanges(run([{ kind: "turn-start", text: "hi" }]))).toBeUndefined();
  });
});

describe("slash-command completion", () => {
  it("offers the advertised commands matching what follows /", () => {
    const s = run([{ kind: "update", update: { sessionUpdate: "available_commands_update", availableCommands: [{ name: "undo", description: "Take back" }, { name: "usage", description: "Tokens" }, { name: "mode", description: "Mode", input: { hint: "<id>" } }] } }]);
    expect(completeCommand(s.commands, "/u").map((c) => c.name)).toEqual(["undo", "usage"]);
    expect(completeCommand(s.commands, "/").length).toBe(3);
    expect(completeCommand(s.commands, "/mode x")).toEqual([]);
    expect(completeCommand(s.commands, "hello")).toEqual([]);
    expect(s.commands.find((c) => c.name === "mode")?.hint).toBe("<id>");
  });
});

describe("first run and errors", () => {
  it("the check's facts become the page's: endpoint, model, key source; a missing key is said", () => {
    const check = parseCheckConfig('{"ok": true, "source": null, "profile": "deepseek", "model": "deepseek-chat", "baseUrl": "https://api.deepseek.com/v1", "keyRequired": true, "keySource": null, "keyVariable": "DEEPSEEK_API_KEY"}\n', "", 0);
    expect(setupView(check, false, false)).toEqual({ endpoint: "https://api.deepseek.com/v1", model: "deepseek-chat", offline: false, keyMissing: true, keySource: null });
    const keyed = parseCheckConfig('{"ok": true, "model": "m", "baseUrl": "http://127.0.0.1:1/v1", "keyRequired": false, "keySource": "AGENT_SERVER_API_KEY"}', "", 0);
    expect(setupView(keyed, true, true)).toMatchObject({ offline: true, keyMissing: false, keySource: "VS Code's secret storage (Set API Key)" });
    expect(setupView(parseCheckConfig("", "agent-server: unknown argument '--json'", 2), false, false).error).toContain("update it");
    expect(setupView(parseCheckConfig('{"ok": false, "error": "bad.toml:1:10: expected a value"}', "", 1), false, false).error).toBe("bad.toml:1:10: expected a value");
    expect(isLoopback("http://127.0.0.1:8765/v1") && isLoopback("http://localhost:1/v1") && !isLoopback("https://api.openai.com/v1")).toBe(true);
  });
  it("an authentication error and a connection error are told apart", () => {
    expect(errorKind(new acp.RequestError(-32000, "Authentication required"))).toBe("auth");
    expect(errorKind(new acp.RequestError(-32603, "Incorrect API key", { code: "AUTH" }))).toBe("auth");
    expect(errorKind(new acp.RequestError(-32603, "Connection refused", { code: "NETWORK" }))).toBe("connection");
    expect(errorKind(new acp.RequestError(-32603, "too long", { code: "CONTEXT_WINDOW_EXCEEDED" }))).toBeUndefined();
    expect(errorKind(new Error("the server could not start: spawn agent-server ENOENT"))).toBe("connection");
  });
  it("an error notice keeps its kind (its card offers Set API Key, Sign in, …)", () => {
    const s = run([{ kind: "turn-start", text: "hi" }, { kind: "turn-end", text: "hi", error: "Incorrect API key", errorKind: "auth" }]);
    expect(s.items.at(-1)).toMatchObject({ type: "notice", errorKind: "auth" });
  });
});

describe("@ mentions", () => {
  it("are embedded resources: a file, a folder listing, the problems, a terminal's output without escapes", () => {
    expect(fileMention("/ws/a b.py", "a b.py", "x = 1\n")).toEqual({ block: { type: "resource", resource: { uri: "file:///ws/a%20b.py", text: "x = 1\n", mimeType: "text/plain" } }, view: { kind: "file", label: "@a b.py" } });
    expect(folderMention("/ws/src", "src", ["a.py", "lib/"]).block.resource).toMatchObject({ uri: "file:///ws/src/", text: "Folder src holds:\na.py\nlib/" });
    const problems = problemsMention([
      { path: "b.py", line: 2, character: 1, severity: "warning", message: "unused", source: "ruff" },
      { path: "a.py", line: 9, character: 4, severity: "error", message: "undefined name" },
    ]);
    expect(problems.block.resource.text).toBe("a.py:9:4 error: undefined name\nb.py:2:1 warning: unused (ruff)");
    expect(problems.view.label).toBe("@problems (2)");
    expect(terminalMention("bash", "make", "\x1b[31mFAIL\x1b[0m test_x\n").block.resource).toEqual({ uri: "terminal:bash", text: "$ make\nFAIL test_x\n", mimeType: "text/plain" });
    expect(stripAnsi("\x1b]633;A\x07ok")).toBe("ok");
  });
});

describe("the smaller findings (issue 30 item 11)", () => {
  it("retry notices not as answer text: a chunk with _meta.agentServer.retry is a notice apart", () => {
    const chunk = (text: string, meta?: object): ChatEvent => ({ kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, ...(meta ? { _meta: meta } : {}) } });
    const s = run([
      { kind: "turn-start", text: "q" },
      chunk("The answer starts"),
      chunk("\n\n[agent-server] The model's answer broke off (the stream closed); retrying in 3 s (attempt 2 of 4)…\n\n", { agentServer: { retry: { seq: 7, attempt: 1, code: "NETWORK", delaySeconds: 3 } } }),
      chunk("The answer again."),
    ]);
    expect(s.items.map((i) => [i.type, (i as { text?: string }).text])).toEqual([
      ["agent", "The answer starts"],
      ["notice", "[agent-server] The model's answer broke off (the stream closed); retrying in 3 s (attempt 2 of 4)…"],
      ["agent", "The answer again."],
    ]);
  });

  it("a working indicator before the first token and a live sign while thinking", () => {
    const s = run([{ kind: "user", text: "q" }, { kind: "turn-start", text: "q" }]);
    expect(activity(s)).toBe("working");
    fold(s, { kind: "update", update: { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "hmm" } } });
    expect(activity(s)).toBe("thinking");
    fold(s, { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "Hi" } } });
    expect(activity(s)).toBeUndefined();
    fold(s, { kind: "turn-end", text: "q", stopReason: "end_turn" });
    expect(activity(s)).toBeUndefined();
  });

  it("a decided proposal lists what was accepted and rejected", () => {
    const hunks = [0, 1, 2].map((index) => ({ fileIndex: 0, index, state: "pending" as const, summary: `h${index}` }));
    const s = run([
      { kind: "proposal", id: "p1", label: "Edit a.py", files: ["a.py"], ops: [], hunks },
      { kind: "proposal", id: "p1", label: "Edit a.py", files: ["a.py"], ops: [], hunks: [{ ...hunks[0]!, state: "accepted" }, hunks[1]!, hunks[2]!] },
      { kind: "proposal-done", id: "p1", outcome: "partial" },
    ]);
    const card = s.items[0] as Extract<(typeof s.items)[number], { type: "proposal" }>;
    expect(card.hunks.map((h) => h.state)).toEqual(["accepted", "rejected", "rejected"]);
    const all = run([{ kind: "proposal", id: "p2", label: "Edit", files: [], ops: [], hunks }, { kind: "proposal-done", id: "p2", outcome: "applied" }]);
    expect((all.items[0] as typeof card).hunks.every((h) => h.state === "accepted")).toBe(true);
  });

  it("whole lines in hunk summaries: a change inside a line shows the whole line before and after", () => {
    const text = "def greet(name):\n    return 'hello ' + name\n";
    const start = text.indexOf("hello");
    expect(hunkSummary(text, start, start + 5, 1, 1, "hi")).toBe(`line 2: "    return 'hello ' + name" → "    return 'hi ' + name"`);
    expect(hunkSummary(text, 0, 0, 0, 0, "import os\n")).toBe('line 1: insert "import os"');
    expect(hunkSummary(text, 0, text.indexOf("\n") + 1, 0, 1, "")).toBe('line 1-2: delete "def greet(name):"');
  });
});
