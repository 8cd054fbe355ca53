// The whole extension (activate) with its panel resolved in a fake webview view and a scripted ACP agent
// as the server: what the webview is sent, folded as the webview folds it, is the transcript the user sees.
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TabInputText, TabInputTextDiff, Uri, commands, resetStub, window, workspace } from "../stub/vscode";
import { contextUseText, deactivate } from "../../src/extension";
import type { ChatEvent } from "../../src/protocol";
import { type ChatState, askUndo, fold, initialState } from "../../webview/state";
import { memento, openPanel } from "./panelHarness";

beforeEach(() => memento.clear());
beforeEach(() => resetStub());
afterEach(async () => {
  await deactivate();
});

const answer = (text: string) => [{ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } }];

describe("the agent panel", () => {
  it("the first prompt of a fresh window, the one that starts the session, stays in the transcript", async () => {
    const panel = await openPanel({ turns: [answer("first answer"), answer("second answer")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    expect(panel.users()).toEqual(["first question"]);
    panel.send({ type: "prompt", text: "second question" });
    await panel.until("the second answer", panel.answered("second answer"));
    expect(panel.users()).toEqual(["first question", "second question"]);
    expect(panel.state().currentSession).toMatch(/\S/);
    panel.send({ type: "ready" }); // the webview reloads: the host replays the same transcript
    await panel.until("the replay", (s) => s.items.filter((i) => i.type === "agent").length === 2);
    expect(panel.users()).toEqual(["first question", "second question"]);
  });

  it("a slash command answered at once while an answer streamed split the answer mid-word (/mode during a stream)", async () => {
    const chunk = (text: string, messageId?: string) => ({ update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, ...(messageId ? { messageId } : {}) } });
    const thought = { update: { sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "let me count" }, messageId: "thought-7" } };
    const panel = await openPanel({
      turns: [
        [thought, chunk("word0 word1 ", "msg-7"), chunk("word24 wor", "msg-7"), { awaitPrompt: true }, chunk("d25 word26", "msg-7"), chunk("\n\nword27", "msg-7")],
        [chunk("Mode: read-only.")], // agent-server answers a slash command at once, with no messageId
      ],
    });
    panel.send({ type: "prompt", text: "count" });
    await panel.until("the stream", (s) => s.items.some((i) => i.type === "agent" && i.text.includes("wor")));
    panel.send({ type: "prompt", text: "/mode read-only" });
    await panel.until("both answers", (s) => !s.busy && s.items.some((i) => i.type === "agent" && i.text.includes("word27")));
    const shown = panel.state().items.map((i) => `${i.type}:${(i as { text?: string }).text ?? ""}`);
    expect(shown).toEqual(["user:count", "thought:let me count", "agent:word0 word1 word24 word25 word26\n\nword27", "user:/mode read-only", "agent:Mode: read-only."]);
  });

  it("Undo on an empty panel created a session holding only '/undo — Nothing to undo' (N3)", async () => {
    const panel = await openPanel({ turns: [answer("first answer")] });
    panel.send({ type: "prompt", text: "/undo" }); // the Undo button's message
    await panel.until("the answer", (s) => s.items.some((i) => i.type === "notice"));
    expect(panel.state().items).toMatchObject([{ type: "notice", level: "info", text: expect.stringMatching(/^Nothing to undo: no session is open/) }]);
    panel.send({ type: "prompt", text: "/mode read-only" }); // any command that needs a session
    panel.send({ type: "prompt", text: "/usage" });
    await panel.until("the answers", (s) => s.items.length === 3);
    expect(panel.state().items.map((i) => (i as { text: string }).text)).toEqual([
      expect.stringMatching(/^Nothing to undo/), expect.stringMatching(/choose the mode with its picker at the top of the panel/), expect.stringMatching(/\/usage needs one/),
    ]);
    expect(panel.state().currentSession).toBeUndefined();
    expect(panel.agentLog()).not.toContain("session/new");
    expect(panel.agentLog()).not.toContain("session/prompt");
    panel.send({ type: "prompt", text: "a question" }); // a prompt still starts the session
    await panel.until("the first answer", panel.answered("first answer"));
    expect(panel.agentLog().filter((m) => m === "session/new")).toHaveLength(1);
  });

  it("New clears the transcript and the next prompt shows in the new session", async () => {
    const panel = await openPanel({ turns: [answer("first answer"), answer("in the new session")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const first = panel.state().currentSession;
    panel.send({ type: "newSession" });
    await panel.until("the new session", (s) => s.items.length === 0 && s.currentSession !== first);
    panel.send({ type: "prompt", text: "after New" });
    await panel.until("the answer", panel.answered("in the new session"));
    expect(panel.users()).toEqual(["after New"]);
    expect(panel.state().currentSession).toMatch(/\S/);
    expect(panel.state().currentSession).not.toBe(first);
  });

  it("clicking New twice leaves no empty session: the server's session is made by the first prompt", async () => {
    const panel = await openPanel({ turns: [answer("first answer"), answer("in the new session")] });
    const news = () => panel.agentLog().filter((m) => m === "session/new").length;
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    expect(news()).toBe(1);
    panel.send({ type: "newSession" });
    panel.send({ type: "newSession" });
    await panel.until("the cleared panel", (s) => s.items.length === 0 && s.currentSession === undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(news()).toBe(1); // no session/new for an empty session
    panel.send({ type: "prompt", text: "after New" });
    await panel.until("the answer", panel.answered("in the new session"));
    expect(news()).toBe(2);
  });

  it("a session a closed tab's server still held showed only a red notice: it offers Take over here, Open a copy, Cancel", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "panel-busy-")), "params.log");
    const calls = () => (existsSync(paramsLog) ? readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { method: string; params: Record<string, unknown> }) : []);
    const panel = await openPanel({ turns: [], loadable: true, busy: { pid: 4242, answersTakeOver: true }, paramsLog });
    const held = "sess_0123456789abcdef0123456789abcdef";
    const busyNotice = () => panel.state().items.find((i) => i.type === "notice" && i.actions) as Extract<ChatState["items"][number], { type: "notice" }> | undefined;
    panel.send({ type: "loadSession", sessionId: held });
    await panel.until("the refusal with its choices", () => busyNotice() !== undefined);
    const notice = busyNotice()!;
    expect(notice.text).toContain(`Session ${held} is open in another agent-server process (pid 4242)`);
    expect(notice.actions!.map((a) => a.label)).toEqual(["Take over here", "Open a copy", "Cancel"]);
    expect(notice.actions![2]!.send).toBeUndefined(); // Cancel only dismisses

    panel.send(notice.actions![0]!.send); // Take over here, as the button sends it
    await panel.until("the taken-over session", (s) => s.currentSession === held && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    const loads = calls().filter((c) => c.method === "session/load");
    expect(loads.map((c) => c.params._meta ?? null)).toEqual([null, { agentServer: { takeOver: true } }]);
    expect(panel.state().items.some((i) => i.type === "notice" && i.actions)).toBe(false); // the buttons went with the old transcript

    panel.send({ type: "loadSession", sessionId: held });
    await panel.until("the refusal again", () => busyNotice() !== undefined);
    panel.send(busyNotice()!.actions![1]!.send); // Open a copy
    await panel.until("the copy", (s) => s.currentSession === `copy-${held}` && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    expect(calls().filter((c) => c.method === "session/fork").map((c) => c.params.sessionId)).toEqual([held]);
    expect(calls().filter((c) => c.method === "session/load").at(-1)!.params).toMatchObject({ sessionId: `copy-${held}` });
  });

  it("a holder that cannot be asked to let go offers only Open a copy and Cancel", () => {
    const s = [
      { kind: "session", sessionId: "sess_mine" },
      { kind: "load-refused", sessionId: "sess_held", error: "cannot load session sess_held: it is open in another agent-server process", current: "sess_mine", busy: { pid: 7, canTakeOver: false } },
    ].reduce((st, e) => fold(st, e as ChatEvent), initialState());
    const notice = s.items[0] as Extract<ChatState["items"][number], { type: "notice" }>;
    expect(notice.actions!.map((a) => a.label)).toEqual(["Open a copy", "Cancel"]);
    expect(notice.actions![0]!.send).toEqual({ type: "loadSession", sessionId: "sess_held", how: "copy" });
    expect(notice.text).toContain("cannot be asked to let it go");
    expect(notice.text).toContain("The panel stays on session sess_mine");
    expect(s.currentSession).toBe("sess_mine");
  });

  it("a refused session load leaves the panel, the picker and the client on the session it had", async () => {
    // the scripted agent refuses every session/load, as agent-server refuses a session open in another window
    const panel = await openPanel({ turns: [answer("first answer"), answer("still here")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const mine = panel.state().currentSession;
    panel.send({ type: "loadSession", sessionId: "sess_elsewhere" });
    await panel.until("the refusal", (s) => s.items.some((i) => i.type === "notice" && i.text.startsWith("Could not load session sess_elsewhere")));
    const s = panel.state();
    expect(s.currentSession).toBe(mine);
    expect(panel.users()).toEqual(["first question"]); // the transcript was not cleared
    const notice = s.items.find((i) => i.type === "notice") as { text: string };
    expect(notice.text).toContain(`The panel stays on session ${mine}`);
    panel.send({ type: "prompt", text: "are you there" });
    await panel.until("the answer", panel.answered("still here"));
    expect(panel.state().currentSession).toBe(mine);
    expect(panel.state().items.some((i) => i.type === "notice" && i.level === "error" && i.text.includes("unknown session"))).toBe(false);
  });
});

const ranCommand = [{ update: { sessionUpdate: "tool_call", toolCallId: "b1", title: "mkdir -p .vscode && printf … > .vscode/settings.json", kind: "execute", status: "completed" } }, ...answer("wrote the settings")];

/** A would-be server binary that only leaves a mark when it is started. */
function trap(): { path: string; mark: string } {
  const dir = mkdtempSync(join(tmpdir(), "agent-server-trap-"));
  const mark = join(dir, "pwned");
  const path = join(dir, "run.sh");
  writeFileSync(path, `#!/bin/sh\necho started > '${mark}'\nexit 1\n`);
  chmodSync(path, 0o755);
  return { path, mark };
}

describe("settings written by the workspace (test_workspace_settings_cannot_choose_the_server_binary)", () => {
  it("a workspace or folder agentServer.path/args/baseUrl never starts a server, restarts it, or clears the turn", async () => {
    const t = trap();
    const panel = await openPanel({ turns: [ranCommand, answer("same server")] });
    // present from the start (a cloned repository shipping .vscode/settings.json) …
    workspace.workspaceSettings = { path: t.path, args: [], baseUrl: "http://attacker.invalid/v1" };
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("wrote the settings"));
    const session = panel.state().currentSession;
    // … and written during the turn (by the command the agent ran): VS Code reports the change
    workspace.folderSettings = { path: t.path, args: ["--evil"] };
    await workspace.changed("path");
    await workspace.changed("args");
    await new Promise((r) => setTimeout(r, 100)); // past the panel's 16 ms batch
    const items = panel.state().items;
    expect(items.some((i) => i.type === "tool" && i.title.includes(".vscode/settings.json"))).toBe(true);
    expect(items.some((i) => i.type === "notice")).toBe(false);
    panel.send({ type: "prompt", text: "second question" });
    await panel.until("the second answer", panel.answered("same server"));
    expect(panel.state().currentSession).toBe(session); // the same server and session answered
    expect(panel.users()).toEqual(["first question", "second question"]);
    expect(existsSync(t.mark)).toBe(false);
  });

  it("the user's own change restarts at the next prompt with a notice naming the new command, and keeps the transcript", async () => {
    const panel = await openPanel({ turns: [ranCommand] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("wrote the settings"));
    const t = trap();
    workspace.settings = { ...workspace.settings, path: t.path };
    await workspace.changed("path");
    await panel.until("the notice", (s) => s.items.some((i) => i.type === "notice"));
    const items = panel.state().items;
    expect(items.some((i) => i.type === "tool" && i.title.includes(".vscode/settings.json"))).toBe(true);
    expect(panel.users()).toEqual(["first question"]);
    const notice = items.find((i): i is Extract<typeof i, { type: "notice" }> => i.type === "notice");
    expect(notice?.text).toContain("agentServer.path");
    expect(notice?.text).toContain(t.path);
  });
});

describe("config changes picked up at the next session/new (issue 30, item 11)", () => {
  it("a settings change during a turn killed the server under it; now the turn and its session go on and the next new session gets a server with the new settings", async () => {
    const dir = mkdtempSync(join(tmpdir(), "panel-config-"));
    const envLog = join(dir, "env.log");
    const servers = () => (existsSync(envLog) ? readFileSync(envLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { pid: number; baseUrl: string | null }) : []);
    const toolCall = { toolCallId: "c1", title: "Edit a.py", kind: "edit", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" }];
    const panel = await openPanel({ envLog, turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }, ...answer("first answer")], answer("second answer")] }, { baseUrl: "http://127.0.0.1:1/v1" });
    panel.send({ type: "prompt", text: "a turn that waits" });
    await panel.until("the question", (s) => s.busy && s.items.some((i) => i.type === "permission"));
    const session = panel.state().currentSession;
    // mid-turn, the user points the extension at another endpoint
    workspace.settings = { ...workspace.settings, baseUrl: "http://127.0.0.1:2/v1", model: "other-model" };
    await workspace.changed("baseUrl");
    await workspace.changed("model");
    await panel.until("the notice", (s) => s.items.some((i) => i.type === "notice"));
    const permission = panel.state().items.find((i) => i.type === "permission") as { permId: string };
    panel.send({ type: "permission", id: permission.permId, optionId: "allow" });
    await panel.until("the first answer", panel.answered("first answer")); // the turn was not killed
    panel.send({ type: "prompt", text: "same session" });
    await panel.until("the second answer", panel.answered("second answer"));
    expect(panel.state().currentSession).toBe(session);
    expect(servers().map((x) => x.baseUrl)).toEqual(["http://127.0.0.1:1/v1"]); // one server so far
    const notices = () => panel.state().items.flatMap((i) => (i.type === "notice" ? [i.text] : []));
    expect(notices()).toHaveLength(1); // said once for the two keys
    expect(notices()[0]).toContain("agentServer.baseUrl, agentServer.model changed");
    expect(notices()[0]).toContain("this session goes on as it was started");
    // New: the next session/new is on a server started with the new settings, and it says so
    panel.send({ type: "newSession" });
    panel.send({ type: "prompt", text: "new session" });
    // a new process plays the script from its first turn (the question) again
    await panel.until("the new server's question", (s) => s.items.some((i) => i.type === "permission" && !i.outcome));
    const again = panel.state().items.find((i) => i.type === "permission" && !i.outcome) as { permId: string };
    panel.send({ type: "permission", id: again.permId, optionId: "allow" });
    await panel.until("the answer in the new session", panel.answered("first answer"));
    expect(servers().map((x) => x.baseUrl)).toEqual(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]);
    expect(panel.state().currentSession).not.toBe(session);
    expect(notices().at(-1)).toBe("agent-server was restarted for this new session: agentServer.baseUrl, agentServer.model changed since it started.");
  });
});

describe("every workspace folder is a root of the session", () => {
  it("sends the first folder as cwd and the others as additionalDirectories, and a folder change starts a new session, said so", async () => {
    const dir = mkdtempSync(join(tmpdir(), "roots-"));
    const paramsLog = join(dir, "params.log");
    const panel = await openPanel({ turns: [answer("first"), answer("second")], additionalDirectories: true, paramsLog });
    workspace.workspaceFolders = [{ uri: Uri.file("/ws/one") }, { uri: Uri.file("/ws/two") }];
    panel.send({ type: "prompt", text: "q1" });
    await panel.until("the first answer", panel.answered("first"));
    const news = () => readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((m) => m.method === "session/new").map((m) => m.params);
    expect(news()).toEqual([{ cwd: "/ws/one", additionalDirectories: ["/ws/two"], mcpServers: [] }]);
    workspace.workspaceFolders = [{ uri: Uri.file("/ws/two") }, { uri: Uri.file("/ws/three") }];
    await Promise.all(workspace.folderListeners.map((l) => l()));
    await panel.until("the notice", (s) => s.items.some((i) => i.type === "notice" && i.text.includes("workspace folders changed")));
    panel.send({ type: "prompt", text: "q2" });
    await panel.until("the second answer", panel.answered("second"));
    expect(news()[1]).toEqual({ cwd: "/ws/two", additionalDirectories: ["/ws/three"], mcpServers: [] });
  });

  it("an image pasted into the prompt goes as an image block to an agent that advertises promptCapabilities.image", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "panel-")), "params.log");
    const panel = await openPanel({ image: true, paramsLog, turns: [answer("I see a red dot")] });
    await panel.until("the agent's capabilities", (s) => s.images);
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    panel.send({ type: "prompt", text: "what is this?", images: [{ mimeType: "image/png", data: png, name: "dot.png" }] });
    await panel.until("the answer", panel.answered("I see a red dot"));
    const prompts = readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((m) => m.method === "session/prompt");
    expect(prompts[0].params.prompt).toEqual([{ type: "text", text: "what is this?" }, { type: "image", data: png, mimeType: "image/png" }]);
    expect(panel.users()).toEqual(["what is this?\n[image dot.png]"]);
  });

  it("an agent without promptCapabilities.image is known not to take images (the panel says so instead of sending)", async () => {
    const panel = await openPanel({ turns: [answer("ok")] });
    panel.send({ type: "prompt", text: "hi" });
    await panel.until("the answer", panel.answered("ok"));
    expect(panel.state().images).toBe(false);
    await panel.until("the first-run facts", (s) => s.setup !== undefined); // another agent: the check says it could not read them
    expect(panel.state().setup?.error).toMatch(/configuration/);
  });
});

