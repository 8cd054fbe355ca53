/**
 * The panel's webview: folds the host's events into the chat state and repaints at most once per
 * animation frame, only the items whose revision changed; a streaming answer is drawn incrementally
 * (each markdown block rendered once, when it closes) and items far from the viewport keep only their
 * height (issue 30: a 2 MB answer must not freeze the panel); a burst or a `session/load` replay draws its
 * end first and the rest when scrolled to (newcomer 4 finding 1). Input with history, stop button,
 * session / mode / model pickers, permission and proposal cards.
 *
 * Must not: insert untrusted text as HTML (model text goes through `renderMarkdown`; everything else
 * is `textContent`), or talk to anything but the host.
 */

import type { ChatEvent, ErrorKind, HostToWebview, ImageView, MentionView, WebviewToHost } from "../src/protocol";
import { BlockSplitter, PAINT_BUDGET, blockCost, blockCuts, drawnFrom, htmlParts, tailPieces } from "./blocks";
import { commandParts } from "./command";
import { renderMarkdown, isSafeLink } from "./render";
import { type ChatState, type Item, activity, askUndo, completeCommand, exitText, fold, formatElapsed, initialState, isRestoreProposal, isStreaming, outcomeWord, proposalMessage, permissionAnswer, promptToGiveBack, shortCommand, statusWord, toolReason, turnChanges, waitingElsewhere } from "./state";

declare function acquireVsCodeApi(): { postMessage(m: WebviewToHost): void; getState(): unknown; setState(s: unknown): void };

const vscode = acquireVsCodeApi();
const send = (m: WebviewToHost) => vscode.postMessage(m);

let state: ChatState = initialState();
let frame = 0;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A VS Code codicon (the @vscode/codicons font, packaged with the extension): `name`, or `name~spin`. */
function icon(name: string): HTMLElement {
  const [glyph, modifier] = name.split("~");
  const node = el("span", `codicon codicon-${glyph}${modifier ? ` codicon-modifier-${modifier}` : ""}`);
  node.setAttribute("aria-hidden", "true");
  return node;
}

/** A button with its codicon before the label (`label` empty: an icon button, named by its title). */
function button(label: string, cls: string, onClick: () => void, title?: string, iconName?: string): HTMLButtonElement {
  const b = el("button", cls);
  b.type = "button";
  if (iconName) {
    b.append(icon(iconName));
    b.classList.add("has-icon");
  }
  if (label) b.append(iconName ? el("span", "label", label) : document.createTextNode(label));
  else b.setAttribute("aria-label", title ?? "");
  if (title) b.title = title;
  b.addEventListener("click", onClick);
  return b;
}

/** Each tool kind's codicon (ACP `ToolKind`), and each status's (a spinner only while it runs). */
const KIND_ICONS: Record<string, string> = { read: "file", edit: "edit", delete: "trash", move: "arrow-both", search: "search", execute: "terminal", think: "lightbulb", fetch: "globe", switch_mode: "settings-gear", other: "tools" };
const STATUS_ICONS: Record<string, string> = { pending: "circle-large-outline", in_progress: "loading~spin", completed: "pass", failed: "error", unfinished: "circle-slash" };
const NOTICE_ICONS: Record<string, string> = { error: "error", warning: "warning", info: "info" };

// ---- layout -----------------------------------------------------------------------------------
const app = document.getElementById("app")!;
const header = el("div", "header");
// one way to pick a session: the searchable QuickPick (titles, when each was last used; Agent: Open Session…)
const sessionButton = button("New session", "session-picker", () => send({ type: "pickSession" }), "Sessions of this workspace (click or Enter: search and open one)", "history");
sessionButton.append(icon("chevron-down"));
const newButton = button("New", "new-session", () => send({ type: "newSession" }), "Agent: New Session", "add");
const pickers = el("div", "pickers");
header.append(sessionButton, newButton, pickers);
const transcript = el("div", "transcript");
transcript.setAttribute("role", "log");
/**
 * A question waiting for the user's answer (a permission, an edit proposal) drawn out of sight — the
 * user had scrolled up to read while the turn ran: a bar under the transcript names it and brings it
 * into view. The transcript is not moved under the reader (a chat panel never yanks someone who
 * scrolled away); the bar cannot be missed and is announced to a screen reader.
 */
const questionBar = button("", "question-waiting", () => revealQuestion(), "Show the question the agent waits on", "arrow-down");
questionBar.hidden = true;
questionBar.setAttribute("aria-live", "polite");
/** Questions of other sessions than the one shown (their running turns wait for the user): one row
 * each, with the way to that session (its question is shown there, answerable). */
const elsewhereBox = el("div", "waiting-elsewhere");
elsewhereBox.hidden = true;
elsewhereBox.setAttribute("aria-live", "polite");
/** The first-run page (an empty transcript): the endpoint and model in use, and the ways forward. */
const emptyState = el("div", "empty-state");
/** "Working…" before the first token and between steps, "Thinking…" while a thought streams. */
const workingLine = el("div", "working");
workingLine.setAttribute("aria-live", "polite");
const planBox = el("div", "plan");
/** The Changes view: what the newest turn that edited files changed, per file, and "Undo this turn". */
const changesBox = el("div", "changes");
const footer = el("div", "footer");
const usageLine = el("div", "usage");
/** Slash-command completion (from `available_commands_update`). */
const completions = el("div", "completions");
completions.setAttribute("role", "listbox");
/** What goes with the prompt: `@` mentions and images. */
const attachments = el("div", "attachments");
const input = el("textarea", "input");
input.placeholder = "Ask the agent (Enter to send, Shift+Enter for a new line, @ to add context, / for commands)";
input.rows = 3;
const sendButton = button("Send", "send", () => submit(), "Send (Enter)", "send");
const stopButton = button("Stop", "stop", () => send({ type: "cancel" }), "Agent: Cancel", "debug-stop");
const undoButton = button("Undo", "undo", () => clickUndo(), "Take back the files the newest agent turn changed (/undo)", "discard");
const mentionButton = button("", "mention", () => send({ type: "pickMention" }), "Add context: a file, a folder, the selection, the problems or the terminal's output", "mention");
const buttons = el("div", "buttons");
buttons.append(mentionButton, undoButton, sendButton, stopButton);
footer.append(usageLine, completions, attachments, input, buttons);
app.append(header, emptyState, transcript, questionBar, elsewhereBox, workingLine, planBox, changesBox, footer);
app.dataset.state = "idle";

/** The buttons that lead out of a first run or an authentication or connection error. */
function setupButtons(kind?: ErrorKind): HTMLElement {
  const row = el("div", "card-buttons setup-actions");
  const action = (a: "setApiKey" | "signIn" | "openSettings" | "showLog") => () => send({ type: "action", action: a });
  row.append(
    button("Set API Key", "set-api-key", action("setApiKey"), "Store a key in VS Code's secret storage (passed to the server as AGENT_SERVER_API_KEY)", "key"),
    button("Sign in", "sign-in", action("signIn"), "Run `agent-server login` in a terminal: provider, key and model, checked and stored", "sign-in"),
    button("Open Settings", "open-settings", action("openSettings"), "The agentServer settings (server path, base URL, model)", "settings-gear"),
    button("Show Server Log", "show-log", action("showLog"), "The agent-server output channel", "output"),
  );
  if (kind) row.dataset.errorKind = kind;
  return row;
}


