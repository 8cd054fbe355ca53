#!/usr/bin/env node
// ACP client harness on the official TypeScript SDK (@agentclientprotocol/sdk).
//
// Role: prove that an agent works with a second, independent ACP client implementation. It spawns
// the agent (own process group), runs initialize -> session/new -> session/prompt through the
// SDK's client app, prints every session/update as it arrives (one JSON line each on stdout),
// records every raw JSON-RPC line in both directions (a tee on the byte streams handed to
// ndJsonStream) and writes them, with the stop reason, to --transcript FILE as one JSON document.
// Exit status: 0 when the prompt ended with a stopReason, 1 otherwise.
//
//   node clients/ts-harness/run.mjs --prompt "hello" [--cwd DIR] [--transcript FILE] -- agent-server

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { isAbsolute, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { Readable } from "node:stream";
import * as stableAcp from "@agentclientprotocol/sdk";
import * as unstableAcp from "@agentclientprotocol/sdk/unstable";

let acp = stableAcp;

const USAGE = `usage: node run.mjs --prompt TEXT [options] -- AGENT_COMMAND [ARGS...]

options:
  --prompt TEXT              the user prompt (required)
  --cwd DIR                  session cwd (default: the current directory); made absolute
  --transcript FILE          write the JSON transcript document to FILE
  --timeout SECONDS          give up after this long (default 120)
  --permission CHOICE        answer to session/request_permission: an optionId or kind
                             (allow_once, reject_once, ...) or "cancelled" (default reject_once)
  --fs                       advertise fs.readTextFile/writeTextFile and serve them from disk
  --agent-server-ext         add the agentServer extension block to clientCapabilities._meta
  --client-capabilities JSON exact clientCapabilities to send (overrides --fs/--agent-server-ext)
  --mcp-servers JSON         the session/new mcpServers (default [])
  --session-params JSON      more params of the session request (systemPrompt, _meta ...)
  --load ID | --resume ID    session/load or session/resume ID instead of session/new
  --set-config JSON          [{configId, value, type?}]: session/set_config_option each, before the prompt
  --prompt-blocks JSON       the prompt's content blocks (instead of one text block of --prompt)
  --unstable                 the SDK's unstable client (@agentclientprotocol/sdk/unstable)
  --elicitation JSON         answer every elicitation/create with this (e.g. {"action":"decline"});
                             each one asked is printed as {"type":"elicitation/create","params":...}
  --quiet                    do not print session/update lines
  --verbose                  copy the agent's stderr to this process's stderr
`;

const AGENT_SERVER_EXTENSION = {
  version: 1,
  bufferVersions: true,
  applyWorkspaceEdit: true,
  positionEncodings: ["utf-16", "utf-8"],
};

function parseArgs(argv) {
  const opts = {
    prompt: null,
    cwd: process.cwd(),
    transcript: null,
    timeout: 120,
    permission: "reject_once",
    fs: false,
    agentServerExt: false,
    clientCapabilities: null,
    mcpServers: [],
    sessionParams: {},
    load: null,
    resume: null,
    setConfig: [],
    promptBlocks: null,
    unstable: false,
    elicitation: null,
    quiet: false,
    verbose: false,
    command: [],
  };
  const needValue = (i, flag) => {
    if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    switch (arg) {
      case "--":
        opts.command = argv.slice(i + 1);
        i = argv.length;
        break;
      case "--prompt":
        opts.prompt = needValue(i++, arg);
        break;
      case "--cwd":
        opts.cwd = needValue(i++, arg);
        break;
      case "--transcript":
        opts.transcript = needValue(i++, arg);
        break;
      case "--timeout":
        opts.timeout = Number(needValue(i++, arg));
        break;
      case "--permission":
        opts.permission = needValue(i++, arg);
        break;
      case "--client-capabilities":
        opts.clientCapabilities = JSON.parse(needValue(i++, arg));
        break;
      case "--mcp-servers":
        opts.mcpServers = JSON.parse(needValue(i++, arg));
        break;
      case "--session-params":
        opts.sessionParams = JSON.parse(needValue(i++, arg));
        break;
      case "--load":
        opts.load = needValue(i++, arg);
        break;
      case "--resume":
        opts.resume = needValue(i++, arg);
        break;
      case "--set-config":
        opts.setConfig = JSON.parse(needValue(i++, arg));
        break;
      case "--prompt-blocks":
        opts.promptBlocks = JSON.parse(needValue(i++, arg));
        break;
      case "--unstable":
        opts.unstable = true;
        break;
      case "--elicitation":
        opts.elicitation = JSON.parse(needValue(i++, arg));
        break;
      case "--fs":
        opts.fs = true;
        break;
      case "--agent-server-ext":
        opts.agentServerExt = true;
        break;
      case "--quiet":
        opts.quiet = true;
        break;
      case "--verbose":
        opts.verbose = true;
        break;
      case "-h":
      case "--help":
        process.stdout.write(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (opts.prompt === null) throw new Error("--prompt is required");
  if (opts.command.length === 0) throw new Error("the agent command goes after --");
  if (!(opts.timeout > 0)) throw new Error("--timeout must be a positive number");
  opts.cwd = resolve(opts.cwd);
  return opts;
}

function sdkVersion() {
  try {
    const url = new URL("./node_modules/@agentclientprotocol/sdk/package.json", import.meta.url);
    return JSON.parse(readFileSync(url, "utf8")).version;
  } catch {
    return null;
  }
}

/** Records NDJSON lines per direction, with monotonic timestamps (seconds). */
class Transcript {
  constructor() {
    this.messages = [];
    this.partial = { "agent->client": Buffer.alloc(0), "client->agent": Buffer.alloc(0) };
  }

  feed(direction, chunk) {
    let buffer = Buffer.concat([this.partial[direction], Buffer.from(chunk)]);
    let newline;
    while ((newline = buffer.indexOf(0x0a)) !== -1) {
      this.record(direction, buffer.subarray(0, newline));
      buffer = buffer.subarray(newline + 1);
    }
    this.partial[direction] = buffer;
  }

  flush() {
    for (const direction of Object.keys(this.partial)) {
      if (this.partial[direction].length > 0) this.record(direction, this.partial[direction]);
      this.partial[direction] = Buffer.alloc(0);
    }
  }

  record(direction, bytes) {
    const raw = bytes.toString("utf8").replace(/\r$/, "");
    const entry = { seq: this.messages.length, direction, t: performance.now() / 1000, raw, message: null };
    try {
      entry.message = JSON.parse(raw);
    } catch (err) {
      entry.parse_error = String(err);
    }
    this.messages.push(entry);
  }
}

function permissionAnswer(choice, params) {
  if (choice === "cancelled") return { outcome: { outcome: "cancelled" } };
  for (const key of ["optionId", "kind"]) {
    const option = (params.options ?? []).find((o) => o[key] === choice);
    if (option) return { outcome: { outcome: "selected", optionId: option.optionId } };
  }
  return { outcome: { outcome: "cancelled" } };
}

function clientCapabilities(opts) {
  if (opts.clientCapabilities) return opts.clientCapabilities;
  const caps = { fs: { readTextFile: opts.fs, writeTextFile: opts.fs }, terminal: false };
  if (opts.agentServerExt) caps._meta = { agentServer: AGENT_SERVER_EXTENSION };
  return caps;
}

function buildClient(opts, emit) {
  const app = acp.client({ name: "agent-server-ts-harness" });
  app.onNotification(acp.methods.client.session.update, ({ params }) => {
    emit({ type: "session/update", params });
  });
  app.onRequest(acp.methods.client.session.requestPermission, ({ params }) =>
    permissionAnswer(opts.permission, params),
  );
  if (opts.elicitation) {
    app.onRequest(acp.methods.client.elicitation.create, ({ params }) => {
      emit({ type: "elicitation/create", params });
      return opts.elicitation;
    });
  }
  if (opts.fs) {
    app.onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
      if (!isAbsolute(params.path)) throw acp.RequestError.invalidParams({ path: params.path });
      let text = await readFile(params.path, "utf8");
      if (params.line != null || params.limit != null) {
        const lines = text.split(/(?<=\n)/);
        const start = Math.max((params.line ?? 1) - 1, 0);
        text = lines.slice(start, params.limit == null ? undefined : start + params.limit).join("");
      }
      return { content: text };
    });
    app.onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
      if (!isAbsolute(params.path)) throw acp.RequestError.invalidParams({ path: params.path });
      await writeFile(params.path, params.content, "utf8");
      return {};
    });
  }
  return app;
}

