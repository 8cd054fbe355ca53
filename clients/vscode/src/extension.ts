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
import { AgentClient, type ClientEvent, errorKind, errorText, sessionBusy } from "./client";
import { readTextFile, trackDiskChanges, writeTextFile } from "./buffers";
import { ChatView, VIEW_ID } from "./chatView";
import { DiffView, type ProposalPanel, shownPath } from "./diff";
import { Permissions } from "./permissions";
import { type Proposal, ProposalManager } from "./proposals";
import { isImmediateCommand } from "../webview/state";
import { offsetAt } from "./proposalModel";
import type { ChatEvent, HunkView, SelectView, SetupView, WebviewToHost, WireUpdate } from "./protocol";
import { SECRET_KEY, changedLaunchSettings, promptForApiKey, readSettings, serverEnv } from "./config";
import { selectionBlock } from "./selection";
import { checkConfig, isOfflineEndpoint, reachView, setupView } from "./setup";
import { type ProblemLike, type ResourceBlock, fileMention, folderMention, problemsMention, terminalMention } from "./mentions";
import { Keyboard } from "./keyboard";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { isSafeLink } from "../webview/render";

let client: AgentClient | undefined;

/** The status bar's context use: `12%` (rounded down: `100%` only when full), `<1%` for a tiny use
 * (it said `0%`), nothing when none is used or the window's size is unknown. */
export function contextUseText(used: number, size: number): string | undefined {
  if (!(size > 0) || !(used > 0)) return undefined;
  const percent = (100 * used) / size;
  return percent < 1 ? "<1%" : `${Math.floor(percent)}%`;
}

/**
 * What the panel answers itself when a slash command that needs a session is sent and none is open
 * (an empty panel, after New): a session made only to say "Nothing to undo" stayed in the picker
 * (N3). Undefined for a prompt that is not such a command (`/init` runs a turn: it starts a session).
 */
export function noSessionAnswer(text: string): string | undefined {
  const m = /^\/([A-Za-z][A-Za-z0-9_-]*)(\s|$)/.exec(text.trim());
  if (!m || m[1] === "init") return undefined;
  const name = m[1]!;
  if (name === "undo" || name === "redo") return `Nothing to ${name}: no session is open here, so no agent turn has changed files yet.`;
  if (name === "mode" || name === "model") return `No session is open yet: choose the ${name} with its picker at the top of the panel; it applies to the session your first prompt starts.`;
  return `No session is open yet: /${name} needs one. Your first prompt starts a session (or open one: Agent: Open Session…).`;
}

