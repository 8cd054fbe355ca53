/**
 * The server process: spawn (own process group, no shell), NDJSON byte streams for the ACP SDK with
 * non-JSON stdout lines skipped and logged, the stderr tail, and killing the whole group.
 *
 * Must not: know any ACP method (the SDK in `client` does the JSON-RPC).
 */

import { spawn, type ChildProcess } from "node:child_process";
import { Readable } from "node:stream";

export interface SpawnOptions {
  command: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** One line of diagnostics (stderr of the server, skipped stdout lines, exits). */
  log: (line: string) => void;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  error?: string;
}

const STDERR_TAIL_BYTES = 4000;

/** True when `line` is a JSON object (the only thing ACP puts on a line). */
export function isJsonObjectLine(line: string): boolean {
  const t = line.trim();
  if (!t.startsWith("{")) return false;
  try {
    const v: unknown = JSON.parse(t);
    return typeof v === "object" && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

/**
 * A byte transform that passes whole lines that are JSON objects and drops (and reports) others,
 * so a stray print on the server's stdout never kills the connection.
 */
export function jsonLineFilter(onSkipped: (line: string) => void): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  // The pieces of the line not ended yet: each chunk is searched for its own line breaks only, so a
  // long line costs time linear in its length (joining and re-searching the whole pending text on
  // every chunk made a 33 MB line take minutes).
  let pieces: string[] = [];
  const emit = (line: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    if (line.trim() === "") return;
    if (isJsonObjectLine(line)) controller.enqueue(encoder.encode(line + "\n"));
    else onSkipped(line);
  };
  const take = (text: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    let start = 0;
    let nl: number;
    while ((nl = text.indexOf("\n", start)) !== -1) {
      pieces.push(text.slice(start, nl));
      const line = pieces.length === 1 ? pieces[0]! : pieces.join("");
      pieces = [];
      emit(line, controller);
      start = nl + 1;
    }
    if (start < text.length) pieces.push(text.slice(start));
  };
  return new TransformStream({
    transform(chunk, controller) {
      take(decoder.decode(chunk, { stream: true }), controller);
    },
    flush(controller) {
      take(decoder.decode(), controller);
      const rest = pieces.join("");
      pieces = [];
      emit(rest, controller);
    },
  });
}

/** A running server process with the streams the ACP SDK needs. */
export class AgentProcess {
  readonly child: ChildProcess;
  readonly input: ReadableStream<Uint8Array>;
  readonly output: WritableStream<Uint8Array>;
  readonly exited: Promise<ExitStatus>;
  private stderr = "";
  private exitStatus: ExitStatus | undefined;

  constructor(opts: SpawnOptions) {
    this.child = spawn(opts.command, [...opts.args], {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true, // its own process group: killed as a whole, tools included
      shell: false,
    });
    const child = this.child;
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitStatus = { code, signal };
        resolve(this.exitStatus);
      });
      child.once("error", (err) => {
        this.exitStatus = { code: null, signal: null, error: String(err.message ?? err) };
        resolve(this.exitStatus);
      });
    });
    let partial = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => {
      this.stderr = (this.stderr + text).slice(-STDERR_TAIL_BYTES);
      partial += text;
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) opts.log(line);
    });
    child.stdin!.on("error", () => {}); // EPIPE after an exit: reported through `exited`
    const stdout = Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>;
    this.input = stdout.pipeThrough(jsonLineFilter((line) => opts.log(`[skipped non-JSON stdout line] ${line.slice(0, 500)}`)));
    this.output = new WritableStream<Uint8Array>({
      write: (chunk) =>
        new Promise<void>((ok, fail) => {
          if (this.exitStatus) return fail(new Error("the agent process has exited"));
          child.stdin!.write(chunk, (err) => (err ? fail(err) : ok()));
        }),
      close: () => {
        child.stdin!.end();
      },
    });
  }

  get alive(): boolean {
    return this.exitStatus === undefined;
  }

  /** The last few KB of the server's stderr. */
  stderrTail(): string {
    return this.stderr;
  }

  /** Sends `signal` to the whole process group (ignores a group already gone). */
  signalGroup(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // the group is gone
    }
  }

  /** SIGTERM to the group, then SIGKILL after `graceMs`; resolves when the process has exited. */
  async kill(graceMs = 1500): Promise<ExitStatus> {
    this.signalGroup("SIGTERM");
    const timer = new Promise<null>((r) => setTimeout(() => r(null), graceMs));
    const done = await Promise.race([this.exited, timer]);
    this.signalGroup("SIGKILL"); // tools the server left behind die too
    return done ?? (await this.exited);
  }
}
