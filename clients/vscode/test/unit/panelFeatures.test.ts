// Issue 30 items 5, 9 and 10 in the panel's pure logic: execute cards (command, live output, elapsed
// time, locations), status words, the Changes view, slash-command completion, the first-run facts,
// error kinds and the `@` mentions' resource blocks.
import { describe, expect, it } from "vitest";
import * as acp from "@agentclientprotocol/sdk";
import type { ChatEvent } from "../../src/protocol";
import { chunk } from "./chatEvents";
import { activity, completeCommand, exitText, fold, formatElapsed, initialState, lineCounts, outcomeWord, shortCommand, statusWord, turnChanges } from "../../webview/state";
import { errorKind } from "../../src/client";
import { hunkSummary, proposalEvent } from "../../src/extension";
import { applyToText, makeHunks, shiftPending } from "../../src/proposalModel";
import type { Proposal } from "../../src/proposals";
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

  it("a rejected command showed \"exit code null\" in red (newcomer finding F11)", () => {
    const s = run([
      { kind: "turn-start", text: "go" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "b2", title: "Run `rm -rf build`", kind: "execute", status: "pending", rawInput: { command: "rm -rf build" } } },
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "b2", status: "failed", content: [{ type: "content", content: { type: "text", text: "Not run: the user rejected the command." } }], _meta: { terminal_exit: { terminal_id: "b2", exit_code: null, signal: null } } } },
    ]);
    expect(exitText(tool(s, "b2"))).toBeUndefined();
    expect(exitText({ ...tool(s, "b2"), exitCode: 2 })).toBe("exit code 2");
    expect(exitText({ ...tool(s, "b2"), exitCode: null, signal: "SIGKILL" })).toBe("killed by SIGKILL");
    expect(exitText({ ...tool(s, "b2"), exitCode: 0 })).toBeUndefined();
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
    expect(["applied", "partial", "rejected", "stale", "failed", "cancelled"].map((o) => outcomeWord(o))).toEqual(["Applied", "Partly applied", "Rejected", "Not applied: the file changed", "Failed", "Cancelled"]);
    expect(formatElapsed(400)).toBe("0.4 s");
    expect(formatElapsed(42_000)).toBe("42 s");
    expect(formatElapsed(185_000)).toBe("3 min 05 s");
  });
});