export async function activate(context: vscode.ExtensionContext): Promise<{ client: AgentClient }> {
  const output = vscode.window.createOutputChannel("agent-server");
  const log = (line: string) => output.appendLine(line);
  let apiKey = await context.secrets.get(SECRET_KEY);
  /** The settings and key the running (or next) server was started with, and those last said in a notice. */
  let launched = readSettings();
  let launchedKey = apiKey;
  let announced = { settings: launched, key: apiKey };
  /** What differs between the running server's settings and key and the current ones (none: undefined). */
  const launchChanges = (from: { settings: typeof launched; key: string | undefined }): string[] => [
    ...changedLaunchSettings(from.settings, readSettings()).map((k) => `agentServer.${k}`),
    ...(from.key !== apiKey ? ["the API key"] : []),
  ];
  context.subscriptions.push(
    output,
    trackDiskChanges(),
    context.secrets.onDidChange(async (e) => {
      if (e.key !== SECRET_KEY) return;
      apiKey = await context.secrets.get(SECRET_KEY);
      if (!settingKey) settingsChanged(); // (Set API Key says itself what its key does)
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration("agentServer")) return;
      // Only the user's own values count (readSettings ignores a workspace's): a change written
      // into .vscode/settings.json (by a command the agent ran, or a pulled commit) changes nothing
      // here and restarts nothing.
      settingsChanged();
    }),
  );

  /**
   * The user's launch settings or key changed: they apply from the next new session (the client
   * restarts the server then, `staleLaunch`), never under a running turn nor in the session open now.
   * Said once per change; the first-run page shows the new facts.
   */
  function settingsChanged(): void {
    const changed = launchChanges(announced);
    announced = { settings: readSettings(), key: apiKey };
    void refreshSetup();
    if (changed.length === 0 || !client) return;
    const now = announced.settings;
    const what = `${changed.join(", ")} changed (the server command is now ${JSON.stringify([now.path, ...now.args].join(" "))})`;
    const running = agent.serverUp && launchChanges({ settings: launched, key: launchedKey }).length > 0;
    log(`${what}: ${running ? "the server is restarted with them at the next new session" : "the next server uses them"}`);
    const open = agent.currentSessionId !== undefined;
    post({
      kind: "notice",
      level: "info",
      text: `${what}. They apply from the next new session${running ? " (agent-server is restarted with them then)" : ""}${open ? `: this session goes on as it was started — New starts one with them` : ": the next prompt starts it"}.`,
    });
  }

  /** The pickers a new session will have (`--check-config --json`), shown while none exists. */
  let preview: SelectView[] = [];
  /** The first-run page's facts as last shown (where the API key comes from). */
  let lastSetup: SetupView | undefined;
  /** The first-run page's facts: the endpoint, model and key source the server will use. */
  let setupRun = 0;
  async function refreshSetup(): Promise<void> {
    const run = ++setupRun;
    const s = readSettings();
    const env = serverEnv(s, apiKey);
    // not in the workspace folder: the configuration does not depend on it, and a process there is a server to whoever counts them
    const check = await checkConfig(s.path, s.args, env, os.tmpdir());
    if (run !== setupRun) return; // the settings or the key changed meanwhile: the newer run says
    const offline = check.ok ? await isOfflineEndpoint(check.baseUrl) : false;
    lastSetup = setupView(check, Boolean(apiKey), offline);
    // then whether the endpoint answers (a wrong base URL, a dead server, a refused key): the server
    // asks it as its first request would (at most 5 s); with no key where one is needed, nothing to ask
    const probe = check.ok && Boolean(check.baseUrl) && !lastSetup.keyMissing;
    if (probe) lastSetup = { ...lastSetup, reach: { state: "checking" } };
    post({ kind: "setup", setup: lastSetup });
    preview = check.ok && Array.isArray(check.configOptions) ? selectsOf(check.configOptions as acp.SessionConfigOption[], null) : [];
    showPreview();
    if (!probe) return;
    const probed = await checkConfig(s.path, s.args, env, os.tmpdir(), true);
    if (run !== setupRun) return;
    const reach = reachView(probed) ?? { state: "failed" as const, text: `could not be checked: ${probed.error ?? "the server said nothing of it"}` };
    lastSetup = { ...lastSetup, reach };
    post({ kind: "setup", setup: lastSetup });
  }

  function showPreview(): void {
    if (!agent.sessionless || preview.length === 0) return;
    const mode = readSettings().mode;
    postSelects(preview.map((x) => (x.id === "mode" && mode && x.options.some((o) => o.value === mode) ? { ...x, currentValue: mode } : x)));
  }

  const chat = new ChatView(context.extensionUri, (m) => void onMessage(m));
  /** Whether the panel holds the keyboard: an editor opened unasked goes behind the user's editor unless it does. */
  const keyboard = new Keyboard();
  context.subscriptions.push(keyboard);
  /** The session whose transcript the panel shows (as the webview's fold takes it from these events):
   * a question of another session is not drawn there — the panel says that session waits. */
  let shownSession: string | undefined;
  const post = (e: ChatEvent) => {
    chat.post(e);
    if (e.kind === "reset" || e.kind === "session" || e.kind === "load-refused") {
      const now = e.kind === "load-refused" ? e.current : e.sessionId;
      if (now !== shownSession) {
        shownSession = now;
        postWaiting();
        diffView.sessionShown(now); // the diffs of its proposals that came while another was shown
      }
    }
  };
  const isShown = (sessionId: string) => sessionId === shownSession;
  /** What waits for the user in sessions the panel does not show (their running turns' questions). */
  const postWaiting = () => {
    chat.post({ kind: "waiting", questions: waitingQuestions().filter((q) => !isShown(q.sessionId)) });
    pickerWaitingChanged?.();
  };
  /** What waits for the user's answer in every session (permissions, edit proposals). */
  const waitingQuestions = () => [...permissions.waiting(), ...proposals.all().filter((p) => !p.done).map((p) => ({ sessionId: p.params.sessionId, what: p.label }))];
  /** The open session picker's repaint when what waits changes (a question came or was answered). */
  let pickerWaitingChanged: (() => void) | undefined;
  const permissions = new Permissions(post, isShown, () => postWaiting(), () => keyboard.unasked());
  // `agentServer.proposalPending`: the accept/reject shortcuts work while a proposal waits
  const pendingContext = (finished?: Proposal) => void vscode.commands.executeCommand("setContext", "agentServer.proposalPending", proposals.all().some((x) => !x.done && x !== finished));
  const panel: ProposalPanel = {
    isShown: (p) => isShown(p.params.sessionId),
    // a proposal of another session than the one shown is not drawn in this transcript (`postWaiting`)
    proposalShown: (p) => {
      if (isShown(p.params.sessionId)) post(proposalEvent(p));
      pendingContext();
      postWaiting();
    },
    proposalChanged: (p) => {
      if (isShown(p.params.sessionId)) post(proposalEvent(p));
    },
    proposalFinished: (p, r) => {
      // the hunks as decided first: the one decided last finishes the proposal without a refresh of its own
      if (isShown(p.params.sessionId)) {
        post(proposalEvent(p));
        // text the user typed into a proposed side landed: the card says so (a slip is seen at once)
        const edited = (r.outcome === "applied" || r.outcome === "partial") && p.files.some((f) => f.edited);
        post({ kind: "proposal-done", id: p.id, outcome: r.outcome, message: r.message, ...(edited ? { edited } : {}), ...(r.saved === false ? { saved: false } : {}), ...(p.savedOther.length > 0 ? { saveChanged: true } : {}) });
      }
      if (p.savedOther.length > 0) keepSaved(p.id, p.savedOther);
      pendingContext(p);
      postWaiting(); // answered (done): no longer waiting
      // a created file opens on accept (the focus stays where it is)
      if (r.outcome === "applied" || r.outcome === "partial") {
        for (const f of p.files) {
          if (f.create) void vscode.commands.executeCommand("vscode.open", f.uri, { preview: false, ...keyboard.unasked() }).then(undefined, () => undefined);
        }
      }
    },
  };
  const diffView = new DiffView(panel, () => keyboard.unasked());
  const proposals = new ProposalManager(diffView, log);
  diffView.manager = proposals;

  const folder = () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
  const agent = new AgentClient({
    spawn: () => {
      const s = readSettings();
      launched = s;
      launchedKey = apiKey;
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
    staleLaunch: () => {
      const changed = launchChanges({ settings: launched, key: launchedKey });
      return changed.length > 0 ? changed.join(", ") : undefined;
    },
    roots: () => (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath),
    log,
  });
  client = agent;

  // ---- the status bar: the server's state (also how a window shows the extension is active) ----
  const status = vscode.window.createStatusBarItem("agentServer.status", vscode.StatusBarAlignment.Right, 100);
  status.name = "Agent";
  status.command = `${VIEW_ID}.focus`;
  type StatusState = "not started" | "starting" | "ready" | "working" | "stopped" | "session taken over";
  /** The session's context use (its last `usage_update`), shown after the state: "Agent: ready · 12%". */
  let contextUse: { used: number; size: number } | undefined;
  let shownStatus: { state: StatusState; detail?: string } = { state: "not started" };
  const setStatus = (state: StatusState, detail?: string) => {
    shownStatus = { state, detail };
    const icon = { "not started": "$(hubot)", starting: "$(sync~spin)", ready: "$(hubot)", working: "$(sync~spin)", stopped: "$(debug-disconnect)", "session taken over": "$(debug-disconnect)" }[state];
    const use = contextUse && contextUseText(contextUse.used, contextUse.size);
    status.text = `${state === "not started" ? `${icon} Agent` : `${icon} Agent: ${state}`}${use ? ` · ${use}` : ""}`;
    status.accessibilityInformation = { label: `Agent: ${state}` }; // the context use is in the tooltip
    const context = contextUse ? `\ncontext: ${contextUse.used.toLocaleString()} / ${contextUse.size.toLocaleString()} tokens` : "";
    status.tooltip = (detail ?? `agent-server: ${state} (click to open the Agent panel)`) + context;
  };
  const setContextUse = (use: { used: number; size: number } | undefined) => {
    contextUse = use;
    setStatus(shownStatus.state, shownStatus.detail);
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
        if (previous && !agent.currentSessionId && !agent.busy) {
          await loadSession(previous, "reopen");
          if (agent.currentSessionId === previous) post({ kind: "notice", level: "info", text: `The window was reloaded: session ${previous.slice(0, 8)} reopened (its history is above).` });
        }
        await refreshSessions();
      } catch (err) {
        setStatus("stopped", errorText(err));
        post({ kind: "notice", level: "error", text: `Could not start agent-server: ${errorText(err)}`, errorKind: "connection" });
      } finally {
        prestarted = undefined;
      }
    })();
    return prestarted;
  }

  /** Why the server went away last (for what the panel says once the session is resumed, or not). */
  let wentAway: "crash" | "restart" | "key" | undefined;
  const restartCause = (why: typeof wentAway) =>
    why === "restart" ? "agent-server was restarted (Agent: Restart Server)"
      : why === "key" ? (apiKey ? "agent-server was restarted with the new API key" : "agent-server was restarted without the API key (cleared)")
        : why === "crash" ? "agent-server was started again after it exited" : "agent-server was started again";

  function onClientEvent(e: ClientEvent): void {
    switch (e.type) {
      case "update":
        if (loading?.sessionId === e.sessionId) loading.clear();
        // stamped when it arrived (a card's elapsed time); a load's replay is not live: no stamp
        if (e.sessionId !== agent.currentSessionId) return;
        {
          const u = e.update as unknown as WireUpdate;
          if (u.sessionUpdate === "config_option_update" && Array.isArray(u.configOptions)) selects = selectsOf(u.configOptions as acp.SessionConfigOption[], null);
          if (u.sessionUpdate === "current_mode_update" && typeof u.currentModeId === "string") selects = selects.map((x) => (x.id === "mode" ? { ...x, currentValue: u.currentModeId as string } : x));
          if (u.sessionUpdate === "usage_update" && Number.isFinite(Number(u.used)) && Number.isFinite(Number(u.size))) setContextUse({ used: Number(u.used), size: Number(u.size) });
          post({ kind: "update", update: u, ...(loading ? {} : { at: Date.now() }) });
          const taken = ((u._meta as { agentServer?: { notice?: { takenOver?: { pid?: unknown } } } } | undefined)?.agentServer?.notice?.takenOver);
          if (taken && !loading) sessionGone(e.sessionId, typeof taken.pid === "number" ? taken.pid : undefined);
        }
        return;
      case "session":
        if (e.resumed) {
          // said once the server answered: resumed after a restart or a crash, never assumed before
          const short = e.sessionId.slice(0, 8);
          post({ kind: "notice", level: "info", text: `${restartCause(wentAway)}: session ${short} resumed — the agent still has everything above.` });
          wentAway = undefined;
        }
        // Not a reset: New, a load and a settings restart clear the panel themselves before their
        // session starts, and a session started by a prompt (the window's first, or the one after the
        // server died) keeps what is shown — that prompt among it.
        reopen = undefined; // a session is open: nothing to reopen at the first start any more
        if (takenOver) {
          takenOver = undefined;
          if (shownStatus.state === "session taken over") setStatus(agent.busy ? "working" : "ready");
        }
        if (!e.loaded) setContextUse(undefined); // a new session has used nothing yet
        void context.workspaceState.update(SESSION_KEY, e.sessionId);
        post({ kind: "session", sessionId: e.sessionId });
        postSelects(selectsOf(e.configOptions, e.modes));
        void refreshSessions();
        return;
      case "turn-start":
        openPrompts.set(e.sessionId, [...(openPrompts.get(e.sessionId) ?? []), e.text]);
        setStatus("working");
        post({ kind: "turn-start", text: e.text, sessionId: e.sessionId });
        return;
      case "turn-end":
        if (!e.started) {  // the server or the session could not start: no turn to end
          post({ kind: "notice", level: "error", text: e.error ?? "the prompt could not be sent", errorKind: e.errorKind });
          return;
        }
        {
          const open = openPrompts.get(e.sessionId) ?? [];
          const at = open.indexOf(e.text);
          if (at >= 0) open.splice(at, 1);
          if (open.length === 0 || at < 0) openPrompts.delete(e.sessionId);
        }
        if (e.last) permissions.cancelAll(); // an overlapping prompt's answer leaves the turn's questions open
        if (e.last) setStatus(takenOver ? "session taken over" : agent.serverUp ? "ready" : "stopped");
        if (e.gone) return void post({ kind: "turn-end", text: e.text, sessionId: e.sessionId }); // offered by sendPrompt
        post({ kind: "turn-end", text: e.text, stopReason: e.stopReason, error: e.error, errorKind: e.errorKind, sessionId: e.sessionId });
        return;
      case "server-exited": {
        setStatus("stopped", e.message);
        permissions.cancelAll();
        log(`--- stderr tail ---\n${e.stderrTail}`);
        wentAway = "crash";
        const short = e.session?.slice(0, 8);
        const next = e.restarting
          ? `It is being started again${short ? `; session ${short} is resumed once it is back` : " (no session was open)"}.`
          : `It is not started again now (${e.why ?? "it stopped"}): the next prompt starts it${short ? ` and resumes session ${short}` : ""}.`;
        post({ kind: "server-exited", message: e.message, stderrTail: e.stderrTail, next });
        return;
      }
      case "session-lost": {
        void context.workspaceState.update(SESSION_KEY, undefined);
        const cause = restartCause(wentAway);
        wentAway = undefined;
        if (e.busy) {
          // held by another agent-server process: the same choice as the session picker's (take it
          // over, a copy, cancel); until then the next prompt starts a new session
          post({ kind: "notice", level: "divider", text: `${cause}, but session ${e.sessionId.slice(0, 8)} was not resumed: another agent-server process holds it. Take it over or open a copy below; otherwise the next prompt starts a new session here and the agent does not see what is above.` });
          post({ kind: "load-refused", sessionId: e.sessionId, error: e.reason, busy: e.busy });
        } else {
          post({ kind: "notice", level: "divider", text: `${cause}, but session ${e.sessionId.slice(0, 8)} could not be resumed (${e.reason}). A new session starts here: the agent does not see what is above.` });
        }
        void refreshSessions();
        return;
      }
      case "relaunched":
        post({ kind: "notice", level: "info", text: `agent-server was restarted for this new session: ${e.why} changed since it started.` });
        return;
      case "server-started":
        setStatus(agent.busy ? "working" : takenOver ? "session taken over" : "ready");
        log(`connected to ${e.agentName}${e.extension ? " (agent-server extensions on)" : " (plain ACP)"}`);
        post({ kind: "capabilities", image: agent.agentCapabilities?.promptCapabilities?.image === true, ...(agent.initialCommands ? { commands: agent.initialCommands } : {}) });
        return;
    }
  }

  async function onMessage(m: WebviewToHost): Promise<void> {
    try {
      switch (m.type) {
        case "focus":
          return keyboard.panelFocus(m.focused === true);
        case "ready": // the panel is shown: the server starts now, before the first prompt
          void refreshSetup();
          return await prestart();
        case "prompt": {
          const blocks: acp.ContentBlock[] = m.text ? [{ type: "text", text: m.text }] : [];
          const labels: string[] = [];
          for (const id of m.mentions ?? []) {
            const mention = mentions.get(id);
            mentions.delete(id);
            if (!mention) continue;
            blocks.push(mention.block as acp.ContentBlock);
            labels.push(mention.label);
          }
          for (const img of m.images ?? []) {
            if (typeof img?.data !== "string" || typeof img.mimeType !== "string" || !img.mimeType.startsWith("image/")) continue;
            blocks.push({ type: "image", data: img.data, mimeType: img.mimeType });
            labels.push(`[image${img.name ? ` ${img.name}` : ""}]`);
          }
          if (blocks.length === 0) return;
          const without = blocks.length === 1 && !agent.currentSessionId && !loading ? noSessionAnswer(m.text) : undefined;
          if (without) return post({ kind: "notice", level: "info", text: without }); // no session made for it (N3)
          const shown = [m.text, ...labels].filter(Boolean).join("\n");
          const replay = loading;
          replay?.clear(); // the loaded session's transcript, the prompt in it (a reset after it would wipe it)
          post({ kind: "user", text: shown }); // shown at once, below the replay still arriving
          // sent once the replay has ended: the server streams its answer after the history, never inside it
          if (replay) await replay.done;
          return await sendPrompt(blocks, m.text || shown, shown);
        }
        case "takenOverChoice":
          return await afterTakeOver(m.how);
        case "pickMention":
          return await pickMention();
        case "action":
          return await runAction(m.action);
        case "openLocation":
          return await openLocation(m.path, m.line);
        case "showChange":
          return await showChange(m.path, m.oldText, m.newText);
        case "pickOption":
          return await pickOption(m.configId);
        case "cancel":
          return await agent.cancel();
        case "newSession":
          return await newSession();
        case "listSessions":
          return await refreshSessions();
        case "pickSession":
          return await pickSession();
        case "loadSession":
          return await loadSession(m.sessionId, "pick", m.how === "take-over" || m.how === "copy" ? m.how : undefined);
        case "permission":
          return permissions.answer(m.id, m.optionId);
        case "proposal": {
          const p = proposals.get(m.id);
          if (!p) return;
          if (m.action === "show") return await diffView.show(p, true);
          if (m.action === "again") return await proposals.askAgain(m.id);
          return await proposals.decideAll(m.id, m.action === "accept");
        }
        case "hunk":
          return await proposals.decideHunk(m.id, m.fileIndex, m.index, m.accept);
        case "showSaved":
          return await showSaved(m.id);
        case "openLink":
          if (isSafeLink(m.href)) await vscode.env.openExternal(vscode.Uri.parse(m.href));
          return;
      }
    } catch (err) {
      post({ kind: "notice", level: "error", text: errorText(err) });
    }
  }

  /**
   * The session this window had open was taken over by another agent-server process (another
   * window; its release notice says so, or a prompt was answered `-32002`): it is forgotten here, the
   * status bar says so, and the next prompt is held and offered a way forward (`sendPrompt`) instead
   * of starting a new session behind the user's back or failing with "unknown session".
   */
  let takenOver: { sessionId: string; pid?: number } | undefined;
  /** The prompt typed after the take-over, sent once the user chose where (`afterTakeOver`). */
  let held: { blocks: acp.ContentBlock[]; text: string; shown: string } | undefined;
  function sessionGone(sessionId: string, pid?: number): void {
    // the client keeps the session as the window's: Restart Server still tries to resume it (and is
    // offered the take-over when another process holds it), Take it back loads it with takeOver
    takenOver = { sessionId, ...(pid === undefined ? {} : { pid }) };
    void context.workspaceState.update(SESSION_KEY, undefined);
    setStatus("session taken over", `Session ${sessionId.slice(0, 8)} was taken over by ${pid === undefined ? "another agent-server process" : `another agent-server process (pid ${pid})`}: the next prompt offers to take it back or to start a new session.`);
    void refreshSessions();
  }

  function offerWayForward(): void {
    if (!takenOver) return;
    const who = takenOver.pid === undefined ? "another agent-server process" : `another agent-server process (pid ${takenOver.pid}, another window)`;
    post({
      kind: "notice",
      level: "warning",
      text: `This prompt was not sent: session ${takenOver.sessionId.slice(0, 8)} was taken over by ${who}. Take it back here (it closes there, a turn running there is cancelled) or start a new session; the prompt goes to the one you choose.`,
      actions: [
        { label: "Take it back", send: { type: "takenOverChoice", how: "take-back" } },
        { label: "New session", send: { type: "takenOverChoice", how: "new" } },
        { label: "Cancel" },
      ],
    });
  }

  /** A prompt to the open session (or a new one); after a take-over it is held and the way forward offered. */
  async function sendPrompt(blocks: acp.ContentBlock[], text: string, shown: string): Promise<void> {
    if (takenOver) {
      held = { blocks, text, shown };
      return offerWayForward();
    }
    const before = agent.currentSessionId;
    if ((await agent.prompt(blocks, text)) === "gone" && before) {
      const said = takenOver as { sessionId: string; pid?: number } | undefined; // set meanwhile by the release notice
      sessionGone(before, said?.sessionId === before ? said.pid : undefined);
      held = { blocks, text, shown };
      offerWayForward();
    }
  }

  /** The choice after a take-over: take the session back (a load with takeOver) or start a new one; then the held prompt goes. */
  async function afterTakeOver(how: "take-back" | "new"): Promise<void> {
    const lost = takenOver;
    const prompt = held;
    if (!lost) return;
    held = undefined;
    if (how === "take-back") {
      await loadSession(lost.sessionId, "pick", "take-over");
      if (takenOver) { // the load's session event clears it: refused
        held = prompt; // refused (its notice says why): the prompt waits for another choice
        return;
      }
    } else {
      await newSession();
    }
    if (!prompt) return;
    post({ kind: "user", text: prompt.shown });
    await sendPrompt(prompt.blocks, prompt.text, prompt.shown);
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
  let loading: { sessionId: string; clear: () => void; done: Promise<void> } | undefined;
  /** The prompts of each session still open here (their texts): a session shown again after a switch
   * gets its running turns and their waiting questions back (newcomer finding 1b). */
  const openPrompts = new Map<string, string[]>();
  async function loadSession(sessionId: string, why: "pick" | "reopen" = "pick", how?: "take-over" | "copy"): Promise<void> {
    let cleared = false;
    let finished = () => {};
    // the panel shows the loaded session from its first update (or a prompt sent meanwhile) on: its
    // context use is unknown until said again (never the last session's figure)
    const clear = () => {
      if (cleared) return;
      cleared = true;
      setContextUse(undefined);
      post({ kind: "reset", sessionId: load.sessionId, replay: true });
    };
    const load = { sessionId, clear, done: new Promise<void>((resolve) => (finished = resolve)) };
    loading = load;
    try {
      if (how === "copy") load.sessionId = await agent.forkSession(sessionId);
      await agent.loadSession(load.sessionId, { takeOver: how === "take-over" });
      load.clear(); // a session with nothing to replay
      // the replay is history — but for a turn of this session still running here (shown again after
      // a switch): it runs again in the panel (Stop, Working…) and its waiting questions are asked again
      const open = openPrompts.get(load.sessionId) ?? [];
      const commands = open.filter(isImmediateCommand).length;
      post({ kind: "loaded", sessionId: load.sessionId, ...(open.length > 0 ? { live: { turns: open.length - commands, commands } } : {}) });
      if (open.length > 0) {
        permissions.repost(load.sessionId);
        for (const p of proposals.all()) if (!p.done && p.params.sessionId === load.sessionId) post(proposalEvent(p));
        setStatus("working");
      }
    } catch (err) {
      if (cleared) agent.resetSession(); // part of it was shown: the panel is on no session now
      if (why === "reopen") void context.workspaceState.update(SESSION_KEY, undefined);
      const busy = sessionBusy(err);
      post({ kind: "load-refused", sessionId, error: errorText(err), current: agent.currentSessionId, ...(busy ? { busy } : {}) });
      void refreshSessions();
    } finally {
      if (loading === load) loading = undefined;
      finished();
    }
  }

  /**
   * New: the panel is cleared and the server's session is made by the first prompt (or a mode or
   * model pick), so clicking New leaves no empty session behind in the picker.
   */
  async function newSession(): Promise<void> {
    if (takenOver) {
      takenOver = undefined;
      held = undefined;
      if (shownStatus.state === "session taken over") setStatus(agent.busy ? "working" : "ready");
    }
    agent.resetSession();
    agent.forgetChoices();
    setContextUse(undefined);
    reopen = undefined;
    void context.workspaceState.update(SESSION_KEY, undefined);
    post({ kind: "reset" });
    showPreview(); // a new session's pickers, not the last one's values
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
    let listed: Awaited<ReturnType<typeof agent.listSessions>> = [];
    let canDelete = false;
    // a session whose turn waits for the user's answer (a permission question, an edit to review) is
    // flagged, with what it asks: a question left in a session switched away from is found here
    const paint = () => {
      const waiting = new Map<string, string[]>();
      for (const q of waitingQuestions()) waiting.set(q.sessionId, [...(waiting.get(q.sessionId) ?? []), q.what]);
      const active = qp.activeItems[0]?.sessionId;
      qp.items = listed.map((s) => {
        const asks = waiting.get(s.sessionId);
        const open = s.sessionId === agent.currentSessionId ? "open in the panel" : undefined;
        const waits = asks ? `$(bell-dot) waits for your answer: ${asks.join(", ")}` : undefined;
        return {
          sessionId: s.sessionId,
          label: `${asks ? "$(bell-dot) " : ""}${s.title || s.sessionId.slice(0, 8)}`,
          description: sessionDate(s.updatedAt),
          detail: [waits, open].filter(Boolean).join(" — ") || undefined,
          buttons: canDelete ? [trash] : [],
        };
      });
      const again = qp.items.find((i) => i.sessionId === active);
      if (again) qp.activeItems = [again];
    };
    pickerWaitingChanged = paint;
    const fill = async () => {
      qp.busy = true;
      try {
        canDelete = Boolean(agent.agentCapabilities?.sessionCapabilities?.delete);
        listed = await agent.listSessions();
        paint();
      } catch (err) {
        qp.placeholder = `session/list failed: ${errorText(err)}`;
      } finally {
        qp.busy = false;
      }
    };
    qp.onDidTriggerItemButton(async ({ item }) => {
      const ok = await vscode.window.showWarningMessage(`Delete the session "${item.label.replace(/^\$\(bell-dot\) /, "")}"? Its log is removed.`, { modal: true }, "Delete");
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
    qp.onDidHide(() => {
      if (pickerWaitingChanged === paint) pickerWaitingChanged = undefined;
      qp.dispose();
    });
    qp.show();
    await fill();
  }

  // ---- @ mentions: the host reads what is mentioned and keeps it until the prompt goes ----------
  const mentions = new Map<string, { block: ResourceBlock; label: string }>();
  let mentionSeq = 0;
  const addMention = (m: { block: ResourceBlock; view: { kind: "file" | "folder" | "selection" | "problems" | "terminal"; label: string } }) => {
    const id = `m${++mentionSeq}`;
    mentions.set(id, { block: m.block, label: m.view.label });
    chat.post({ kind: "mention", id, mention: m.view });
  };

  async function pickMention(): Promise<void> {
    const kinds: (vscode.QuickPickItem & { what: string })[] = [
      { what: "file", label: "$(file) File…", description: "a file of the workspace (its unsaved text when open)" },
      { what: "folder", label: "$(folder) Folder…", description: "what a folder holds" },
      { what: "selection", label: "$(selection) Selection", description: "the active editor's selection" },
      { what: "problems", label: "$(warning) Problems", description: "the errors and warnings of the workspace" },
      { what: "terminal", label: "$(terminal) Terminal output", description: "the last command run in a terminal, and its output" },
    ];
    const pick = await vscode.window.showQuickPick(kinds, { title: "Add context to the prompt (@)", placeHolder: "What should the agent see?" });
    if (!pick) return;
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? folder();
    if (pick.what === "file") {
      const files = await vscode.workspace.findFiles("**/*", undefined, 5000);
      const items = files.filter((u) => u.scheme === "file").map((u) => ({ label: vscode.workspace.asRelativePath(u), uri: u }));
      items.sort((a, b) => a.label.localeCompare(b.label));
      const file = await vscode.window.showQuickPick(items, { title: "Add a file (@)", matchOnDescription: true });
      if (!file) return;
      const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === file.uri.toString());
      let text: string;
      if (open) text = open.getText();
      else {
        const bytes = await fs.readFile(file.uri.fsPath);
        if (bytes.includes(0)) return void vscode.window.showWarningMessage(`Agent: ${file.label} is not text; it was not added.`);
        text = new TextDecoder("utf-8").decode(bytes);
      }
      return addMention(fileMention(file.uri.fsPath, file.label, text));
    }
    if (pick.what === "folder") {
      const chosen = await vscode.window.showOpenDialog({ canSelectFolders: true, canSelectFiles: false, canSelectMany: false, defaultUri: vscode.Uri.file(root), title: "Add a folder (@)" });
      const dir = chosen?.[0];
      if (!dir) return;
      const entries = (await fs.readdir(dir.fsPath, { withFileTypes: true })).map((d) => (d.isDirectory() ? `${d.name}/` : d.name)).sort();
      return addMention(folderMention(dir.fsPath, vscode.workspace.asRelativePath(dir, false) === dir.fsPath ? dir.fsPath : vscode.workspace.asRelativePath(dir, false), entries));
    }
    if (pick.what === "selection") {
      const editor = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
      if (!editor) return void vscode.window.showWarningMessage("Agent: no editor is open to take the selection from.");
      const block = selectionBlock(editor.document, editor.selection);
      const name = vscode.workspace.asRelativePath(editor.document.uri);
      return addMention({ block: block.block, view: { kind: "selection", label: `@${name}:${block.lines}` } });
    }
    if (pick.what === "problems") {
      const severity = ["error", "warning", "information", "hint"] as const;
      const problems: ProblemLike[] = vscode.languages.getDiagnostics().flatMap(([uri, diags]) =>
        diags.map((d) => ({ path: vscode.workspace.asRelativePath(uri), line: d.range.start.line + 1, character: d.range.start.character + 1, severity: severity[d.severity] ?? "error", message: d.message, source: d.source })),
      );
      return addMention(problemsMention(problems));
    }
    const last = terminalOutputs.at(-1);
    if (!last) return void vscode.window.showWarningMessage("Agent: no terminal command's output was seen yet (it needs VS Code's shell integration, on by default for bash, zsh, fish and PowerShell).");
    return addMention(terminalMention(last.name, last.command, last.output));
  }

  /** The last commands run in terminals and their output (shell integration), newest last. */
  const terminalOutputs: { name: string; command: string; output: string }[] = [];
  context.subscriptions.push(
    vscode.window.onDidStartTerminalShellExecution(async (e) => {
      let output = "";
      for await (const piece of e.execution.read()) {
        output += piece;
        if (output.length > 512 * 1024) output = output.slice(-256 * 1024);
      }
      terminalOutputs.push({ name: e.terminal.name, command: e.execution.commandLine.value, output });
      if (terminalOutputs.length > 5) terminalOutputs.shift();
    }),
  );

  /** Restarts the server and resumes the session open (Restart Server; a new API key). */
  async function restartAndResume(why: "restart" | "key"): Promise<void> {
    const had = agent.currentSessionId;
    await agent.restart(true);
    permissions.cancelAll();
    setStatus("not started");
    log(`restarted ${why === "key" ? "with the new API key" : "on request"}${had ? `: session ${had} is resumed` : ""}`);
    wentAway = why;
    try {
      await agent.start();
      // what happened is said when it is known: resumed (the session event), not (session-lost)
      if (!had) post({ kind: "notice", level: "info", text: `${restartCause(why)}; no session was open: the next prompt starts one.` });
      await agent.resumeLost();
    } catch (err) {
      post({ kind: "notice", level: "error", text: `Could not start agent-server: ${errorText(err)}` });
    }
  }

  /** "Set API Key" is under way: its own outcome is said (not the settings notice). */
  let settingKey = false;
  /**
   * The API key changed by Set API Key (the command, or an authentication error's button). A key is
   * no property of a session: with one open and no turn running, the server is restarted with the
   * key at once and the session resumed, its conversation kept — a prompt refused for the key is
   * sent again in it (newcomer 6 finding 6: the key applied only to a new session, so the session
   * showing the error kept failing with it). Other launch settings changed too, or a turn running:
   * they apply as settings do (`settingsChanged`).
   */
  async function keyChanged(): Promise<void> {
    const onlyKey = changedLaunchSettings(launched, readSettings()).length === 0;
    if (!agent.serverUp || agent.busy || !onlyKey || launchedKey === apiKey) {
      if (!agent.serverUp && !agent.busy) void vscode.window.showInformationMessage("Agent: API key stored; agent-server starts with it at the next prompt.");
      return settingsChanged();
    }
    announced = { settings: readSettings(), key: apiKey };
    void refreshSetup();
    await restartAndResume("key");
  }

  let loginSeq = 0;
  async function runAction(action: "setApiKey" | "signIn" | "openSettings" | "showLog" | "checkSetup"): Promise<void> {
    switch (action) {
      case "checkSetup":
        return await refreshSetup();
      case "setApiKey":
        return void (await vscode.commands.executeCommand("agentServer.setApiKey"));
      case "signIn": {
        const s = readSettings();
        // the login's exit status goes to a file and the terminal's shell always exits 0: VS Code
        // shows its own error toast ("terminated with exit code: 1") for a terminal that exits
        // otherwise after the user typed — Ctrl-C included; the panel says what happened instead
        const statusFile = path.join(os.tmpdir(), `agent-server-login-${process.pid}-${++loginSeq}.status`);
        const env: Record<string, string> = { AGENT_SERVER_LOGIN_STATUS: statusFile };
        if (s.baseUrl) env.AGENT_SERVER_BASE_URL = s.baseUrl;
        if (s.model) env.AGENT_SERVER_MODEL = s.model;
        const script = 'trap : INT; "$@"; printf %s "$?" > "$AGENT_SERVER_LOGIN_STATUS"; exit 0';
        const terminal = vscode.window.createTerminal({ name: "agent-server login", shellPath: "/bin/sh", shellArgs: ["-c", script, "agent-server-login", s.path, ...s.args, "login"], env, cwd: folder() });
        terminal.show();
        const done = vscode.window.onDidCloseTerminal(async (t) => {
          if (t !== terminal) return;
          done.dispose();
          const status = await fs.readFile(statusFile, "utf8").then((x) => x.trim(), () => "");
          void fs.rm(statusFile, { force: true });
          if (status === "0") post({ kind: "notice", level: "info", text: "Signed in (agent-server login): the next prompt uses the stored key." });
          else {
            // a cancelled sign-in is no failure, and a notice would replace the set-up card (its buttons) of an empty panel
            const kept = lastSetup?.keySource ? ` The API key from ${lastSetup.keySource} is still used.` : "";
            void vscode.window.showInformationMessage(`Not signed in: ${status ? `agent-server login ended with status ${status}` : "the login terminal was closed"} — nothing was stored.${kept}`);
          }
          void refreshSetup();
        });
        context.subscriptions.push(done);
        return;
      }
      case "openSettings":
        // the user's settings, where path, baseUrl and model live (machine-scoped: a workspace's are
        // ignored) — the Remote tab in a remote window — filtered to this extension's
        return void (await vscode.commands.executeCommand(vscode.env.remoteName ? "workbench.action.openRemoteSettings" : "workbench.action.openGlobalSettings", { query: `@ext:${context.extension?.id ?? EXTENSION_ID}` }));
      case "showLog":
        return void (await vscode.commands.executeCommand("agentServer.showLog"));
    }
  }

  /** The pickers' options as the panel shows them (kept here for the QuickPick). */
  let selects: SelectView[] = [];
  const postSelects = (next: SelectView[]) => {
    selects = next;
    post({ kind: "config", selects: next });
  };

  /** A mode or model picker as a QuickPick; full access (no sandbox) is confirmed first. */
  async function pickOption(configId: string): Promise<void> {
    const sel = selects.find((x) => x.id === configId);
    if (!sel) return;
    const items = sel.options.map((o) => ({ label: `${o.value === sel.currentValue ? "$(check) " : ""}${o.name}`, description: o.value === o.name ? undefined : o.value, value: o.value }));
    const pick = await vscode.window.showQuickPick(items, { title: `Agent: ${sel.name}`, placeHolder: `Now: ${sel.options.find((o) => o.value === sel.currentValue)?.name ?? sel.currentValue}` });
    if (!pick || pick.value === sel.currentValue) return;
    if (sel.category === "mode" || configId === "mode") {
      const lifts = liftsSandbox(pick.value, pick.label);
      if (lifts) {
        const ok = "Use Full Access";
        const answer = await vscode.window.showWarningMessage(
          pick.value === "danger-full-access"
            ? "Full access: no sandbox — the agent's commands can write anywhere and reach the network; a process a command detaches may outlive the session. Destructive commands still ask."
            : `${pick.label.replace(/^\$\(check\) /, "")}: this mode lifts the agent's sandbox or its questions — what it runs and writes is no longer confined or asked about.`,
          { modal: true },
          ok,
        );
        if (answer !== ok) return; // the mode stays
      }
    }
    await choose(configId, pick.value);
  }

  /**
   * A mode or model choice: set on the session, or — no session yet (the empty panel, after New) —
   * kept for the session the first prompt makes (set right after its `session/new`, before the prompt).
   */
  async function choose(configId: string, value: string): Promise<void> {
    if (agent.sessionless) {
      agent.choose(configId, value);
      return postSelects(selects.map((x) => (x.id === configId ? { ...x, currentValue: value } : x)));
    }
    const options = await setOption(configId, value);
    if (options) postSelects(selectsOf(options, null));
    else postSelects(selects.map((x) => (x.id === configId ? { ...x, currentValue: value } : x)));
  }

  /** A tool card's file at its location (an absolute path of a file that exists; 1-based line). */
  async function openLocation(file: string, line?: number): Promise<void> {
    if (typeof file !== "string" || !path.isAbsolute(file)) return;
    const stat = await fs.stat(file).catch(() => undefined);
    if (!stat?.isFile()) return void vscode.window.showWarningMessage(`Agent: ${file} is not there any more.`);
    const at = typeof line === "number" && line >= 1 ? new vscode.Position(line - 1, 0) : undefined;
    await vscode.window.showTextDocument(vscode.Uri.file(file), { preview: true, preserveFocus: false, ...(at ? { selection: new vscode.Range(at, at) } : {}) });
  }

  /** The Changes view's diff of one file: the text before the turn's first edit ↔ after its last (read-only). */
  const changeTexts = new Map<string, string>();
  let changeSeq = 0;
  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider("agent-change", { provideTextDocumentContent: (uri) => changeTexts.get(uri.query) ?? "" }),
  );
  /**
   * The Changes view's diff: the text before the turn's first edit ↔ the file on disk now — what the
   * turn left there (a save participant's changes too), not the proposal's text. A file gone from disk
   * (or unreadable) shows the turn's last text, said in the title.
   */
  async function showChange(file: string, oldText: string | null, newText: string): Promise<void> {
    if (typeof file !== "string" || typeof newText !== "string") return;
    const shown = shownPath(vscode.Uri.file(file)); // the breadcrumb reads as the file's path
    const before = `b${++changeSeq}`;
    const after = `a${changeSeq}`;
    const disk = path.isAbsolute(file) ? await fs.readFile(file).then((b) => new TextDecoder().decode(b).replace(/^\ufeff/, ""), () => undefined) : undefined;
    changeTexts.set(before, oldText ?? "");
    changeTexts.set(after, disk ?? newText);
    const uri = (key: string) => vscode.Uri.from({ scheme: "agent-change", path: shown, query: key });
    const title = disk === undefined ? `${shown.slice(1)} (the turn's change; not on disk now)` : `${shown.slice(1)} (the turn's change ↔ on disk now)`;
    await vscode.commands.executeCommand("vscode.diff", uri(before), uri(after), title, { preview: true });
  }

  /** The texts as accepted of the proposals whose save changed them (the last 20), for `showSaved`. */
  const savedTexts = new Map<string, { uri: vscode.Uri; accepted: string }[]>();
  function keepSaved(id: string, files: { uri: vscode.Uri; accepted: string }[]): void {
    savedTexts.set(id, files);
    for (const old of savedTexts.keys()) if (savedTexts.size > 20) savedTexts.delete(old);
  }
  /** An answered proposal's "Show What the Save Changed": each file's text as accepted ↔ the file as saved. */
  async function showSaved(id: string): Promise<void> {
    const files = savedTexts.get(id);
    if (!files) return void vscode.window.showInformationMessage("Agent: the accepted text of that change is no longer kept (the window was reloaded, or it is older than the last 20 such changes).");
    for (const f of files) {
      const shown = shownPath(f.uri);
      const key = `s${++changeSeq}`;
      changeTexts.set(key, f.accepted);
      const left = vscode.Uri.from({ scheme: "agent-change", path: shown, query: key });
      await vscode.commands.executeCommand("vscode.diff", left, f.uri, `${shown.slice(1)} (as accepted ↔ as saved)`, { preview: true });
    }
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
      const shown = `${text}\n[${vscode.workspace.asRelativePath(editor.document.uri)}#${block.range}]`;
      post({ kind: "user", text: shown });
      await sendPrompt([{ type: "text", text }, block.block], text, shown);
    }),
    vscode.commands.registerCommand("agentServer.newSession", async () => {
      void prestart();
      await chat.reveal();
      await newSession();
    }),
    vscode.commands.registerCommand("agentServer.cancel", () => agent.cancel()),
    vscode.commands.registerCommand("agentServer.setApiKey", async () => {
      const before = apiKey;
      settingKey = true;
      try {
        if (!(await promptForApiKey(context.secrets))) return;
        apiKey = await context.secrets.get(SECRET_KEY);
      } finally {
        settingKey = false;
      }
      if (apiKey !== before) await keyChanged();
    }),
    vscode.commands.registerCommand("agentServer.showLog", () => {
      void prestart();
      output.show();
    }),
    vscode.commands.registerCommand("agentServer.restartServer", () => restartAndResume("restart")),
    vscode.commands.registerCommand("agentServer.openSession", () => pickSession()),
    vscode.commands.registerCommand("agentServer.acceptProposal", (arg?: unknown) => {
      const id = diffView.activeProposalId(arg);
      return id ? proposals.decideAll(id, true) : undefined;
    }),
    vscode.commands.registerCommand("agentServer.rejectProposal", (arg?: unknown) => {
      const id = diffView.activeProposalId(arg);
      return id ? proposals.decideAll(id, false) : undefined;
    }),
    vscode.commands.registerCommand("agentServer.nextHunk", () => vscode.commands.executeCommand("workbench.action.compareEditor.nextChange")),
    vscode.commands.registerCommand("agentServer.previousHunk", () => vscode.commands.executeCommand("workbench.action.compareEditor.previousChange")),
    vscode.commands.registerCommand("agentServer.askAgain", (id: string) => proposals.askAgain(id)),
    vscode.commands.registerCommand("agentServer.acceptHunk", (id: string, fileIndex: number, index: number) => proposals.decideHunk(id, fileIndex, index, true)),
    vscode.commands.registerCommand("agentServer.rejectHunk", (id: string, fileIndex: number, index: number) => proposals.decideHunk(id, fileIndex, index, false)),
  );
  // tabs of proposals (and diffs) a reload left behind: their turn was cancelled with the old host
  diffView.closeLeftovers(undefined, true);
  return { client: agent };
}

