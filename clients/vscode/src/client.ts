/**
 * The ACP client on the official TypeScript SDK (2.x client API): `initialize` with our
 * `_meta.agentServer` block, sessions, prompts, cancel, config options; the server's requests routed
 * to the handlers given by `buffers`, `proposals` and `permissions`; one event stream for the UI.
 * Restarts the server when it dies and resumes the session that was open (`session/resume`; the
 * panel keeps its transcript), as after Restart Server; when it cannot, `session-lost` says so and the
 * next prompt starts a new session. A transport error (a message over the SDK's size limit, a broken
 * stream) with the process still running stops that process and is reported once as the server's end.
 *
 * Must not: touch a buffer, a document or a window.
 */

import * as acp from "@agentclientprotocol/sdk";
import { AgentProcess, type ExitStatus, type SpawnOptions } from "./rpc";
import { CLIENT_ENCODINGS, type PositionEncoding, parseEncoding } from "./positions";
import type { ErrorKind, SessionBusy } from "./protocol";

/**
 * The extension method's name exactly as the 2.x SDK delivers it to `onRequest` (the 1.x SDK
 * stripped the leading `_`; 2.x does not). Pinned by `test/unit/sdkMethodName.test.ts`.
 */
export const APPLY_WORKSPACE_EDIT = "_agent_server/apply_workspace_edit";

/** Params of `_agent_server/apply_workspace_edit` (docs/protocol.md). */
export interface ApplyWorkspaceEditParams {
  sessionId: string;
  toolCallId?: string;
  label?: string;
  edit: { documentChanges?: unknown[] };
  baseHashes?: Record<string, string>;
  save?: "if-clean" | "never";
}

export interface ApplyWorkspaceEditResult {
  outcome: "applied" | "partial" | "rejected" | "stale" | "cancelled" | "failed";
  applied?: { documentChanges: unknown[] };
  saved?: boolean;
  versions?: Record<string, { version: number | null; sha256: string }>;
  message?: string;
  /** `agentServer.merged`: the documents that also hold the user's edits of other lines (`applied` is
   * then the agent's hunks as sent); `agentServer.saveFailed`: the documents (no unsaved text of the
   * user's) whose save did not complete. */
  _meta?: { agentServer: { merged?: string[]; saveFailed?: string[]; beforeSave?: Record<string, string> } };
}

