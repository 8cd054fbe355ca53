/**
 * Settings (`agentServer.*`) and the API key (SecretStorage, "Agent: Set API Key"), turned into the
 * server's command line and environment.
 *
 * Must not: print or log a secret, or keep the key in settings.
 */

import * as vscode from "vscode";

export const SECRET_KEY = "agentServer.apiKey";

export interface Settings {
  path: string;
  args: string[];
  baseUrl: string;
  model: string;
  mode: string;
}

/**
 * Settings that choose what runs (`path`, `args`) or where the API key goes (`baseUrl`, `model`):
 * taken from the user's own settings or the default only, never from a workspace or folder
 * (`.vscode/settings.json`, a `.code-workspace` file). A cloned repository, or a command the agent
 * ran in the workspace, can write those files; a value there must not choose the server binary or
 * send the key elsewhere. package.json gives them `"scope": "machine"` (and lists them in
 * `restrictedConfigurations`) so VS Code itself ignores workspace values; reading `inspect()` here
 * keeps that true even if VS Code ever merged them in.
 */
export const LAUNCH_KEYS = ["path", "args", "baseUrl", "model"] as const;

/** Session modes from the strictest to the loosest (the server's default is `workspace-write`). */
export const MODES = ["read-only", "workspace-write", "accept-edits", "danger-full-access"] as const;

type Inspected<T> = { defaultValue?: T; globalValue?: T; workspaceValue?: T; workspaceFolderValue?: T } | undefined;

function userValue<T>(i: Inspected<T>, fallback: T, valid: (v: unknown) => v is T): T {
  if (valid(i?.globalValue)) return i!.globalValue;
  if (valid(i?.defaultValue)) return i!.defaultValue;
  return fallback;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

/**
 * `agentServer.mode`: the user's value; a workspace or folder value is taken only when it is
 * stricter (`read-only` over `workspace-write` over `accept-edits` over `danger-full-access`; an empty user value counts
 * as the server's default, `workspace-write`). A workspace can ask for less, never for more.
 */
export function effectiveMode(i: Inspected<string>): string {
  const user = userValue(i, "", isString);
  const rank = (m: string) => (m === "" ? MODES.indexOf("workspace-write") : MODES.indexOf(m as (typeof MODES)[number]));
  let mode = user;
  for (const v of [i?.workspaceValue, i?.workspaceFolderValue]) {
    if (!isString(v) || v === "" || rank(v) < 0) continue;
    if (rank(v) < rank(mode)) mode = v;
  }
  return mode;
}

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration("agentServer");
  return {
    path: userValue(c.inspect<string>("path"), "agent-server", isString) || "agent-server",
    args: userValue(c.inspect<string[]>("args"), [], isStrings),
    baseUrl: userValue(c.inspect<string>("baseUrl"), "", isString),
    model: userValue(c.inspect<string>("model"), "", isString),
    mode: effectiveMode(c.inspect<string>("mode")),
  };
}

/** The launch settings that differ between two readings (`path`, `args` …), for the notice. */
export function changedLaunchSettings(a: Settings, b: Settings): string[] {
  return LAUNCH_KEYS.filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}

/** The server's environment: ours, plus the settings and the key (never logged). */
export function serverEnv(settings: Settings, apiKey: string | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (settings.baseUrl) env.AGENT_SERVER_BASE_URL = settings.baseUrl;
  if (settings.model) env.AGENT_SERVER_MODEL = settings.model;
  if (apiKey) env.AGENT_SERVER_API_KEY = apiKey;
  return env;
}

/** "Agent: Set API Key": asks for the key (hidden input) and stores it in SecretStorage. */
export async function promptForApiKey(secrets: vscode.SecretStorage): Promise<boolean> {
  const value = await vscode.window.showInputBox({
    title: "agent-server API key",
    prompt: "Stored in VS Code's secret storage and passed to agent-server as AGENT_SERVER_API_KEY. Empty clears it.",
    password: true,
    ignoreFocusOut: true,
  });
  if (value === undefined) return false;
  if (value.trim() === "") await secrets.delete(SECRET_KEY);
  else await secrets.store(SECRET_KEY, value.trim());
  return true;
}
