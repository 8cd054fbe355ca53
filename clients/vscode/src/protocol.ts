/**
 * The one message protocol between the extension host and the panel's webview. The panel's state is
 * a fold over `ChatEvent`s (`webview/state.ts`): replaying the same events rebuilds the same chat.
 *
 * Must not: import `vscode` or anything of the host (the webview bundles it too).
 */

/** A `session/update`'s `update` as the wire has it (loosely typed: other agents send more). */
export interface WireUpdate {
  sessionUpdate: string;
  [key: string]: unknown;
}

export interface PermissionOptionView {
  optionId: string;
  name: string;
  kind: string;
}

export interface SelectView {
  id: string;
  name: string;
  category?: string | null;
  currentValue: string;
  options: { value: string; name: string }[];
}

export interface HunkView {
  fileIndex: number;
  index: number;
  state: "pending" | "accepted" | "rejected";
  summary: string;
}

/** Who holds a session another agent-server process has open (`data.lockedBy` of `SESSION_BUSY`). */
export interface SessionBusy {
  pid?: number;
  canTakeOver: boolean;
}

/** What an error was about, so its notice offers the way forward (Set API Key, Sign in, …). */
export type ErrorKind = "auth" | "connection";

/** The first-run page's facts: the endpoint and model the server will use (`--check-config --json`). */
export interface SetupView {
  endpoint?: string | null;
  model?: string | null;
  /** The endpoint is agent-server's offline endpoint (a script plays the model). */
  offline?: boolean;
  /** The endpoint needs a key and none is set anywhere the server reads. */
  keyMissing?: boolean;
  /** Where the key comes from (a variable or file name, `keyring`, `VS Code secret storage`), never the key. */
  keySource?: string | null;
  /** The configuration could not be read (or the server could not be run): why. */
  error?: string;
  /** Whether the endpoint answers (`--check-config --probe`): being asked, answered, or not (why). */
  reach?: { state: "checking" | "ok" | "failed"; text?: string };
}

/** A file, folder, selection, the problems or the terminal's output attached to a prompt (`@`). */
export interface MentionView {
  kind: "file" | "folder" | "selection" | "problems" | "terminal";
  /** What the prompt area shows (`@src/app.py`, `@selection app.py:3-9`). */
  label: string;
}

/** An image pasted or dropped into the prompt (base64, as ACP's image block). */
export interface ImageView {
  mimeType: string;
  data: string;
  name?: string;
}

export type ChatEvent =
  /** The transcript starts again; `replay`: with `sessionId`'s `session/load` replay, which lasts until
   * `loaded` (or `load-refused`): the session's mode, model and context use are unknown until said again. */
  | { kind: "reset"; sessionId?: string; replay?: boolean }
  /** The panel's session is now `sessionId` (the transcript stays). */
  | { kind: "session"; sessionId: string }
  /** A `session/load` was refused: the panel stays on `current` (none: the next prompt starts one).
   * `busy`: another agent-server process holds the session (`SESSION_BUSY`: its pid, whether it
   * can be asked to let it go); the panel then offers to take it over or open a copy. */
  | { kind: "load-refused"; sessionId: string; error: string; current?: string; busy?: SessionBusy }
  | { kind: "user"; text: string }
  /** `at`: when the host received it (ms since the epoch; none for a loaded session's replay). */
  | { kind: "update"; update: WireUpdate; at?: number }
  /** `text`: the prompt's (a slash command answered at once does not hold the turn order); `sessionId`:
   * the session it runs in (a turn of a session the panel left after New or a load is not shown live). */
  | { kind: "turn-start"; text?: string; sessionId?: string }
  | { kind: "turn-end"; text?: string; stopReason?: string; error?: string; errorKind?: ErrorKind; sessionId?: string }
  /** A `session/load`'s replay is over: what it showed is history, nothing of it runs here. */
  /** `live`: prompts of this session still open in this window (a turn that went on while another
   * session was shown): they run here again, and their waiting questions are posted after this. */
  | { kind: "loaded"; sessionId: string; live?: { turns: number; commands: number } }
  /** `next`: what happens now (started again, the session resumed or not), said after the exit. */
  | { kind: "server-exited"; message: string; stderrTail: string; next?: string }
  /** `divider`: a new session starts here (the one above could not be resumed). */
  /** `actions`: buttons under the text (their `send` goes back to the host when clicked). */
  | { kind: "notice"; level: "info" | "warning" | "error" | "divider"; text: string; errorKind?: ErrorKind; actions?: { label: string; send?: WebviewToHost }[] }
  /** The first-run page's facts (sent when the panel loads and after a settings or key change). */
  | { kind: "setup"; setup: SetupView }
  /** Whether the agent takes image blocks in a prompt (`promptCapabilities.image`). */
  /** `commands`: the slash commands listed in `initialize` (agent-server's `_meta`), before any session. */
  | { kind: "capabilities"; image: boolean; commands?: unknown[] }
  /** A mention the user picked (host QuickPick) goes into the prompt area. */
  | { kind: "mention"; mention: MentionView; id: string }
  /** `command`: a shell command the question is about, shown whole. */
  | { kind: "permission"; id: string; title: string; reason: string; options: PermissionOptionView[]; hasDiff: boolean; command?: string }
  | { kind: "permission-done"; id: string; outcome: string }
  /** `stale`: why accepting is refused now (the document changed under the proposal). */
  | { kind: "proposal"; id: string; label: string; files: string[]; ops: string[]; hunks: HunkView[]; stale?: string;
      /** What the card says of how the change is written (a file changed on disk byte for byte). */
      notes?: string[] }
  /** `saveChanged`: the editor's save changed the accepted text (the card offers to show how: `showSaved`). */
  | { kind: "proposal-done"; id: string; outcome: string; message?: string; edited?: boolean; saved?: boolean; saveChanged?: boolean }
  | { kind: "config"; selects: SelectView[] }
  | { kind: "sessions"; sessions: { sessionId: string; title: string; updatedAt?: string | null }[]; current?: string }
  /** The questions (permissions, edit proposals) of sessions the panel does not show that wait for the
   * user's answer: the panel names each and offers to go to its session (the whole list each time). */
  | { kind: "waiting"; questions: WaitingQuestion[] };