/** What the server may ask of the editor. `signal` aborts on `$/cancel_request` or a lost connection. */
export interface ClientHandlers {
  readTextFile(params: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse>;
  writeTextFile(params: acp.WriteTextFileRequest): Promise<acp.WriteTextFileResponse>;
  requestPermission(params: acp.RequestPermissionRequest, signal: AbortSignal): Promise<acp.RequestPermissionResponse>;
  applyWorkspaceEdit(params: ApplyWorkspaceEditParams, signal: AbortSignal, encoding: PositionEncoding): Promise<ApplyWorkspaceEditResult>;
}

export type ClientEvent =
  | { type: "update"; sessionId: string; update: acp.SessionUpdate }
  /** `resumed`: the session that was open when the server went away, reattached (`session/resume`). */
  | { type: "session"; sessionId: string; modes?: acp.SessionModeState | null; configOptions?: acp.SessionConfigOption[] | null; loaded: boolean; resumed?: boolean }
  | { type: "turn-start"; sessionId: string; text: string }
  /** `gone`: the server no longer knows the session (`-32002`: taken over by another window, closed): forgotten here. */
  | { type: "turn-end"; sessionId: string; text: string; started: boolean; last: boolean; stopReason?: string; error?: string; errorKind?: ErrorKind; gone?: boolean }
  /** `restarting`: the server is started again at once (else at the next prompt: it exited too often,
   * or could not start); `session`: the session open then, resumed when the server is back. */
  | { type: "server-exited"; message: string; stderrTail: string; restarting: boolean; session?: string; why?: string }
  /** The session that was open could not be resumed after a restart: the next prompt starts a new one.
   * `busy`: another agent-server process holds it (`SESSION_BUSY`); it may be taken over or copied. */
  | { type: "session-lost"; sessionId: string; reason: string; busy?: SessionBusy }
  | { type: "server-started"; agentName: string; extension: boolean }
  /** The server was restarted before a new session because its settings changed (`why`, from `staleLaunch`). */
  | { type: "relaunched"; why: string };

export interface ClientOptions {
  spawn: () => SpawnOptions;
  handlers: ClientHandlers;
  onEvent: (event: ClientEvent) => void;
  /** Mode to set after a session starts ("" = the server's default). */
  initialMode: () => string;
  /** Why the running server no longer matches its settings (they changed since it started), else
   * undefined: asked before a new session is made; the server is restarted first when it says why. */
  staleLaunch?: () => string | undefined;
  /** The workspace's folders (absolute paths), the first is the session's `cwd`; empty: the spawn's `cwd`. */
  roots?: () => string[];
  log: (line: string) => void;
}

/** Our extension block for `clientCapabilities._meta.agentServer`. */
export function extensionCapabilities(): Record<string, unknown> {
  return { version: 1, bufferVersions: true, applyWorkspaceEdit: true, positionEncodings: [...CLIENT_ENCODINGS] };
}

/** Builds the SDK client app with every handler registered (exported for tests). */
export function buildClientApp(
  handlers: ClientHandlers,
  onUpdate: (params: acp.SessionNotification) => void,
  encoding: () => PositionEncoding,
): acp.ClientApp {
  const app = acp.client({ name: "agent-server-vscode" });
  app.onNotification(acp.methods.client.session.update, ({ params }) => onUpdate(params));
  app.onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => handlers.requestPermission(params, signal));
  app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => handlers.readTextFile(params));
  app.onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => handlers.writeTextFile(params));
  app.onRequest<ApplyWorkspaceEditParams, ApplyWorkspaceEditResult>(
    APPLY_WORKSPACE_EDIT,
    (raw) => {
      if (typeof raw !== "object" || raw === null || typeof (raw as { edit?: unknown }).edit !== "object") {
        throw acp.RequestError.invalidParams({ reason: "apply_workspace_edit needs an 'edit' object" });
      }
      return raw as ApplyWorkspaceEditParams;
    },
    ({ params, signal }) => handlers.applyWorkspaceEdit(params, signal, encoding()),
  );
  return app;
}

interface Running {
  proc: AgentProcess;
  conn: acp.ClientConnection;
  init: acp.InitializeResponse;
  encoding: PositionEncoding;
  extension: boolean;
}

/** Pages of `session/list` followed at most (50 sessions each: 5000), against a server that never stops sending cursors. */
export const MAX_SESSION_PAGES = 100;

/**
 * Every page of `session/list` for `cwd`: follows `nextCursor` until the server sends none and
 * returns the sessions at the end, in the server's order (newest first), each id once. `note` says why
 * the walk stopped before the server said there was no more: a cursor seen before, `maxPages` pages,
 * or a later page failing (`sessions` holds the pages before it). A failing first page throws.
 */
export async function listAllSessions(
  request: (params: acp.ListSessionsRequest) => Promise<acp.ListSessionsResponse>,
  cwd: string,
  maxPages = MAX_SESSION_PAGES,
): Promise<{ sessions: acp.SessionInfo[]; note?: string }> {
  const sessions: acp.SessionInfo[] = [];
  const ids = new Set<string>();
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; ; ) {
    let res: acp.ListSessionsResponse;
    try {
      res = await request(cursor === undefined ? { cwd } : { cwd, cursor });
    } catch (err) {
      if (pages === 0) throw err;
      return { sessions, note: `session/list page ${pages + 1} failed (${errorText(err)}): showing the first ${sessions.length} sessions` };
    }
    pages++;
    for (const s of res?.sessions ?? []) {
      if (s && typeof s.sessionId === "string" && !ids.has(s.sessionId)) {
        ids.add(s.sessionId);
        sessions.push(s);
      }
    }
    const next = res?.nextCursor;
    if (typeof next !== "string" || next === "") return { sessions };
    if (cursors.has(next)) {
      return { sessions, note: `session/list: the server sent a cursor again after page ${pages}; showing the ${sessions.length} sessions listed so far` };
    }
    if (pages >= maxPages) {
      return { sessions, note: `session/list: stopped after ${pages} pages (${sessions.length} sessions); the server still had more` };
    }
    cursors.add(next);
    cursor = next;
  }
}

