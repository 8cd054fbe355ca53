// The client against a small scripted ACP agent WITHOUT our extensions (a real child process speaking
// NDJSON): the plain-ACP permission with its diff, fs/write_text_file into an open dirty document,
// a stray stdout line, the server killed mid-turn, and session/list in pages.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, commands, files, resetStub, workspace } from "../stub/vscode";
import { AgentClient, type ClientEvent } from "../../src/client";
import { readTextFile, writeTextFile } from "../../src/buffers";
import { Permissions } from "../../src/permissions";
import type { ChatEvent } from "../../src/protocol";

const AGENT = fileURLToPath(new URL("../fixtures/scripted-agent.mjs", import.meta.url));

let client: AgentClient | undefined;
afterEach(async () => {
  await client?.dispose();
  client = undefined;
});
beforeEach(() => resetStub());

function start(script: unknown, onChat: (e: ChatEvent, p: Permissions) => void = () => {}) {
  const events: ClientEvent[] = [];
  const logs: string[] = [];
  const chat: ChatEvent[] = [];
  const permissions: Permissions = new Permissions((e) => {
    chat.push(e);
    onChat(e, permissions);
  });
  client = new AgentClient({
    spawn: () => ({ command: process.execPath, args: [AGENT, JSON.stringify(script)], cwd: "/", env: process.env, log: (l) => logs.push(l) }),
    handlers: {
      readTextFile,
      writeTextFile,
      requestPermission: (params, signal) => permissions.request(params, signal),
      applyWorkspaceEdit: async () => ({ outcome: "failed" }),
    },
    onEvent: (e) => events.push(e),
    initialMode: () => "",
    log: (l) => logs.push(l),
  });
  return { client, events, logs, chat, permissions };
}

const texts = (events: ClientEvent[]) =>
  events.flatMap((e) => (e.type === "update" && e.update.sessionUpdate === "agent_message_chunk" && e.update.content.type === "text" ? [e.update.content.text] : []));