describe("sessions survive restarts (issue 30, item 6)", () => {
  const sessionOf = (log: string[]) => log.filter((l) => l.startsWith("session/"));

  it("Restart Server resumes the session that was open: the next prompt goes to it, the transcript stays", async () => {
    const panel = await openPanel({ resume: true, turns: [answer("first answer")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const mine = panel.state().currentSession;
    await commands.registered.get("agentServer.restartServer")!();
    expect(panel.agentLog()).toContain("session/resume");
    panel.send({ type: "prompt", text: "after the restart" }); // the new process plays its first turn again
    await panel.until("the answer", (s) => !s.busy && s.items.filter((i) => i.type === "agent").length === 2);
    expect(panel.state().currentSession).toBe(mine);
    expect(panel.users()).toEqual(["first question", "after the restart"]);
    expect(sessionOf(panel.agentLog()).filter((m) => m === "session/new")).toHaveLength(1);
    expect(panel.state().items.some((i) => i.type === "notice" && i.level === "divider")).toBe(false);
  });

  it("an agent that cannot resume: a divider says a new session starts, and the next prompt starts it", async () => {
    const panel = await openPanel({ turns: [answer("first answer")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const first = panel.state().currentSession;
    await commands.registered.get("agentServer.restartServer")!();
    await panel.until("the divider", (s) => s.items.some((i) => i.type === "notice" && i.level === "divider"));
    panel.send({ type: "prompt", text: "after the restart" });
    await panel.until("the answer", (s) => !s.busy && s.items.filter((i) => i.type === "agent").length === 2);
    expect(panel.state().currentSession).not.toBe(first);
    expect(sessionOf(panel.agentLog()).filter((m) => m === "session/new")).toHaveLength(2);
  });

  const notices = (s: ChatState) => s.items.flatMap((i) => (i.type === "notice" ? [i.text] : []));

  it("restart and kill notices said the session went on before anyone knew (Restart Server, a crash, no session open)", async () => {
    // Restart Server with a session open: said once it was resumed, naming what happened
    const panel = await openPanel({ resume: true, turns: [answer("first answer")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const short = panel.state().currentSession!.slice(0, 8);
    await commands.registered.get("agentServer.restartServer")!();
    await panel.until("the restart notice", (s) => notices(s).some((t) => t.includes("resumed")));
    expect(notices(panel.state())).toEqual([`agent-server was restarted (Agent: Restart Server): session ${short} resumed — the agent still has everything above.`]);
    // New, then Restart Server: no session was open, and it says so (not "this session goes on")
    panel.send({ type: "newSession" });
    await commands.registered.get("agentServer.restartServer")!();
    await panel.until("the second restart notice", (s) => notices(s).some((t) => t.includes("no session was open")));
    expect(notices(panel.state())).toEqual(["agent-server was restarted (Agent: Restart Server); no session was open: the next prompt starts one."]);
  });

  it("Restart Server while a proposal waited said the server died during the turn (exit code 0)", async () => {
    const toolCall = { toolCallId: "c1", title: "Edit a.py", kind: "edit", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" }];
    const panel = await openPanel({ resume: true, turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }]] });
    panel.send({ type: "prompt", text: "a turn that waits for the user" });
    await panel.until("the question", (s) => s.busy && s.items.some((i) => i.type === "permission"));
    await commands.registered.get("agentServer.restartServer")!();
    await panel.until("the turn's end and the restart notice", (s) => !s.busy && notices(s).some((t) => t.includes("resumed")));
    const said = notices(panel.state());
    expect(said.filter((t) => /died|exit code/.test(t))).toEqual([]);
    expect(said).toContain("Stopped: cancelled");
    expect(said.at(-1)).toMatch(/^agent-server was restarted \(Agent: Restart Server\): session \S+ resumed/);
  });

  it("a crash mid-turn says the server is started again and, once it is, that the session was resumed", async () => {
    const once = join(mkdtempSync(join(tmpdir(), "panel-crash-")), "died");
    const panel = await openPanel({ resume: true, turns: [answer("first answer"), [{ die: "fatal: scripted crash", onceFile: once }]] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const short = panel.state().currentSession!.slice(0, 8);
    panel.send({ type: "prompt", text: "this one crashes" });
    await panel.until("the resumed notice", (s) => notices(s).some((t) => t.includes("started again after it exited")));
    expect(notices(panel.state())).toEqual([
      `agent-server exited (exit code 3). It is being started again; session ${short} is resumed once it is back.`,
      `agent-server was started again after it exited: session ${short} resumed — the agent still has everything above.`,
    ]);
  });

  it("the automatic resume of a session another agent-server process holds offers Take over here, Open a copy, Cancel", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "panel-busy-resume-")), "params.log");
    const calls = () => (existsSync(paramsLog) ? readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { method: string; params: Record<string, unknown> }) : []);
    const panel = await openPanel({ resume: true, busyResume: true, loadable: true, busy: { pid: 4242, answersTakeOver: true }, paramsLog, turns: [answer("first answer")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const mine = panel.state().currentSession!;
    await commands.registered.get("agentServer.restartServer")!();
    const choice = () => panel.state().items.find((i) => i.type === "notice" && i.actions) as Extract<ChatState["items"][number], { type: "notice" }> | undefined;
    await panel.until("the choice", () => choice() !== undefined);
    expect(choice()!.text).toContain(`Session ${mine} is open in another agent-server process (pid 4242)`);
    expect(choice()!.actions!.map((a) => a.label)).toEqual(["Take over here", "Open a copy", "Cancel"]);
    expect(notices(panel.state())[0]).toContain(`agent-server was restarted (Agent: Restart Server), but session ${mine.slice(0, 8)} was not resumed: another agent-server process holds it.`);
    panel.send(choice()!.actions![0]!.send); // Take over here
    await panel.until("the taken-over session", (s) => s.currentSession === mine && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    const asked = calls().filter((c) => c.method === "session/resume" || c.method === "session/load");
    expect(asked.map((c) => [c.method, c.params._meta ?? null])).toEqual([["session/resume", null], ["session/load", { agentServer: { takeOver: true } }]]);
  });

  it("a window reload while a proposal waited restored its diff tab, which could not be opened", async () => {
    // VS Code restores the window's tabs; the proposal's virtual file lived in the old extension host
    const proposal = { input: new TabInputTextDiff(Uri.file("/ws/calc.py"), Uri.parse("agent-proposal:/calc.py?p1/0/new")), label: "Edit calc.py (proposal)" };
    const change = { input: new TabInputTextDiff(Uri.parse("agent-change:/calc.py?b1"), Uri.parse("agent-change:/calc.py?a1")), label: "calc.py (the turn's change)" };
    const file = { input: new TabInputText(Uri.file("/ws/calc.py")), label: "calc.py" };
    window.tabGroups.all.push({ tabs: [proposal, file, change] });
    await openPanel({ turns: [] });
    expect(window.tabGroups.closed).toEqual([proposal, change]);
  });

  it("after a take-over the old window was stuck: its next prompt got a raw unknown session error, the prompt was lost, the status bar still said ready (newcomer finding F5)", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "panel-taken-")), "params.log");
    const calls = () => (existsSync(paramsLog) ? readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { method: string; params: Record<string, unknown> }) : []);
    const released = {
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text: "[agent-server] This session was taken over by another agent-server process (pid 4242: another window): it is closed here. Load it again to take it back." },
      _meta: { agentServer: { notice: { severity: "warning", takenOver: { pid: 4242 } } } },
    };
    const panel = await openPanel({ loadable: true, busy: { pid: 4242, answersTakeOver: true }, paramsLog, turns: [[{ update: released }], answer("answered after taking it back")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the take-over notice", (s) => !s.busy && s.items.some((i) => i.type === "agent" && i.text.includes("taken over")));
    const mine = calls().find((c) => c.method === "session/prompt")!.params.sessionId;
    await panel.until("the status bar", () => window.statusItems[0]!.text.includes("session taken over"));
    panel.send({ type: "prompt", text: "the prompt after the take-over" });
    const choice = () => panel.state().items.find((i) => i.type === "notice" && i.actions) as Extract<ChatState["items"][number], { type: "notice" }> | undefined;
    await panel.until("the way forward", () => choice() !== undefined);
    expect(choice()!.actions!.map((a) => a.label)).toEqual(["Take it back", "New session", "Cancel"]);
    expect(choice()!.text).toContain("This prompt was not sent");
    expect(calls().filter((c) => c.method === "session/prompt")).toHaveLength(1); // not sent to a session the server no longer has
    expect(panel.state().items.some((i) => i.type === "notice" && /unknown session/.test(i.text))).toBe(false);
    panel.send(choice()!.actions![0]!.send); // Take it back
    await panel.until("the prompt answered in the session taken back", panel.answered("answered after taking it back"));
    expect(panel.state().currentSession).toBe(mine);
    const asked = calls().filter((c) => c.method === "session/load" || c.method === "session/prompt");
    expect(asked.map((c) => [c.method, c.params._meta ?? null])).toEqual([["session/prompt", null], ["session/load", { agentServer: { takeOver: true } }], ["session/prompt", null]]);
    expect(JSON.stringify(asked[2]!.params.prompt)).toContain("the prompt after the take-over");
    expect(panel.users().at(-1)).toBe("the prompt after the take-over");
    expect(window.statusItems[0]!.text).toContain("Agent: ready");
  });

  it("a prompt answered unknown session (-32002) for the open session offers the same way forward, the prompt kept", async () => {
    const gone = { fail: { code: -32002, message: "unknown session: {sessionId}", data: { sessionId: "{sessionId}" } } };
    const panel = await openPanel({ turns: [answer("first answer"), [gone], answer("answered in a new session")] });
    panel.send({ type: "prompt", text: "first question" });
    await panel.until("the first answer", panel.answered("first answer"));
    const first = panel.state().currentSession;
    panel.send({ type: "prompt", text: "kept prompt" });
    const choice = () => panel.state().items.find((i) => i.type === "notice" && i.actions) as Extract<ChatState["items"][number], { type: "notice" }> | undefined;
    await panel.until("the way forward", (s) => !s.busy && choice() !== undefined);
    expect(panel.state().items.some((i) => i.type === "notice" && /unknown session/.test(i.text))).toBe(false);
    expect(window.statusItems[0]!.text).toContain("session taken over");
    panel.send(choice()!.actions![1]!.send); // New session
    await panel.until("the kept prompt answered", panel.answered("answered in a new session"));
    expect(panel.state().currentSession).not.toBe(first);
    expect(panel.users()).toEqual(["kept prompt"]);
  });

  it("a window reload reopens the session the window had open (session/load into the empty panel)", async () => {
    const before = await openPanel({ loadable: true, turns: [answer("first answer")] });
    before.send({ type: "prompt", text: "first question" });
    await before.until("the first answer", before.answered("first answer"));
    const mine = before.state().currentSession;
    await deactivate(); // the window reloads: a new extension host, the same workspaceState
    const after = await openPanel({ loadable: true, turns: [] });
    await after.until("the reopened session", (s) => s.currentSession === mine && s.items.some((i) => i.type === "agent" && i.text === "replayed answer"));
    expect(after.users()).toEqual(["replayed question"]);
    expect(after.agentLog()).toContain("session/load");
    await after.until("the reopen notice", (s) => notices(s).length > 0);
    expect(notices(after.state())).toEqual([`The window was reloaded: session ${mine!.slice(0, 8)} reopened (its history is above).`]);
  });

  it("loaded sessions show chips as live: a call the replay left open is drawn unfinished, and a load during another session's turn is not busy", async () => {
    const toolCall = { toolCallId: "c1", title: "Edit a.py", kind: "edit", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" }];
    const panel = await openPanel({
      loadable: true,
      replay: [{ sessionUpdate: "tool_call", toolCallId: "tc-9", title: "Run the tests", kind: "execute", status: "in_progress", rawInput: { command: "pytest -q" } }],
      turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }]],
    });
    panel.send({ type: "prompt", text: "a turn that waits" });
    await panel.until("the question", (s) => s.busy && s.items.some((i) => i.type === "permission"));
    panel.send({ type: "loadSession", sessionId: "s-old" });
    await panel.until("the replay", (s) => s.currentSession === "s-old" && s.items.some((i) => i.type === "tool" && i.toolCallId === "tc-9" && i.status === "unfinished"));
    const s = panel.state();
    expect(s.busy).toBe(false); // no Stop, no "Working…" for a transcript where nothing runs
    expect(s.items.map((i) => i.type)).toEqual(["user", "agent", "tool"]);
  });
});

describe("mode and model pickers before the first prompt (issue 30, item 11)", () => {
  const select = (id: string, name: string, currentValue: string, values: string[]) => ({ id, name, category: id, type: "select", currentValue, options: values.map((v) => ({ value: v, name: v })) });
  const offered = [select("mode", "Mode", "workspace-write", ["read-only", "workspace-write", "danger-full-access"]), select("model", "Model", "m-1", ["m-1", "m-2"])];
  const calls = (paramsLog: string) => (existsSync(paramsLog) ? readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { method: string; params: Record<string, unknown> }) : []);

  it("mode/model pickers were usable only once a session existed: the empty panel offers them, and the choice is set after session/new, before the prompt", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "pick-")), "params.log");
    const panel = await openPanel({ paramsLog, checkConfig: { ok: true, baseUrl: "http://127.0.0.1:9/v1", model: "m-1", configOptions: offered }, configOptions: offered, turns: [answer("answered")] });
    await panel.until("the pickers on the empty panel", (s) => s.items.length === 0 && s.selects.map((x) => x.id).join() === "mode,model");
    // full access asks first; cancelled, the mode stays
    window.quickPickAnswers.push("danger-full-access");
    window.warningAnswers.push(undefined);
    await panel.send({ type: "pickOption", configId: "mode" });
    await panel.until("the confirmation", () => window.warnings.length === 1);
    expect(window.warnings[0]).toMatch(/no sandbox/i);
    window.quickPickAnswers.push("read-only", "m-2");
    await panel.send({ type: "pickOption", configId: "mode" });
    await panel.send({ type: "pickOption", configId: "model" });
    await panel.until("the choices shown", (s) => s.selects.find((x) => x.id === "mode")?.currentValue === "read-only" && s.selects.find((x) => x.id === "model")?.currentValue === "m-2");
    expect(calls(paramsLog).map((c) => c.method)).not.toContain("session/new"); // no session made for a pick
    panel.send({ type: "prompt", text: "go" });
    await panel.until("the answer", panel.answered("answered"));
    const sent = calls(paramsLog).filter((c) => c.method.startsWith("session/")).map((c) => (c.method === "session/set_config_option" ? `set ${c.params.configId}=${c.params.value}` : c.method));
    expect(sent).toEqual(["session/new", "set mode=read-only", "set model=m-2", "session/prompt"]);
    expect(panel.state().selects.map((x) => x.currentValue)).toEqual(["read-only", "m-2"]);
    // New: the pickers show what a new session starts with, not the last one's values
    panel.send({ type: "newSession" });
    await panel.until("the new session's pickers", (s) => s.items.length === 0 && s.selects.map((x) => x.currentValue).join() === "workspace-write,m-1");
  });

  it("a setConfigOption message from the webview chose full access without the confirmation: only a picker's choice sets an option", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "pick-")), "params.log");
    const panel = await openPanel({ paramsLog, checkConfig: { ok: true, configOptions: offered }, configOptions: offered, turns: [answer("answered")] });
    await panel.until("the pickers on the empty panel", (s) => s.selects.length === 2);
    panel.send({ type: "setConfigOption", configId: "mode", value: "danger-full-access" });
    panel.send({ type: "prompt", text: "go" });
    await panel.until("the answer", panel.answered("answered"));
    expect(calls(paramsLog).map((c) => c.method)).not.toContain("session/set_config_option");
    expect(panel.state().selects.find((x) => x.id === "mode")?.currentValue).toBe("workspace-write");
  });
});