/** One server per window; sessions, turns and the server's life. */
export class AgentClient {
  private running: Running | undefined;
  private starting: Promise<Running> | undefined;
  private sessionId: string | undefined;
  /** The session open when the server went away (a crash, Restart Server): resumed when it is back. */
  private resumable: string | undefined;
  private resuming: Promise<void> | undefined;
  private cwd = "";
  private turns = 0;
  private disposed = false;
  private crashes: number[] = [];
  /** Why the connection to a still-running process broke (a transport error), by process. */
  private readonly lost = new WeakMap<AgentProcess, string>();
  /** Processes stopped on purpose (Restart Server, a relaunch for new settings): a turn they end was not a crash. */
  private readonly stopped = new WeakSet<AgentProcess>();

  constructor(private readonly opts: ClientOptions) {}

  get currentSessionId(): string | undefined {
    return this.sessionId;
  }

  get busy(): boolean {
    return this.turns > 0;
  }

  /** A server process is running or starting. */
  get serverUp(): boolean {
    return this.running?.proc.alive === true || this.starting !== undefined;
  }

  /** Capabilities the agent answered in `initialize` (undefined before the server started). */
  get agentCapabilities(): acp.AgentCapabilities | undefined {
    return this.running?.init.agentCapabilities ?? undefined;
  }

  /** The slash commands the agent listed in `initialize` (`_meta.agentServer.availableCommands`, agent-server
   * sends them so a client completes them before its first session; ACP sends them only with a session). */
  get initialCommands(): unknown[] | undefined {
    const listed = ((this.running?.init._meta as Record<string, unknown> | null | undefined)?.agentServer as { availableCommands?: unknown } | undefined)?.availableCommands;
    return Array.isArray(listed) ? listed : undefined;
  }

  /** Starts the server (once) and initializes it. */
  async start(): Promise<Running> {
    if (this.running?.proc.alive) return this.running;
    if (!this.starting) {
      this.starting = this.launch().finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  private async launch(): Promise<Running> {
    const spawnOpts = this.opts.spawn();
    this.cwd = spawnOpts.cwd;
    this.opts.log(`starting ${spawnOpts.command} ${spawnOpts.args.join(" ")} in ${spawnOpts.cwd}`);
    const proc = new AgentProcess(spawnOpts);
    const encodingRef = { value: "utf-16" as PositionEncoding };
    const app = buildClientApp(
      this.opts.handlers,
      (n) => this.opts.onEvent({ type: "update", sessionId: n.sessionId, update: n.update }),
      () => encodingRef.value,
    );
    const conn = app.connect(acp.ndJsonStream(proc.output, proc.input));
    void proc.exited.then((status) => this.onExit(proc, conn, status));
    void conn.closed.then(() => this.onConnectionClosed(proc, conn));
    const init = await Promise.race([
      conn.agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {
          fs: { readTextFile: true, writeTextFile: true },
          terminal: false,
          // the terminal convention (docs/protocol.md "Live shell output"): a shell call's output
          // while it runs, display only; the panel's execute cards show it
          _meta: { agentServer: extensionCapabilities(), terminal_output_delta: true },
        },
        clientInfo: { name: "agent-server-vscode", version: "0.1.0" },
      }),
      proc.exited.then((s) => {
        throw new Error(`the server exited during initialize (${describeExit(s)})\n${proc.stderrTail()}`);
      }),
    ]);
    const ext = (init.agentCapabilities?._meta as Record<string, unknown> | undefined)?.agentServer as
      | { applyWorkspaceEdit?: boolean; positionEncoding?: string }
      | undefined;
    encodingRef.value = parseEncoding(ext?.positionEncoding);
    const running: Running = { proc, conn, init, encoding: encodingRef.value, extension: ext?.applyWorkspaceEdit === true };
    this.running = running;
    this.opts.onEvent({ type: "server-started", agentName: init.agentInfo?.name ?? "agent", extension: running.extension });
    return running;
  }

