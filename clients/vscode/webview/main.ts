/**
 * The panel's webview: folds the host's events into the chat state and repaints at most once per
 * animation frame, only the items whose revision changed; a streaming answer is drawn incrementally
 * (each markdown block rendered once, when it closes) and items far from the viewport keep only their
 * height (issue 30: a 2 MB answer must not freeze the panel). Input with history, stop button,
 * session / mode / model pickers, permission and proposal cards.
 *
 * Must not: insert untrusted text as HTML (model text goes through `renderMarkdown`; everything else
 * is `textContent`), or talk to anything but the host.
 */

import type { ChatEvent, HostToWebview, WebviewToHost } from "../src/protocol";
import { BlockSplitter } from "./blocks";
import { commandParts } from "./command";
import { renderMarkdown, isSafeLink } from "./render";
import { type ChatState, type Item, fold, initialState, permissionAnswer, toolReason } from "./state";

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

function button(label: string, cls: string, onClick: () => void, title?: string): HTMLButtonElement {
  const b = el("button", cls, label);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", onClick);
  return b;
}

// ---- layout -----------------------------------------------------------------------------------
const app = document.getElementById("app")!;
const header = el("div", "header");
const sessionSelect = el("select", "session-picker");
sessionSelect.title = "Sessions of this workspace";
const newButton = button("New", "new-session", () => send({ type: "newSession" }), "Agent: New Session");
const pickers = el("div", "pickers");
header.append(sessionSelect, newButton, pickers);
const transcript = el("div", "transcript");
transcript.setAttribute("role", "log");
const planBox = el("div", "plan");
const footer = el("div", "footer");
const usageLine = el("div", "usage");
const input = el("textarea", "input");
input.placeholder = "Ask the agent (Enter to send, Shift+Enter for a new line)";
input.rows = 3;
const sendButton = button("Send", "send", () => submit());
const stopButton = button("Stop", "stop", () => send({ type: "cancel" }), "Agent: Cancel");
const buttons = el("div", "buttons");
buttons.append(sendButton, stopButton);
footer.append(usageLine, input, buttons);
app.append(header, transcript, planBox, footer);
app.dataset.state = "idle";

sessionSelect.addEventListener("focus", () => send({ type: "listSessions" }));
sessionSelect.addEventListener("change", () => {
  if (sessionSelect.value) send({ type: "loadSession", sessionId: sessionSelect.value });
});

// ---- input with history -------------------------------------------------------------------------
const saved = (vscode.getState() as { history?: string[] } | undefined) ?? {};
const history: string[] = Array.isArray(saved.history) ? saved.history.slice(-100) : [];
let historyPos = history.length;

function submit(): void {
  const text = input.value.trim();
  if (!text) return;
  history.push(text);
  historyPos = history.length;
  vscode.setState({ history: history.slice(-100) });
  input.value = "";
  send({ type: "prompt", text });
}

