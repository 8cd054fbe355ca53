// The whole extension (activate) with its panel in a fake webview and a scripted ACP agent as the
// server: what the webview is sent, folded as the webview folds it (panel.test.ts, findings3.test.ts).
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Uri, window, workspace } from "../stub/vscode";
import { activate } from "../../src/extension";
import type { ChatEvent, HostToWebview } from "../../src/protocol";
import { type ChatState, fold, initialState } from "../../webview/state";

export const AGENT = fileURLToPath(new URL("../fixtures/scripted-agent.mjs", import.meta.url));

/** The window's workspaceState (kept across a "reload": a second activate); a test file clears it before each test. */
export const memento = (() => {
  const values = new Map<string, unknown>();
  return { get: (k: string) => values.get(k), update: async (k: string, v: unknown) => void (v === undefined ? values.delete(k) : values.set(k, v)), keys: () => [...values.keys()], clear: () => values.clear() };
})();

export async function openPanel(script: object, settings: Record<string, unknown> = {}) {
  const log = join(mkdtempSync(join(tmpdir(), "panel-")), "methods.log");
  workspace.settings = { path: process.execPath, args: [AGENT, JSON.stringify({ ...script, log })], ...settings };
  workspace.workspaceFolders = [{ uri: Uri.file(process.cwd()) }];
  const context = {
    subscriptions: [] as unknown[],
    extensionUri: Uri.file("/extension"),
    secrets: { get: async () => undefined, onDidChange: () => ({ dispose() {} }), store: async () => {}, delete: async () => {} },
    workspaceState: memento,
  };
  await activate(context as never);
  const provider = window.providers.get("agentServer.panel") as { resolveWebviewView(v: unknown): void };
  const sent: ChatEvent[] = [];
  let receive: (m: unknown) => void = () => {};
  provider.resolveWebviewView({
    webview: {
      options: {},
      html: "",
      cspSource: "vscode-resource:",
      asWebviewUri: (u: Uri) => u,
      onDidReceiveMessage: (f: (m: unknown) => void) => ((receive = f), { dispose() {} }),
      postMessage: async (m: HostToWebview) => (sent.push(...m.events), true),
    },
    onDidDispose: () => ({ dispose() {} }),
    onDidChangeVisibility: () => ({ dispose() {} }),
    visible: true,
    show() {},
  });
  receive({ type: "ready" });
  const state = (): ChatState => sent.reduce(fold, initialState());
  const users = () => state().items.flatMap((i) => (i.type === "user" ? [i.text] : []));
  const until = async (what: string, ok: (s: ChatState) => boolean) => {
    const deadline = Date.now() + 15_000;
    while (!ok(state())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(state().items)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const answered = (text: string) => (s: ChatState) => !s.busy && s.items.some((i) => i.type === "agent" && i.text.includes(text));
  const agentLog = () => (existsSync(log) ? readFileSync(log, "utf8").split("\n").filter(Boolean) : []);
  return { send: (m: unknown) => receive(m), users, until, answered, state, agentLog, sent };
}