/** Spawn the agent in its own process group with teed stdio; returns handles for the SDK. */
function spawnAgent(opts, transcript) {
  const [cmd, ...args] = opts.command;
  const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
  const stderr = [];
  child.stderr.on("data", (chunk) => {
    stderr.push(chunk);
    if (opts.verbose) process.stderr.write(chunk);
  });
  const exited = new Promise((resolveExit) => {
    child.on("exit", (code, signal) => resolveExit({ code, signal }));
    child.on("error", (err) => resolveExit({ code: null, signal: null, error: String(err) }));
  });
  child.stdin.on("error", () => {}); // EPIPE when the agent is gone: reported via the exit status

  const input = Readable.toWeb(child.stdout).pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        transcript.feed("agent->client", chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  const output = new WritableStream({
    write(chunk) {
      transcript.feed("client->agent", chunk);
      return new Promise((ok, fail) => child.stdin.write(chunk, (err) => (err ? fail(err) : ok())));
    },
    close() {
      child.stdin.end();
    },
  });
  return { child, input, output, exited, stderrText: () => Buffer.concat(stderr).toString("utf8") };
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // group already gone
  }
}

async function shutdown(agent) {
  agent.child.stdin.end();
  const graceful = await Promise.race([agent.exited, new Promise((r) => setTimeout(() => r(null), 2000))]);
  killGroup(agent.child, "SIGTERM");
  await new Promise((r) => setTimeout(r, graceful ? 50 : 500));
  killGroup(agent.child, "SIGKILL"); // no orphans: tool processes the agent left behind die too
  return (await Promise.race([agent.exited, new Promise((r) => setTimeout(() => r(null), 2000))])) ?? {};
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`run.mjs: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }

  if (opts.unstable) acp = unstableAcp;
  const transcript = new Transcript();
  const emit = (obj) => {
    if (!opts.quiet || obj.type !== "session/update") process.stdout.write(JSON.stringify(obj) + "\n");
  };
  const agent = spawnAgent(opts, transcript);
  for (const sig of ["SIGINT", "SIGTERM"]) {
    process.on(sig, () => {
      killGroup(agent.child, "SIGKILL");
      process.exit(1);
    });
  }

  const doc = {
    harness: "clients/ts-harness/run.mjs",
    sdk: { name: "@agentclientprotocol/sdk", version: sdkVersion() },
    agentCommand: opts.command,
    cwd: opts.cwd,
    prompt: opts.prompt,
    initialize: null,
    sessionId: null,
    responses: [],
    stopReason: null,
    error: null,
    agentExit: null,
    stderrTail: "",
    messages: transcript.messages,
  };

  const app = buildClient(opts, emit);
  const stream = acp.ndJsonStream(agent.output, agent.input);
  let timer;
  const timeout = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`timed out after ${opts.timeout}s`)), opts.timeout * 1000);
  });
  const died = agent.exited.then(async (status) => {
    await new Promise((r) => setTimeout(r, 200)); // let the last stdout lines be processed
    throw new Error(`agent exited before the turn ended (${JSON.stringify(status)})`);
  });
  died.catch(() => {});

  try {
    const response = await Promise.race([
      app.connectWith(stream, async (ctx) => {
        doc.initialize = await ctx.request(acp.methods.agent.initialize, {
          protocolVersion: acp.PROTOCOL_VERSION,
          clientCapabilities: clientCapabilities(opts),
          clientInfo: { name: "agent-server-ts-harness", version: "0.1.0" },
        });
        const params = { cwd: opts.cwd, mcpServers: opts.mcpServers, ...opts.sessionParams };
        let method = acp.methods.agent.session.new;
        if (opts.load !== null || opts.resume !== null) {
          params.sessionId = opts.load ?? opts.resume;
          method = opts.load !== null ? acp.methods.agent.session.load : acp.methods.agent.session.resume;
        }
        const session = await ctx.request(method, params);
        doc.sessionId = session.sessionId ?? params.sessionId;
        doc.responses.push({ method: method, result: session });
        for (const change of opts.setConfig) {
          const result = await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId: doc.sessionId, ...change });
          doc.responses.push({ method: "session/set_config_option", result });
        }
        return ctx.request(acp.methods.agent.session.prompt, {
          sessionId: doc.sessionId,
          prompt: opts.promptBlocks ?? [{ type: "text", text: opts.prompt }],
        });
      }),
      timeout,
      died,
    ]);
    doc.stopReason = response.stopReason ?? null;
    if (doc.stopReason === null) doc.error = `prompt response without stopReason: ${JSON.stringify(response)}`;
  } catch (err) {
    doc.error = err instanceof Error ? err.message : JSON.stringify(err);
  } finally {
    clearTimeout(timer);
  }

  doc.agentExit = await shutdown(agent);
  transcript.flush();
  const stderrText = agent.stderrText();
  doc.stderrTail = stderrText.length > 4000 ? stderrText.slice(-4000) : stderrText;
  emit(doc.stopReason !== null ? { type: "stop", stopReason: doc.stopReason } : { type: "error", error: doc.error });
  if (doc.error !== null) process.stderr.write(`run.mjs: ${doc.error}\n--- agent stderr (tail) ---\n${doc.stderrTail}\n`);
  if (opts.transcript) writeFileSync(opts.transcript, JSON.stringify(doc, null, 1) + "\n");
  process.exit(doc.stopReason !== null && doc.error === null ? 0 : 1);
}

main();