// ---- input with history -------------------------------------------------------------------------
const saved = (vscode.getState() as { history?: string[] } | undefined) ?? {};
const history: string[] = Array.isArray(saved.history) ? saved.history.slice(-100) : [];
let historyPos = history.length;

/** Mentions picked (the host holds their content: sent back by id) and images, until the prompt goes. */
let pendingMentions: { id: string; mention: MentionView }[] = [];
let pendingImages: ImageView[] = [];
let completionIndex = 0;

/** An Undo button: one click, one `/undo` — the buttons are disabled until its answer (finding 3b). */
function clickUndo(): void {
  if (!askUndo(state)) return;
  sendPrompt("/undo");
  schedule();
}

function sendPrompt(text: string): void {
  following = true; // the answer to what the user just sent is shown, wherever they had scrolled
  send({ type: "prompt", text });
}

function submit(): void {
  const text = input.value.trim();
  if (!text && pendingMentions.length === 0 && pendingImages.length === 0) return;
  if (text) {
    history.push(text);
    historyPos = history.length;
    vscode.setState({ history: history.slice(-100) });
  }
  input.value = "";
  const mentions = pendingMentions.map((m) => m.id);
  const images = pendingImages;
  pendingMentions = [];
  pendingImages = [];
  paintAttachments();
  paintCompletions();
  following = true; // the answer to what the user just sent is shown, wherever they had scrolled
  send(mentions.length || images.length ? { type: "prompt", text, mentions, images } : { type: "prompt", text });
}

function paintAttachments(): void {
  const chips: HTMLElement[] = [];
  pendingMentions.forEach((m, i) => {
    const chip = el("span", `chip chip-${m.mention.kind}`);
    chip.append(icon(({ file: "file", folder: "folder", selection: "selection", problems: "warning", terminal: "terminal" } as Record<string, string>)[m.mention.kind] ?? "mention"), document.createTextNode(m.mention.label));
    chip.append(button("", "chip-remove", () => { pendingMentions.splice(i, 1); paintAttachments(); }, "Remove", "close"));
    chips.push(chip);
  });
  pendingImages.forEach((img, i) => {
    const chip = el("span", "chip chip-image");
    chip.append(icon("file-media"), document.createTextNode(`${img.name ?? "image"} (${Math.round((img.data.length * 3) / 4 / 1024)} KB)`));
    chip.append(button("", "chip-remove", () => { pendingImages.splice(i, 1); paintAttachments(); }, "Remove", "close"));
    chips.push(chip);
  });
  attachments.replaceChildren(...chips);
  attachments.hidden = chips.length === 0;
}

function paintCompletions(): void {
  const found = document.activeElement === input ? completeCommand(state.commands, input.value) : [];
  completionIndex = Math.min(completionIndex, Math.max(0, found.length - 1));
  completions.replaceChildren(
    ...found.map((c, i) => {
      const row = el("div", `completion${i === completionIndex ? " selected" : ""}`);
      row.setAttribute("role", "option");
      row.dataset.command = c.name;
      row.append(el("span", "completion-name", `/${c.name}${c.hint ? ` ${c.hint}` : ""}`), el("span", "completion-description", c.description));
      row.addEventListener("mousedown", (ev) => {
        ev.preventDefault(); // the input keeps the focus
        complete(c.name);
      });
      return row;
    }),
  );
  completions.hidden = found.length === 0;
}

function complete(name: string): void {
  input.value = `/${name} `;
  input.setSelectionRange(input.value.length, input.value.length);
  paintCompletions();
}

/** Images pasted or dropped: sent as image blocks when the agent takes them, else said so. */
function addImages(files: File[]): void {
  for (const file of files) {
    if (!state.images) {
      state = fold(state, { kind: "notice", level: "warning", text: `This agent does not take images in a prompt (promptCapabilities.image is off): ${file.name || "the image"} was not attached.` });
      schedule();
      continue;
    }
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      const comma = url.indexOf(",");
      pendingImages.push({ mimeType: file.type, data: url.slice(comma + 1), name: file.name || undefined });
      paintAttachments();
    };
    reader.readAsDataURL(file);
  }
}

function imageFiles(list: DataTransferItemList | FileList | null | undefined): File[] {
  const out: File[] = [];
  for (const entry of Array.from((list ?? []) as ArrayLike<DataTransferItem | File>)) {
    const file = entry instanceof File ? entry : entry.kind === "file" ? entry.getAsFile() : null;
    if (file && file.type.startsWith("image/")) out.push(file);
  }
  return out;
}

input.addEventListener("paste", (ev) => {
  const files = imageFiles(ev.clipboardData?.items);
  if (files.length === 0) return;
  ev.preventDefault();
  addImages(files);
});
input.addEventListener("dragover", (ev) => {
  if (ev.dataTransfer?.types.includes("Files")) ev.preventDefault();
});
input.addEventListener("drop", (ev) => {
  const files = imageFiles(ev.dataTransfer?.files);
  if (files.length === 0) return;
  ev.preventDefault();
  addImages(files);
});

input.addEventListener("input", (ev) => {
  paintCompletions();
  // `@` typed at the start or after a space: the host asks what to attach (the `@` is then removed)
  const e = ev as InputEvent;
  const at = input.selectionStart - 1;
  if (e.data === "@" && input.value[at] === "@" && (at === 0 || /\s/.test(input.value[at - 1]!))) {
    input.value = input.value.slice(0, at) + input.value.slice(at + 1);
    input.setSelectionRange(at, at);
    send({ type: "pickMention" });
  }
});
input.addEventListener("blur", () => paintCompletions());
input.addEventListener("focus", () => paintCompletions());

input.addEventListener("keydown", (ev) => {
  const found = completeCommand(state.commands, input.value);
  if (found.length > 0 && !ev.isComposing && (ev.key === "ArrowDown" || ev.key === "ArrowUp" || ev.key === "Tab" || ev.key === "Escape" || (ev.key === "Enter" && !ev.shiftKey))) {
    if (ev.key === "Escape") {
      input.value = "";
      paintCompletions();
      return;
    }
    ev.preventDefault();
    if (ev.key === "ArrowDown") completionIndex = (completionIndex + 1) % found.length;
    else if (ev.key === "ArrowUp") completionIndex = (completionIndex + found.length - 1) % found.length;
    else {
      const chosen = found[Math.min(completionIndex, found.length - 1)]!;
      // Enter on a command that is already whole and takes no argument sends it
      if (ev.key === "Enter" && input.value === `/${chosen.name}` && !chosen.hint) submit();
      else complete(chosen.name);
      return;
    }
    paintCompletions();
    return;
  }
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    submit();
  } else if (ev.key === "ArrowUp" && input.selectionStart === 0 && historyPos > 0) {
    ev.preventDefault();
    input.value = history[--historyPos] ?? "";
  } else if (ev.key === "ArrowDown" && input.selectionEnd === input.value.length && historyPos < history.length) {
    ev.preventDefault();
    historyPos++;
    input.value = history[historyPos] ?? "";
  }
});

transcript.addEventListener("click", (ev) => {
  const a = (ev.target as HTMLElement).closest("a");
  if (!a) return;
  ev.preventDefault();
  const href = a.getAttribute("href") ?? "";
  if (isSafeLink(href)) send({ type: "openLink", href });
});

// ---- items --------------------------------------------------------------------------------------
/** A shell command shown whole in a question: runs of whitespace as a marker, control characters escaped. */
function commandBlock(command: string): HTMLElement {
  const pre = el("pre", "command");
  for (const part of commandParts(command)) pre.append(part.kind === "text" ? document.createTextNode(part.text) : el("span", `command-${part.kind}`, part.text));
  return pre;
}

