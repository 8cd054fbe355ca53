/**
 * Activation: wires the server process and ACP client to the panel, the buffers, the proposals' diff
 * view and the permission questions; registers the commands; kills the server's process group on
 * deactivation.
 *
 * Must not: hold protocol logic (the modules below do) or print a secret.
 */

import * as vscode from "vscode";
import * as os from "node:os";
import type * as acp from "@agentclientprotocol/sdk";
import { AgentClient, type ClientEvent, errorText, sessionBusy } from "./client";
import { readTextFile, trackDiskChanges, writeTextFile } from "./buffers";
import { ChatView, VIEW_ID } from "./chatView";
import { DiffView, type ProposalPanel } from "./diff";
import { Permissions } from "./permissions";
import { type Proposal, ProposalManager } from "./proposals";
import { offsetAt } from "./proposalModel";
import type { ChatEvent, HunkView, SelectView, WebviewToHost, WireUpdate } from "./protocol";
import { SECRET_KEY, changedLaunchSettings, promptForApiKey, readSettings, serverEnv } from "./config";
import { selectionBlock } from "./selection";
import { isSafeLink } from "../webview/render";

let client: AgentClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<{ client: AgentClient }> {
  const output = vscode.window.createOutputChannel("agent-server");
  const log = (line: string) => output.appendLine(line);
  let apiKey = await context.secrets.get(SECRET_KEY);
  /** The settings the running (or next) server was started with. */
  let launched = readSettings();
  context.subscriptions.push(
    output,
    trackDiskChanges(),
    context.secrets.onDidChange(async (e) => {
      if (e.key !== SECRET_KEY) return;
      apiKey = await context.secrets.get(SECRET_KEY);
      await restartForSettings("the API key changed");
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration("agentServer")) return;
      // Only the user's own values count (readSettings ignores a workspace's): a change written
      // into .vscode/settings.json (by a command the agent ran, or a pulled commit) changes nothing
      // here and restarts nothing.
      const now = readSettings();
      const changed = changedLaunchSettings(launched, now);
      if (changed.length === 0) return;
      launched = now;
      await restartForSettings(`your agentServer settings changed (${changed.map((k) => `agentServer.${k}`).join(", ")}; the server command is now ${JSON.stringify([now.path, ...now.args].join(" "))})`);
    }),
  );

  async function restartForSettings(why: string): Promise<void> {
    if (!client) return;
    await client.restart();
    setStatus("not started");
    log(`${why}: the server restarts with the next prompt (in a new session)`);
    // Not a reset: the transcript so far stays (the commands that ran, their output); the notice
    // says what changed and that what follows is a new session.
    post({ kind: "notice", level: "info", text: `${why}; the next prompt starts the server again in a new session.` });
  }

  const chat = new ChatView(context.extensionUri, (m) => void onMessage(m));
  const post = (e: ChatEvent) => chat.post(e);
  const permissions = new Permissions(post);
  const panel: ProposalPanel = {
    proposalShown: (p) => post(proposalEvent(p)),
    proposalChanged: (p) => post(proposalEvent(p)),
    proposalFinished: (p, r) => post({ kind: "proposal-done", id: p.id, outcome: r.outcome, message: r.message }),
  };
  const diffView = new DiffView(panel);
  const proposals = new ProposalManager(diffView, log);
  diffView.manager = proposals;

  const folder = () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
  const agent = new AgentClient({
    spawn: () => {
      const s = readSettings();
      launched = s;
      return { command: s.path, args: s.args, cwd: folder(), env: serverEnv(s, apiKey), log };
    },
    handlers: {
      readTextFile,
      writeTextFile,
      requestPermission: (params, signal) => {
        void chat.reveal();
        return permissions.request(params, signal);
      },
      applyWorkspaceEdit: (params, signal, encoding) => proposals.handle(params, signal, encoding),
    },
    onEvent: (e) => onClientEvent(e),
    initialMode: () => readSettings().mode,
    roots: () => (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath),
    log,
  });
  client = agent;

  // ---- the status bar: the server's state (also how a window shows the extension is active) ----
  const status = vscode.window.createStatusBarItem("agentServer.status", vscode.StatusBarAlignment.Right, 100);
  status.name = "Agent";
  status.command = `${VIEW_ID}.focus`;
  const setStatus = (state: "not started" | "starting" | "ready" | "working" | "stopped", detail?: string) => {
    const icon = { "not started": "$(hubot)", starting: "$(sync~spin)", ready: "$(hubot)", working: "$(sync~spin)", stopped: "$(debug-disconnect)" }[state];
    status.text = state === "not started" ? `${icon} Agent` : `${icon} Agent: ${state}`;
    status.accessibilityInformation = { label: `Agent: ${state}` };
    status.tooltip = detail ?? `agent-server: ${state} (click to open the Agent panel)`;
  };
  setStatus("not started");
  status.show();
  context.subscriptions.push(status);

  /**
   * Starts the server ahead of the first prompt (issue 27: the panel became visible, or one of our
   * commands ran), so its imports are done by the time a person has typed. Never at VS Code's
   * start-up: a window that never shows the panel never starts a server. A failure is said once.
   */
  let prestarted: Promise<void> | undefined;
  /** The session this window had open before a reload (VS Code restarted the extension host): loaded
   * into the empty panel once, at the first start. */
  let reopen: string | undefined = context.workspaceState.get<string>(SESSION_KEY);
  function prestart(): Promise<void> {
    prestarted ??= (async () => {
      if (!agent.serverUp) setStatus("starting");
      try {
        await agent.start();
        if (!agent.busy) setStatus("ready");
        const previous = reopen;
        reopen = undefined;
        if (previous && !agent.currentSessionId && !agent.busy) await loadSession(previous, "reopen");
        await refreshSessions();
      } catch (err) {
        setStatus("stopped", errorText(err));
        post({ kind: "notice", level: "error", text: `Could not start agent-server: ${errorText(err)}` });
      } finally {
        prestarted = undefined;
      }
    })();
    return prestarted;
  }

  function onClientEvent(e: ClientEvent): void {
    switch (e.type) {
      case "update":
        if (loading?.sessionId === e.sessionId) loading.clear();
        if (e.sessionId === agent.currentSessionId) post({ kind: "update", update: e.update as unknown as WireUpdate });
        return;
      case "session":
        // Not a reset: New, a load and a settings restart clear the panel themselves before their
        // session starts, and a session started by a prompt (the window's first, or the one after the
        // server died) keeps what is shown — that prompt among it.
        reopen = undefined; // a session is open: nothing to reopen at the first start any more
        void context.workspaceState.update(SESSION_KEY, e.sessionId);
        post({ kind: "session", sessionId: e.sessionId });
        post({ kind: "config", selects: selectsOf(e.configOptions, e.modes) });
        void refreshSessions();
        return;
      case "turn-start":
        setStatus("working");
        post({ kind: "turn-start", text: e.text });
        return;
      case "turn-end":
        if (!e.started) {  // the server or the session could not start: no turn to end
          post({ kind: "notice", level: "error", text: e.error ?? "the prompt could not be sent" });
          return;
        }
        if (e.last) permissions.cancelAll(); // an overlapping prompt's answer leaves the turn's questions open
        if (e.last) setStatus(agent.serverUp ? "ready" : "stopped");
        post({ kind: "turn-end", text: e.text, stopReason: e.stopReason, error: e.error });
        return;
      case "server-exited":
        setStatus("stopped", e.message);
        permissions.cancelAll();
        log(`--- stderr tail ---\n${e.stderrTail}`);
        post({ kind: "server-exited", message: e.message, stderrTail: e.stderrTail });
        return;
      case "session-lost":
        void context.workspaceState.update(SESSION_KEY, undefined);
        post({ kind: "notice", level: "divider", text: `Session ${e.sessionId.slice(0, 8)} could not be resumed (${e.reason}). A new session starts here: the agent does not see what is above.` });
        void refreshSessions();
        return;
      case "server-started":
        setStatus(agent.busy ? "working" : "ready");
        log(`connected to ${e.agentName}${e.extension ? " (agent-server extensions on)" : " (plain ACP)"}`);
        return;
    }
  }

  async function onMessage(m: WebviewToHost): Promise<void> {
    try {
      switch (m.type) {
        case "ready": // the panel is shown: the server starts now, before the first prompt
          return await prestart();
        case "prompt":
          post({ kind: "user", text: m.text });
          return await agent.prompt([{ type: "text", text: m.text }], m.text);
        case "cancel":
          return await agent.cancel();
        case "newSession":
          return await newSession();
        case "listSessions":
          return await refreshSessions();
        case "loadSession":
          return await loadSession(m.sessionId, "pick", m.how === "take-over" || m.how === "copy" ? m.how : undefined);
        case "setConfigOption": {
          const options = await setOption(m.configId, m.value);
          if (options) post({ kind: "config", selects: selectsOf(options, null) });
          return;
        }
        case "permission":
          return permissions.answer(m.id, m.optionId);
        case "proposal": {
          const p = proposals.get(m.id);
          if (!p) return;
          if (m.action === "show") return await diffView.show(p);
          if (m.action === "again") return await proposals.askAgain(m.id);
          return await proposals.decideAll(m.id, m.action === "accept");
        }
        case "hunk":
          return await proposals.decideHunk(m.id, m.fileIndex, m.index, m.accept);
        case "openLink":
          if (isSafeLink(m.href)) await vscode.env.openExternal(vscode.Uri.parse(m.href));
          return;
      }
    } catch (err) {
      post({ kind: "notice", level: "error", text: errorText(err) });
    }
  }

  /** `session/list` (every page) into the panel's session picker, whole (after each session change and on focus). */
  async function refreshSessions(): Promise<void> {
    try {
      const sessions = await agent.listSessions();
      post({ kind: "sessions", sessions: sessions.map((s) => ({ sessionId: s.sessionId, title: s.title ?? s.sessionId.slice(0, 8), updatedAt: s.updatedAt })), current: agent.currentSessionId });
    } catch (err) {
      log(`session/list failed: ${errorText(err)}`);
    }
  }

  async function setOption(configId: string, value: string): Promise<acp.SessionConfigOption[] | undefined> {
    if (configId === "mode" && !agent.agentCapabilities) return undefined;
    try {
      return await agent.setConfigOption(configId, value);
    } catch (err) {
      if (configId !== "mode") throw err;
      await agent.setMode(value);
      return undefined;
    }
  }

  /**
   * A load clears the panel only when it goes ahead (its first replayed update, or its answer): a
   * refused load (`SESSION_BUSY`: open in another window) leaves the panel, the picker and the
   * client on the session they had, and says so (with who holds it: the panel then offers `how`:
   * `take-over`, the holder is asked to let it go; `copy`, a fork of it is opened instead).
   */
  let loading: { sessionId: string; clear: () => void } | undefined;
  async function loadSession(sessionId: string, why: "pick" | "reopen" = "pick", how?: "take-over" | "copy"): Promise<void> {
    let cleared = false;
    const load = { sessionId, clear: () => { if (!cleared) { cleared = true; post({ kind: "reset", sessionId: load.sessionId }); } } };
    loading = load;
    try {
      if (how === "copy") load.sessionId = await agent.forkSession(sessionId);
      await agent.loadSession(load.sessionId, { takeOver: how === "take-over" });
      load.clear(); // a session with nothing to replay
    } catch (err) {
      if (cleared) agent.resetSession(); // part of it was shown: the panel is on no session now
      if (why === "reopen") void context.workspaceState.update(SESSION_KEY, undefined);
      const busy = sessionBusy(err);
      post({ kind: "load-refused", sessionId, error: errorText(err), current: agent.currentSessionId, ...(busy ? { busy } : {}) });
      void refreshSessions();
    } finally {
      if (loading === load) loading = undefined;
    }
  }

  /**
   * New: the panel is cleared and the server's session is made by the first prompt (or a mode or
   * model pick), so clicking New leaves no empty session behind in the picker.
   */
  async function newSession(): Promise<void> {
    agent.resetSession();
    reopen = undefined;
    void context.workspaceState.update(SESSION_KEY, undefined);
    post({ kind: "reset" });
    void refreshSessions();
  }

  /**
   * The session picker (a QuickPick): every session of this workspace with its title and when it was
   * last used, searchable by both; the trash button deletes one (`session/delete`, after a confirm).
   */
  async function pickSession(): Promise<void> {
    void prestart();
    const qp = vscode.window.createQuickPick<vscode.QuickPickItem & { sessionId: string }>();
    qp.title = "Agent: Open Session";
    qp.placeholder = "Search sessions by title or date";
    qp.matchOnDescription = true;
    qp.ignoreFocusOut = true; // stays open under the delete confirmation
    qp.busy = true;
    const trash: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("trash"), tooltip: "Delete session" };
    const fill = async () => {
      qp.busy = true;
      try {
        const canDelete = Boolean(agent.agentCapabilities?.sessionCapabilities?.delete);
        const sessions = await agent.listSessions();
        qp.items = sessions.map((s) => ({
          sessionId: s.sessionId,
          label: s.title || s.sessionId.slice(0, 8),
          description: sessionDate(s.updatedAt),
          detail: s.sessionId === agent.currentSessionId ? "open in the panel" : undefined,
          buttons: canDelete ? [trash] : [],
        }));
      } catch (err) {
        qp.placeholder = `session/list failed: ${errorText(err)}`;
      } finally {
        qp.busy = false;
      }
    };
    qp.onDidTriggerItemButton(async ({ item }) => {
      const ok = await vscode.window.showWarningMessage(`Delete the session "${item.label}"? Its log is removed.`, { modal: true }, "Delete");
      if (ok !== "Delete") return;
      try {
        const wasOpen = item.sessionId === agent.currentSessionId;
        await agent.deleteSession(item.sessionId);
        if (wasOpen) await newSession();
      } catch (err) {
        void vscode.window.showErrorMessage(`Agent: could not delete the session: ${errorText(err)}`);
      }
      await fill();
      void refreshSessions();
    });
    qp.onDidAccept(() => {
      const picked = qp.selectedItems[0];
      qp.hide();
      if (picked && picked.sessionId !== agent.currentSessionId) void chat.reveal().then(() => loadSession(picked.sessionId));
    });
    qp.onDidHide(() => qp.dispose());
    qp.show();
    await fill();
  }

  context.subscriptions.push(
    // every folder is a root of the session: a change of folders starts a new session (said so)
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      if (!agent.currentSessionId) return;
      agent.resetSession();
      const names = (vscode.workspace.workspaceFolders ?? []).map((f) => f.name).join(", ") || "none";
      post({ kind: "notice", level: "info", text: `The workspace folders changed (now: ${names}); the next prompt starts a new session with all of them.` });
    }),
    vscode.window.registerWebviewViewProvider(VIEW_ID, chat, { webviewOptions: { retainContextWhenHidden: true } }),
    diffView.register(),
    permissions.register(),
    vscode.commands.registerCommand("agentServer.askAboutSelection", async (question?: unknown) => {
      const editor = vscode.window.activeTextEditor;
      if (!editor) return void vscode.window.showWarningMessage("Agent: open a file and select some text first.");
      const block = selectionBlock(editor.document, editor.selection);
      void prestart(); // while the question is typed
      const text =
        typeof question === "string"
          ? question
          : await vscode.window.showInputBox({ title: "Ask the agent about the selection", prompt: `${vscode.workspace.asRelativePath(editor.document.uri)} lines ${block.lines}`, ignoreFocusOut: true });
      if (!text) return;
      await chat.reveal();
      post({ kind: "user", text: `${text}\n[${vscode.workspace.asRelativePath(editor.document.uri)}#L${block.lines}]` });
      await agent.prompt([{ type: "text", text }, block.block], text);
    }),
    vscode.commands.registerCommand("agentServer.newSession", async () => {
      void prestart();
      await chat.reveal();
      await newSession();
    }),
    vscode.commands.registerCommand("agentServer.cancel", () => agent.cancel()),
    vscode.commands.registerCommand("agentServer.setApiKey", async () => {
      if (await promptForApiKey(context.secrets)) vscode.window.showInformationMessage("Agent: API key stored; the server restarts with it at the next prompt.");
    }),
    vscode.commands.registerCommand("agentServer.showLog", () => {
      void prestart();
      output.show();
    }),
    vscode.commands.registerCommand("agentServer.restartServer", async () => {
      const had = agent.currentSessionId;
      await agent.restart(true);
      permissions.cancelAll();
      setStatus("not started");
      log(`restarted on request${had ? `: session ${had} is resumed` : ""}`);
      post({ kind: "notice", level: "info", text: had ? "agent-server was restarted; this session goes on." : "agent-server was restarted." });
      try {
        await agent.start();
        await agent.resumeLost();
      } catch (err) {
        post({ kind: "notice", level: "error", text: `Could not start agent-server: ${errorText(err)}` });
      }
    }),
    vscode.commands.registerCommand("agentServer.openSession", () => pickSession()),
    vscode.commands.registerCommand("agentServer.acceptProposal", (arg?: unknown) => {
      const id = diffView.activeProposalId(arg);
      return id ? proposals.decideAll(id, true) : undefined;
    }),
    vscode.commands.registerCommand("agentServer.rejectProposal", (arg?: unknown) => {
      const id = diffView.activeProposalId(arg);
      return id ? proposals.decideAll(id, false) : undefined;
    }),
    vscode.commands.registerCommand("agentServer.askAgain", (id: string) => proposals.askAgain(id)),
    vscode.commands.registerCommand("agentServer.acceptHunk", (id: string, fileIndex: number, index: number) => proposals.decideHunk(id, fileIndex, index, true)),
    vscode.commands.registerCommand("agentServer.rejectHunk", (id: string, fileIndex: number, index: number) => proposals.decideHunk(id, fileIndex, index, false)),
  );
  return { client: agent };
}