describe("the status bar (issue 30, item 10)", () => {
  it("the status bar showed the state but not the context use: it says how much of the context the session used", async () => {
    const usage = { update: { sessionUpdate: "usage_update", used: 42_000, size: 100_000 } };
    const panel = await openPanel({ turns: [[usage, ...answer("counted")]] });
    panel.send({ type: "prompt", text: "how much?" });
    await panel.until("the answer", panel.answered("counted"));
    const item = window.statusItems[0]!;
    await panel.until("the status bar's figure", () => item.text.includes("· 42%"));
    expect(item.text).toMatch(/Agent: ready · 42%$/);
    expect(item.tooltip).toContain("42,000 / 100,000 tokens");
    panel.send({ type: "newSession" }); // a new session has used nothing yet
    await panel.until("the figure gone", () => !item.text.includes("%"));
  });

  it("the status bar showed 'Agent: ready · 0%' for a tiny context use: it says <1%", async () => {
    const usage = { update: { sessionUpdate: "usage_update", used: 900, size: 200_000 } };
    const panel = await openPanel({ turns: [[usage, ...answer("counted")]] });
    panel.send({ type: "prompt", text: "hi" });
    await panel.until("the answer", panel.answered("counted"));
    const item = window.statusItems[0]!;
    await panel.until("the status bar's figure", () => item.text.includes("%"));
    expect(item.text).toMatch(/Agent: ready · <1%$/);
    expect(item.tooltip).toContain("900 / 200,000 tokens");
  });

  it("the context use's figure: rounded down, <1% under one percent, nothing when none is used", () => {
    expect(contextUseText(1, 200_000)).toBe("<1%");
    expect(contextUseText(1_999, 200_000)).toBe("<1%");
    expect(contextUseText(2_000, 200_000)).toBe("1%");
    expect(contextUseText(199_999, 200_000)).toBe("99%"); // 100% only when full
    expect(contextUseText(200_000, 200_000)).toBe("100%");
    expect(contextUseText(0, 200_000)).toBeUndefined();
    expect(contextUseText(5, 0)).toBeUndefined();
  });
});