function renderItem(item: Item): HTMLElement {
  switch (item.type) {
    case "user": {
      if (item.afterReplay) {
        const node = el("div", "item user queued", item.text);
        node.prepend(el("div", "queued-note", "Sent once the session's history has loaded"));
        return node;
      }
      if (item.waits) {
        const waiting = el("div", "item user queued", item.text);
        waiting.prepend(el("div", "queued-note", "Waits for the running turn: answered once it ends"));
        return waiting;
      }
      if (!item.queued) return el("div", "item user", item.text);
      const node = el("div", "item user queued", item.text);
      node.prepend(el("div", "queued-note", "Queued: sent when the running turn ends"));
      return node;
    }
    case "agent": // drawn block by block (updateAgent); a command's answer is plain text, its lines kept
      return item.command ? el("div", "item agent command-answer", item.text) : el("div", "item agent markdown");
    case "thought": {
      const slot = slots.get(item.id);
      const wasOpen = (slot?.el.firstElementChild as HTMLDetailsElement | null)?.open ?? false;
      const node = slot ? thoughtNode(slot, item) : el("details", "item thought");
      (node as HTMLDetailsElement).open = wasOpen;
      return node;
    }
    case "tool": {
      const node = el("div", `item tool status-${item.status} kind-${item.kind}`);
      node.dataset.status = item.status;
      node.dataset.toolCallId = item.toolCallId;
      const head = el("div", "tool-head");
      const status = el("span", "tool-status", statusWord(item.status));
      status.title = item.status;
      const statusIcon = icon(STATUS_ICONS[item.status] ?? "circle-large-outline");
      statusIcon.classList.add("tool-status-icon");
      const kindIcon = icon(KIND_ICONS[item.kind] ?? "tools");
      kindIcon.classList.add("tool-kind-icon");
      kindIcon.title = item.kind;
      const where = item.locations[0];
      const title = el(where ? "a" : "span", "tool-title", item.title || item.kind);
      if (where) {
        // opens the file at its location (the host checks the path)
        title.setAttribute("role", "link");
        title.tabIndex = 0;
        title.title = `Open ${where.path}${where.line ? `:${where.line}` : ""}`;
        title.addEventListener("click", (ev) => {
          ev.preventDefault();
          ev.stopPropagation();
          send({ type: "openLocation", path: where.path, line: where.line });
        });
      }
      head.append(statusIcon, status, kindIcon, title);
      if (item.startedAt !== undefined) {
        const elapsed = el("span", "tool-elapsed", formatElapsed((item.endedAt ?? Date.now()) - item.startedAt));
        elapsed.dataset.started = String(item.startedAt);
        if (item.endedAt === undefined && (item.status === "pending" || item.status === "in_progress")) elapsed.dataset.running = "true";
        head.append(elapsed);
      }
      node.append(head);
      if (item.command !== undefined) {
        // a card asks nothing: a long command is shortened, whole in its tooltip (a question shows it whole)
        const short = shortCommand(item.command);
        const pre = commandBlock(short.text);
        pre.classList.add("tool-command");
        if (short.shortened) {
          pre.title = item.command;
          pre.dataset.shortened = "true";
        }
        node.append(pre);
      }
      const reason = toolReason(item);
      if (reason) node.append(el("div", "tool-reason", reason));
      if (item.diffs.length) {
        const row = el("div", "tool-diffs", "diff: ");
        item.diffs.forEach((d, i) => {
          const a = el("a", "tool-diff-file", d.split("/").pop());
          a.title = `Open ${d}`;
          a.addEventListener("click", (ev) => {
            ev.preventDefault();
            send({ type: "openLocation", path: d, line: item.locations.find((l) => l.path === d)?.line });
          });
          row.append(...(i ? [document.createTextNode(", "), a] : [a]));
        });
        node.append(row);
      }
      if (item.terminal) {
        const pre = el("pre", "tool-terminal", item.terminal.length > 20000 ? `…${item.terminal.slice(-20000)}` : item.terminal);
        node.append(pre);
        requestAnimationFrame(() => { pre.scrollTop = pre.scrollHeight; });
      }
      const exit = exitText(item);
      if (exit) node.append(el("div", "tool-exit", exit));
      if (item.output && item.output !== item.terminal) {
        const details = el("details", "tool-output");
        details.append(el("summary", "", "output"), el("pre", "", item.output.slice(0, 20000)));
        node.append(details);
      }
      return node;
    }
    case "notice": {
      const node = el("div", `item notice ${item.level}`, item.text);
      const noticeIcon = NOTICE_ICONS[item.level];
      if (noticeIcon) node.prepend(icon(noticeIcon));
      if (item.errorKind) node.dataset.errorKind = item.errorKind;
      if (item.detail) {
        const pre = el("pre", "stderr-tail", item.detail);
        node.append(pre);
      }
      if (item.actions?.length) {
        const row = el("div", "card-buttons");
        for (const a of item.actions) {
          // one choice per notice: the row goes once one is clicked (Cancel only removes it)
          row.append(button(a.label, a.send ? "notice-action" : "notice-action cancel", () => { row.remove(); if (a.send) send(a.send); }, undefined, a.send ? undefined : "close"));
        }
        node.append(row);
      }
      if (item.errorKind) node.append(setupButtons(item.errorKind));
      return node;
    }
    case "permission": {
      const node = el("div", "item permission");
      node.dataset.permissionId = item.permId;
      const permTitle = el("div", "card-title");
      permTitle.append(icon("shield"), document.createTextNode(item.title));
      node.append(permTitle);
      if (item.command !== undefined) node.append(commandBlock(item.command));
      if (item.reason) {
        const reason = el("div", "card-reason markdown");
        reason.innerHTML = renderMarkdown(item.reason); // the agent's text: markdown-it, html:false
        node.append(reason);
      }
      if (item.hasDiff) node.append(el("div", "card-note", "The change is shown in a diff editor."));
      if (item.outcome) {
        node.dataset.outcome = item.outcome;
        node.append(el("div", "card-outcome", permissionAnswer(item)));
      } else {
        const row = el("div", "card-buttons");
        for (const o of item.options) {
          const b = button(o.name, `option ${o.kind}`, () => send({ type: "permission", id: item.permId, optionId: o.optionId }), undefined, o.kind.startsWith("allow") ? "check" : o.kind.startsWith("reject") ? "close" : undefined);
          b.dataset.optionId = o.optionId;
          row.append(b);
        }
        node.append(row);
      }
      return node;
    }
    case "proposal": {
      const node = el("div", "item proposal");
      node.dataset.proposalId = item.proposalId;
      node.dataset.outcome = item.outcome ?? "pending";
      node.append(el("div", "card-title", item.label));
      for (const f of item.files) node.append(el("div", "card-file", f));
      for (const o of item.ops) node.append(el("div", "card-file", o));
      for (const n of item.notes ?? []) node.append(el("div", "card-note", n));
      if (item.outcome) {
        const message = proposalMessage(item.message);
        node.append(el("div", `card-outcome outcome-${item.outcome}`, `${outcomeWord(item.outcome, item.saved)}${item.edited ? " with your changes" : ""}${message ? `: ${message}` : ""}`));
        // a decided proposal lists what was accepted and what was rejected
        if (item.hunks.length > 1 || item.outcome === "partial") {
          const list = el("div", "hunks hunks-decided");
          for (const h of item.hunks) {
            const row = el("div", `hunk hunk-${h.state}`);
            row.append(icon(h.state === "accepted" ? "check" : h.state === "rejected" ? "close" : "circle-small"), document.createTextNode(` ${h.index + 1}. ${h.summary} (${h.state})`));
            list.append(row);
          }
          node.append(list);
        }
        if (item.saveChanged) {
          // format-on-save (or another save participant) changed what was accepted: how, in a diff
          const row = el("div", "card-buttons");
          row.append(button("Show What the Save Changed", "show-saved", () => send({ type: "showSaved", id: item.proposalId }), "The text as you accepted it ↔ the file as the editor's save wrote it", "diff"));
          node.append(row);
        }
        if (item.outcome === "rejected" && item.message?.includes("closed") && !isRestoreProposal(item.label)) {
          // the diff was closed (a reject, answered at once): the change can be asked for again
          const row = el("div", "card-buttons");
          const files = item.files.join(", ") || item.label;
          row.append(button("Ask Again", "ask-again", () => send({ type: "prompt", text: `Please propose your change to ${files} again.` }), undefined, "refresh"));
          node.append(row);
        }
      } else if (item.stale) {
        // stale said at once: the document changed under the proposal; accepting is refused
        node.dataset.stale = "true";
        const restore = isRestoreProposal(item.label);
        const stale = el("div", "card-stale", restore ? `Stale: ${item.stale}. Accepting would replace that text: reject it, and /${item.label.startsWith("Redo") ? "redo" : "undo"} again asks about the file as it is now.` : `Stale: ${item.stale}. Accepting would apply the agent's change to text it has not seen.`);
        stale.prepend(icon("warning"));
        node.append(stale);
        const row = el("div", "card-buttons");
        if (!restore) row.append(button("Ask the Agent Again", "ask-again", () => send({ type: "proposal", id: item.proposalId, action: "again" }), "The agent reads the current text and makes its change again", "refresh"));
        row.append(
          button("Reject", "reject-all", () => send({ type: "proposal", id: item.proposalId, action: "reject" }), undefined, "close-all"),
          button("Show Diff", "show-diff", () => send({ type: "proposal", id: item.proposalId, action: "show" }), undefined, "diff"),
        );
        node.append(row);
      } else {
        const list = el("div", "hunks");
        for (const h of item.hunks) {
          const row = el("div", `hunk hunk-${h.state}`);
          row.append(el("span", "", `${h.index + 1}. ${h.summary} (${h.state})`));
          if (h.state === "pending") {
            row.append(
              button("Accept", "hunk-accept", () => send({ type: "hunk", id: item.proposalId, fileIndex: h.fileIndex, index: h.index, accept: true }), undefined, "check"),
              button("Reject", "hunk-reject", () => send({ type: "hunk", id: item.proposalId, fileIndex: h.fileIndex, index: h.index, accept: false }), undefined, "close"),
            );
          }
          list.append(row);
        }
        const row = el("div", "card-buttons");
        row.append(
          button("Accept All", "accept-all", () => send({ type: "proposal", id: item.proposalId, action: "accept" }), undefined, "check-all"),
          button("Reject All", "reject-all", () => send({ type: "proposal", id: item.proposalId, action: "reject" }), undefined, "close-all"),
          button("Show Diff", "show-diff", () => send({ type: "proposal", id: item.proposalId, action: "show" }), undefined, "diff"),
        );
        node.append(list, row);
      }
      return node;
    }
  }
}