/** workspaceState: the session the window has open (reloaded into the panel after a window reload). */
const SESSION_KEY = "agentServer.sessionId";

export async function deactivate(): Promise<void> {
  await client?.dispose();
  client = undefined;
}

function proposalEvent(p: Proposal): ChatEvent {
  const hunks: HunkView[] = p.files.flatMap((f, fileIndex) =>
    f.hunks.map((h) => {
      const old = h.state === "pending" ? f.expected.slice(offsetAt(f.expected, h.range.start), offsetAt(f.expected, h.range.end)) : "";
      return { fileIndex, index: h.index, state: h.state, summary: hunkSummary(h.range.start.line, h.range.end.line, old, h.newText) };
    }),
  );
  return {
    kind: "proposal",
    id: p.id,
    label: p.label,
    files: p.files.map((f) => `${f.create ? "create " : ""}${vscode.workspace.asRelativePath(f.uri)}`),
    ops: p.ops.map((o) => (o.kind === "rename" ? `rename ${vscode.workspace.asRelativePath(o.uri)} → ${vscode.workspace.asRelativePath(o.newUri!)}` : `delete ${vscode.workspace.asRelativePath(o.uri)}`)),
    hunks,
    stale: p.stale,
  };
}

/** "today 14:05", "yesterday 09:30", "2026-11-30 17:02" (local time) for a session's `updatedAt`. */
export function sessionDate(iso: string | null | undefined, now = new Date()): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n: number) => String(n).padStart(2, "0");
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const day = (x: Date) => `${x.getFullYear()}-${pad(x.getMonth() + 1)}-${pad(x.getDate())}`;
  const yesterday = new Date(now);
  yesterday.setDate(now.getDate() - 1);
  if (day(d) === day(now)) return `today ${time}`;
  if (day(d) === day(yesterday)) return `yesterday ${time}`;
  return `${day(d)} ${time}`;
}

