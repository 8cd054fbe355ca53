/**
 * `@` mentions: a file, a folder, the selection, the problems (diagnostics) or the terminal's last
 * output, each as the embedded `resource` block the prompt carries (docs/protocol.md "Selections in
 * prompts": `file://` URIs; the problems and the terminal under `problems:` and `terminal:` URIs).
 * The pure builders are here; `extension.ts` asks the user (QuickPick) and reads the editor.
 *
 * Must not: read a file that is not text, or more than `MAX_MENTION_BYTES` of one (said instead).
 */

import { pathToFileURL } from "node:url";
import type { MentionView } from "./protocol";

export type ResourceBlock = { type: "resource"; resource: { uri: string; text: string; mimeType?: string } };

/** A file or terminal output larger than this is cut (its end kept for the terminal, its start for a file) and said. */
export const MAX_MENTION_BYTES = 256 * 1024;

/** Entries listed for a folder at most. */
export const MAX_FOLDER_ENTRIES = 500;

export function fileMention(path: string, relative: string, text: string): { block: ResourceBlock; view: MentionView } {
  const cut = text.length > MAX_MENTION_BYTES ? `${text.slice(0, MAX_MENTION_BYTES)}\n[… cut: the file is ${text.length} characters; the first ${MAX_MENTION_BYTES} are shown]` : text;
  return { block: { type: "resource", resource: { uri: pathToFileURL(path).href, text: cut, mimeType: "text/plain" } }, view: { kind: "file", label: `@${relative}` } };
}

/** A folder as the list of what is in it (relative paths, folders with a trailing `/`). */
export function folderMention(path: string, relative: string, entries: string[]): { block: ResourceBlock; view: MentionView } {
  const shown = entries.slice(0, MAX_FOLDER_ENTRIES);
  const more = entries.length > shown.length ? `\n[… and ${entries.length - shown.length} more entries]` : "";
  const href = pathToFileURL(path).href.replace(/\/?$/, "/");
  return { block: { type: "resource", resource: { uri: href, text: `Folder ${relative || "."} holds:\n${shown.join("\n")}${more}`, mimeType: "text/plain" } }, view: { kind: "folder", label: `@${relative || "."}/` } };
}

export interface ProblemLike {
  path: string;
  line: number;
  character: number;
  severity: "error" | "warning" | "information" | "hint";
  message: string;
  source?: string;
}

/** The problems (errors and warnings first), one a line: `path:line:col severity: message (source)`. */
export function problemsMention(problems: ProblemLike[]): { block: ResourceBlock; view: MentionView } {
  const order = { error: 0, warning: 1, information: 2, hint: 3 };
  const sorted = [...problems].sort((a, b) => order[a.severity] - order[b.severity] || a.path.localeCompare(b.path) || a.line - b.line);
  const lines = sorted.map((p) => `${p.path}:${p.line}:${p.character} ${p.severity}: ${p.message}${p.source ? ` (${p.source})` : ""}`);
  const text = lines.length ? lines.join("\n") : "No problems are reported in the workspace.";
  return { block: { type: "resource", resource: { uri: "problems:workspace", text, mimeType: "text/plain" } }, view: { kind: "problems", label: `@problems (${problems.length})` } };
}

/** A terminal's last command and its output (its end kept when long). */
export function terminalMention(name: string, command: string, output: string): { block: ResourceBlock; view: MentionView } {
  const cut = output.length > MAX_MENTION_BYTES ? `[… the first ${output.length - MAX_MENTION_BYTES} characters cut]\n${output.slice(-MAX_MENTION_BYTES)}` : output;
  return {
    block: { type: "resource", resource: { uri: `terminal:${encodeURIComponent(name)}`, text: `$ ${command}\n${stripAnsi(cut)}`, mimeType: "text/plain" } },
    view: { kind: "terminal", label: `@terminal ${name}` },
  };
}

/** Terminal output without its colour and cursor escapes (the model reads text). */
export function stripAnsi(text: string): string {
  // CSI … final byte, OSC … BEL/ST, and single-character escapes
  return text.replace(/\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]/g, "");
}