// ---- the transcript: one slot per item, far from the viewport a slot's content is dropped ----------
// (its height kept) and drawn again from the state when it comes near; an agent message is a list
// of chunks of closed markdown blocks (each block rendered once, its HTML kept for redrawing) and a
// plain-text tail, the block still streaming.

/** A part of the transcript that can leave the DOM while far from the viewport. */
interface Unit {
  el: HTMLElement;
  collapsed: boolean;
  fill(): void;
}

interface Chunk extends Unit {
  /** The HTML of its blocks rendered so far (kept for drawing it again). */
  html: string;
  /** Its blocks not rendered yet (a burst's or a replay's older part): rendered, once, when the chunk
   * first comes near the viewport; until then the chunk is their estimated height. */
  source: string[];
  blocks: number;
  size: number;
}

interface AgentView {
  node: HTMLElement;
  splitter: BlockSplitter;
  /** The message's text as last seen. */
  text: string;
  chunks: Chunk[];
  tail: StreamText | undefined;
  /** Offset in the text where the tail node's text starts, and how much of the text it shows. */
  tailFrom: number;
  tailTo: number;
  open: boolean;
  /** The text's length when the message was closed (its last block rendered). */
  closedAt: number;
}

interface Slot extends Unit {
  item: Item;
  rev: number;
  agent?: AgentView;
  /** The streaming text of a thought and how much of the text it shows. */
  thought?: { text: StreamText; shown: number };
}

/** Plain text that grows as it streams (the open block of an answer, a thought), in boxes of whole
 * lines (`tailPieces`): what arrives lays out only the last box, never the whole text again. */
class StreamText {
  readonly box: HTMLElement;
  private last: Text | undefined;

  constructor(cls: string) {
    this.box = el("div", cls);
  }

  set(text: string): void {
    this.box.replaceChildren();
    this.last = undefined;
    this.append(text);
  }

  append(data: string): void {
    if (data === "") return;
    const last = this.last;
    const [toLast, ...more] = tailPieces(last?.length ?? 0, !last || last.data.endsWith("\n"), data);
    if (last) last.appendData(toLast!);
    else more.unshift(toLast!);
    for (const piece of more) {
      if (piece === "") continue;
      this.last = document.createTextNode(piece);
      const box = el("div", "stream-piece");
      box.append(this.last);
      this.box.append(box);
    }
  }
}

const slots = new Map<number, Slot>();
const units = new Map<Element, Unit>();
/** Markdown blocks of agent messages closed, and markdown renders of them (the same when each is rendered once). */
let mdBlocks = 0;
let mdRenders = 0;
const CHUNK_BYTES = 8000;
/** What drawing a card spends of a paint's budget (`PAINT_BUDGET`, in markdown characters). */
const CARD_COST = 1024;
/**
 * New slots a paint makes at most, the newest first; the older ones wait for the next frames. A replay
 * arrives in a few batches of hundreds of items: one paint making all of a batch's slots (placeholders
 * mostly) blocked the panel 150–250 ms with their style and layout (900 cards, bench/README.md).
 */
const NEW_SLOTS_PER_PAINT = 48;
/** Items a paint left for the next frames (`NEW_SLOTS_PER_PAINT`): drawn as placeholders when made. */
const deferred = new Set<number>();

/**
 * Heights of what is not drawn yet (a replay's or a burst's far part): a placeholder of about the
 * height it will have, so the scrollbar is right and only what is near the viewport is drawn. Text:
 * its lines at the transcript's width (measured once per paint, before the paint changes the DOM);
 * an item: the height last measured of its kind. A wrong guess only moves the content below it when
 * it is drawn (the browser's scroll anchoring keeps a reader's place; the end is followed anyway).
 */
const typicalHeight: Record<string, number> = { tool: 34, user: 44, notice: 40, thought: 30, permission: 140, proposal: 140, agent: 40 };
let fontPx = 0;
let charsPerLine = 80;