  private onExit(proc: AgentProcess, conn: acp.ClientConnection, status: ExitStatus): void {
    conn.close(new Error("the agent process exited"));
    if (this.running?.proc !== proc) return;
    this.running = undefined;
    this.resumable = this.sessionId ?? this.resumable;
    this.sessionId = undefined;
    if (this.disposed) return;
    const message = `agent-server exited (${describeExit(status)})`;
    this.opts.log(message);
    const now = Date.now();
    this.crashes = this.crashes.filter((t) => now - t < 60_000).concat(now);
    const restarting = this.crashes.length <= 3 && !status.error;
    const why = status.error ? "it could not start" : restarting ? undefined : `it exited ${this.crashes.length} times within a minute`;
    this.opts.onEvent({ type: "server-exited", message, stderrTail: proc.stderrTail(), restarting, ...(this.resumable ? { session: this.resumable } : {}), ...(why ? { why } : {}) });
    if (restarting) {
      this.start()
        .then(() => this.resumeLost())
        .catch((err) => this.opts.log(`restart failed: ${String(err)}`));
    }
  }

  /**
   * The connection closed. When the process is still running a moment later, the transport broke
   * under it (the SDK refused a message over its size limit, the stream failed): nothing more can be
   * read from that process, so it is stopped and reported once (`server-exited`), and the next
   * prompt or New starts a new one. A process that exits is `onExit`'s; a close we made
   * (`restart`, `dispose`) has already let the process go.
   */
  private async onConnectionClosed(proc: AgentProcess, conn: acp.ClientConnection): Promise<void> {
    if (this.running?.proc !== proc || this.disposed) return;
    const exited = await Promise.race([proc.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 300))]);
    if (exited || this.running?.proc !== proc || this.disposed) return;
    const reason = conn.signal.reason === undefined ? "the stream closed" : errorText(conn.signal.reason);
    this.lost.set(proc, reason);
    this.running = undefined;
    this.resumable = this.sessionId ?? this.resumable;
    this.sessionId = undefined;
    const message = `the connection to agent-server broke (${reason}); the server was stopped`;
    this.opts.log(message);
    this.opts.onEvent({ type: "server-exited", message, stderrTail: proc.stderrTail(), restarting: false, ...(this.resumable ? { session: this.resumable } : {}), why: "the connection broke" });
    await proc.kill();
  }

  /**
   * Every workspace folder: the first as `cwd`, the others as `additionalDirectories` (when the agent
   * announced `sessionCapabilities.additionalDirectories`; else the first folder only).
   */
  private sessionRoots(r: Running): { cwd: string; additionalDirectories?: string[] } {
    const [first, ...rest] = this.opts.roots?.() ?? [];
    const cwd = first ?? this.cwd;
    const extra = rest.filter((d) => d !== cwd);
    const can = (r.init.agentCapabilities?.sessionCapabilities as { additionalDirectories?: unknown } | undefined)?.additionalDirectories;
    return can && extra.length > 0 ? { cwd, additionalDirectories: extra } : { cwd };
  }

  /**
   * Before a new session (no session open, none to resume): a server started with settings that
   * changed since is restarted quietly, so the new session runs with them. Never under a turn: with
   * no session open, no turn of this window runs on that server.
   */
  private async relaunchIfStale(): Promise<void> {
    if (this.sessionId || this.resumable || !this.running?.proc.alive) return;
    const why = this.opts.staleLaunch?.();
    if (!why) return;
    this.opts.log(`restarting the server for a new session: ${why}`);
    await this.restart(false);
    this.opts.onEvent({ type: "relaunched", why });
  }

  /** Creates a new session in the workspace folder (replaces the current one). */
  async newSession(): Promise<string> {
    const r = await this.start();
    const res = await r.conn.agent.request(acp.methods.agent.session.new, { ...this.sessionRoots(r), mcpServers: [] });
    this.sessionId = res.sessionId;
    let modes = res.modes;
    let configOptions = res.configOptions;
    // what the user chose on the empty panel applies to this session, before its first prompt
    const choices = new Map(this.choices);
    this.choices.clear();
    const mode = choices.get("mode") ?? this.opts.initialMode();
    choices.delete("mode");
    if (mode && modes && modes.currentModeId !== mode && modes.availableModes.some((m) => m.id === mode)) {
      await r.conn.agent.request(acp.methods.agent.session.setMode, { sessionId: res.sessionId, modeId: mode });
      modes = { ...modes, currentModeId: mode };
      configOptions = configOptions?.map((o) => (o.id === "mode" && o.type === "select" ? { ...o, currentValue: mode } : o));
    } else if (mode && !modes && configOptions?.some((o) => o.id === "mode" && o.currentValue !== mode)) {
      configOptions = (await r.conn.agent.request(acp.methods.agent.session.setConfigOption, { sessionId: res.sessionId, configId: "mode", value: mode })).configOptions ?? configOptions;
    }
    for (const [configId, value] of choices) {
      const option = configOptions?.find((o) => o.id === configId);
      if (!option || option.currentValue === value) continue;
      try {
        configOptions = (await r.conn.agent.request(acp.methods.agent.session.setConfigOption, { sessionId: res.sessionId, configId, value })).configOptions ?? configOptions;
      } catch (err) {
        this.opts.log(`the ${configId} chosen before the session (${value}) was refused: ${errorText(err)}`);
      }
    }
    this.opts.onEvent({ type: "session", sessionId: res.sessionId, modes, configOptions, loaded: false });
    return res.sessionId;
  }

  /** Mode and model choices made before a session exists (the empty panel's pickers). */
  private choices = new Map<string, string>();

  /** Whether no session is open or waiting to be resumed: a choice then waits for the next `session/new`. */
  get sessionless(): boolean {
    return !this.sessionId && !this.resumable;
  }

  /**
   * A mode or model choice for the session the next prompt makes: sent right after its
   * `session/new`, before the prompt (`session/set_mode` for the mode when the agent has modes,
   * else `session/set_config_option`). Forgotten by New (`forgetChoices`).
   */
  choose(configId: string, value: string): void {
    this.choices.set(configId, value);
  }

  forgetChoices(): void {
    this.choices.clear();
  }

  /**
   * Reattaches the session that was open when the server went away (`session/resume`: nothing is
   * replayed, the panel still shows it; a turn the dead process left open is closed by the server).
   * Once: a prompt and the restart share it. When the agent cannot resume, or refuses, `session-lost`
   * is emitted and the next prompt starts a new session.
   */
  resumeLost(): Promise<void> {
    const sessionId = this.resumable;
    if (!sessionId || this.sessionId || this.disposed) return this.resuming ?? Promise.resolve();
    this.resuming ??= (async () => {
      try {
        const r = await this.start();
        if (this.resumable !== sessionId || this.sessionId) return; // New or a load meanwhile
        if (!r.init.agentCapabilities?.sessionCapabilities?.resume) throw new Error("the agent cannot resume sessions (no sessionCapabilities.resume)");
        const res = await r.conn.agent.request(acp.methods.agent.session.resume, { sessionId, ...this.sessionRoots(r), mcpServers: [] });
        if (this.resumable !== sessionId || this.sessionId) return;
        this.resumable = undefined;
        this.sessionId = sessionId;
        this.opts.log(`resumed session ${sessionId}`);
        this.opts.onEvent({ type: "session", sessionId, modes: res.modes, configOptions: res.configOptions, loaded: true, resumed: true });
      } catch (err) {
        if (this.resumable !== sessionId) return;
        this.resumable = undefined;
        this.opts.log(`could not resume session ${sessionId}: ${errorText(err)}`);
        const busy = sessionBusy(err);
        this.opts.onEvent({ type: "session-lost", sessionId, reason: errorText(err), ...(busy ? { busy } : {}) });
      }
    })().finally(() => (this.resuming = undefined));
    return this.resuming;
  }

  /** `session/delete` (when the agent announced `sessionCapabilities.delete`). */
  async deleteSession(sessionId: string): Promise<void> {
    const r = await this.start();
    if (!r.init.agentCapabilities?.sessionCapabilities?.delete) throw new Error("the agent cannot delete sessions");
    await r.conn.agent.request(acp.methods.agent.session.delete, { sessionId });
    if (this.sessionId === sessionId) this.sessionId = undefined;
    if (this.resumable === sessionId) this.resumable = undefined;
  }

  /**
   * `session/list` for this workspace, every page (`listAllSessions`; empty when the agent cannot
   * list). An early stop is logged; the sessions listed until then are returned.
   */
  async listSessions(): Promise<acp.SessionInfo[]> {
    const r = await this.start();
    if (!r.init.agentCapabilities?.sessionCapabilities?.list) return [];
    const { sessions, note } = await listAllSessions((params) => r.conn.agent.request(acp.methods.agent.session.list, params), this.cwd);
    if (note) this.opts.log(note);
    return sessions;
  }

  /**
   * `session/load`: the history is replayed as updates before the answer. `takeOver`: a session
   * another agent-server process holds is asked of it (`_meta.agentServer.takeOver`).
   */
  async loadSession(sessionId: string, opts: { takeOver?: boolean } = {}): Promise<void> {
    const r = await this.start();
    const previous = this.sessionId;
    this.resumable = undefined;
    this.sessionId = sessionId; // the replay's updates are this session's
    let res: acp.LoadSessionResponse;
    try {
      const meta = opts.takeOver ? { _meta: { agentServer: { takeOver: true } } } : {};
      res = await r.conn.agent.request(acp.methods.agent.session.load, { sessionId, ...this.sessionRoots(r), mcpServers: [], ...meta });
    } catch (err) {
      // refused (open in another agent-server process, a corrupt log): stay on the session we had
      if (this.sessionId === sessionId) this.sessionId = previous;
      throw err;
    }
    this.opts.onEvent({ type: "session", sessionId, modes: res.modes, configOptions: res.configOptions, loaded: true });
  }

  /** `session/fork` of `sessionId` (a copy with its history: a session another window holds); the copy's id. */
  async forkSession(sessionId: string): Promise<string> {
    const r = await this.start();
    // unstable in ACP: not among the SDK's stable method names
    const res = await r.conn.agent.request<{ sessionId: string }>("session/fork", { sessionId, ...this.sessionRoots(r), mcpServers: [] });
    return res.sessionId;
  }

  /**
   * Runs one turn; starts the server and a session first when needed. Never throws. Prompts may
   * overlap (a slash command sent while a turn waits is answered at once): `turn-end` says whether its
   * `turn-start` was emitted (`started`) and whether no other prompt is still open (`last`).
   */
  async prompt(blocks: acp.ContentBlock[], shownText: string): Promise<"gone" | undefined> {
    let sessionId = this.sessionId ?? "";
    this.turns++;
    let proc: AgentProcess | undefined;
    let started = false;
    let end: { stopReason?: string; error?: string; errorKind?: ErrorKind; gone?: boolean };
    try {
      await this.relaunchIfStale();
      const r = await this.start();
      proc = r.proc;
      if (!this.sessionId && this.resumable) await this.resumeLost();
      if (!this.sessionId) sessionId = await this.newSession();
      else sessionId = this.sessionId;
      this.opts.onEvent({ type: "turn-start", sessionId, text: shownText });
      started = true;
      const died = r.proc.exited.then((s) => {
        throw new Error(`the server died during the turn (${describeExit(s)})`);
      });
      const res = await Promise.race([r.conn.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: blocks }), died]);
      end = { stopReason: res.stopReason };
    } catch (err) {
      // A closed connection usually means the process is going away: let its exit be reported first.
      const exit = proc ? await Promise.race([proc.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000))]) : undefined;
      const lost = proc ? this.lost.get(proc) : undefined;
      if (proc && this.stopped.has(proc)) end = { stopReason: "cancelled" }; // the user restarted it: said by the restart's own notice
      else if (err instanceof acp.RequestError && err.code === -32002 && sessionId && (err.data as { sessionId?: unknown } | undefined)?.sessionId === sessionId) {
        // the server no longer has the session (another window took it over, or it was closed): the
        // extension offers to take it back or start a new one
        end = { gone: true, error: errorText(err) };
      } else end = { error: lost ? "the turn ended: the connection to the server broke" : exit ? `the server died during the turn (${describeExit(exit)})` : errorText(err), errorKind: lost || exit ? undefined : errorKind(err) };
    } finally {
      this.turns--;
    }
    this.opts.onEvent({ type: "turn-end", sessionId, text: shownText, started, last: this.turns === 0, ...end });
    return end.gone ? "gone" : undefined;
  }

  /** `session/cancel` for the running turn. */
  async cancel(): Promise<void> {
    const r = this.running;
    if (!r || !this.sessionId) return;
    await r.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: this.sessionId });
  }

  async setConfigOption(configId: string, value: string): Promise<acp.SessionConfigOption[] | undefined> {
    await this.relaunchIfStale();
    const r = await this.start();
    if (!this.sessionId && this.resumable) await this.resumeLost();
    if (!this.sessionId) await this.newSession();
    const res = await r.conn.agent.request(acp.methods.agent.session.setConfigOption, {
      sessionId: this.sessionId!,
      configId,
      value,
    });
    return res.configOptions;
  }

  /** `session/set_mode` (for agents that expose modes but no config options). */
  async setMode(modeId: string): Promise<void> {
    await this.relaunchIfStale();
    const r = await this.start();
    if (!this.sessionId && this.resumable) await this.resumeLost();
    if (!this.sessionId) await this.newSession();
    await r.conn.agent.request(acp.methods.agent.session.setMode, { sessionId: this.sessionId!, modeId });
  }

  /** Forgets the current session: the next prompt starts a new one. */
  resetSession(): void {
    this.sessionId = undefined;
    this.resumable = undefined;
  }

  /**
   * Stops the server without reporting a crash: the next prompt (or `start`) starts a new one. With
   * `resume` (Restart Server) the session that was open is resumed then; else (its settings or the
   * API key changed) the next prompt starts a new session.
   */
  async restart(resume = false): Promise<void> {
    const r = this.running;
    this.running = undefined;
    this.resumable = resume ? (this.sessionId ?? this.resumable) : undefined;
    this.sessionId = undefined;
    if (r) {
      this.stopped.add(r.proc);
      r.conn.close();
      await r.proc.kill();
    }
  }

  /** Kills the server's process group (extension deactivation). */
  async dispose(): Promise<void> {
    this.disposed = true;
    const r = this.running;
    this.running = undefined;
    if (r) {
      r.conn.close();
      await r.proc.kill();
    }
  }

  /** Test hook and "restart" command: kills the server as a crash would. */
  killForRestart(): void {
    this.running?.proc.signalGroup("SIGKILL");
  }
}