describe("a plain ACP agent", () => {
  it("asks permission with a diff: the options are shown, the diff opens, the picked option is answered", async () => {
    const toolCall = { toolCallId: "c1", title: "Edit a.py", kind: "edit", status: "pending", content: [{ type: "diff", path: "/ws/a.py", oldText: "x = 1\n", newText: "x = 2\n" }] };
    const options = [
      { optionId: "allow", name: "Allow", kind: "allow_once" },
      { optionId: "deny", name: "Reject", kind: "reject_once" },
    ];
    const { client, events, chat } = start({ turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }]] }, (e, p) => {
      if (e.kind === "permission") setTimeout(() => p.answer(e.id, "allow"), 10);
    });
    await client.prompt([{ type: "text", text: "go" }], "go");
    const asked = chat.find((e) => e.kind === "permission");
    expect(asked).toMatchObject({ title: "Edit a.py", hasDiff: true, options: [{ optionId: "allow", kind: "allow_once" }, { optionId: "deny", kind: "reject_once" }] });
    const diff = commands.executed.find((c) => c[0] === "vscode.diff");
    expect(String(diff?.[1])).toContain("agent-permission:");
    expect(texts(events).join("")).toContain('session/request_permission -> {"outcome":{"outcome":"selected","optionId":"allow"}}');
    expect(events.at(-1)).toMatchObject({ type: "turn-end", stopReason: "end_turn" });
  });

  it("fs/write_text_file into an open dirty document changes it and leaves it unsaved", async () => {
    files.set("/ws/b.py", "disk\n");
    const doc = new StubDocument(vscode.Uri.file("/ws/b.py") as never, "unsaved work\n", 4, true);
    workspace.textDocuments.push(doc);
    const { client, events } = start({ turns: [[
      { request: "fs/read_text_file", params: { sessionId: "{sessionId}", path: "/ws/b.py" } },
      { request: "fs/write_text_file", params: { sessionId: "{sessionId}", path: "/ws/b.py", content: "new text\n" } },
    ]] });
    await client.prompt([{ type: "text", text: "go" }], "go");
    expect(texts(events).join("")).toContain('"content":"unsaved work\\n","_meta":{"agentServer":{"version":4,"dirty":true}}');
    expect(doc.text).toBe("new text\n");
    expect(doc.isDirty).toBe(true);
    expect(doc.saves).toBe(0);
    expect(files.get("/ws/b.py")).toBe("disk\n");
  });

  it("a stray non-JSON stdout line is skipped and logged, the turn goes on", async () => {
    const { client, events, logs } = start({ turns: [[{ print: "Welcome banner!" }, { update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "still here" } } }]] });
    await client.prompt([{ type: "text", text: "go" }], "go");
    expect(logs.some((l) => l.includes("[skipped non-JSON stdout line] Welcome banner!"))).toBe(true);
    expect(texts(events)).toEqual(["still here"]);
  });

  it("killed mid-turn: the exit is reported with the stderr tail, the next prompt starts a new server and session", async () => {
    const { client, events } = start({ turns: [[{ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "working" } } }, { die: "fatal: scripted crash in the middle of the turn", onceFile: join(mkdtempSync(join(tmpdir(), "scripted-")), "died") }]] });
    await client.prompt([{ type: "text", text: "one" }], "one");
    const exited = events.find((e) => e.type === "server-exited");
    expect(exited).toMatchObject({ message: expect.stringContaining("exit code 3") });
    expect((exited as { stderrTail: string }).stderrTail).toContain("fatal: scripted crash");
    expect(events.find((e) => e.type === "turn-end")).toMatchObject({ error: expect.stringMatching(/died|exited|closed/) });
    const firstSession = events.find((e) => e.type === "session") as { sessionId: string };
    await client.prompt([{ type: "text", text: "two" }], "two");
    const sessions = events.filter((e) => e.type === "session") as { sessionId: string }[];
    expect(sessions).toHaveLength(2);
    expect(sessions[1]!.sessionId).not.toBe(firstSession.sessionId);
    expect(events.at(-1)).toMatchObject({ type: "turn-end", stopReason: "end_turn" });
  });

  it("a message over the SDK's 32 MiB limit: the broken connection is reported once, the live server is stopped, the next prompt and New start a new one", async () => {
    const once = join(mkdtempSync(join(tmpdir(), "scripted-")), "huge");
    const { client, events, logs } = start({ turns: [[{ huge: 33 * 1024 * 1024, onceFile: once }], [], []] });
    await client.prompt([{ type: "text", text: "one" }], "one");
    const exited = events.filter((e) => e.type === "server-exited");
    expect(exited).toHaveLength(1);
    expect(exited[0]).toMatchObject({ message: expect.stringContaining("Incoming ACP data exceeds the configured 33554432 byte limit") });
    expect(events.find((e) => e.type === "turn-end")).toMatchObject({ started: true, error: "the turn ended: the connection to the server broke" });
    const first = (events.find((e) => e.type === "session") as { sessionId: string }).sessionId;
    const pid = Number(first.split("-")[1]);
    await new Promise((r) => setTimeout(r, 200));
    expect(() => process.kill(pid, 0)).toThrow(); // the old process was stopped, not left running
    await client.prompt([{ type: "text", text: "two" }], "two");
    expect(events.at(-1)).toMatchObject({ type: "turn-end", stopReason: "end_turn" });
    const second = (events.filter((e) => e.type === "session") as { sessionId: string }[])[1]!.sessionId;
    expect(second.split("-")[1]).not.toBe(first.split("-")[1]); // a new process
    client.resetSession();
    await client.newSession();
    expect(events.filter((e) => e.type === "server-exited")).toHaveLength(1); // said once
    expect(logs.some((l) => l.includes("the connection to agent-server broke"))).toBe(true);
  });

  it("restart() after a settings change stops the server quietly: no crash reported, the next prompt starts anew", async () => {
    const { client, events } = start({ turns: [[], []] });
    await client.prompt([{ type: "text", text: "one" }], "one");
    await client.restart();
    await client.prompt([{ type: "text", text: "two" }], "two");
    expect(events.filter((e) => e.type === "server-exited")).toEqual([]);
    const sessions = events.filter((e) => e.type === "session") as { sessionId: string }[];
    expect(sessions).toHaveLength(2);
    expect(sessions[0]!.sessionId.split("-")[1]).not.toBe(sessions[1]!.sessionId.split("-")[1]); // another process
  });

  it("a slash command answered while the turn waits for the user ends as not the last prompt: the question stays open", async () => {
    const toolCall = { toolCallId: "c1", title: "Run make", kind: "execute", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" }];
    const { client, events, chat, permissions } = start({ turns: [
      [{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }],
      [{ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "No checkpoints yet." } } }],
    ] });
    const first = client.prompt([{ type: "text", text: "make it" }], "make it");
    await expect.poll(() => chat.some((e) => e.kind === "permission")).toBe(true);
    await client.prompt([{ type: "text", text: "/checkpoints" }], "/checkpoints");
    expect(events.at(-1)).toMatchObject({ type: "turn-end", started: true, last: false, stopReason: "end_turn" });
    expect(client.busy).toBe(true);
    expect(chat.some((e) => e.kind === "permission-done")).toBe(false);
    const id = (chat.find((e) => e.kind === "permission") as { id: string }).id;
    permissions.answer(id, "allow");
    await first;
    expect(events.at(-1)).toMatchObject({ type: "turn-end", started: true, last: true, stopReason: "end_turn" });
    expect(texts(events).join("")).toContain('"optionId":"allow"');
  });

  it("sessions picker reaches sessions past the first page: listSessions follows nextCursor through the SDK to all 63", async () => {
    const { client } = start({ turns: [], listed: 63 });
    const sessions = await client.listSessions();
    expect(sessions.map((s) => s.sessionId)).toEqual(Array.from({ length: 63 }, (_, i) => `s-${String(i + 1).padStart(3, "0")}`));
    const stamps = sessions.map((s) => s.updatedAt ?? "");
    expect(stamps).toEqual([...stamps].sort().reverse()); // newest first, across the page boundary
  });

  it("a server that cannot start ends the prompt as never started", async () => {
    const events: ClientEvent[] = [];
    client = new AgentClient({
      spawn: () => ({ command: "/nonexistent/agent-server", args: [], cwd: "/", env: process.env, log: () => {} }),
      handlers: { readTextFile, writeTextFile, requestPermission: async () => ({ outcome: { outcome: "cancelled" } }), applyWorkspaceEdit: async () => ({ outcome: "failed" }) },
      onEvent: (e) => events.push(e),
      initialMode: () => "",
      log: () => {},
    });
    await client.prompt([{ type: "text", text: "hi" }], "hi");
    expect(events.filter((e) => e.type === "turn-start")).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: "turn-end", started: false, last: true, error: expect.any(String) });
  });
});