function measureText(): void {
  fontPx ||= parseFloat(getComputedStyle(transcript).fontSize) || 13;
  const width = transcript.clientWidth;
  if (width > 0) charsPerLine = Math.max(20, Math.floor((width - 24) / (fontPx * 0.55)));
}

function estimateBlock(block: string): number {
  let lines = 1 + Math.floor(block.length / charsPerLine); // its wrapped lines, about
  for (let at = block.indexOf("\n"); at >= 0; at = block.indexOf("\n", at + 1)) lines++;
  return Math.round((lines + 1) * fontPx * 1.4); // + the margin between blocks
}

/** The height of a part of a long code block (`htmlParts`): its lines do not wrap. */
function estimateCode(html: string): number {
  let lines = 1;
  for (let at = html.indexOf("\n"); at >= 0; at = html.indexOf("\n", at + 1)) lines++;
  return Math.round(lines * fontPx * 1.4);
}

/** Units come near the viewport and wait to be drawn: those in view first, then the nearest, at most
 * `FILL_MS` of a frame beyond those in view (a replay's end comes near with a hundred cards at once). */
const toFill = new Set<Unit>();
const FILL_MS = 8;
let fillFrame = 0;

function fillNear(): void {
  fillFrame = 0;
  const view = transcript.getBoundingClientRect();
  const away = (box: DOMRect) => (box.bottom <= view.top ? view.top - box.bottom : box.top >= view.bottom ? box.top - view.bottom : 0);
  const near = [...toFill].map((unit) => ({ unit, away: away(unit.el.getBoundingClientRect()) })).sort((a, b) => a.away - b.away);
  const until = performance.now() + FILL_MS;
  let filled = false;
  for (const { unit, away: distance } of near) {
    if (distance > 0 && performance.now() > until) break;
    toFill.delete(unit);
    if (!unit.collapsed || !units.has(unit.el)) continue;
    unit.collapsed = false;
    unit.el.style.height = "";
    unit.fill();
    filled = true;
  }
  // a unit drawn may not have the height it was kept as (its item changed meanwhile, or an estimate):
  // the end the view follows stays in view
  if (filled && following) transcript.scrollTop = transcript.scrollHeight;
  if (toFill.size > 0) fillFrame = requestAnimationFrame(fillNear);
}

const observer = new IntersectionObserver(
  (entries) => {
    for (const entry of entries) {
      const unit = units.get(entry.target);
      if (!unit) continue;
      if (entry.isIntersecting) {
        if (unit.collapsed) toFill.add(unit);
      } else {
        toFill.delete(unit);
        if (!unit.collapsed && transcript.clientHeight > 0 && entry.boundingClientRect.height > 0) {
          // out of reach: keep its height, drop its nodes (a hidden panel measures 0: left alone)
          unit.el.style.height = `${entry.boundingClientRect.height}px`;
          const type = (unit as Partial<Slot>).item?.type;
          if (type && type !== "agent") typicalHeight[type] = Math.round(((typicalHeight[type] ?? 40) * 3 + entry.boundingClientRect.height) / 4);
          unit.el.replaceChildren();
          unit.collapsed = true;
        }
      }
    }
    if (toFill.size > 0 && !fillFrame) fillNear();
  },
  { root: transcript, rootMargin: "1500px 0px 1500px 0px" },
);

function watch(unit: Unit): void {
  units.set(unit.el, unit);
  observer.observe(unit.el);
}

function unwatch(el: Element): void {
  const unit = units.get(el);
  if (unit) toFill.delete(unit);
  units.delete(el);
  observer.unobserve(el);
}

function renderBlock(markdown: string): string {
  mdRenders++;
  return renderMarkdown(markdown); // markdown-it, html:false, checked links
}

function newChunk(view: AgentView, later: boolean): Chunk {
  const chunk: Chunk = {
    el: el("div", "md-chunk"),
    collapsed: later,
    html: "",
    source: [],
    blocks: 0,
    size: 0,
    fill: () => {
      if (chunk.source.length > 0) {
        chunk.html += chunk.source.map(renderBlock).join(""); // each block rendered once, when first near
        chunk.source = [];
      }
      chunk.el.innerHTML = chunk.html;
    },
  };
  view.chunks.push(chunk);
  view.node.insertBefore(chunk.el, view.tail?.box ?? null);
  watch(chunk);
  return chunk;
}

/** What is left of this paint's markdown budget (`PAINT_BUDGET`). */
let paintBudget = PAINT_BUDGET;

/** Adds closed blocks to the message: those before `from` as their markdown (rendered when they come
 * near the viewport), the rest rendered now. */
function addBlocks(view: AgentView, blocks: string[], from: number): void {
  const later = new Map<Chunk, number>(); // chunks kept as markdown: their estimated height, set once
  blocks.forEach((block, i) => {
    mdBlocks++;
    let chunk = view.chunks[view.chunks.length - 1];
    if (i < from) {
      // a chunk never drawn takes more of them; one drawn (or kept as its measured height) does not
      if (!chunk || !chunk.collapsed || chunk.html !== "" || chunk.size >= CHUNK_BYTES) chunk = newChunk(view, true);
      chunk.source.push(block);
      chunk.size += block.length;
      chunk.blocks++;
      later.set(chunk, (later.get(chunk) ?? (parseFloat(chunk.el.style.height) || 0)) + estimateBlock(block));
      return;
    }
    const parts = htmlParts(renderBlock(block), CHUNK_BYTES);
    const html = parts.pop()!;
    for (const part of parts) {
      // a long code block's parts before its last: kept as their HTML, drawn when near the viewport
      const far = newChunk(view, true);
      far.html = part;
      far.size = part.length;
      far.el.style.height = `${estimateCode(part)}px`;
    }
    if (parts.length > 0) chunk = newChunk(view, false);
    else if (!chunk || chunk.collapsed || chunk.size >= CHUNK_BYTES) chunk = newChunk(view, false);
    chunk.html += html;
    chunk.size += block.length;
    chunk.blocks++;
    chunk.el.insertAdjacentHTML("beforeend", html);
  });
  for (const [chunk, height] of later) chunk.el.style.height = `${height}px`;
}

/** Places the message's newly closed blocks — the newest within `budget` rendered now, the older ones
 * when scrolled near (none at all for a message far from the end) — and draws its tail. */
function drain(view: AgentView, blocks: string[], budget: number): void {
  const costs = blocks.map(blockCost);
  const drawn = drawnFrom(costs, budget);
  for (let i = drawn; i < costs.length; i++) paintBudget -= costs[i]!;
  addBlocks(view, blocks, drawn);
  if (!view.open) {
    view.tail?.box.remove();
    view.tail = undefined;
    return;
  }
  const text = view.text;
  if (!view.tail) {
    view.tail = new StreamText("md-tail");
    view.node.append(view.tail.box);
    view.tailFrom = view.tailTo = -1;
  }
  const from = view.splitter.tailStart;
  if (from !== view.tailFrom) {
    view.tail.set(text.slice(from));
  } else if (text.length > view.tailTo) {
    view.tail.append(text.slice(view.tailTo)); // only what arrived since the last frame
  }
  view.tailFrom = from;
  view.tailTo = text.length;
}

/** A message's text placed at once beyond this (a replay's answer, a webview drawn again) is cut into
 * parts of whole blocks far from its end (`blockCuts`), not split into its blocks in one paint. */
const FAR_CUT = 4 * PAINT_BUDGET;