/** publisher.name in package.json (`@ext:` filters the settings editor to this extension's settings). */
const EXTENSION_ID = "agent-server.agent-server-vscode";

/** workspaceState: the session the window has open (reloaded into the panel after a window reload). */
const SESSION_KEY = "agentServer.sessionId";

export async function deactivate(): Promise<void> {
  await client?.dispose();
  client = undefined;
}

/** Each hunk's summary as it read while pending: once a hunk is accepted its range no longer
 * addresses the file's text (the label read `"L1" → "L1"`), so a decided hunk keeps its summary. */
const hunkSummaries = new WeakMap<object, string>();

export function proposalEvent(p: Proposal): ChatEvent {
  const hunks: HunkView[] = p.files.flatMap((f, fileIndex) =>
    f.hunks.map((h) => {
      let summary = h.state === "pending" ? undefined : hunkSummaries.get(h);
      if (summary === undefined) {
        const start = offsetAt(f.expected, h.range.start);
        const end = offsetAt(f.expected, h.range.end);
        summary = hunkSummary(f.expected, start, end, h.range.start.line, h.range.end.line, h.newText);
        hunkSummaries.set(h, summary);
      }
      return { fileIndex, index: h.index, state: h.state, summary };
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
    ...(p.files.some((f) => f.disk) ? { notes: p.files.filter((f) => f.disk).map((f) => diskNote(vscode.workspace.asRelativePath(f.uri), f.create)) } : {}),
  };
}

/** The card's note for a file proposed on its bytes on disk (`FileChange.disk`). */
export function diskNote(name: string, created: boolean): string {
  return created
    ? `${name} is created on disk with exactly these line breaks (VS Code's editor would turn them into its own).`
    : `${name} is changed on disk byte for byte: VS Code's editor would turn its line breaks (a mix of CRLF and LF, lone CRs, or other than its own) into one kind. The diff shows them its way; every other byte of the file stays as it is.`;
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

/**
 * A hunk as the card lists it, in whole lines (a change inside a line shows that whole line, before
 * and after): `line 3: "    return 'hello ' + name" → "    return 'hi ' + name"`, longer lines cut at
 * 80 characters with `…`, more lines counted.
 */
export function hunkSummary(expected: string, start: number, end: number, startLine: number, endLine: number, newText: string): string {
  const lineStart = expected.lastIndexOf("\n", start - 1) + 1;
  let lineEnd = expected.indexOf("\n", end);
  if (lineEnd < 0) lineEnd = expected.length;
  const before = expected.slice(lineStart, lineEnd);
  const after = expected.slice(lineStart, start) + newText + expected.slice(end, lineEnd);
  // on a long line (a minified file) both sides show the stretch where the change starts, not the
  // line's first 80 characters, the same on both sides (newcomer 3, finding 18)
  const column = start - lineStart;
  const from = column > 60 ? column - 20 : 0;
  const show = (t: string, at = 0) => {
    const lines = t.split("\n").map((l) => l.replace(/\r$/, "")); // a CRLF line's ending is not its text
    const line = lines[0]!;
    const first = `${at > 0 ? "…" : ""}${line.slice(at, at + 80)}${line.length > at + 80 ? "…" : ""}`;
    return `${JSON.stringify(first)}${lines.length > 1 ? ` (+${lines.length - 1} lines)` : ""}`;
  };
  const where = `line ${startLine + 1}${endLine !== startLine ? `-${endLine + 1}` : ""}${from > 0 ? `, column ${column + 1}` : ""}`;
  const oldText = expected.slice(start, end);
  if (!oldText && start === lineStart && newText.endsWith("\n")) return `${where}: insert ${show(newText.slice(0, -1))}`;
  if (!newText && start === lineStart && (end === lineEnd + 1 || oldText.endsWith("\n"))) return `${where}: delete ${show(oldText.replace(/\n$/, ""))}`;
  return `${where}: ${show(before, from)} → ${show(after, from)}`;
}

/** A mode that lifts the sandbox (agent-server's `danger-full-access`; another agent's full-access or
 * bypass-permissions mode by its id or name): chosen only after a confirmation. */
export function liftsSandbox(value: string, name = ""): boolean {
  return /danger|full[-_ ]?access|bypass|yolo|unrestricted|no[-_ ]?sandbox/i.test(`${value} ${name}`);
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