describe("a question left waiting in another session (newcomer finding 1b)", () => {
  it("switching sessions while a permission question waits, then back: the card was 'Unfinished' with no Allow and no Stop, and the next prompt hung behind the hidden question", async () => {
    const toolCall = { toolCallId: "c1", title: "Read .env", kind: "read", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow once", kind: "allow_once" }, { optionId: "reject", name: "Reject", kind: "reject_once" }];
    const panel = await openPanel({
      loadable: true,
      // what session/load replays of the waiting turn: its call, still open
      replay: [{ sessionUpdate: "tool_call", toolCallId: "c1", title: "Read .env", kind: "read", status: "pending" }],
      turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }, ...answer("first answer")], answer("second answer")],
    });
    panel.send({ type: "prompt", text: "READ .env" });
    await panel.until("the question", (s) => s.busy && s.items.some((i) => i.type === "permission"));
    const mine = panel.state().currentSession!;
    panel.send({ type: "loadSession", sessionId: "s-old" });
    await panel.until("the other session", (s) => s.currentSession === "s-old" && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    panel.send({ type: "loadSession", sessionId: mine });
    await panel.until("the session back", (s) => s.currentSession === mine && s.items.some((i) => i.type === "agent" && i.text.includes("replayed answer")));
    await panel.until("the question shown again", (s) => s.items.some((i) => i.type === "permission" && !i.outcome));
    const back = panel.state();
    expect(back.busy).toBe(true); // the turn runs: Stop is offered, "Working…" shown
    const call = back.items.find((i) => i.type === "tool" && i.toolCallId === "c1") as { status: string };
    expect(call.status).toBe("pending"); // not "Unfinished": it waits for the answer below
    const question = back.items.find((i) => i.type === "permission" && !i.outcome) as { permId: string; options: { name: string }[] };
    expect(question.options.map((o) => o.name)).toEqual(["Allow once", "Reject"]);
    panel.send({ type: "permission", id: question.permId, optionId: "allow" });
    await panel.until("the turn's end", panel.answered("first answer"));
    panel.send({ type: "prompt", text: "SAY hello-after-switch" });
    await panel.until("the next prompt's answer", panel.answered("second answer"));
    expect(panel.state().items.filter((i) => i.type === "notice").map((i) => (i as { text: string }).text)).toEqual([]);
  });

  it("after switching back to a session whose question waits, Stop cancels that session's turn", async () => {
    const paramsLog = join(mkdtempSync(join(tmpdir(), "params-")), "params.log");
    const toolCall = { toolCallId: "c1", title: "Read .env", kind: "read", status: "pending" };
    const options = [{ optionId: "allow", name: "Allow once", kind: "allow_once" }];
    const panel = await openPanel({ loadable: true, paramsLog, turns: [[{ request: "session/request_permission", params: { sessionId: "{sessionId}", toolCall, options } }]] });
    panel.send({ type: "prompt", text: "READ .env" });
    await panel.until("the question", (s) => s.busy && s.items.some((i) => i.type === "permission"));
    const mine = panel.state().currentSession!;
    panel.send({ type: "loadSession", sessionId: "s-old" });
    await panel.until("the other session", (s) => s.currentSession === "s-old" && !s.busy);
    panel.send({ type: "loadSession", sessionId: mine });
    await panel.until("the question shown again", (s) => s.currentSession === mine && s.busy && s.items.some((i) => i.type === "permission" && !i.outcome));
    panel.send({ type: "cancel" });
    const cancels = () => (existsSync(paramsLog) ? readFileSync(paramsLog, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { method: string; params: { sessionId?: string } }) : []).filter((c) => c.method === "session/cancel");
    await panel.until("the cancel", () => cancels().length > 0);
    expect(cancels().map((c) => c.params.sessionId)).toEqual([mine]);
  });
});