/** The far part of a long text placed at once: parts of whole blocks up to the last cut, each kept as
 * its markdown and rendered whole when it comes near the viewport; the splitter goes on from there. */
function addFarParts(view: AgentView, text: string): void {
  const cuts = blockCuts(text, text.length - 2 * PAINT_BUDGET, CHUNK_BYTES);
  let from = 0;
  for (const cut of cuts) {
    const part = text.slice(from, cut);
    const chunk = newChunk(view, true);
    chunk.source.push(part);
    chunk.size = part.length;
    chunk.blocks = 1;
    chunk.el.style.height = `${estimateBlock(part)}px`;
    mdBlocks++;
    from = cut;
  }
  if (from > 0) view.splitter.skipTo(from);
}

/** Brings an agent message's view up to its text: new closed blocks placed (the newest within
 * `budget` rendered now), the tail extended. */
function updateAgent(view: AgentView, text: string, open: boolean, budget = paintBudget): void {
  if (!view.open && (open || text.length !== view.closedAt)) {
    // a closed message grew (text of it after a tool card or a retry): drawn again as one message,
    // never its rest as a block of its own
    for (const c of view.chunks) {
      unwatch(c.el);
      c.el.remove();
    }
    view.chunks = [];
    view.splitter = new BlockSplitter();
    view.open = true;
    view.text = "";
  }
  if (view.text === "" && view.chunks.length === 0 && text.length > FAR_CUT) addFarParts(view, text);
  view.text = text;
  let blocks: string[];
  if (!open) {
    if (!view.open) return;
    blocks = view.splitter.finish(text);
    view.open = false;
    view.closedAt = text.length;
  } else {
    view.open = true;
    blocks = view.splitter.feed(text);
  }
  drain(view, blocks, budget);
}

function isOpen(item: Item): boolean {
  return isStreaming(state, item);
}

/** A slot for `item`: drawn now, or (`budget` 0: an item of a replay or a burst far from the end) kept
 * as its estimated height until it comes near the viewport; an agent message draws its newest blocks
 * within `budget`. */
function makeSlot(item: Item, budget: number): Slot {
  const slot: Slot = {
    el: el("div", `slot slot-${item.type}`),
    collapsed: false,
    item,
    rev: item.rev,
    fill: () => slot.el.replaceChildren(renderItem(slot.item)),
  };
  if (item.type === "agent" && !item.command) {
    const node = el("div", "item agent markdown");
    slot.agent = { node, splitter: new BlockSplitter(), text: "", chunks: [], tail: undefined, tailFrom: 0, tailTo: 0, open: true, closedAt: 0 };
    slot.el.append(node);
    updateAgent(slot.agent, item.text, isOpen(item), budget);
  } else if (budget <= 0) {
    slot.collapsed = true;
    slot.el.style.height = `${typicalHeight[item.type] ?? 40}px`;
    watch(slot);
  } else if (item.type === "thought") {
    slot.el.append(thoughtNode(slot, item));
    watch(slot);
  } else {
    slot.fill();
    watch(slot);
  }
  return slot;
}

function thoughtNode(slot: Slot, item: Extract<Item, { type: "thought" }>): HTMLElement {
  const node = el("details", "item thought");
  const text = new StreamText("thought-text");
  text.set(item.text);
  const summary = el("summary", "", " Thinking");
  summary.prepend(icon("lightbulb"));
  node.append(summary, text.box);
  slot.thought = { text, shown: item.text.length };
  return node;
}

function updateSlot(slot: Slot, item: Item): void {
  slot.item = item;
  slot.rev = item.rev;
  if (slot.agent && item.type === "agent") {
    updateAgent(slot.agent, item.text, isOpen(item));
    return;
  }
  if (slot.collapsed) return; // drawn from the state when it comes near
  if (slot.thought && item.type === "thought" && item.text.length >= slot.thought.shown) {
    slot.thought.text.append(item.text.slice(slot.thought.shown));
    slot.thought.shown = item.text.length;
    return;
  }
  slot.fill();
}

function dropSlot(slot: Slot): void {
  unwatch(slot.el);
  for (const c of slot.agent?.chunks ?? []) unwatch(c.el);
  slot.el.remove();
}

let following = true;
transcript.addEventListener("scroll", () => {
  following = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  anchorWhileReading();
  paintQuestionBar();
});

/**
 * Scroll anchoring (the browser keeps the node in view in place when content above it changes height)
 * holds a reader's place when a card above is drawn again; while the panel follows the end it puts the
 * end in view itself after every paint, and the anchor the browser looks for at each layout is work
 * for nothing (half the layout forced by following the end in a 900-card replay: bench/README.md).
 */
function anchorWhileReading(): void {
  transcript.classList.toggle("following", following);
}

/** The oldest question still waiting for the user's answer, and its slot (none yet: not drawn). */
function waitingQuestion(): { item: Extract<Item, { type: "permission" | "proposal" }>; slot: Slot | undefined } | undefined {
  for (const item of state.items) {
    if ((item.type === "permission" || item.type === "proposal") && !item.outcome) return { item, slot: slots.get(item.id) };
  }
  return undefined;
}

/** Where a slot lies from the transcript's viewport: in it (any part of it shown), above or below. */
function whereShown(slot: Slot | undefined): "in" | "above" | "below" {
  if (!slot || !slot.el.isConnected) return following ? "in" : "below"; // not drawn yet (a burst's rest): at the end
  const box = slot.el.getBoundingClientRect();
  const view = transcript.getBoundingClientRect();
  if (box.bottom <= view.top) return "above";
  if (box.top >= view.bottom - 8) return "below";
  return "in";
}

let questionKey = "";
function paintQuestionBar(): void {
  const q = transcript.clientHeight > 0 ? waitingQuestion() : undefined;
  const where = q ? whereShown(q.slot) : "in";
  questionBar.hidden = where === "in";
  if (!q || where === "in") {
    questionKey = "";
    return;
  }
  const text = q.item.type === "permission" ? `The agent waits for your answer: ${q.item.title}` : `An edit waits for your review: ${q.item.label}`;
  const key = `${where}\n${text}`;
  if (key === questionKey) return;
  questionKey = key;
  questionBar.dataset.where = where;
  questionBar.replaceChildren(icon(where === "above" ? "arrow-up" : "arrow-down"), el("span", "label", text));
}

let elsewhereKey = "";
function paintElsewhere(): void {
  const rows = waitingElsewhere(state);
  const key = JSON.stringify(rows);
  if (key === elsewhereKey) return;
  elsewhereKey = key;
  elsewhereBox.hidden = rows.length === 0;
  elsewhereBox.replaceChildren(
    ...rows.map((r) => {
      const row = el("div", "waiting-row");
      row.dataset.sessionId = r.sessionId;
      row.append(icon("bell-dot"), el("span", "label", r.text), button("Go to it", "go-to-session", () => send({ type: "loadSession", sessionId: r.sessionId }), "Show that session: its question is there", "arrow-right"));
      return row;
    }),
  );
}