describe("slash commands sent while a turn streams", () => {
  it("/compact typed while an answer streams was answered after the turn, below later commands' replies, away from its own bubble", () => {
    // newcomer 4, finding 8: the server runs /compact once the turn has ended (it takes the turn's lock),
    // so its reply comes after /model nosuch's and /frobnicate's; its bubble now says it waits for the turn
    const streaming: ChatEvent[] = [
      { kind: "user", text: "write a long answer" },
      { kind: "turn-start", text: "write a long answer" },
      chunk("part one", "msg-3"),
      { kind: "user", text: "/compact" },
      { kind: "turn-start", text: "/compact" },
      { kind: "user", text: "/frobnicate" },
      { kind: "turn-start", text: "/frobnicate" },
      chunk("Unknown command /frobnicate", "cmd-6"),
      { kind: "turn-end", text: "/frobnicate", stopReason: "end_turn" },
    ];
    const bubble = (s: ReturnType<typeof run>) => s.items.find((i) => i.type === "user" && i.text === "/compact") as Extract<ReturnType<typeof run>["items"][number], { type: "user" }>;
    const during = run(streaming);
    expect(bubble(during).waits).toBe(true);
    expect(during.items.find((i) => i.type === "user" && i.text === "/frobnicate")).not.toHaveProperty("waits");
    const after = run([...streaming, chunk(" part two", "msg-3"), { kind: "turn-end", text: "write a long answer", stopReason: "end_turn" },
      chunk("Nothing to compact yet", "cmd-9"), { kind: "turn-end", text: "/compact", stopReason: "end_turn" }]);
    expect(bubble(after).waits).toBe(false); // the turn ended: it runs, and its answer follows
    const idle = run([{ kind: "user", text: "/compact" }]);
    expect(bubble(idle)).not.toHaveProperty("waits"); // no turn running: answered at once
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
  });
  it("a one-line proposal pretty-printed by format-on-save was counted +1 −1 in the Changes box (newcomer 5, finding 0.1)", () => {
    // the diff is the proposal; the server's count (the checkpoint: what the save left on disk) wins
    const s = run([
      { kind: "turn-start", text: "b is 3" },
      edit("e1", "/ws/cfg.json", '{"a":1,"b":2,"c":[1,2,3]}', '{"a":1,"b":3,"c":[1,2,3]}'),
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: "e1",
        _meta: { agentServer: { changedFiles: ["/ws/cfg.json"], lineCounts: { "/ws/cfg.json": [9, 1] } } } } },
      edit("e2", "/ws/plain.txt", "a\n", "b\n"),
      { kind: "turn-end", text: "b is 3", stopReason: "end_turn" },
    ]);
    expect(turnChanges(s)!.files.map((f) => [f.path, f.added, f.removed])).toEqual([["/ws/cfg.json", 9, 1], ["/ws/plain.txt", 1, 1]]);
  });
  it("a file the agent created and then edited in one turn was counted with the edit's lines added and removed on top", () => {
    // the server gives each call's own count (its before and after); the Changes box added them up:
    // a new 3-line file whose line 2 the next call changed showed +4 −1, one line edited twice +2 −2
    const counts = (id: string, path: string, n: [number, number]): ChatEvent => (
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: id, _meta: { agentServer: { changedFiles: [path], lineCounts: { [path]: n } } } } });
    const s = run([
      { kind: "turn-start", text: "new module" },
      edit("w1", "/ws/new.py", "", "a\nb\nc\n"),
      counts("w1", "/ws/new.py", [3, 0]),
      edit("e1", "/ws/new.py", "a\nb\nc\n", "a\nB\nc\n"),
      counts("e1", "/ws/new.py", [1, 1]),
      edit("e2", "/ws/x.py", "x = 1\n", "x = 2\n"),
      counts("e2", "/ws/x.py", [1, 1]),
      edit("e3", "/ws/x.py", "x = 2\n", "x = 3\n"),
      counts("e3", "/ws/x.py", [1, 1]),
      { kind: "turn-end", text: "new module", stopReason: "end_turn" },
    ]);
    expect(turnChanges(s)!.files.map((f) => [f.path, f.added, f.removed])).toEqual([["/ws/new.py", 3, 0], ["/ws/x.py", 1, 1]]);
  });
  it("a_mode_only_change_showed_plus_0_minus_0: the Changes box reads changedFiles' modes", () => {
    // a shell call's chmod 600 (no line changed), then another call's chmod of a file it also appended to
    const bash = (id: string, meta: Record<string, unknown>) => [
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: id, title: "Run", kind: "execute", status: "in_progress" } },
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: id, _meta: { agentServer: meta } } },
      { kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: id, status: "completed" } },
    ];
    const s = run([
      { kind: "turn-start", text: "chmod" },
      ...bash("b1", { changedFiles: ["/ws/only.sh", "/ws/both.sh"], lineCounts: { "/ws/only.sh": [0, 0], "/ws/both.sh": [1, 0] }, modes: { "/ws/only.sh": ["644", "600"] } }),
      ...bash("b2", { changedFiles: ["/ws/both.sh", "/ws/back.sh"], lineCounts: { "/ws/both.sh": [0, 0], "/ws/back.sh": [0, 0] }, modes: { "/ws/both.sh": ["644", "755"], "/ws/back.sh": ["644", "600"], "/ws/bad": ["rwx", "x"] } }),
      ...bash("b3", { changedFiles: ["/ws/back.sh"], lineCounts: { "/ws/back.sh": [0, 0] }, modes: { "/ws/back.sh": ["600", "644"] } }),
      { kind: "turn-end", text: "chmod", stopReason: "end_turn" },
    ] as never);
    const files = turnChanges(s)!.files.map((f) => [f.path, f.added, f.removed, f.mode]);
    expect(files).toEqual([
      ["/ws/only.sh", 0, 0, ["644", "600"]],
      ["/ws/both.sh", 1, 0, ["644", "755"]],
      ["/ws/back.sh", 0, 0, undefined], // changed and changed back within the turn: no mode change to show
    ]);
  });
  it("a newly created one-line file was counted +1 −1 in the Changes box", () => {
    // newcomer 4, finding 8: `.vscode/settings.json` created with one line (no final newline) showed
    // "+1 −1" — the empty text before counted as one empty line removed. Nothing was removed.
    const s = run([
      { kind: "turn-start", text: "settings" },
      edit("e1", "/ws/.vscode/settings.json", "", '{ "editor.tabSize": 2 }'),
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "e2", title: "Edit /ws/x.txt", kind: "edit", status: "completed", content: [{ type: "diff", path: "/ws/x.txt", oldText: null, newText: "x" }] } },
      edit("e3", "/ws/gone.txt", "last", ""),
      { kind: "turn-end", text: "settings", stopReason: "end_turn" },
    ]);
    expect(turnChanges(s)!.files.map((f) => [f.path, f.added, f.removed])).toEqual([
      ["/ws/.vscode/settings.json", 1, 0],
      ["/ws/x.txt", 1, 0],
      ["/ws/gone.txt", 0, 1],
    ]);
    expect(lineCounts("", "")).toEqual({ added: 0, removed: 0 });
    expect(lineCounts("a\n", "a\nb\n")).toEqual({ added: 1, removed: 0 });
    expect(lineCounts("a\n", "a")).toEqual({ added: 1, removed: 1 }); // the final newline dropped: a change
  });
  it("is empty before any edit", () => {
    expect(turnChanges(run([{ kind: "turn-start", text: "hi" }]))).toBeUndefined();
  });
});

