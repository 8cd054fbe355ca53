/**
 * The panel's state as a fold over the host's `ChatEvent`s (same events → same chat). Items carry a
 * revision so the view repaints only what changed.
 *
 * Must not: touch the DOM.
 */

import type { ChatEvent, ErrorKind, HunkView, PermissionOptionView, SelectView, SessionBusy, SetupView, WaitingQuestion, WebviewToHost, WireUpdate } from "../src/protocol";

/** A button of a notice: `send` goes to the host when clicked (none: it only dismisses the buttons). */
export interface NoticeAction {
  label: string;
  send?: WebviewToHost;
}

/** An edit a tool call made (its `diff` content): the file, and the text before and after. */
export interface Change {
  path: string;
  oldText: string | null;
  newText: string;
}

/** A slash command the agent advertised (`available_commands_update`). */
export interface SlashCommand {
  name: string;
  description: string;
  hint?: string;
}

/** The live terminal output a card keeps (the server caps a call's at 512 KiB; the card shows the end). */
export const TERMINAL_KEEP = 64 * 1024;

export type Item =
  /** `queued`: sent while another prompt's turn runs; the server runs it when that turn ends, and
   * it stays below everything else (the running turn's steps land above it) until then.
   * `waits`: a slash command sent while a turn runs that the server runs only once that turn has
   * ended (`/compact`): its answer comes after the turn, below the answers of commands sent after it. */
  | { type: "user"; id: number; rev: number; text: string; queued?: boolean; waits?: boolean;
      /** Sent while a `session/load` replay arrived (the host sends it once the replay has ended): drawn at
       * once, and the replayed history goes above it (newcomer 4 finding 1). */
      afterReplay?: boolean }
  /** `messageId`: the ACP message its chunks carry (`<session>/<messageId>`): each message has its own
   * block, whatever arrives between its chunks (a slash command's answer, a notice). */
  | { type: "agent"; id: number; rev: number; text: string; messageId?: string;
      /** A slash command's answer (plain text, not the model's markdown): shown with its line breaks. */
      command?: boolean }
  | { type: "thought"; id: number; rev: number; text: string; messageId?: string }
  | {
      type: "tool"; id: number; rev: number; sessionId: string; toolCallId: string; title: string; kind: string; status: string; output: string; diffs: string[];
      /** The turn it ran in (the Changes view shows the newest turn's edits). */
      turn: number;
      /** A shell call's command (`rawInput.command`). */
      command?: string;
      /** Where it reads or edits (`locations`: absolute path, 1-based line). */
      locations: { path: string; line?: number }[];
      changes: Change[];
      /** The files the server's checkpoint recorded for this call (`_meta.agentServer.changedFiles`). */
      changedFiles?: string[];
      /** Lines added and removed of each of them, as the server counted them (`_meta.agentServer.lineCounts`). */
      lineCounts?: Record<string, [number, number]>;
      /** Of those, the ones it created or deleted (`_meta.agentServer.created` / `deleted`). */
      fileHow?: Record<string, "created" | "deleted">;
      /** The permission bits (octal) before and after of each whose mode changed (`_meta.agentServer.modes`). */
      modes?: Record<string, [string, string]>;
      /** An `/undo` or `/redo` card: whether the run counted (`_meta.agentServer.restore.done`). */
      restoreDone?: boolean;
      /** Live terminal output (the terminal convention: `_meta.terminal_output(_delta)` pieces). */
      terminal: string;
      exitCode?: number | null;
      signal?: string | null;
      /** When it started and ended (host clock, ms); none for a loaded session's calls. */
      startedAt?: number;
      endedAt?: number;
    }
  /** `actions`: buttons under the text (a session another process holds: take over, copy, cancel);
   * dropped once the panel moves on to a session. */
  | { type: "notice"; id: number; rev: number; level: string; text: string; detail?: string; actions?: NoticeAction[]; errorKind?: ErrorKind }
  | { type: "permission"; id: number; rev: number; permId: string; title: string; reason: string; options: PermissionOptionView[]; outcome?: string; hasDiff: boolean; command?: string }
  | { type: "proposal"; id: number; rev: number; proposalId: string; label: string; files: string[]; ops: string[]; hunks: HunkView[]; outcome?: string; message?: string; stale?: string; notes?: string[]; edited?: boolean; saved?: boolean;
      /** The editor's save changed the accepted text: the card offers "Show What the Save Changed". */
      saveChanged?: boolean };

export interface ChatState {
  items: Item[];
  busy: boolean;
  /** Prompts sent and not answered yet: they overlap (a slash command typed while a turn waits for
   * an edit proposal is answered at once; other prompts queue on the server). */
  running: number;
  /** Prompts that run a turn (not slash commands answered at once) sent and not answered yet: the
   * server runs them one after the other, so each answer ends the oldest. */
  turnsOpen: number;
  /** Slash commands answered at once sent and not answered yet: text without a `messageId` meanwhile is their answer. */
  commandsOpen?: number;
  /** Prompts still open that were sent before the panel was cleared (New, a load): another
   * transcript's turns; their end changes nothing shown, and they do not make this one busy. */
  elsewhere: number;
  /** The server's exit was reported while prompts were open: their error answers say it again. */
  exitShown?: boolean;
  /** The text item chunks without a `messageId` join now (an agent that sends none, our notes, a
   * command's answer); a turn's end closes it. */
  openText?: number;
  /** The message streaming now (chunks with a `messageId`): a chunk of another message, the agent's
   * next card or its turn's end closes it; a slash command answered meanwhile, a notice or a queued
   * prompt does not. */
  streamingMessage?: number;
  plan: { content: string; status: string }[];
  usage?: { used: number; size: number; cost?: { amount: number; currency: string } | null };
  selects: SelectView[];
  sessions: { sessionId: string; title: string }[];
  currentSession?: string;
  title?: string;
  nextId: number;
  /** Turns started in this transcript (tool cards carry the number of theirs). */
  turn: number;
  /** A `session/load` replay is arriving (from its `reset` to `loaded` or `load-refused`). */
  replaying?: boolean;
  commands: SlashCommand[];
  setup?: SetupView;
  /** The agent takes images in a prompt (`promptCapabilities.image`). */
  images: boolean;
  /** An Undo button's `/undo` was sent and not answered yet: the Undo buttons wait for its answer
   * (a double click ran two undos at once, newcomer finding 3b). Set by `askUndo`. */
  undoAsked?: boolean;
  /** Questions of other sessions than the one shown, waiting for the user (`waiting` events). */
  waiting?: WaitingQuestion[];
}