/** A question of another session than the one shown: `what` names it (its title or label). */
export interface WaitingQuestion {
  sessionId: string;
  what: string;
}

export type HostToWebview = { type: "events"; events: ChatEvent[] };

export type WebviewToHost =
  | { type: "ready" }
  /** The panel's webview gained or lost the keyboard focus (an editor the agent opens then goes behind the user's editor unless it has). */
  | { type: "focus"; focused: boolean }
  /** `mentions`: ids of mentions the host made (it holds their content); `images` pasted or dropped. */
  | { type: "prompt"; text: string; mentions?: string[]; images?: ImageView[] }
  /** `@` typed or the attach button: the host asks what to attach (QuickPick). */
  | { type: "pickMention"; kind?: MentionView["kind"] }
  | { type: "action"; action: "setApiKey" | "signIn" | "openSettings" | "showLog" | "checkSetup" }
  /** A mode or model picker: the host asks with a QuickPick (full access is confirmed first). */
  | { type: "pickOption"; configId: string }
  | { type: "openLocation"; path: string; line?: number }
  /** The Changes view: a file the turn changed, shown as a diff (before the turn ↔ now). */
  | { type: "showChange"; path: string; oldText: string | null; newText: string }
  | { type: "cancel" }
  | { type: "newSession" }
  | { type: "listSessions" }
  /** The session button: the host's searchable session QuickPick (Agent: Open Session…). */
  | { type: "pickSession" }
  /** `how`: `take-over` asks the process holding it to let it go; `copy` opens a fork of it. */
  | { type: "loadSession"; sessionId: string; how?: "take-over" | "copy" }
  | { type: "permission"; id: string; optionId: string | null }
  | { type: "proposal"; id: string; action: "accept" | "reject" | "show" | "again" }
  | { type: "hunk"; id: string; fileIndex: number; index: number; accept: boolean }
  /** An answered proposal whose save changed its text: the diff of the text as accepted ↔ the file as saved. */
  | { type: "showSaved"; id: string }
  | { type: "openLink"; href: string }
  /** The session was taken over by another window: take it back here, or start a new session; the
   * prompt held meanwhile is sent to the one chosen. */
  | { type: "takenOverChoice"; how: "take-back" | "new" };

/** Narrows an unknown message from the webview (the host trusts nothing it did not check). */
export function isWebviewMessage(m: unknown): m is WebviewToHost {
  if (typeof m !== "object" || m === null) return false;
  const t = (m as { type?: unknown }).type;
  return typeof t === "string" && ["ready", "focus", "prompt", "cancel", "newSession", "listSessions", "pickSession", "loadSession", "permission", "proposal", "hunk", "openLink", "pickMention", "action", "openLocation", "showChange", "showSaved", "pickOption", "takenOverChoice"].includes(t);
}