export function describeExit(s: ExitStatus): string {
  if (s.error) return `could not start: ${s.error}`;
  if (s.signal) return `killed by ${s.signal}`;
  return `exit code ${s.code}`;
}

/**
 * What an error is about, so the panel offers the way forward: `auth` for "Authentication required"
 * (`-32000`) and a prompt refused by the endpoint (`data.code` `AUTH`: a 401/403), `connection` for
 * an endpoint that cannot be reached (`NETWORK`, `STREAM_IDLE`) or a server that could not start.
 */
export function errorKind(err: unknown): ErrorKind | undefined {
  if (err instanceof acp.RequestError) {
    const code = (err.data as { code?: unknown } | undefined)?.code;
    if (err.code === -32000 || code === "AUTH") return "auth";
    if (code === "NETWORK" || code === "STREAM_IDLE") return "connection";
    return undefined;
  }
  const message = err instanceof Error ? err.message : String(err);
  return /could not start|ENOENT|EACCES|spawn/.test(message) ? "connection" : undefined;
}

/**
 * Human text of an error from the SDK (JSON-RPC errors carry `data.details`): the message, and the
 * details only when they say more (agent-server's `details` repeats the message: shown once).
 */
/** What a `SESSION_BUSY` refusal says of the process holding the session (`data.lockedBy`), else undefined. */
export function sessionBusy(err: unknown): SessionBusy | undefined {
  if (!(err instanceof acp.RequestError)) return undefined;
  const data = err.data as { code?: unknown; lockedBy?: { pid?: unknown; answersTakeOver?: unknown } | null } | undefined;
  if (data?.code !== "SESSION_BUSY") return undefined;
  const pid = typeof data.lockedBy?.pid === "number" ? data.lockedBy.pid : undefined;
  return { ...(pid === undefined ? {} : { pid }), canTakeOver: data.lockedBy?.answersTakeOver === true };
}

export function errorText(err: unknown): string {
  if (err instanceof acp.RequestError) {
    const data = err.data as { details?: unknown; message?: unknown } | undefined;
    const detail = typeof data?.details === "string" ? data.details : typeof data?.message === "string" ? data.message : "";
    if (!detail || err.message.includes(detail)) return err.message;
    if (detail.includes(err.message)) return detail;
    return `${err.message}: ${detail}`;
  }
  return err instanceof Error ? err.message : String(err);
}
