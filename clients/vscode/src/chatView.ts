/**
 * The host side of the agent panel (a webview view): the HTML with a strict Content-Security-Policy,
 * the event log of the current session (replayed when the webview (re)loads), events batched into
 * one message per ~16 ms, and messages from the webview checked and routed to the controller.
 *
 * Must not: hold state the event stream cannot rebuild, or trust a message from the webview.
 */

import * as vscode from "vscode";
import { randomBytes } from "node:crypto";
import { type ChatEvent, type HostToWebview, type WebviewToHost, isWebviewMessage } from "./protocol";

export const VIEW_ID = "agentServer.panel";

const TEXT_CHUNKS = new Set(["agent_message_chunk", "agent_thought_chunk"]);

function chunkText(e: ChatEvent): string | undefined {
  if (e.kind !== "update" || !TEXT_CHUNKS.has(e.update.sessionUpdate)) return undefined;
  // only a plain chunk: `sessionUpdate`, `content` and its `messageId` (a `_meta` — a retry notice — stays apart)
  if (Object.keys(e.update).some((k) => k !== "sessionUpdate" && k !== "content" && k !== "messageId")) return undefined;
  const c = e.update.content as { type?: string; text?: unknown } | undefined;
  return c?.type === "text" && typeof c.text === "string" && Object.keys(c).length === 2 ? c.text : undefined;
}

/**
 * Appends `e` to `events`, joining a text chunk to a text chunk of the same kind and message
 * (`messageId`) just before it (the panel's fold appends them to the same message either way): a long
 * answer in small deltas is a few events in the replayed history and one per batch on the wire, not
 * one per delta.
 */
export function appendEvent(events: ChatEvent[], e: ChatEvent): void {
  const text = chunkText(e);
  const last = events[events.length - 1];
  const before = last === undefined || text === undefined ? undefined : chunkText(last);
  if (before === undefined || last?.kind !== "update" || e.kind !== "update" || last.update.sessionUpdate !== e.update.sessionUpdate || last.update.messageId !== e.update.messageId) {
    events.push(e);
    return;
  }
  // a new event object: the one replaced may also sit in the other list (history and queue share them)
  const messageId = e.update.messageId === undefined ? {} : { messageId: e.update.messageId };
  events[events.length - 1] = { kind: "update", update: { sessionUpdate: e.update.sessionUpdate, content: { type: "text", text: before + text }, ...messageId } };
}

export class ChatView implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private history: ChatEvent[] = [];
  private queue: ChatEvent[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private ready = false;
  /** Facts that outlive a New session (the first-run page's, the agent's capabilities): the last of each kind. */
  private sticky = new Map<string, ChatEvent>();

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (m: WebviewToHost) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    view.webview.options = { enableScripts: true, localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")] };
    view.webview.html = this.html(view.webview);
    view.webview.onDidReceiveMessage((m: unknown) => {
      if (!isWebviewMessage(m)) return;
      if (m.type === "ready") {
        this.ready = true;
        this.queue = [];
        this.send([{ kind: "reset" }, ...this.sticky.values(), ...this.history]);
      }
      this.onMessage(m);
    });
    view.onDidChangeVisibility(() => {
      if (!view.visible) this.onMessage({ type: "focus", focused: false });
    });
    view.onDidDispose(() => {
      this.view = undefined;
      this.ready = false;
      this.onMessage({ type: "focus", focused: false });
    });
  }

  /** Records an event and sends it with the next batch. `reset` starts a new history. */
  post(event: ChatEvent): void {
    if (event.kind === "reset") this.history = [];
    if (event.kind === "setup" || event.kind === "capabilities" || event.kind === "waiting") this.sticky.set(event.kind, event);
    // a mention belongs to the prompt area now, not to a replay of the transcript
    else if (event.kind !== "sessions" && event.kind !== "mention") appendEvent(this.history, event);
    if (!this.view || !this.ready) return;
    appendEvent(this.queue, event);
    this.timer ??= setTimeout(() => this.flush(), 16);
  }

  private flush(): void {
    this.timer = undefined;
    const events = this.queue;
    this.queue = [];
    if (events.length > 0) this.send(events);
  }

  private send(events: ChatEvent[]): void {
    const msg: HostToWebview = { type: "events", events };
    void this.view?.webview.postMessage(msg);
  }

  /** Reveals the panel (focus stays where it is unless `focus`: a panel never shown yet opens with
   * VS Code's `<view>.open`, which keeps the focus; `<view>.focus` took it from the user's editor). */
  async reveal(focus = false): Promise<void> {
    if (this.view) this.view.show(!focus);
    else await vscode.commands.executeCommand(focus ? `${VIEW_ID}.focus` : `${VIEW_ID}.open`, ...(focus ? [] : [{ preserveFocus: true }]));
  }

  private html(webview: vscode.Webview): string {
    const nonce = randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "webview.css"));
    // VS Code's icon font (@vscode/codicons, packaged in dist/codicons): its CSS and font come from the
    // extension's own resource roots, the only origin style-src and font-src allow
    const codicons = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "codicons", "codicon.css"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      `font-src ${webview.cspSource}`,
      "img-src 'none'",
      "connect-src 'none'",
      "frame-src 'none'",
      "form-action 'none'",
      "base-uri 'none'",
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${codicons}" id="codicons">
<link rel="stylesheet" href="${style}">
<title>Agent</title></head>
<body><div id="app" data-state="loading"></div>
<script nonce="${nonce}" src="${script}"></script></body></html>`;
  }
}