/** An Undo button was clicked: true when its `/undo` is to be sent — false while the last click's is
 * still unanswered (one click, one undo). */
export function askUndo(s: ChatState): boolean {
  if (s.undoAsked) return false;
  s.undoAsked = true;
  return true;
}

export function initialState(): ChatState {
  return { items: [], busy: false, running: 0, turnsOpen: 0, elsewhere: 0, plan: [], selects: [], sessions: [], nextId: 1, turn: 0, commands: [], images: false };
}

/**
 * Whether a prompt's text is a slash command the server answers at once, even while a turn runs
 * (`parse_command` in the server: one text block `/word …`); `/init` runs a turn, so it queues.
 */
export function isImmediateCommand(text: string): boolean {
  const m = /^\/([A-Za-z][A-Za-z0-9_-]*)(\s|$)/.exec(text.trim());
  return m !== null && m[1] !== "init";
}

/** A slash command the server answers only after the running turn (`/compact` takes the turn's lock). */
export function waitsForTurn(text: string): boolean {
  return /^\/compact(\s|$)/.test(text.trim());
}

/** Index of the first queued prompt (queued prompts, and prompts sent during a replay, are always last), or the length. */
function tail(s: ChatState): number {
  let i = s.items.length;
  for (let last = s.items[i - 1]; last?.type === "user" && (last.queued || last.afterReplay); last = s.items[i - 1]) i--;
  return i;
}

/** A replay ended (loaded, or refused): prompts sent during it are the transcript's again (sent now). */
function endReplay(s: ChatState): void {
  s.replaying = undefined;
  for (const i of s.items) if (i.type === "user" && i.afterReplay) { delete i.afterReplay; i.rev++; }
}

function textOf(content: unknown): string {
  const c = content as { type?: string; text?: string; resource?: { uri?: string } } | undefined;
  if (!c) return "";
  if (c.type === "text") return c.text ?? "";
  if (c.type === "resource") return `\n[${c.resource?.uri ?? "resource"}]\n`;
  return "";
}

function toolOutput(content: unknown): { output: string; diffs: string[]; changes: Change[] } {
  const out: string[] = [];
  const diffs: string[] = [];
  const changes: Change[] = [];
  for (const c of (Array.isArray(content) ? content : []) as { type?: string; content?: unknown; path?: string; oldText?: unknown; newText?: unknown }[]) {
    if (c.type === "content") out.push(textOf(c.content));
    else if (c.type === "diff") {
      diffs.push(c.path ?? "");
      if (typeof c.path === "string" && typeof c.newText === "string") changes.push({ path: c.path, oldText: typeof c.oldText === "string" ? c.oldText : null, newText: c.newText });
    }
  }
  return { output: out.join("\n"), diffs, changes };
}

/** The next piece of a shell call's live output, under either key of the terminal convention. */
function terminalPiece(meta: unknown): string | undefined {
  const m = meta as Record<string, { data?: unknown } | undefined> | undefined;
  const piece = m?.terminal_output_delta ?? m?.terminal_output;
  return typeof piece?.data === "string" ? piece.data : undefined;
}

/** What the panel says while a turn runs and nothing streams: `working` before the first token (or
 * between steps), `thinking` while a thought streams; nothing while the answer streams or when idle. */
export function activity(s: ChatState): "working" | "thinking" | undefined {
  if (!s.busy) return undefined;
  const open = s.items.find((i) => i.id === (s.streamingMessage ?? s.openText));
  if (open?.type === "thought") return "thinking";
  if (open?.type === "agent") return undefined;
  const running = s.items.some((i) => i.type === "tool" && i.status === "in_progress");
  const asking = s.items.some((i) => (i.type === "permission" || i.type === "proposal") && !i.outcome);
  return running || asking ? undefined : "working";
}

/** Status words instead of the wire's enum names (`in_progress` → "Running"). */
export function statusWord(status: string): string {
  return ({ pending: "Pending", in_progress: "Running", completed: "Done", failed: "Failed", unfinished: "Unfinished" } as Record<string, string>)[status] ?? status;
}

/** The note "Ask the Agent Again" adds to a stale answer for the model (src/proposals.ts); the card leaves it out. */
export const ASK_AGAIN_NOTE = "; the user asks you to read it again and make your change on its current text";

/**
 * The prompt to give back to the prompt box once its turn ended (`s`: the state after `e` was folded):
 * one that failed (the endpoint unreachable, a refused key…) or was cancelled before the agent answered
 * anything, so that it can be sent again without being typed again; never a slash command.
 */
export function promptToGiveBack(s: ChatState, e: ChatEvent): string | undefined {
  if (e.kind !== "turn-end" || !e.text?.trim() || e.text.trim().startsWith("/")) return undefined;
  if (e.error) return e.text;
  if (e.stopReason !== "cancelled") return undefined;
  let at = -1;
  for (let i = s.items.length - 1; i >= 0 && at < 0; i--) {
    const it = s.items[i]!;
    if (it.type === "user" && it.text === e.text) at = i;
  }
  const answered = s.items.slice(at + 1).some((i) => (i.type === "agent" && !i.command) || i.type === "thought" || i.type === "tool" || i.type === "permission" || i.type === "proposal");
  return at >= 0 && !answered ? e.text : undefined;
}

/** Whether a proposal is an `/undo` or `/redo` restore ("Undo turn 2: a.py"): no model is involved,
 * so it is never "asked again", only rejected. */
export function isRestoreProposal(label: string): boolean {
  return /^(Undo|Redo) turn \d+/.test(label);
}

/** What a decided proposal's card says after its outcome: the answer's message without what was meant for the model. */
export function proposalMessage(message: string | undefined): string | undefined {
  return message?.split(ASK_AGAIN_NOTE).join("") || undefined;
}