function hunkSummary(startLine: number, endLine: number, oldText: string, newText: string): string {
  const show = (t: string) => JSON.stringify(t.length > 30 ? `${t.slice(0, 30)}…` : t);
  const where = `line ${startLine + 1}${endLine !== startLine ? `-${endLine + 1}` : ""}`;
  if (!oldText) return `${where}: insert ${show(newText)}`;
  if (!newText) return `${where}: delete ${show(oldText)}`;
  return `${where}: ${show(oldText)} → ${show(newText)}`;
}

function selectsOf(options: acp.SessionConfigOption[] | null | undefined, modes: acp.SessionModeState | null | undefined): SelectView[] {
  const out: SelectView[] = [];
  for (const o of options ?? []) {
    if (o.type !== "select") continue;
    const flat = (o.options as { value?: string; name: string; options?: { value: string; name: string }[] }[]).flatMap((x) =>
      Array.isArray(x.options) ? x.options.map((y) => ({ value: y.value, name: y.name })) : x.value !== undefined ? [{ value: x.value, name: x.name }] : [],
    );
    out.push({ id: o.id, name: o.name, category: o.category, currentValue: String(o.currentValue), options: flat });
  }
  if (modes && !out.some((s) => s.id === "mode")) {
    out.unshift({ id: "mode", name: "Mode", category: "mode", currentValue: modes.currentModeId, options: modes.availableModes.map((m) => ({ value: m.id, name: m.name })) });
  }
  return out;
}
