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

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration("agentServer");
  return {
    path: c.get<string>("path", "agent-server") || "agent-server",
    args: c.get<string[]>("args", []),
    baseUrl: c.get<string>("baseUrl", ""),
    model: c.get<string>("model", ""),
    mode: c.get<string>("mode", ""),
  };
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
