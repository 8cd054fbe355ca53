/**
 * The first-run page's facts: which endpoint and model the server will use and where its key comes
 * from (`agent-server --check-config --json`, run with the server's own command and environment),
 * whether that endpoint answers (then `--check-config --json --probe`: the server asks its endpoint's
 * `/models` with its own key, as its first request would), and whether it is agent-server's offline
 * endpoint (a script, not a model: its `/models` says `owned_by: "agent-server-offline"`; asked only of
 * an endpoint on this machine, without a key).
 *
 * Must not: send a key anywhere itself, or print one (the JSON never holds it; the offline check sends
 * none; only the server's own probe carries the key, to the endpoint it is configured for).
 */

import { execFile } from "node:child_process";
import type { SetupView } from "./protocol";

/** What `--check-config --json` prints (agent_server/cli/main.py). */
export interface CheckConfig {
  ok: boolean;
  error?: string;
  source?: string | null;
  profile?: string;
  model?: string | null;
  baseUrl?: string | null;
  keyRequired?: boolean;
  keySource?: string | null;
  keyVariable?: string | null;
  /** The config options a new session starts with (`mode`, `model`): the pickers before the first prompt. */
  configOptions?: unknown[];
  /** With `--probe`: the endpoint's answer to `GET <baseUrl>/models` (`message` says what happened). */
  endpoint?: { ok: boolean; message: string };
}

/** Parses the command's stdout (its last JSON line); an older server (no `--json`) or a failure says so. */
export function parseCheckConfig(stdout: string, stderr: string, code: number | null): CheckConfig {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    const parsed = JSON.parse(line) as CheckConfig;
    if (typeof parsed === "object" && parsed !== null && typeof parsed.ok === "boolean") return parsed;
  } catch {
    // not JSON: below
  }
  if (code === 2 && /unknown argument/.test(stderr)) return { ok: false, error: "This agent-server cannot report its configuration (no --check-config --json): update it." };
  const why = stderr.trim().split("\n").slice(-3).join(" ") || `exit code ${code}`;
  return { ok: false, error: `Could not read the server's configuration: ${why}` };
}

/** The page's view of a check (`secretKey`: a key is in VS Code's secret storage, passed as AGENT_SERVER_API_KEY). */
export function setupView(check: CheckConfig, secretKey: boolean, offline: boolean): SetupView {
  if (!check.ok) return { error: check.error ?? "Could not read the server's configuration." };
  const keySource = secretKey && check.keySource === "AGENT_SERVER_API_KEY" ? "VS Code's secret storage (Set API Key)" : (check.keySource ?? null);
  return {
    endpoint: check.baseUrl ?? null,
    model: check.model ?? null,
    offline,
    keyMissing: check.keyRequired === true && !check.keySource,
    keySource,
  };
}

/** An endpoint on this machine (`localhost`, `127.x`, `::1`): the only ones probed. */
export function isLoopback(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === "localhost" || host === "[::1]" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
  } catch {
    return false;
  }
}

/** Whether the endpoint's `/models` says it is agent-server's offline endpoint (no key sent; 2 s at most). */
export async function isOfflineEndpoint(baseUrl: string | null | undefined): Promise<boolean> {
  if (!baseUrl || !isLoopback(baseUrl)) return false;
  try {
    const res = await fetch(`${baseUrl.replace(/\/+$/, "")}/models`, { signal: AbortSignal.timeout(2000) });
    const body = (await res.json()) as { data?: { owned_by?: unknown }[] };
    return Array.isArray(body.data) && body.data.some((m) => m?.owned_by === "agent-server-offline");
  } catch {
    return false;
  }
}

/**
 * What the page says of the endpoint after the probe, or undefined when nothing was probed: whether the
 * first prompt can reach it, in words a user acts on (the server's own message after them).
 */
export function reachView(check: CheckConfig): SetupView["reach"] {
  if (!check.ok || !check.endpoint || typeof check.endpoint.ok !== "boolean") return undefined;
  const message = String(check.endpoint.message ?? "").trim();
  if (check.endpoint.ok) return { state: "ok", text: `answers — ${message}` };
  return { state: "failed", text: `does not answer as an endpoint should, so a prompt would fail: ${message} Check the base URL and the key (Open Settings, Set API Key), then Check Again.` };
}

/** Runs `command args --check-config --json` (`probe`: with `--probe`; 20 s at most). */
export function checkConfig(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, probe = false): Promise<CheckConfig> {
  return new Promise((resolve) => {
    const child = execFile(command, [...args, "--check-config", "--json", ...(probe ? ["--probe"] : [])], { env, cwd, timeout: 20_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : null) : 0;
      if (err && code === null) resolve({ ok: false, error: `Could not run ${command}: ${err.message}` });
      else resolve(parseCheckConfig(String(stdout), String(stderr), code));
    });
    child.stdin?.end(); // another ACP agent that ignores the flag and serves stdin ends at once
  });
}
