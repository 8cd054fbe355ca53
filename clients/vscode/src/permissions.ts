/**
 * `session/request_permission`: the question goes to the panel with its options (and, for an edit,
 * a read-only diff of the change); the answer is what the user picked — nothing else allows.
 *
 * A question of a session the panel does not show is not drawn in its transcript: the panel says that
 * session waits (`waiting`), and shows the question there (`repost`) once it is shown.
 *
 * Must not: allow on silence, on a closed panel, or on an error (those answer `cancelled`).
 */

import * as vscode from "vscode";
import type * as acp from "@agentclientprotocol/sdk";
import type { ChatEvent, WaitingQuestion } from "./protocol";
import { shownPath } from "./diff";

export const PERMISSION_DIFF_SCHEME = "agent-permission";

interface Pending {
  params: acp.RequestPermissionRequest;
  resolve: (r: acp.RequestPermissionResponse) => void;
  /** The question as the panel was sent it (sent again when its session is shown again). */
  event?: ChatEvent;
  /** Its diffs not opened yet: a question of a session the panel did not show opens none over the
   * user's work; they open once its session is shown (`repost`). */
  diffs?: acp.Diff[];
}

export class Permissions implements vscode.TextDocumentContentProvider {
  private readonly pending = new Map<string, Pending>();
  private readonly texts = new Map<string, string>();
  private next = 1;

  /** `shown(sessionId)`: the panel shows that session's transcript; `changed`: a question was asked or answered. */
  constructor(
    private readonly post: (e: ChatEvent) => void,
    private readonly shown: (sessionId: string) => boolean = () => true,
    private readonly changed: () => void = () => {},
    /** Where the question's diff opens: behind the user's editor unless the panel has the keyboard (keyboard.ts). */
    private readonly place: () => { preserveFocus: true; background: boolean } = () => ({ preserveFocus: true, background: false }),
  ) {}

  register(): vscode.Disposable {
    return vscode.workspace.registerTextDocumentContentProvider(PERMISSION_DIFF_SCHEME, this);
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.query) ?? "";
  }

  /** Asks the user; resolves with `selected` only for an option the user clicked. */
  request(params: acp.RequestPermissionRequest, signal: AbortSignal): Promise<acp.RequestPermissionResponse> {
    const id = `perm${this.next++}`;
    const call = params.toolCall;
    const content = call.content ?? [];
    let reason = content
      .map((c) => (c.type === "content" && c.content.type === "text" ? c.content.text : ""))
      .filter(Boolean)
      .join("\n");
    const raw = call.rawInput as { command?: unknown } | undefined;
    // a shell command is shown whole by the card (commandParts), once: not again inside the words
    const command = typeof raw?.command === "string" && raw.command.trim() ? raw.command : undefined;
    if (command !== undefined) reason = withoutCommand(reason, command);
    const diffs = content.filter((c): c is acp.Diff & { type: "diff" } => c.type === "diff");
    const result = new Promise<acp.RequestPermissionResponse>((resolve) => this.pending.set(id, { params, resolve }));
    const event: ChatEvent = {
      kind: "permission",
      id,
      title: call.title ?? "The agent asks for permission",
      reason,
      options: params.options.map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind })),
      hasDiff: diffs.length > 0,
      ...(command !== undefined ? { command } : {}),
    };
    this.pending.get(id)!.event = event;
    if (this.shown(params.sessionId)) this.post(event);
    this.changed();
    signal.addEventListener("abort", () => this.answer(id, null), { once: true });
    if (this.shown(params.sessionId)) for (const [i, d] of diffs.entries()) void this.showDiff(id, i, d);
    else if (diffs.length > 0) this.pending.get(id)!.diffs = diffs;
    return result;
  }

  /** The question's diff: `agent-permission:/<the file's workspace-relative path>?<id>/<i>/<side>` (the
   * breadcrumb reads as the file's path; the ids ride in the query). */
  private async showDiff(id: string, i: number, d: acp.Diff): Promise<void> {
    const shown = shownPath(vscode.Uri.file(d.path));
    const left = `${id}/${i}/old`;
    const right = `${id}/${i}/new`;
    this.texts.set(left, d.oldText ?? "");
    this.texts.set(right, d.newText);
    await vscode.commands.executeCommand(
      "vscode.diff",
      vscode.Uri.from({ scheme: PERMISSION_DIFF_SCHEME, path: shown, query: left }),
      vscode.Uri.from({ scheme: PERMISSION_DIFF_SCHEME, path: shown, query: right }),
      `${shown.slice(1)}: change the agent asks to make${partialNote(d)}`,
      { preview: true, ...this.place() },
    );
  }

  /** The panel's answer (`null`: dismissed). An unknown option id is a cancel, never an allow. */
  answer(id: string, optionId: string | null): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    const known = optionId !== null && p.params.options.some((o) => o.optionId === optionId);
    p.resolve(known ? { outcome: { outcome: "selected", optionId: optionId! } } : { outcome: { outcome: "cancelled" } });
    if (this.shown(p.params.sessionId)) this.post({ kind: "permission-done", id, outcome: known ? optionId! : "cancelled" });
    this.changed();
    for (const key of [...this.texts.keys()]) if (key.startsWith(`${id}/`)) this.texts.delete(key);
    // the question's diff closes with its answer (it showed a change that is now decided)
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.scheme === PERMISSION_DIFF_SCHEME && t.input.modified.query.startsWith(`${id}/`));
    if (tabs.length > 0) void vscode.window.tabGroups.close(tabs);
  }

  /** Posts again the questions of `sessionId` still waiting (the panel was cleared by a session switch
   * and shows that session again): answerable as before, same ids. */
  repost(sessionId: string): void {
    for (const [id, p] of this.pending) {
      if (p.params.sessionId !== sessionId) continue;
      if (p.event) this.post(p.event);
      const diffs = p.diffs ?? [];
      p.diffs = undefined;
      for (const [i, d] of diffs.entries()) void this.showDiff(id, i, d);
    }
  }

  /** The questions still waiting, by session (`what`: the question's title). */
  waiting(): WaitingQuestion[] {
    return [...this.pending.values()].map((p) => ({ sessionId: p.params.sessionId, what: p.params.toolCall.title ?? "a permission" }));
  }

  /** Every open question is cancelled (the turn ended, the server died, the panel went away). */
  cancelAll(): void {
    for (const id of [...this.pending.keys()]) this.answer(id, null);
  }
}

/**
 * A big file's diff carries only the changed region (`_meta.agentServer.diff`, docs/protocol.md):
 * the title says where in the file it starts, since the diff editor numbers its lines from 1.
 */
export function partialNote(d: acp.Diff): string {
  const meta = (d._meta as { agentServer?: { diff?: { partial?: unknown; oldLine?: unknown } } } | null | undefined)?.agentServer?.diff;
  if (meta?.partial !== true) return "";
  return typeof meta.oldLine === "number" ? ` (the changed region, from line ${meta.oldLine})` : " (the changed region)";
}

/** `reason` without the code block or inline code that only repeats `command` (the card shows the
 * command itself, whole). */
export function withoutCommand(reason: string, command: string): string {
  let out = reason;
  for (const fence of ["```", "~~~"]) {
    const start = out.search(new RegExp(`(^|\\n)${fence}[^\\n]*\\n`));
    if (start < 0) continue;
    const open = out.indexOf("\n", start + (out[start] === "\n" ? 1 : 0)) + 1;
    if (out.startsWith(`${command}\n${fence}`, open)) out = (out.slice(0, start) + out.slice(open + command.length + 1 + fence.length)).trimEnd();
  }
  return out.replace("`" + command + "`", "").trim();
}