/** What a decided proposal's card says (`partial` → "Partly applied"), never the wire's outcome name;
 * `saved` false: the change is in the editor's buffer only ("Applied in the editor, not saved"). */
export function outcomeWord(outcome: string, saved?: boolean): string {
  if (saved === false && (outcome === "applied" || outcome === "partial")) {
    return `${outcome === "applied" ? "Applied" : "Partly applied"} in the editor, not saved`;
  }
  return ({ applied: "Applied", partial: "Partly applied", rejected: "Rejected", stale: "Not applied: the file changed", failed: "Failed", cancelled: "Cancelled" } as Record<string, string>)[outcome] ?? outcome;
}

/** Elapsed time as a card shows it: `0.4 s`, `12 s`, `3 min 05 s`. */
export function formatElapsed(ms: number): string {
  if (!(ms >= 0)) return "";
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

/** A command as a card that asks nothing shows it: the first line, at most `max` characters, with `…`
 * when anything was left out (the whole command is the card's tooltip, and a question shows it whole). */
export function shortCommand(command: string, max = 120): { text: string; shortened: boolean } {
  const first = command.split("\n", 1)[0]!;
  const cut = first.length > max ? first.slice(0, max) : first;
  return cut === command ? { text: command, shortened: false } : { text: `${cut}…`, shortened: true };
}

/** One file in the Changes view: the text before the turn's first edit and after its last (none
 * known: a file only the server's checkpoint names — a shell call's, an edit applied in part). */
export interface ChangedFile {
  path: string;
  oldText: string | null;
  newText: string | null;
  /** What the turn did to a file without a diff (`changed` when not said). */
  how?: "created" | "deleted";
  added: number;
  removed: number;
  /** A file without a diff whose `added` / `removed` the server counted (`lineCounts`). */
  counted?: boolean;
  /** Its permission bits (octal) before the turn and after it, when the turn changed them (`modes`). */
  mode?: [string, string];
}

/**
 * The Changes view: the newest turn whose file changes were confirmed — an edit card that completed
 * (its proposal applied, not one still waiting, rejected, stopped or cut off by a restart), or a call
 * the server says changed files (`_meta.agentServer.changedFiles`: its checkpoint, what `/undo` takes
 * back) — per file, and what became of `/undo`. The server's `/undo` takes back the newest turn that
 * changed files and was not undone yet, so `undo` follows the restores the server reported ("Undo turn
 * N" cards, `_meta.agentServer.restore {done}`), never the `/undo` typed: `running` while one runs;
 * `undone` once a restore was applied; `nothing` when it counted with no file restored (each already
 * as it was, or one that cannot be taken back: the next /undo takes the turn before); `declined` when
 * the user said no to every restore (Keep mine, rejected): no undo — the server's next /undo asks
 * about this turn again, so "Undo this turn" is offered for `undefined` and `declined`
 * (`undoSummary` says how).
 * Undefined when no turn of this transcript changed files (a loaded session's edits carry no diff).
 */
export function turnChanges(s: ChatState): { turn: number; prompt?: string; undone: boolean; undo?: UndoState; undoSummary?: string; files: ChangedFile[] } | undefined {
  /** Turns with confirmed changes, oldest first, and what the server's restores made of each. */
  const turns: { turn: number; prompt?: string; undo?: UndoState; undoSummary?: string }[] = [];
  const undoneStack: number[] = [];
  /** The turn acted on last (changed, undone or redone): the box's, so its button takes back what it names. */
  let shown: number | undefined;
  let prompt: string | undefined;
  for (const i of s.items) {
    if (i.type === "user" && !i.queued) prompt = i.text;
    if (i.type !== "tool") continue;
    const restore = restoreOf(i);
    if (restore) {
      // the server's undo takes the newest turn not undone yet; a redo the last one undone
      const target = restore === "undo" ? [...turns].reverse().find((t) => t.undo !== "undone" && t.undo !== "nothing") : turns.find((t) => t.turn === undoneStack[undoneStack.length - 1]);
      if (!target) continue;
      // a redo puts its turn back: that turn is the next /undo's, the box is about it (newcomer finding 3b)
      if (restore === "redo" && i.status === "completed") shown = target.turn;
      if (i.status === "pending" || i.status === "in_progress") {
        if (restore === "undo") target.undo = "running";
      } else if (i.status === "completed") {
        const done = i.restoreDone ?? (restoredSome(i.output) || !/kept the user's version|rejected/.test(i.output));
        if (restore === "undo") {
          target.undo = !done ? "declined" : restoredSome(i.output) ? "undone" : "nothing";
          target.undoSummary = i.output.trim();
          if (done) undoneStack.push(target.turn);
        } else if (done) {
          undoneStack.pop();
          target.undo = undefined;
          target.undoSummary = undefined;
        }
      } else if (target.undo === "running") {
        target.undo = undefined; // failed or cut off: the server never reported a restore
      }
      continue;
    }
    if (!confirmedChange(i)) continue;
    undoneStack.length = 0; // the agent changed files again: what was undone stays undone, no redo
    if (turns[turns.length - 1]?.turn !== i.turn) turns.push({ turn: i.turn, prompt });
    shown = i.turn;
  }
  const last = turns.find((t) => t.turn === shown) ?? turns[turns.length - 1];
  if (!last) return undefined;
  const files = new Map<string, { oldText: string | null; newText: string | null; how?: "created" | "deleted"; lines?: [number, number] }>();
  // the server's counts from the checkpoint (what is on disk: a save participant's changes too), when
  // every call of the turn that changed the file gave one and they tell more than the diffs: one call
  // (its count is the turn's), or a call whose count is not its diff's (the save changed what it
  // wrote, or a shell command changed the file). Each count is its call's alone: added up over calls
  // that changed the same lines (a file created then edited) they count those lines again — then the
  // diffs' net change, from the first call's old text to the last one's new text, is the count.
  const counted = new Map<string, { sum: [number, number] | null; calls: number; beyondDiffs: boolean }>();
  /** Each file's mode before the turn's first change of it and after its last one. */
  const modes = new Map<string, [string, string]>();
  for (const i of s.items) {
    if (i.type !== "tool" || i.turn !== last.turn || restoreOf(i) || !confirmedChange(i)) continue;
    for (const [path, [from, to]] of Object.entries(i.modes ?? {})) modes.set(path, [modes.get(path)?.[0] ?? from, to]);
    for (const path of new Set([...i.changes.map((c) => c.path), ...(i.changedFiles ?? [])])) {
      const n = i.lineCounts?.[path];
      const c = counted.get(path) ?? { sum: [0, 0], calls: 0, beyondDiffs: false };
      c.calls++;
      c.sum = n && c.sum ? [c.sum[0] + n[0], c.sum[1] + n[1]] : null;
      const mine = i.changes.filter((d) => d.path === path);
      const diff = mine.length > 0 ? lineCounts(mine[0]!.oldText ?? "", mine[mine.length - 1]!.newText) : undefined;
      if (!diff || (n && (diff.added !== n[0] || diff.removed !== n[1]))) c.beyondDiffs = true;
      counted.set(path, c);
    }
    for (const c of i.changes) {
      const seen = files.get(c.path);
      files.set(c.path, { oldText: seen ? seen.oldText : c.oldText, newText: c.newText });
    }
    for (const path of i.changedFiles ?? []) {
      const seen = files.get(path);
      const lines = i.lineCounts?.[path];
      if (!seen) files.set(path, { oldText: null, newText: null, ...(i.fileHow?.[path] ? { how: i.fileHow[path] } : {}), ...(lines ? { lines } : {}) });
      else if (seen.newText === null && seen.lines && lines) seen.lines = [seen.lines[0] + lines[0], seen.lines[1] + lines[1]];
      else if (seen.newText === null) delete seen.lines; // a call of the turn that changed it said no count
    }
  }
  return {
    turn: last.turn,
    prompt: last.prompt,
    undone: last.undo === "undone",
    undo: last.undo,
    undoSummary: last.undoSummary,
    files: [...files].map(([path, { lines, ...f }]) => ({
      path,
      ...f,
      ...(modes.has(path) && modes.get(path)![0] !== modes.get(path)![1] ? { mode: modes.get(path) } : {}),
      ...(f.newText !== null && !f.how && serverCount(counted.get(path))
        ? { added: serverCount(counted.get(path))![0], removed: serverCount(counted.get(path))![1] }
        : f.newText !== null ? lineCounts(f.oldText ?? "", f.newText) : lines && !f.how ? { added: lines[0], removed: lines[1], counted: true } : { added: 0, removed: 0 }),
    })),
  };
}

/** What became of a turn's `/undo` (see `turnChanges`). */
export type UndoState = "running" | "undone" | "nothing" | "declined";

/** `undo` or `redo` for the card of a server restore (`/undo`'s "Undo turn N" call), else undefined. */
function restoreOf(i: Extract<Item, { type: "tool" }>): "undo" | "redo" | undefined {
  const m = /^(undo|redo)-\d+$/.exec(i.toolCallId) ?? (/^(Undo|Redo) turn \d+$/.test(i.title) ? [i.title, i.title.slice(0, 4).toLowerCase()] : null);
  return m ? (m[1] === "undo" ? "undo" : "redo") : undefined;
}

/** Whether a restore's summary (`path: outcome; …`) has a file put back: restored, brought back or
 * removed — not "not restored (…)", "kept the user's version (…)", "already as it was". */
function restoredSome(summary: string): boolean {
  return /(^|; )[^;]*: (restored|brought back|removed \(the agent had created it\))/.test(summary.trim());
}

/** A call whose file changes happened: it completed, and carries a diff or the server's word. */
function confirmedChange(i: Extract<Item, { type: "tool" }>): boolean {
  return i.status === "completed" && (i.changes.length > 0 || (i.changedFiles?.length ?? 0) > 0);
}

/** Lines added and removed between two texts (a multiset count of lines, each with its newline: cheap, close
 * enough for a summary). An empty text has no lines (a created file's "before" is not one empty line removed). */
export function lineCounts(a: string, b: string): { added: number; removed: number } {
  const lines = (t: string) => t.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  const count = new Map<string, number>();
  for (const l of lines(a)) count.set(l, (count.get(l) ?? 0) + 1);
  let added = 0;
  for (const l of lines(b)) {
    const n = count.get(l) ?? 0;
    if (n > 0) count.set(l, n - 1);
    else added++;
  }
  let removed = 0;
  for (const n of count.values()) removed += n;
  return { added, removed };
}

/** The advertised slash commands whose name starts with what follows `/` (the input is `/word`, no space yet). */
export function completeCommand(commands: SlashCommand[], input: string): SlashCommand[] {
  const m = /^\/([A-Za-z0-9_-]*)$/.exec(input);
  if (!m) return [];
  return commands.filter((c) => c.name.startsWith(m[1]!));
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type NewItem = DistributiveOmit<Item, "id" | "rev">;

/**
 * Where the line that closes a turn ("Stopped: cancelled", its error) goes: right below the turn's
 * own last item — above a slash command's prompt and answer drawn after it while it ran — and above
 * the queued prompts.
 */
function afterTurn(s: ChatState): number {
  let k = tail(s);
  for (; k > 0; k--) {
    const i = s.items[k - 1]!;
    const command = (i.type === "user" && !i.queued && isImmediateCommand(i.text)) || (i.type === "agent" && i.command === true);
    if (!command) break;
  }
  return k;
}

/** The server's count of a file's changes in a turn (`turnChanges`), when it is the one to show. */
function serverCount(c: { sum: [number, number] | null; calls: number; beyondDiffs: boolean } | undefined): [number, number] | undefined {
  return c?.sum && (c.calls === 1 || c.beyondDiffs) ? c.sum : undefined;
}

/** Adds an item above the queued prompts (the running turn's steps come before them), or at `at`. */
function push(s: ChatState, item: NewItem, at = tail(s)): Item {
  const full = { ...item, id: s.nextId++, rev: 0 } as Item;
  if (full.type === "user" && (full.queued || full.afterReplay)) {
    // drawn after the running turn: the text streaming there goes on in its own message
    s.items.push(full);
    return full;
  }
  s.items.splice(at, 0, full);
  s.openText = full.type === "agent" || full.type === "thought" || full.type === "user" ? full.id : undefined;
  // the agent's next card ends the message it streamed (text after it in the same message goes below it)
  if (full.type === "tool" || full.type === "permission" || full.type === "proposal") s.streamingMessage = undefined;
  return full;
}

/** Whether a text item is still streaming (the panel draws it as an open message: its last block plain). */
export function isStreaming(s: ChatState, item: Item): boolean {
  if (!s.busy) return false;
  if (item.id === s.streamingMessage) return true;
  return item.id === s.openText && (item.type === "user" || ((item.type === "agent" || item.type === "thought") && item.messageId === undefined));
}

/**
 * A chunk of the message `messageId` (ACP `ContentChunk.messageId`): it joins that message's block
 * whatever was drawn below it meanwhile — a slash command's answer, a notice, a prompt —, else starts
 * one (above queued prompts). An agent's card drawn after the block (a tool call, a question, a
 * proposal: an agent that interleaves them in one message) ends it: the message goes on below the card,
 * in reading order. The last items are searched first.
 */
function appendMessage(s: ChatState, type: "agent" | "thought", text: string, messageId: string): void {
  const key = `${s.currentSession ?? ""}/${messageId}`;
  let item: Item | undefined;
  for (let k = s.items.length - 1; k >= 0; k--) { // the streaming message is one of the last items
    const i = s.items[k]!;
    if (i.type === type && i.messageId === key) { item = i; break; }
    if (i.type === "tool" || i.type === "permission" || i.type === "proposal") break;
  }
  if (item) {
    (item as { text: string }).text += text;
    item.rev++;
  } else {
    const openText = s.openText;
    item = push(s, { type, text, messageId: key });
    s.openText = openText; // chunks without an id go on where they were
  }
  s.streamingMessage = item.id;
}

/** A slash command's answer (the server's `messageId` `cmd-N`, docs/protocol.md): a block of its own,
 * drawn as a command's answer, that neither ends nor joins the message streaming meanwhile. */
function appendCommandAnswer(s: ChatState, text: string, messageId: string): void {
  const key = `${s.currentSession ?? ""}/${messageId}`;
  const item = s.items.find((i) => i.type === "agent" && i.messageId === key);
  if (item) {
    (item as { text: string }).text += text;
    item.rev++;
    return;
  }
  const openText = s.openText;
  push(s, { type: "agent", text, command: true, messageId: key });
  s.openText = openText;
}

function appendText(s: ChatState, type: "agent" | "thought" | "user", text: string, messageId?: string): void {
  if (type === "agent" && messageId?.startsWith("cmd-")) return appendCommandAnswer(s, text, messageId);
  if (type !== "user" && messageId !== undefined) return appendMessage(s, type, text, messageId);
  const last = s.items[tail(s) - 1];
  if (last && last.type === type && last.id === s.openText && (last.type === "user" || last.messageId === undefined)) {
    last.text += text;
    last.rev++;
  } else {
    push(s, type === "agent" && (s.commandsOpen ?? 0) > 0 ? { type, text, command: true } : { type, text });
  }
}

function messageIdOf(u: WireUpdate): string | undefined {
  return typeof u.messageId === "string" && u.messageId !== "" ? u.messageId : undefined;
}

function applyUpdate(s: ChatState, u: WireUpdate, at?: number): void {
  switch (u.sessionUpdate) {
    case "user_message_chunk": {
      // a loaded session's replay: each prompt starts a turn (live turns count at turn-start)
      const before = s.openText;
      appendText(s, "user", textOf(u.content));
      if (s.openText !== before) s.turn++;
      return;
    }
    case "agent_message_chunk": {
      // a retry or waiting notice is the server's word, not the answer: a notice apart (docs/protocol.md)
      const ours = (u._meta as { agentServer?: { retry?: unknown; waiting?: unknown } } | undefined)?.agentServer;
      if (ours?.retry || ours?.waiting) {
        push(s, { type: "notice", level: "warning", text: textOf(u.content).trim() });
        s.openText = undefined;
        // the retried request keeps its step's ids, and its answer follows the notice: the failed
        // try's text (which ACP cannot take back) stays above it, a message of its own
        for (const i of s.items) if ((i.type === "agent" || i.type === "thought") && i.messageId !== undefined) delete i.messageId;
        s.streamingMessage = undefined;
        return;
      }
      return appendText(s, "agent", textOf(u.content), messageIdOf(u));
    }
    case "agent_thought_chunk":
      return appendText(s, "thought", textOf(u.content), messageIdOf(u));
    case "tool_call":
    case "tool_call_update": {
      // Ids (`tc-<seq>`) restart in each session: a card is its session's call, never an earlier
      // session's card with the same id (after a crash the next prompt runs in a new session).
      const id = String(u.toolCallId ?? "");
      const sessionId = s.currentSession ?? "";
      let tool = s.items.find((i): i is Extract<Item, { type: "tool" }> => i.type === "tool" && i.toolCallId === id && i.sessionId === sessionId);
      if (!tool) {
        tool = push(s, { type: "tool", sessionId, toolCallId: id, title: "", kind: "other", status: "pending", output: "", diffs: [], turn: s.turn, locations: [], changes: [], terminal: "" }) as Extract<Item, { type: "tool" }>;
        if (at !== undefined) tool.startedAt = at;
      }
      if (typeof u.title === "string") tool.title = u.title;
      if (typeof u.kind === "string") tool.kind = u.kind;
      if (typeof u.status === "string") tool.status = u.status;
      const raw = u.rawInput as { command?: unknown } | undefined;
      if (typeof raw?.command === "string") tool.command = raw.command;
      if (Array.isArray(u.locations)) {
        tool.locations = (u.locations as { path?: unknown; line?: unknown }[])
          .filter((l) => typeof l?.path === "string")
          .map((l) => ({ path: l.path as string, line: typeof l.line === "number" ? l.line : undefined }));
      }
      if (u.content !== undefined && u.content !== null) Object.assign(tool, toolOutput(u.content));
      const piece = terminalPiece(u._meta);
      if (piece !== undefined) {
        tool.terminal += piece;
        if (tool.terminal.length > 2 * TERMINAL_KEEP) tool.terminal = tool.terminal.slice(-TERMINAL_KEEP);
      }
      const server = (u._meta as { agentServer?: { changedFiles?: unknown; created?: unknown; deleted?: unknown; lineCounts?: unknown; modes?: unknown } } | undefined)?.agentServer;
      if (server?.modes && typeof server.modes === "object") {
        for (const [p, m] of Object.entries(server.modes as Record<string, unknown>)) {
          if (Array.isArray(m) && m.length === 2 && m.every((x) => typeof x === "string" && /^[0-7]{1,4}$/.test(x))) tool.modes = { ...tool.modes, [p]: [m[0], m[1]] };
        }
      }
      if (server?.lineCounts && typeof server.lineCounts === "object") {
        for (const [p, n] of Object.entries(server.lineCounts as Record<string, unknown>)) {
          if (Array.isArray(n) && n.length === 2 && n.every((x) => typeof x === "number")) tool.lineCounts = { ...tool.lineCounts, [p]: [n[0], n[1]] };
        }
      }
      const changed = server?.changedFiles;
      for (const how of ["created", "deleted"] as const) {
        const paths = server?.[how];
        if (Array.isArray(paths)) for (const p of paths) if (typeof p === "string") tool.fileHow = { ...tool.fileHow, [p]: how };
      }
      const restored = (u._meta as { agentServer?: { restore?: { done?: unknown } } } | undefined)?.agentServer?.restore;
      if (typeof restored?.done === "boolean") tool.restoreDone = restored.done;
      if (Array.isArray(changed)) tool.changedFiles = [...new Set([...(tool.changedFiles ?? []), ...changed.filter((p): p is string => typeof p === "string")])];
      const exit = (u._meta as { terminal_exit?: { exit_code?: number | null; signal?: string | null } } | undefined)?.terminal_exit;
      if (exit) {
        tool.exitCode = exit.exit_code ?? null;
        tool.signal = exit.signal ?? null;
      }
      if (at !== undefined) {
        if (tool.status === "in_progress" && tool.endedAt === undefined) tool.startedAt ??= at;
        if ((tool.status === "completed" || tool.status === "failed") && tool.startedAt !== undefined) tool.endedAt ??= at;
      }
      tool.rev++;
      return;
    }
    case "plan":
      s.plan = ((u.entries as { content: string; status: string }[]) ?? []).map((e) => ({ content: e.content, status: e.status }));
      return;
    case "usage_update":
      s.usage = { used: Number(u.used ?? 0), size: Number(u.size ?? 0), cost: (u.cost as { amount: number; currency: string } | null | undefined) ?? null };
      return;
    case "session_info_update":
      if (typeof u.title === "string") s.title = u.title;
      return;
    case "current_mode_update":
      for (const sel of s.selects) if (sel.id === "mode" && typeof u.currentModeId === "string") sel.currentValue = u.currentModeId;
      return;
    case "config_option_update":
      if (Array.isArray(u.configOptions)) s.selects = toSelects(u.configOptions);
      return;
    case "available_commands_update":
      if (Array.isArray(u.availableCommands)) s.commands = toCommands(u.availableCommands);
      return;
    default:
      return;
  }
}

/** ACP `AvailableCommand`s of the wire as the completion's commands (entries without a name are left out). */
export function toCommands(list: unknown[]): SlashCommand[] {
  return (list as ({ name?: unknown; description?: unknown; input?: { hint?: unknown } | null } | null)[])
    .filter((c) => typeof c?.name === "string")
    .map((c) => ({ name: c!.name as string, description: typeof c!.description === "string" ? c!.description : "", hint: typeof c!.input?.hint === "string" ? c!.input.hint : undefined }));
}

/** Select-type config options of the wire as pickers (boolean ones are left out). */
export function toSelects(options: unknown[]): SelectView[] {
  const out: SelectView[] = [];
  for (const o of options as { type?: string; id: string; name: string; category?: string | null; currentValue: unknown; options?: unknown[] }[]) {
    if (o.type !== "select" || !Array.isArray(o.options)) continue;
    const flat: { value: string; name: string }[] = [];
    for (const opt of o.options as { value?: string; name: string; options?: { value: string; name: string }[] }[]) {
      if (Array.isArray(opt.options)) flat.push(...opt.options.map((x) => ({ value: x.value, name: x.name })));
      else if (typeof opt.value === "string") flat.push({ value: opt.value, name: opt.name });
    }
    out.push({ id: o.id, name: o.name, category: o.category, currentValue: String(o.currentValue), options: flat });
  }
  return out;
}

/**
 * Why a failed tool call failed, shown on its card without opening the output (as the Neovim chat
 * shows `- ✗ Edit calc.py — Not written: the user rejected the change …`): the output's first line
 * with text, at most 200 characters. A loaded session's edits replay as such cards — the replayed
 * updates carry the call's final status and the text the model was told, not the proposal itself.
 */
export function toolReason(item: Extract<Item, { type: "tool" }>): string {
  if (item.status !== "failed") return "";
  const line = item.output.split("\n").find((l) => l.trim() !== "") ?? "";
  return line.trim().slice(0, 200);
}

/** What a shell card says of how its command ended: an exit code other than 0, or the signal that
 * killed it; nothing when no code came back (a command that never ran — rejected — said "exit code null"). */
export function exitText(item: Extract<Item, { type: "tool" }>): string | undefined {
  if (item.signal) return `killed by ${item.signal}`;
  if (typeof item.exitCode === "number" && item.exitCode !== 0) return `exit code ${item.exitCode}`;
  return undefined;
}

/** What the panel says when a session is open in another agent-server process (`SESSION_BUSY`). */
export function busyText(sessionId: string, busy: SessionBusy, current?: string): string {
  const who = busy.pid === undefined ? "another agent-server process" : `another agent-server process (pid ${busy.pid})`;
  const choices = busy.canTakeOver
    ? "Take it over here (that process lets it go: a turn running there is cancelled), open a copy with the same history, or cancel."
    : "That process cannot be asked to let it go: open a copy with the same history, or close it there first.";
  const stay = current ? ` The panel stays on session ${current}.` : "";
  return `Session ${sessionId} is open in ${who}: another window, or a closed tab whose server is still running. ${choices}${stay}`;
}

/** The buttons under that notice: "Take over here" (when the holder can be asked), "Open a copy", "Cancel". */
export function busyActions(sessionId: string, busy: SessionBusy): NoticeAction[] {
  return [
    ...(busy.canTakeOver ? [{ label: "Take over here", send: { type: "loadSession", sessionId, how: "take-over" } as WebviewToHost }] : []),
    { label: "Open a copy", send: { type: "loadSession", sessionId, how: "copy" } },
    { label: "Cancel" },
  ];
}

/**
 * What the panel says of each session (not the one shown) whose running turn waits for the user's
 * answer, with the session to go to: one line a session ("Session “Fix the parser” waits for your
 * answer: Edit app.py"; "… and 1 more" when it asks several).
 */
export function waitingElsewhere(s: ChatState): { sessionId: string; text: string }[] {
  const out = new Map<string, string[]>();
  for (const q of s.waiting ?? []) if (q.sessionId !== s.currentSession) out.set(q.sessionId, [...(out.get(q.sessionId) ?? []), q.what]);
  return [...out].map(([sessionId, what]) => {
    const full = s.sessions.find((x) => x.sessionId === sessionId)?.title || sessionId.slice(0, 8);
    const title = full.length > 40 ? `${full.slice(0, 39)}…` : full;
    const more = what.length > 1 ? ` and ${what.length - 1} more` : "";
    return { sessionId, text: `Session “${title}” waits for your answer: ${what[0]}${more}` };
  });
}

/** Notices' buttons are for the moment they were shown: once the panel moves on, they go. */
function dropActions(s: ChatState): void {
  for (const i of s.items) if (i.type === "notice" && i.actions) { delete i.actions; i.rev++; }
}

/** What a permission card says once answered: the chosen option's name ("Allow once"), never its id. */
export function permissionAnswer(item: Extract<Item, { type: "permission" }>): string {
  if (!item.outcome) return "";
  const option = item.options.find((o) => o.optionId === item.outcome);
  if (option) return `Answered: ${option.name || option.optionId}`;
  return item.outcome === "cancelled" ? "Not answered: denied" : `Answered: ${item.outcome}`;
}

/** Folds one event into the state (mutates and returns it). */
export function fold(s: ChatState, e: ChatEvent): ChatState {
  switch (e.kind) {
    case "reset": {
      const fresh = initialState();
      fresh.selects = s.selects;
      fresh.sessions = s.sessions;
      fresh.currentSession = e.sessionId; // none after New or a restart: the next prompt makes one
      fresh.nextId = s.nextId;
      fresh.running = s.running; // prompts still open in the host are answered later,
      fresh.elsewhere = s.running; // but they are the transcript's that was cleared: nothing here runs,
      fresh.turnsOpen = 0; // and a prompt of this one does not wait for them (another session's turns)
      fresh.busy = false;
      fresh.turn = s.turn;
      fresh.commands = s.commands;
      fresh.setup = s.setup;
      fresh.images = s.images;
      fresh.undoAsked = s.undoAsked; // the /undo sent is still answered (its turn-end)
      fresh.waiting = s.waiting; // the host says again what waits elsewhere once the shown session changed
      if (e.replay) {
        // the loaded session's mode and model are said with its answer: never the last session's meanwhile
        fresh.replaying = true;
        fresh.selects = [];
      }
      return fresh;
    }
    case "session":
      if (s.currentSession !== e.sessionId) s.title = undefined; // the title was the previous session's
      s.currentSession = e.sessionId;
      return s;
    case "load-refused":
      endReplay(s);
      s.currentSession = e.current;
      dropActions(s);
      if (e.busy) {
        // the text says it all; the server's error names protocol fields (_meta.agentServer.takeOver, session/fork): the log has it
        push(s, { type: "notice", level: "error", text: busyText(e.sessionId, e.busy, e.current), actions: busyActions(e.sessionId, e.busy) });
        return s;
      }
      push(s, {
        type: "notice",
        level: "error",
        text: `Could not load session ${e.sessionId}: ${e.error}. ${e.current ? `The panel stays on session ${e.current}.` : "No session is open: the next prompt starts a new one."}`,
      });
      return s;
    case "user":
      if (s.replaying) { // the replay still arriving goes above it
        push(s, { type: "user", text: e.text, afterReplay: true });
        return s;
      }
      // A prompt sent while another prompt's turn runs waits on the server: shown queued, last.
      push(s, { type: "user", text: e.text, queued: s.turnsOpen > 0 && !isImmediateCommand(e.text), ...(s.turnsOpen > 0 && waitsForTurn(e.text) ? { waits: true } : {}) });
      return s;
    case "update":
      applyUpdate(s, e.update, e.at);
      return s;
    case "turn-start":
      s.elsewhere = Math.min(s.elsewhere, s.running);
      s.running++;
      if (e.text === undefined || !isImmediateCommand(e.text)) {
        if (s.turnsOpen === 0) s.turn++; // a queued prompt's turn starts when it runs (turn-end)
        s.turnsOpen++;
      } else {
        s.commandsOpen = (s.commandsOpen ?? 0) + 1;
      }
      s.busy = true;
      return s;
    case "turn-end": {
      if (e.text !== undefined && /^\/undo(\s|$)/.test(e.text.trim())) s.undoAsked = false; // answered: Undo may be clicked again
      s.elsewhere = Math.min(s.elsewhere, s.running);
      if (s.elsewhere > 0 && (e.sessionId === undefined || e.sessionId !== s.currentSession)) {
        // a turn of the transcript the panel left (New, a load): nothing shown here is its
        s.elsewhere--;
        s.running = Math.max(0, s.running - 1);
        s.busy = s.running > s.elsewhere;
        return s;
      }
      // Only the last open prompt's answer ends the work: an earlier answer (a slash command's)
      // must not mark the running turn's tool calls unfinished or its permission questions answered.
      s.running = Math.max(0, s.running - 1);
      s.elsewhere = Math.min(s.elsewhere, s.running);
      s.busy = s.running > s.elsewhere;
      for (const i of s.busy ? [] : s.items) {
        if (i.type === "tool" && (i.status === "pending" || i.status === "in_progress")) {
          i.status = "unfinished";
          i.rev++;
        }
        if (i.type === "permission" && !i.outcome) {
          i.outcome = "cancelled";
          i.rev++;
        }
      }
      // one notice for one event: a server that died under the turn was already reported (with
      // its stderr tail and what happens next), its prompts' error answers only repeat it
      const at = e.text !== undefined && isImmediateCommand(e.text) ? tail(s) : afterTurn(s);
      if (e.error && !s.exitShown) push(s, { type: "notice", level: "error", text: e.error, errorKind: e.errorKind }, at);
      else if (e.stopReason && e.stopReason !== "end_turn") push(s, { type: "notice", level: e.stopReason === "cancelled" ? "info" : "warning", text: `Stopped: ${e.stopReason}` }, at);
      s.openText = undefined; // the next turn's text starts its own message
      if (s.running === 0) s.exitShown = false;
      if (e.text !== undefined && isImmediateCommand(e.text)) s.commandsOpen = Math.max(0, (s.commandsOpen ?? 0) - 1);
      if (e.text === undefined || !isImmediateCommand(e.text)) {
        s.streamingMessage = undefined; // a command answered meanwhile leaves the turn's message open
        s.turnsOpen = Math.max(0, s.turnsOpen - 1);
        for (const i of s.items) {
          if (i.type === "user" && i.waits) { // the turn it waited for is over: it runs now
            i.waits = false;
            i.rev++;
          }
        }
        if (s.turnsOpen > 0) s.turn++; // the next queued prompt's turn runs now
        // that turn is over: the oldest queued prompt runs now, below it
        const next = s.items[tail(s)];
        if (next && next.type === "user" && next.queued) {
          next.queued = false;
          next.rev++;
        }
      }
      return s;
    }
    case "loaded":
      endReplay(s);
      if (e.live) {
        // a turn of this session still running in this window (the panel showed another session
        // meanwhile): it is this transcript's again — its open calls go on, Stop stops it
        const n = e.live.turns + e.live.commands;
        s.elsewhere = Math.max(0, s.elsewhere - n);
        s.turnsOpen += e.live.turns;
        s.commandsOpen = (s.commandsOpen ?? 0) + e.live.commands;
        s.busy = s.running > s.elsewhere;
        s.openText = undefined;
        s.streamingMessage = undefined;
        return s;
      }
      // a replayed call has its final status; one replayed still open (its process died, or another
      // agent replays a call that never ended) runs nowhere the panel can see or stop
      for (const i of s.items) {
        if (i.type === "tool" && i.sessionId === e.sessionId && i.startedAt === undefined && (i.status === "pending" || i.status === "in_progress")) {
          i.status = "unfinished";
          i.rev++;
        }
      }
      s.openText = undefined;
      s.streamingMessage = undefined;
      return s;
    case "server-exited":
      if (s.running > 0) s.exitShown = true;
      push(s, { type: "notice", level: "error", text: `${e.message}. ${e.next ?? "The session is resumed when the server is back."}`, detail: e.stderrTail });
      return s;
    case "notice":
      s.undoAsked = false; // a prompt that could not be sent is said by a notice, never answered
      if (e.actions) dropActions(s); // the choice offered now replaces an older one
      push(s, { type: "notice", level: e.level, text: e.text, errorKind: e.errorKind, ...(e.actions ? { actions: e.actions } : {}) });
      return s;
    case "setup":
      s.setup = e.setup;
      return s;
    case "capabilities":
      s.images = e.image;
      // the commands listed before any session (a session's available_commands_update replaces them)
      if (Array.isArray(e.commands)) s.commands = toCommands(e.commands);
      return s;
    case "mention": // the prompt area's, not the transcript's (main.ts)
      return s;
    case "permission":
      push(s, { type: "permission", permId: e.id, title: e.title, reason: e.reason, options: e.options, hasDiff: e.hasDiff, command: e.command });
      return s;
    case "permission-done":
      for (const i of s.items) if (i.type === "permission" && i.permId === e.id) { i.outcome = e.outcome; i.rev++; }
      return s;
    case "proposal": {
      const found = s.items.find((i): i is Extract<Item, { type: "proposal" }> => i.type === "proposal" && i.proposalId === e.id);
      if (found) { found.hunks = e.hunks; found.stale = e.stale; found.rev++; }
      else push(s, { type: "proposal", proposalId: e.id, label: e.label, files: e.files, ops: e.ops, hunks: e.hunks, stale: e.stale, ...(e.notes?.length ? { notes: e.notes } : {}) });
      return s;
    }
    case "proposal-done": {
      let found = s.items.find((i): i is Extract<Item, { type: "proposal" }> => i.type === "proposal" && i.proposalId === e.id);
      if (!found) found = push(s, { type: "proposal", proposalId: e.id, label: e.id, files: [], ops: [], hunks: [] }) as Extract<Item, { type: "proposal" }>;
      found.outcome = e.outcome;
      found.message = e.message;
      if (e.edited) found.edited = true;
      if (e.saved === false) found.saved = false;
      if (e.saveChanged) found.saveChanged = true;
      // what was accepted and what was rejected: the changes still pending when it was decided
      const rest = e.outcome === "applied" ? "accepted" : e.outcome === "partial" || e.outcome === "rejected" ? "rejected" : undefined;
      if (rest) found.hunks = found.hunks.map((h) => (h.state === "pending" ? { ...h, state: rest } : h));
      found.rev++;
      return s;
    }
    case "config":
      s.selects = e.selects;
      return s;
    case "waiting":
      s.waiting = e.questions;
      return s;
    case "sessions":
      s.sessions = e.sessions.map((x) => ({ sessionId: x.sessionId, title: x.title }));
      s.currentSession = e.current; // none: no session is open (a refused load leaves none chosen)
      return s;
  }
}