describe("Undo this turn (newcomer finding 3b)", () => {
  it("a double-click on Undo this turn ran two /undos: one click, one undo — the buttons wait for its answer", async () => {
    const panel = await openPanel({ turns: [answer("first answer"), answer("Undo of turn 1: a.txt: removed."), answer("Nothing to undo.")] });
    // the webview's own state, folded as it arrives (askUndo marks it between the click and the host's events)
    const webview = initialState();
    let seen = 0;
    const sync = () => { for (; seen < panel.sent.length; seen++) fold(webview, panel.sent[seen]!); };
    panel.send({ type: "prompt", text: "WRITE a.txt" });
    await panel.until("the first turn", panel.answered("first answer"));
    sync();
    const click = () => { if (askUndo(webview)) panel.send({ type: "prompt", text: "/undo" }); };
    click();
    click(); // the second click of a double-click, in the same tick
    await panel.until("the undo's answer", panel.answered("Undo of turn 1"));
    sync();
    const prompts = () => panel.agentLog().filter((m) => m === "session/prompt").length;
    expect(prompts()).toBe(2); // the first turn and one /undo
    expect(panel.users()).toEqual(["WRITE a.txt", "/undo"]);
    // answered: the next click sends again
    click();
    await panel.until("the second undo's answer", panel.answered("Nothing to undo."));
    expect(prompts()).toBe(3);
  });
});