/** Scrolls the waiting question into view (drawn again if it was kept as its height) and focuses its first button. */
function revealQuestion(): void {
  const q = waitingQuestion();
  if (!q) return;
  if (!q.slot) {
    following = true; // not drawn yet: it comes at the end
    transcript.scrollTop = transcript.scrollHeight;
    return;
  }
  const slot = q.slot;
  if (slot.collapsed) {
    slot.collapsed = false;
    slot.el.style.height = "";
    slot.fill();
  }
  // its answers are at its bottom: the card's end in view (its top too when it fits), its first
  // button focused; the last item (the agent waits on it): the end is followed again, so the cards
  // drawn again around it and the answer that comes stay in view
  if (state.items.at(-1)?.id === q.item.id) {
    following = true;
    transcript.scrollTop = transcript.scrollHeight;
  } else {
    slot.el.scrollIntoView({ block: "end" });
  }
  slot.el.querySelector<HTMLButtonElement>("button:not(:disabled)")?.focus({ preventScroll: true });
  paintQuestionBar();
}

/**
 * What a paint draws of the items it has no slot for yet, newest first within `PAINT_BUDGET`: the
 * budget each of them gets (an agent message draws its newest blocks within it), 0 for the older ones
 * — a `session/load` replay's history, a burst of cards — kept as their estimated height and drawn
 * when they come near the viewport. The newest always gets the whole budget: a prompt sent while a
 * replay arrives is drawn at once (newcomer 4 finding 1).
 */
function newItemBudgets(): Map<number, number> {
  const budgets = new Map<number, number>();
  let left = PAINT_BUDGET;
  for (let k = state.items.length - 1; k >= 0; k--) {
    const item = state.items[k]!;
    if (slots.has(item.id)) continue;
    if (deferred.has(item.id)) {
      budgets.set(item.id, 0); // a replay's older part, made over the frames after its end: placeholders
      continue;
    }
    budgets.set(item.id, Math.max(0, left));
    left -= item.type === "agent" && !item.command ? item.text.length : CARD_COST;
  }
  return budgets;
}

function paint(): void {
  frame = 0;
  paintBudget = PAINT_BUDGET;
  measureText();
  const budgets = newItemBudgets();
  // the newest items without a slot get one now; the older ones in the next frames (their slots go
  // above, kept as placeholders until near the viewport: the end the panel shows comes first)
  const making = new Set<number>();
  let waiting = 0;
  for (let k = state.items.length - 1; k >= 0; k--) {
    const id = state.items[k]!.id;
    if (slots.has(id)) continue;
    if (making.size < NEW_SLOTS_PER_PAINT) {
      making.add(id);
      deferred.delete(id);
    } else {
      waiting++;
      deferred.add(id);
    }
  }
  // following the end unless the user scrolled away (a flag kept by scroll events: the boxes below
  // the transcript — working line, Changes — change its height without the user scrolling)
  const stick = following || transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  anchorWhileReading();
  const alive = new Set<number>();
  let previous: HTMLElement | null = null;
  for (const item of state.items) {
    let slot = slots.get(item.id);
    alive.add(item.id);
    if (!slot) {
      if (!making.has(item.id)) continue; // a later frame's
      slot = makeSlot(item, budgets.get(item.id) ?? 0);
      slots.set(item.id, slot);
    } else if (slot.rev !== item.rev || (slot.agent?.open && !isOpen(item))) {
      updateSlot(slot, item);
    }
    const expectedNext: ChildNode | null = previous ? previous.nextSibling : transcript.firstChild;
    if (expectedNext !== slot.el) transcript.insertBefore(slot.el, expectedNext);
    previous = slot.el;
  }
  for (const [id, slot] of slots) {
    if (!alive.has(id)) {
      dropSlot(slot);
      slots.delete(id);
    }
  }
  app.dataset.drawing = String(waiting); // items still to get a slot (a replay drawn over frames)
  if (waiting > 0) schedule();
  else deferred.clear();
  app.dataset.mdBlocks = String(mdBlocks);
  app.dataset.mdRenders = String(mdRenders);

  app.dataset.state = state.busy ? "busy" : "idle";
  stopButton.disabled = !state.busy;
  planBox.replaceChildren(
    ...state.plan.map((p) => {
      const row = el("div", `plan-entry plan-${p.status}`);
      row.append(icon(p.status === "completed" ? "pass" : p.status === "in_progress" ? "arrow-right" : "circle-large-outline"), document.createTextNode(` ${p.content}`));
      return row;
    }),
  );
  planBox.hidden = state.plan.length === 0;
  if (state.usage) {
    const pct = state.usage.size ? Math.round((100 * state.usage.used) / state.usage.size) : 0;
    const cost = state.usage.cost ? ` · ${state.usage.cost.amount.toFixed(4)} ${state.usage.cost.currency}` : "";
    usageLine.textContent = `context ${state.usage.used.toLocaleString()} / ${state.usage.size.toLocaleString()} tokens (${pct}%)${cost}`;
  } else {
    usageLine.textContent = "";
  }
  paintPickers();
  paintEmptyState();
  paintChanges();
  const now = activity(state);
  workingLine.hidden = now === undefined;
  workingLine.dataset.activity = now ?? "";
  if (workingLine.dataset.shown !== (now ?? "")) {
    workingLine.dataset.shown = now ?? "";
    workingLine.replaceChildren(...(now ? [icon(now === "thinking" ? "lightbulb" : "loading~spin"), document.createTextNode(now === "thinking" ? " Thinking…" : " Working…")] : []));
  }
  undoButton.hidden = !state.commands.some((c) => c.name === "undo");
  // an empty panel has nothing to undo, and must not make a session to say so (N3)
  undoButton.disabled = !state.currentSession || state.undoAsked === true;
  undoButton.title = state.currentSession ? "Take back the files the newest agent turn changed (/undo)" : "Nothing to undo: no session is open";
  paintCompletions();
  tickElapsed();
  paintElsewhere();
  if (stick) transcript.scrollTop = transcript.scrollHeight; // last: after every box changed its height
  paintQuestionBar();
}

let emptyKey = "";
function paintEmptyState(): void {
  const empty = state.items.length === 0;
  emptyState.hidden = !empty;
  app.dataset.empty = String(empty);
  if (!empty) return;
  const setup = state.setup;
  const key = JSON.stringify(setup ?? null);
  if (key === emptyKey) return;
  emptyKey = key;
  const facts = el("div", "setup-facts");
  const fact = (label: string, value: string, cls: string) => {
    const row = el("div", `setup-fact ${cls}`);
    row.append(el("span", "setup-label", `${label}: `), el("span", "setup-value", value));
    facts.append(row);
  };
  if (!setup) {
    facts.append(el("div", "setup-fact", "Reading the server's configuration…"));
  } else if (setup.error) {
    facts.append(el("div", "setup-fact setup-error", setup.error));
  } else {
    if (setup.offline) {
      fact("Model", "offline script — agent-server's offline endpoint plays a script of answers; it is not a model", "setup-model setup-offline");
      fact("Endpoint", setup.endpoint ?? "", "setup-endpoint");
    } else {
      fact("Endpoint", setup.endpoint || "none configured", "setup-endpoint");
      fact("Model", setup.model || "none configured", "setup-model");
    }
    if (setup.keyMissing) facts.append(el("div", "setup-fact setup-key-missing", "No API key is set: Set API Key, or Sign in (agent-server login)."));
    else if (setup.keySource) fact("API key", `from ${setup.keySource}`, "setup-key");
    // whether the endpoint answers (the server asked it, as its first request would): a wrong base URL
    // or a refused key is found out here, before a prompt
    if (setup.reach) {
      const row = el("div", `setup-fact setup-reach setup-reach-${setup.reach.state}`);
      row.dataset.state = setup.reach.state;
      row.append(el("span", "setup-label", "Endpoint check: "), el("span", "setup-value", setup.reach.state === "checking" ? "asking the endpoint whether it answers…" : (setup.reach.text ?? "")));
      if (setup.reach.state === "failed") row.append(button("Check Again", "check-setup", () => send({ type: "action", action: "checkSetup" }), "Ask the endpoint again (after fixing the settings or the key)", "refresh"));
      facts.append(row);
    }
  }
  emptyState.replaceChildren(el("div", "empty-title", "Ask the agent anything about this workspace."), facts, setupButtons());
}