// Newcomer findings F1 a–e: the box showed what had not happened, and offered to undo a turn that
// changed nothing (the server's /undo then took back an older turn the user could not see). As the
// server sends them: the card, the diff shown while the proposal waits (`_show_diff`), the result.
describe("the Changes box shows only what the server says happened", () => {
  const card = (id: string, title: string, kind = "edit"): ChatEvent => ({ kind: "update", update: { sessionUpdate: "tool_call", toolCallId: id, title, kind, status: "pending" } });
  const upd = (id: string, fields: Record<string, unknown>): ChatEvent => ({ kind: "update", update: { sessionUpdate: "tool_call_update", toolCallId: id, ...fields } });
  const text = (t: string) => ({ type: "content", content: { type: "text", text: t } });
  const diff = (path: string, oldText: string, newText: string) => ({ type: "diff", path, oldText, newText });
  /** Turn 1 (the prompt "fix multi"): an edit of multi.txt applied. */
  const applied: ChatEvent[] = [
    { kind: "user", text: "fix multi" },
    { kind: "turn-start", text: "fix multi" },
    card("tc-1", "Edit multi.txt"),
    upd("tc-1", { status: "in_progress" }),
    upd("tc-1", { content: [diff("/ws/multi.txt", "L5\n", "l5\n")] }),
    upd("tc-1", { status: "completed", content: [text("Edited multi.txt."), diff("/ws/multi.txt", "L5\n", "l5\n")] }),
    { kind: "turn-end", text: "fix multi", stopReason: "end_turn" },
  ];
  /** Turn 2: an edit of calc.py whose proposal is shown and waits. */
  const waiting: ChatEvent[] = [
    { kind: "user", text: "fix calc" },
    { kind: "turn-start", text: "fix calc" },
    card("tc-9", "Edit calc.py"),
    upd("tc-9", { status: "in_progress" }),
    upd("tc-9", { content: [diff("/ws/calc.py", "x = 1\n", "x = 2\n")] }),
  ];
  const paths = (s: ReturnType<typeof run>) => turnChanges(s)?.files.map((f) => f.path);

  it("a file was shown changed while its proposal still waited (F1a)", () => {
    const s = run(waiting);
    expect(turnChanges(s)).toBeUndefined();
    fold(s, upd("tc-9", { status: "completed", content: [text("Edited calc.py."), diff("/ws/calc.py", "x = 1\n", "x = 2\n")] }));
    expect(paths(s)).toEqual(["/ws/calc.py"]);
  });

  it("Stop or Restart Server while a proposal waited left it in the box with Undo this turn, which undid an older turn (F1b)", () => {
    // Restart Server: no result ever comes, the turn ends with the card unfinished
    const restarted = run([...applied, ...waiting, { kind: "turn-end", text: "fix calc", error: "the server exited" }]);
    // Stop: the proposal is cancelled, the card fails
    const stopped = run([...applied, ...waiting, upd("tc-9", { status: "failed", content: [text("Not written: the proposal for calc.py was cancelled before the user answered; nothing was applied.")] }), { kind: "turn-end", text: "fix calc", stopReason: "cancelled" }]);
    for (const s of [restarted, stopped]) {
      // the box names what /undo will take back: turn 1's multi.txt, and the prompt of that turn
      expect(paths(s)).toEqual(["/ws/multi.txt"]);
      expect(turnChanges(s)).toMatchObject({ turn: 1, prompt: "fix multi", undone: false, undo: undefined });
    }
  });

  const undoCard = (id: string, turn: number): ChatEvent => ({ kind: "update", update: { sessionUpdate: "tool_call", toolCallId: id, title: `Undo turn ${turn}`, kind: "edit", status: "in_progress", locations: [{ path: "/ws/multi.txt" }] } });

  it("a /undo refused while a turn ran said undone (F1c)", () => {
    const s = run([...applied, ...waiting, { kind: "user", text: "/undo" }, { kind: "turn-start", text: "/undo" },
      { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "A turn is running: /undo once it has ended (or cancel it first)." } } },
      { kind: "turn-end", text: "/undo", stopReason: "end_turn" }]);
    expect(turnChanges(s)).toMatchObject({ turn: 1, undone: false, undo: undefined });
    // after Accept All the change is applied: the box shows it, not undone
    fold(s, upd("tc-9", { status: "completed", content: [text("Edited calc.py."), diff("/ws/calc.py", "x = 1\n", "x = 2\n")] }));
    fold(s, { kind: "turn-end", text: "fix calc", stopReason: "end_turn" });
    expect(turnChanges(s)).toMatchObject({ turn: 2, undone: false, undo: undefined });
  });

  it("an undo whose proposal was rejected said undone (F1d)", () => {
    const s = run([...applied, { kind: "user", text: "/undo" }, { kind: "turn-start", text: "/undo" }, undoCard("undo-40", 13)]);
    expect(turnChanges(s)).toMatchObject({ turn: 1, undone: false, undo: "running" });
    fold(s, upd("undo-40", { status: "completed", content: [text("multi.txt: not restored (rejected: the user rejected the change)")] }));
    fold(s, { kind: "turn-end", text: "/undo", stopReason: "end_turn" });
    expect(turnChanges(s)).toMatchObject({ turn: 1, undone: false, undo: "declined" });
    expect(turnChanges(s)!.undoSummary).toContain("not restored");
    // an applied one: undone
    const t = run([...applied, { kind: "user", text: "/undo" }, { kind: "turn-start", text: "/undo" }, undoCard("undo-40", 13),
      upd("undo-40", { status: "completed", content: [text("multi.txt: restored")] }), { kind: "turn-end", text: "/undo", stopReason: "end_turn" }]);
    expect(turnChanges(t)).toMatchObject({ turn: 1, undone: true, undo: "undone" });
    // /redo brings it back: it can be undone again
    fold(t, { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "redo-44", title: "Redo turn 13", kind: "edit", status: "in_progress" } });
    fold(t, upd("redo-44", { status: "completed", content: [text("multi.txt: restored")] }));
    expect(turnChanges(t)).toMatchObject({ turn: 1, undone: false, undo: undefined });
  });

  it("a turn whose shell command changed a file left the box on an earlier turn's edit (F1e)", () => {
    const s = run([...applied, { kind: "user", text: "run the script" }, { kind: "turn-start", text: "run the script" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-20", title: "Run it", kind: "execute", status: "pending", rawInput: { command: "./fix.sh" } } },
      upd("tc-20", { status: "in_progress" }),
      upd("tc-20", { _meta: { agentServer: { changedFiles: ["/ws/shared.txt"] } } }),
      upd("tc-20", { status: "completed", content: [text("exit 0")] }),
      { kind: "turn-end", text: "run the script", stopReason: "end_turn" }]);
    expect(turnChanges(s)).toMatchObject({ turn: 2, prompt: "run the script", files: [{ path: "/ws/shared.txt", oldText: null, newText: null }] });
  });

  it("the box called a file the shell created or deleted 'changed' (newcomer 3, finding 7)", () => {
    const s = run([{ kind: "user", text: "shell" }, { kind: "turn-start", text: "shell" },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-20", title: "Run it", kind: "execute", status: "pending", rawInput: { command: "./fix.sh" } } },
      upd("tc-20", { _meta: { agentServer: { changedFiles: ["/ws/a.txt", "/ws/new.txt", "/ws/multi.txt"], created: ["/ws/new.txt"], deleted: ["/ws/multi.txt"] } } }),
      upd("tc-20", { status: "completed", content: [text("exit 0")] }),
      { kind: "turn-end", text: "shell", stopReason: "end_turn" }]);
    const files = turnChanges(s)!.files.map((f) => [f.path, f.how ?? "changed"]);
    expect(files).toEqual([["/ws/a.txt", "changed"], ["/ws/new.txt", "created"], ["/ws/multi.txt", "deleted"]]);
  });

  it("after a window reload (session/load) the box names what the replay says changed, and the undo's outcome", () => {
    const s = run([
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "fix multi" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-3", title: "Edit multi.txt", kind: "edit", status: "completed", content: [text("Edited multi.txt.")], _meta: { agentServer: { changedFiles: ["/ws/multi.txt"] } } } },
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "/undo" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "undo-9", title: "Undo turn 1", kind: "edit", status: "completed", content: [text("multi.txt: kept the user's version (changed since the agent's edit)")] } },
      { kind: "loaded", sessionId: "s1" },
    ]);
    expect(turnChanges(s)).toMatchObject({ prompt: "fix multi", undo: "declined", files: [{ path: "/ws/multi.txt" }] });
  });

  it("after a session was re-opened from the picker the box listed edited files as 'changed' instead of +1 −1 (newcomer 4, finding 8)", () => {
    const s = run([
      { kind: "update", update: { sessionUpdate: "user_message_chunk", content: { type: "text", text: "shout" } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-3", title: "Edit a.txt", kind: "edit", status: "completed", content: [text("Edited a.txt.")],
        _meta: { agentServer: { changedFiles: ["/ws/a.txt"], lineCounts: { "/ws/a.txt": [1, 1] } } } } },
      { kind: "update", update: { sessionUpdate: "tool_call", toolCallId: "tc-4", title: "Run it", kind: "execute", status: "completed", content: [text("exit 0")],
        _meta: { agentServer: { changedFiles: ["/ws/new.txt", "/ws/b.txt"], created: ["/ws/new.txt"], lineCounts: { "/ws/new.txt": [2, 0] } } } } },
      { kind: "loaded", sessionId: "s1" },
    ]);
    const files = turnChanges(s)!.files.map((f) => [f.path, f.how ?? (f.counted ? `+${f.added} −${f.removed}` : "changed")]);
    expect(files).toEqual([["/ws/a.txt", "+1 −1"], ["/ws/new.txt", "created"], ["/ws/b.txt", "changed"]]);
  });

  it("an undo whose restores were all rejected counted as undone: the box and the next /undo went a turn further back (N5)", () => {
    // the server: done false — no undo; the next /undo asks about the same turn again
    const s = run([...applied, { kind: "user", text: "/undo" }, { kind: "turn-start", text: "/undo" }, undoCard("undo-40", 1),
      upd("undo-40", { status: "completed", content: [text("multi.txt: not restored (the user rejected the restore in the editor)")],
        _meta: { agentServer: { restore: { which: "undo", turn: 1, done: false, changed: [] } } } }),
      { kind: "turn-end", text: "/undo", stopReason: "end_turn" }]);
    expect(turnChanges(s)).toMatchObject({ turn: 1, undone: false, undo: "declined" });
    // the next /undo takes the same turn: now accepted, it is undone (it was the target again)
    fold(s, undoCard("undo-50", 1));
    expect(turnChanges(s)).toMatchObject({ turn: 1, undo: "running" });
    fold(s, upd("undo-50", { status: "completed", content: [text("multi.txt: restored")],
      _meta: { agentServer: { restore: { which: "undo", turn: 1, done: true, changed: ["/ws/multi.txt"] } } } }));
    expect(turnChanges(s)).toMatchObject({ turn: 1, undone: true, undo: "undone" });
    // a run that counted with nothing restored (each file already as it was): the turn before is next
    const t = run([...applied, undoCard("undo-60", 1), upd("undo-60", { status: "completed", content: [text("multi.txt: already as it was")],
      _meta: { agentServer: { restore: { which: "undo", turn: 1, done: true, changed: [] } } } })]);
    expect(turnChanges(t)).toMatchObject({ turn: 1, undo: "nothing" });
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

  it("hunk labels of a CRLF file showed a raw \\r, and after Accept hunk 1 read \"L1\\r\" → \"L1\\r\" (newcomer finding F11)", () => {
    const base = "L1\r\nbeta\r\ngamma\r\n";
    const hunks = makeHunks(base, [
      { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 2 } }, newText: "LINE1" },
      { range: { start: { line: 1, character: 0 }, end: { line: 1, character: 4 } }, newText: "BETA" },
    ], "utf-16");
    const file = { uri: { path: "/ws/crlf.txt", fsPath: "/ws/crlf.txt" }, create: false, expected: base, base, hunks, edited: false };
    const proposal = { id: "p1", label: "Edit crlf.txt", files: [file], ops: [], stale: undefined } as unknown as Proposal;
    const summaries = () => (proposalEvent(proposal) as Extract<ChatEvent, { kind: "proposal" }>).hunks.map((h) => `${h.summary} (${h.state})`);
    const before = ['line 1: "L1" → "LINE1" (pending)', 'line 2: "beta" → "BETA" (pending)'];
    expect(summaries()).toEqual(before);
    // Accept hunk 1, as ProposalManager.apply does: the text moves on, the later hunk is shifted
    file.expected = applyToText(file.expected, [hunks[0]!]);
    hunks[0]!.state = "accepted";
    shiftPending(hunks, hunks[0]!);
    expect(summaries()).toEqual(['line 1: "L1" → "LINE1" (accepted)', 'line 2: "beta" → "BETA" (pending)']);
  });
});