input.addEventListener("keydown", (ev) => {
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
      if (!item.queued) return el("div", "item user", item.text);
      const node = el("div", "item user queued", item.text);
      node.prepend(el("div", "queued-note", "Queued: sent when the running turn ends"));
      return node;
    }
    case "agent": // drawn block by block (updateAgent)
      return el("div", "item agent markdown");
    case "thought": {
      const slot = slots.get(item.id);
      const wasOpen = (slot?.el.firstElementChild as HTMLDetailsElement | null)?.open ?? false;
      const node = slot ? thoughtNode(slot, item) : el("details", "item thought");
      (node as HTMLDetailsElement).open = wasOpen;
      return node;
    }
    case "tool": {
      const node = el("div", `item tool status-${item.status}`);
      node.dataset.status = item.status;
      node.dataset.toolCallId = item.toolCallId;
      const head = el("div", "tool-head");
      head.append(el("span", "tool-status", item.status), el("span", "tool-title", item.title || item.kind));
      node.append(head);
      const reason = toolReason(item);
      if (reason) node.append(el("div", "tool-reason", reason));
      if (item.diffs.length) node.append(el("div", "tool-diffs", `diff: ${item.diffs.map((d) => d.split("/").pop()).join(", ")}`));
      if (item.output) {
        const details = el("details", "tool-output");
        details.append(el("summary", "", "output"), el("pre", "", item.output.slice(0, 20000)));
        node.append(details);
      }
      return node;
    }
    case "notice": {
      const node = el("div", `item notice ${item.level}`, item.text);
      if (item.detail) {
        const pre = el("pre", "stderr-tail", item.detail);
        node.append(pre);
      }
      if (item.actions?.length) {
        const row = el("div", "card-buttons");
        for (const a of item.actions) {
          // one choice per notice: the row goes once one is clicked (Cancel only removes it)
          row.append(button(a.label, a.send ? "notice-action" : "notice-action cancel", () => { row.remove(); if (a.send) send(a.send); }));
        }
        node.append(row);
      }
      return node;
    }
    case "permission": {
      const node = el("div", "item permission");
      node.dataset.permissionId = item.permId;
      node.append(el("div", "card-title", item.title));
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
          const b = button(o.name, `option ${o.kind}`, () => send({ type: "permission", id: item.permId, optionId: o.optionId }));
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
      if (item.outcome) {
        node.append(el("div", `card-outcome outcome-${item.outcome}`, `${item.outcome}${item.message ? `: ${item.message}` : ""}`));
        if (item.outcome === "rejected" && item.message?.includes("closed")) {
          // the diff was closed (a reject, answered at once): the change can be asked for again
          const row = el("div", "card-buttons");
          const files = item.files.join(", ") || item.label;
          row.append(button("Ask Again", "ask-again", () => send({ type: "prompt", text: `Please propose your change to ${files} again.` })));
          node.append(row);
        }
      } else if (item.stale) {
        // stale said at once: the document changed under the proposal; accepting is refused
        node.dataset.stale = "true";
        node.append(el("div", "card-stale", `Stale: ${item.stale}. Accepting would apply the agent's change to text it has not seen.`));
        const row = el("div", "card-buttons");
        row.append(
          button("Ask the Agent Again", "ask-again", () => send({ type: "proposal", id: item.proposalId, action: "again" }), "The agent reads the current text and makes its change again"),
          button("Reject", "reject-all", () => send({ type: "proposal", id: item.proposalId, action: "reject" })),
          button("Show Diff", "show-diff", () => send({ type: "proposal", id: item.proposalId, action: "show" })),
        );
        node.append(row);
      } else {
        const list = el("div", "hunks");
        for (const h of item.hunks) {
          const row = el("div", `hunk hunk-${h.state}`);
          row.append(el("span", "", `${h.index + 1}. ${h.summary} (${h.state})`));
          if (h.state === "pending") {
            row.append(
              button("Accept", "hunk-accept", () => send({ type: "hunk", id: item.proposalId, fileIndex: h.fileIndex, index: h.index, accept: true })),
              button("Reject", "hunk-reject", () => send({ type: "hunk", id: item.proposalId, fileIndex: h.fileIndex, index: h.index, accept: false })),
            );
          }
          list.append(row);
        }
        const row = el("div", "card-buttons");
        row.append(
          button("Accept All", "accept-all", () => send({ type: "proposal", id: item.proposalId, action: "accept" })),
          button("Reject All", "reject-all", () => send({ type: "proposal", id: item.proposalId, action: "reject" })),
          button("Show Diff", "show-diff", () => send({ type: "proposal", id: item.proposalId, action: "show" })),
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
  html: string;
  blocks: number;
  size: number;
}

interface AgentView {
  node: HTMLElement;
  splitter: BlockSplitter;
  chunks: Chunk[];
  tail: Text | undefined;
  /** Offset in the text where the tail node's text starts, and how much of the text it shows. */
  tailFrom: number;
  tailTo: number;
  open: boolean;
}

interface Slot extends Unit {
  item: Item;
  rev: number;
  agent?: AgentView;
  /** The streaming text node of a thought and how much of the text it shows. */
  thought?: { text: Text; shown: number };
}

const slots = new Map<number, Slot>();
const units = new Map<Element, Unit>();
/** Markdown blocks of agent messages closed, and markdown renders of them (the same when each is rendered once). */
let mdBlocks = 0;
let mdRenders = 0;
const CHUNK_BYTES = 8000;

const observer = new IntersectionObserver(
  (entries) => {
    for (const entry of entries) {
      const unit = units.get(entry.target);
      if (!unit) continue;
      if (entry.isIntersecting) {
        if (unit.collapsed) {
          unit.collapsed = false;
          unit.el.style.height = "";
          unit.fill();
        }
      } else if (!unit.collapsed && transcript.clientHeight > 0 && entry.boundingClientRect.height > 0) {
        // out of reach: keep its height, drop its nodes (a hidden panel measures 0: left alone)
        unit.el.style.height = `${entry.boundingClientRect.height}px`;
        unit.el.replaceChildren();
        unit.collapsed = true;
      }
    }
  },
  { root: transcript, rootMargin: "1500px 0px 1500px 0px" },
);

function watch(unit: Unit): void {
  units.set(unit.el, unit);
  observer.observe(unit.el);
}

function unwatch(el: Element): void {
  units.delete(el);
  observer.unobserve(el);
}

function renderBlock(markdown: string): string {
  mdRenders++;
  return renderMarkdown(markdown); // markdown-it, html:false, checked links
}

function newChunk(view: AgentView): Chunk {
  const chunk: Chunk = {
    el: el("div", "md-chunk"),
    collapsed: false,
    html: "",
    blocks: 0,
    size: 0,
    fill: () => {
      chunk.el.innerHTML = chunk.html; // HTML rendered once when its blocks closed
    },
  };
  view.chunks.push(chunk);
  view.node.insertBefore(chunk.el, view.tail?.parentNode ?? null);
  watch(chunk);
  return chunk;
}

function addBlocks(view: AgentView, blocks: string[]): void {
  for (const block of blocks) {
    mdBlocks++;
    const html = renderBlock(block);
    let chunk = view.chunks[view.chunks.length - 1];
    if (!chunk || chunk.collapsed || chunk.size >= CHUNK_BYTES) chunk = newChunk(view);
    chunk.html += html;
    chunk.size += block.length;
    chunk.blocks++;
    chunk.el.insertAdjacentHTML("beforeend", html);
  }
}

/** Brings an agent message's view up to its text: new closed blocks rendered, the tail extended. */
function updateAgent(view: AgentView, text: string, open: boolean): void {
  if (!open) {
    addBlocks(view, view.splitter.finish(text));
    (view.tail?.parentNode as HTMLElement | null | undefined)?.remove();
    view.tail = undefined;
    view.open = false;
    return;
  }
  addBlocks(view, view.splitter.feed(text));
  if (!view.tail) {
    const box = el("div", "md-tail");
    view.tail = document.createTextNode("");
    box.append(view.tail);
    view.node.append(box);
    view.tailFrom = view.tailTo = view.splitter.tailStart;
  }
  const from = view.splitter.tailStart;
  if (from !== view.tailFrom) {
    view.tail.data = text.slice(from);
  } else if (text.length > view.tailTo) {
    view.tail.appendData(text.slice(view.tailTo)); // only what arrived since the last frame
  }
  view.tailFrom = from;
  view.tailTo = text.length;
}

function isOpen(item: Item): boolean {
  return state.openText === item.id && state.busy;
}

function makeSlot(item: Item): Slot {
  const slot: Slot = {
    el: el("div", `slot slot-${item.type}`),
    collapsed: false,
    item,
    rev: item.rev,
    fill: () => slot.el.replaceChildren(renderItem(slot.item)),
  };
  if (item.type === "agent") {
    const node = el("div", "item agent markdown");
    slot.agent = { node, splitter: new BlockSplitter(), chunks: [], tail: undefined, tailFrom: 0, tailTo: 0, open: true };
    slot.el.append(node);
    updateAgent(slot.agent, item.text, isOpen(item));
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
  const text = document.createTextNode(item.text);
  const body = el("div", "thought-text");
  body.append(text);
  node.append(el("summary", "", "Thinking"), body);
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
    slot.thought.text.appendData(item.text.slice(slot.thought.shown));
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

function paint(): void {
  frame = 0;
  const stick = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  const alive = new Set<number>();
  let previous: HTMLElement | null = null;
  for (const item of state.items) {
    alive.add(item.id);
    let slot = slots.get(item.id);
    if (!slot) {
      slot = makeSlot(item);
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
  if (stick) transcript.scrollTop = transcript.scrollHeight;
  app.dataset.mdBlocks = String(mdBlocks);
  app.dataset.mdRenders = String(mdRenders);

  app.dataset.state = state.busy ? "busy" : "idle";
  stopButton.disabled = !state.busy;
  planBox.replaceChildren(...state.plan.map((p) => el("div", `plan-entry plan-${p.status}`, `${p.status === "completed" ? "✓" : p.status === "in_progress" ? "▸" : "○"} ${p.content}`)));
  planBox.hidden = state.plan.length === 0;
  if (state.usage) {
    const pct = state.usage.size ? Math.round((100 * state.usage.used) / state.usage.size) : 0;
    const cost = state.usage.cost ? ` · ${state.usage.cost.amount.toFixed(4)} ${state.usage.cost.currency}` : "";
    usageLine.textContent = `context ${state.usage.used.toLocaleString()} / ${state.usage.size.toLocaleString()} tokens (${pct}%)${cost}`;
  } else {
    usageLine.textContent = "";
  }
  paintPickers();
}

function paintPickers(): void {
  const current = state.currentSession ?? "";
  const options = [el("option", "", state.title || (current ? `Session ${current.slice(0, 8)}` : "New session"))];
  options[0]!.value = "";
  for (const s of state.sessions) {
    if (s.sessionId === current) continue;
    const o = el("option", "", s.title || s.sessionId.slice(0, 8));
    o.value = s.sessionId;
    options.push(o);
  }
  const key = JSON.stringify(options.map((o) => [o.value, o.textContent]));
  if (sessionSelect.dataset.key !== key) {
    sessionSelect.dataset.key = key;
    sessionSelect.replaceChildren(...options);
  }
  // the first option is the panel's session: a pick that did not load (refused) must not stay shown
  if (sessionSelect.value !== "" && document.activeElement !== sessionSelect) sessionSelect.value = "";
  const selects = state.selects.map((sel) => {
    const node = el("select", `picker picker-${sel.id}`);
    node.title = sel.name;
    node.dataset.configId = sel.id;
    for (const o of sel.options) {
      const opt = el("option", "", o.name);
      opt.value = o.value;
      opt.selected = o.value === sel.currentValue;
      node.append(opt);
    }
    node.addEventListener("change", () => send({ type: "setConfigOption", configId: sel.id, value: node.value }));
    return node;
  });
  if (!pickers.contains(document.activeElement)) pickers.replaceChildren(...selects);
}

function schedule(): void {
  if (!frame) frame = requestAnimationFrame(paint);
}

window.addEventListener("message", (ev: MessageEvent<HostToWebview>) => {
  const msg = ev.data;
  if (!msg || msg.type !== "events" || !Array.isArray(msg.events)) return;
  for (const e of msg.events as ChatEvent[]) state = fold(state, e);
  schedule();
});

send({ type: "ready" });