let changesKey = "";
function paintChanges(): void {
  const found = turnChanges(state);
  const canUndo = state.commands.some((c) => c.name === "undo");
  // the key leaves the texts out (a big file's would be stringified every frame)
  const key = JSON.stringify([found && { ...found, files: found.files.map((f) => [f.path, f.added, f.removed, f.newText === null, f.how, f.counted, f.mode]) }, state.busy, canUndo, state.undoAsked]);
  if (key === changesKey) return;
  changesKey = key;
  changesBox.hidden = !found;
  if (!found) return changesBox.replaceChildren();
  const head = el("div", "changes-head");
  const count = `${found.files.length} file${found.files.length === 1 ? "" : "s"}`;
  const from = found.prompt ? ` (“${found.prompt.length > 60 ? `${found.prompt.slice(0, 60)}…` : found.prompt}”)` : "";
  // what became of /undo is what the server reported, never the /undo typed (refused while a turn runs)
  const undo = found.undo === "undone" ? " — undone" : found.undo === "running" ? " — undoing…" : found.undo === "nothing" ? " — /undo restored nothing" : found.undo === "declined" ? " — /undo changed nothing" : "";
  head.append(el("span", "changes-title", `Changes of the last turn that changed files${from}: ${count}${undo}`));
  changesBox.dataset.undone = String(found.undone);
  changesBox.dataset.undo = found.undo ?? "";
  changesBox.dataset.turn = String(found.turn);
  // not while a turn runs: its own changes may be the newest (finding 21), and /undo is refused then
  if ((found.undo === undefined || found.undo === "declined") && !state.busy) {
    const undoTurn = button("Undo this turn", "undo-turn", () => clickUndo(), state.undoAsked ? "/undo was sent: waiting for its answer" : "Take back the files this turn changed (/undo; a file you changed since is asked about)", "discard");
    undoTurn.disabled = !canUndo || state.busy || state.undoAsked === true;
    head.append(undoTurn);
  }
  const parts: HTMLElement[] = [head];
  if (found.undo === "nothing" && found.undoSummary) parts.push(el("div", "changes-undo-summary", `${found.undoSummary} The next /undo takes back the turn before it.`));
  if (found.undo === "declined" && found.undoSummary) parts.push(el("div", "changes-undo-summary", `${found.undoSummary} Nothing was undone: the next /undo asks about this turn again.`));
  const list = el("div", "changes-files");
  for (const f of found.files) {
    const row = el("div", "change-file");
    row.dataset.path = f.path;
    const name = el("a", "change-name", f.path.split("/").pop());
    name.title = f.newText === null ? `Open ${f.path}` : `Show what the turn changed in ${f.path}`;
    name.addEventListener("click", (ev) => {
      ev.preventDefault();
      // the texts as they are now (the box is repainted only when its summary changes)
      const now = turnChanges(state)?.files.find((x) => x.path === f.path) ?? f;
      send(now.newText === null ? { type: "openLocation", path: f.path } : { type: "showChange", path: f.path, oldText: now.oldText, newText: now.newText });
    });
    row.append(name);
    const lines = f.newText !== null || f.counted === true;
    // a chmod changes no line: its row says the mode, never "+0 −0"
    const modeOnly = f.mode !== undefined && lines && f.added === 0 && f.removed === 0 && !f.how;
    if (!lines) row.append(el("span", "change-how", f.how ?? "changed"));
    else if (!modeOnly) row.append(el("span", "change-added", `+${f.added}`), el("span", "change-removed", `−${f.removed}`));
    if (f.mode) {
      const mode = el("span", "change-mode", `mode ${f.mode[0]} → ${f.mode[1]}`);
      mode.title = `The file's permission bits: ${f.mode[0]} before the turn, ${f.mode[1]} after it`;
      row.append(mode);
    }
    list.append(row);
  }
  parts.push(list);
  changesBox.replaceChildren(...parts);
}

/** Running cards' elapsed time, once a second while any runs (only those spans change). */
let ticker: ReturnType<typeof setTimeout> | undefined;
function tickElapsed(): void {
  const running = transcript.querySelectorAll<HTMLElement>('.tool-elapsed[data-running="true"]');
  for (const span of Array.from(running)) span.textContent = formatElapsed(Date.now() - Number(span.dataset.started));
  if (running.length > 0 && ticker === undefined) {
    ticker = setTimeout(() => {
      ticker = undefined;
      tickElapsed();
    }, 1000);
  }
}

function paintPickers(): void {
  const current = state.currentSession ?? "";
  // its title: said by the agent (session_info_update), else as session/list has it
  const listed = current ? state.sessions.find((x) => x.sessionId === current)?.title : undefined;
  const title = state.title || listed || (current ? `Session ${current.slice(0, 8)}` : "New session");
  const label = sessionButton.querySelector(".label");
  if (label && label.textContent !== title) {
    label.textContent = title;
    sessionButton.title = `${title} — the sessions of this workspace (click or Enter: search and open one)`;
    sessionButton.setAttribute("aria-label", `Session: ${title}. Open another session`);
  }
  // VS Code-native: each picker is a button that opens a QuickPick in the host
  const key2 = JSON.stringify(state.selects.map((sel) => [sel.id, sel.currentValue, sel.options.length]));
  if (pickers.dataset.key === key2) return;
  pickers.dataset.key = key2;
  const selects = state.selects.map((sel) => {
    const current = sel.options.find((o) => o.value === sel.currentValue)?.name ?? sel.currentValue;
    const node = button(current, `picker picker-${sel.id}`, () => send({ type: "pickOption", configId: sel.id }), `${sel.name}: ${current} (click to choose)`, sel.id === "model" ? "sparkle" : sel.id === "mode" ? "shield" : "settings-gear");
    node.append(icon("chevron-down"));
    node.dataset.configId = sel.id;
    node.dataset.value = sel.currentValue;
    return node;
  });
  pickers.replaceChildren(...selects);
}

function schedule(): void {
  if (!frame) frame = requestAnimationFrame(paint);
}

window.addEventListener("message", (ev: MessageEvent<HostToWebview>) => {
  const msg = ev.data;
  if (!msg || msg.type !== "events" || !Array.isArray(msg.events)) return;
  for (const e of msg.events as ChatEvent[]) {
    if (e.kind === "mention") {
      pendingMentions.push({ id: e.id, mention: e.mention });
      paintAttachments();
      input.focus();
    }
    state = fold(state, e);
    // a prompt that failed or was cancelled unanswered comes back to the box (when the user typed nothing since)
    const back = promptToGiveBack(state, e);
    if (back !== undefined && input.value.trim() === "") input.value = back;
  }
  schedule();
});

// where the keyboard is: an editor the agent opens while the panel lacks it goes behind the user's editor
window.addEventListener("focus", () => send({ type: "focus", focused: true }));
window.addEventListener("blur", () => send({ type: "focus", focused: false }));
if (document.hasFocus()) send({ type: "focus", focused: true });

paintAttachments();
paintCompletions();
send({ type: "ready" });
