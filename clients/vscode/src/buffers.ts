/**
 * `fs/read_text_file` and `fs/write_text_file` from the editor's documents: the unsaved text of an
 * open document with its `version` and `isDirty` (the `_meta.agentServer` block of PROTOCOL.md
 * "Buffer versions"), else `workspace.fs`.
 *
 * A document that is not UTF-8 — VS Code holds it in another encoding (`TextDocument.encoding`), or
 * its bytes on disk do not decode as UTF-8 (a fatal `TextDecoder`; VS Code shows each bad byte as
 * U+FFFD and would save U+FFFD back) — is refused with a JSON-RPC error carrying
 * `data.agentServer.notUtf8` (docs/protocol.md "Files that are not UTF-8"), never answered with text.
 *
 * One document per file: a path is matched to the open documents by its real path (symlinks resolved
 * both ways: a workspace opened through a link, the server naming the link's target), and a file
 * that is not open is named as the workspace spells it, so VS Code never holds it twice.
 *
 * Must not: decide anything about proposals, answer text decoded lossily, write through a second
 * document of a file that is open under another path.
 */

import * as vscode from "vscode";
import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import * as nodePath from "node:path";
import type * as acp from "@agentclientprotocol/sdk";
import { RequestError } from "@agentclientprotocol/sdk";
import { modelChangesLineBreaks, modelHolds, modelLineBreak, sha256 } from "./proposalModel";

/**
 * The real path of `p`: symlinks resolved; for a path that does not exist (yet), its nearest existing
 * parent's real path joined with the rest.
 */
export function realPath(p: string): string {
  try {
    return realpathSync.native(p);
  } catch {
    const parent = nodePath.dirname(p);
    return parent === p ? p : nodePath.join(realPath(parent), nodePath.basename(p));
  }
}

/**
 * Why writing `uri` now would land outside the workspace, or undefined: its real path (for a file
 * still to be created, its nearest existing folder's real path joined with the rest) lies outside
 * the real path of every `file:` workspace folder. Synchronous: nothing is awaited between this
 * check and the write it guards (finding 20: a folder swapped for a link while a proposal waited).
 */
export function leadsOutside(uri: vscode.Uri): string | undefined {
  if (uri.scheme !== "file") return undefined;
  const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file");
  if (folders.length === 0) return undefined;
  const real = realPath(uri.fsPath);
  for (const folder of folders) {
    const root = realPath(folder.uri.fsPath);
    if (real === root || real.startsWith(root + nodePath.sep)) return undefined;
  }
  return `${uri.fsPath}: the path now leads outside the workspace (to ${real}: a link was swapped into it)`;
}

/**
 * Why writing `uri` now would land elsewhere than `real`, its real path when the proposal arrived, or
 * undefined: a link swapped in while the proposal waited (a folder made a link to `.git/hooks`) carries
 * the write to another file — inside the workspace too — than the one the user reviewed. Synchronous,
 * as `leadsOutside`.
 */
export function movedSince(uri: vscode.Uri, real: string | undefined): string | undefined {
  if (uri.scheme !== "file" || real === undefined) return undefined;
  const now = realPath(uri.fsPath);
  if (now === real) return undefined;
  return `${uri.fsPath}: the path now leads to ${now}, not to ${real} where it led when the change was proposed (a link was swapped into it)`;
}

/** Whether `uri` names a path under a workspace folder as written (links not resolved). */
function lexicallyInside(uri: vscode.Uri): boolean {
  return uri.scheme === "file" && (vscode.workspace.workspaceFolders ?? []).some((f) =>
    f.uri.scheme === "file" && (uri.fsPath === f.uri.fsPath || uri.fsPath.startsWith(f.uri.fsPath + nodePath.sep)));
}

/**
 * The open (not closed) text document of `uri`, if any: the same URI, else a `file:` document whose
 * real path is the same file (a dirty one first: the user's unsaved text is the file's text).
 */
export function openDocument(uri: vscode.Uri): vscode.TextDocument | undefined {
  const key = uri.toString();
  const docs = vscode.workspace.textDocuments.filter((d) => !d.isClosed);
  const same = docs.filter((d) => d.uri.toString() === key);
  if (uri.scheme !== "file") return same[0];
  const real = realPath(uri.fsPath);
  const all = [...same, ...docs.filter((d) => d.uri.scheme === "file" && d.uri.toString() !== key && realPath(d.uri.fsPath) === real)];
  return all.find((d) => d.isDirty) ?? all[0];
}

/**
 * `uri` as the user's editor names it: the open document's URI when the file is open under another
 * path, else the path under the workspace folder that holds it (a folder opened through a symlink:
 * the server may name the link's target), else `uri` itself.
 */
export function editorUri(uri: vscode.Uri): vscode.Uri {
  if (uri.scheme !== "file") return uri;
  const doc = openDocument(uri);
  if (doc) return doc.uri;
  const real = realPath(uri.fsPath);
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    if (folder.uri.scheme !== "file") continue;
    if (uri.fsPath === folder.uri.fsPath || uri.fsPath.startsWith(folder.uri.fsPath + nodePath.sep)) return uri;
    const root = realPath(folder.uri.fsPath);
    if (real === root) return folder.uri;
    if (real.startsWith(root + nodePath.sep)) return vscode.Uri.joinPath(folder.uri, ...real.slice(root.length + 1).split(nodePath.sep));
  }
  return uri;
}

/** Lines `line` (1-based) .. `line + limit - 1` of `text`, line ends kept. */
export function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if (line == null && limit == null) return text;
  const lines = text.split(/(?<=\r\n|\n|\r(?!\n))/);
  const start = Math.max((line ?? 1) - 1, 0);
  return lines.slice(start, limit == null ? undefined : start + Math.max(limit, 0)).join("");
}

function absoluteUri(path: string): vscode.Uri {
  if (!path.startsWith("/")) throw RequestError.invalidParams({ path, reason: "the path must be absolute" });
  return vscode.Uri.file(path);
}

/** Why a document is not UTF-8 text: its `encoding` as VS Code names it (or null), and the reason. */
export interface NotUtf8 {
  encoding: string | null;
  reason: string;
}

const UTF8_ENCODINGS = new Set(["utf8", "utf8bom"]);

/** The first byte of `bytes` that is not part of valid UTF-8 (strict), or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const c = bytes[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let len = -1;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 1;
    else if (c === 0xe0) [len, lo] = [2, 0xa0];
    else if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) len = 2;
    else if (c === 0xed) [len, hi] = [2, 0x9f];
    else if (c === 0xf0) [len, lo] = [3, 0x90];
    else if (c >= 0xf1 && c <= 0xf3) len = 3;
    else if (c === 0xf4) [len, hi] = [3, 0x8f];
    if (len < 0) return i;
    for (let k = 1; k <= len; k++) {
      const b = bytes[i + k];
      if (b === undefined || b < (k === 1 ? lo : 0x80) || b > (k === 1 ? hi : 0xbf)) return i;
    }
    i += len + 1;
  }
  return -1;
}

/** Bytes as UTF-8 text, or the reason they are not (a fatal decoder: never a U+FFFD for a byte). */
export function decodeUtf8(bytes: Uint8Array): { text: string } | NotUtf8 {
  try {
    return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
  } catch {
    return { encoding: null, reason: `its bytes on disk are not UTF-8 (the first invalid byte is at offset ${firstInvalidUtf8(bytes)})` };
  }
}

/** The JSON-RPC error answering a read (or write) of a document that is not UTF-8. */
export function notUtf8Error(path: string, why: NotUtf8): RequestError {
  return new RequestError(-32603, `${path} is not UTF-8 text (${why.reason})`, { agentServer: { notUtf8: true, encoding: why.encoding }, path });
}

async function readBytes(uri: vscode.Uri): Promise<Uint8Array | undefined> {
  try {
    return await vscode.workspace.fs.readFile(uri);
  } catch (err) {
    if (err instanceof vscode.FileSystemError && err.code === "FileNotFound") return undefined;
    throw err;
  }
}

/** The disk's text of `uri` (undefined: no such file); throws the not-UTF-8 error for other bytes. */
async function readDisk(uri: vscode.Uri): Promise<string | undefined> {
  const bytes = await readBytes(uri);
  if (bytes === undefined) return undefined;
  const decoded = decodeUtf8(bytes);
  if ("reason" in decoded) throw notUtf8Error(uri.fsPath, decoded);
  return decoded.text;
}

/** The bytes on disk of a `file:` URI read now, as text (`bom`: they start with a UTF-8 BOM, not in `text`). */
export type DiskNow = { text: string; bom: boolean } | { gone: "missing" | "directory" | "unreadable" } | NotUtf8;

/**
 * The file of `uri` read now, synchronously: nothing is awaited between this read and a write it
 * guards (`writeDiskNow`).
 */
export function readDiskNow(uri: vscode.Uri): DiskNow {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(uri.fsPath);
  } catch (err) {
    const code = (err as { code?: string }).code;
    return { gone: code === "ENOENT" || code === "ENOTDIR" ? "missing" : code === "EISDIR" ? "directory" : "unreadable" };
  }
  const decoded = decodeUtf8(bytes);
  if ("reason" in decoded) return decoded;
  // the decoder takes a leading BOM off (ignoreBOM false): the text is the rest
  return { text: decoded.text, bom: bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf };
}

/**
 * The disk's text of `uri` when VS Code's text model of it holds other line breaks than the file
 * (`modelChangesLineBreaks`: a mix of CRLF and LF, or lone CRs) or than `content`, the text to write
 * (a model turns inserted line breaks into its own), and no editor holds unsaved text of it: such a file is read, proposed on and written as its bytes on disk, never through a document
 * (applying to the model and saving would rewrite every line break of the file). Else undefined.
 */
export function diskOnlyText(uri: vscode.Uri, doc: vscode.TextDocument | undefined, content: string): { text: string; bom: boolean } | undefined {
  if (uri.scheme !== "file" || doc?.isDirty) return undefined;
  const now = readDiskNow(uri);
  if (!("text" in now)) return undefined;
  const eol = doc ? lineBreakOf(doc) : modelLineBreak(now.text) || defaultLineBreak();
  return modelChangesLineBreaks(now.text) || !modelHolds(content, eol) ? now : undefined;
}

/** The line break VS Code gives a new document (`files.eol`; `auto`: the platform's). */
export function defaultLineBreak(): "\r\n" | "\n" {
  const eol = vscode.workspace.getConfiguration("files").get<string>("eol");
  return eol === "\r\n" || eol === "\n" ? eol : process.platform === "win32" ? "\r\n" : "\n";
}

/** The line break of an open document's text model. */
export function lineBreakOf(doc: vscode.TextDocument): "\r\n" | "\n" {
  const eol = (doc as { eol?: number }).eol;
  return eol === 2 ? "\r\n" : eol === 1 ? "\n" : modelLineBreak(doc.getText()) || defaultLineBreak();
}

/** Writes `text` as the file's bytes (UTF-8; a BOM first when `bom`), synchronously, in place (its
 * mode and links kept); `create`: only a file that does not exist yet. */
export function writeDiskNow(uri: vscode.Uri, text: string, bom: boolean, create = false): void {
  const body = new TextEncoder().encode(text);
  writeFileSync(uri.fsPath, bom ? new Uint8Array([0xef, 0xbb, 0xbf, ...body]) : body, { flag: create ? "wx" : "w" });
}

/**
 * Why the document of `uri` (open as `doc`, or only on disk) is not UTF-8 text, or undefined: VS Code
 * holds it in another encoding, or the file's bytes on disk are not UTF-8 (whatever the document
 * holds: VS Code decoded them lossily, and saving writes the whole file re-encoded).
 */
export async function notUtf8(uri: vscode.Uri, doc?: vscode.TextDocument): Promise<NotUtf8 | undefined> {
  const encoding = (doc as { encoding?: string } | undefined)?.encoding;
  if (encoding && !UTF8_ENCODINGS.has(encoding)) return { encoding, reason: `VS Code holds it as ${encoding}` };
  if (uri.scheme !== "file") return undefined;
  const bytes = await readBytes(uri).catch(() => undefined);
  if (bytes === undefined) return undefined;
  const decoded = decodeUtf8(bytes);
  return "reason" in decoded ? { ...decoded, encoding: encoding ?? null } : undefined;
}

/**
 * When each open document's file was last loaded or saved by the editor (its mtime then, by URI): a
 * dirty document whose file has another mtime now was changed on disk under the user's unsaved text.
 */
const diskSeen = new Map<string, number>();

async function noteDisk(doc: vscode.TextDocument): Promise<void> {
  if (doc.uri.scheme !== "file" || doc.isDirty) return;
  try {
    diskSeen.set(doc.uri.toString(), (await vscode.workspace.fs.stat(doc.uri)).mtime);
  } catch {
    diskSeen.delete(doc.uri.toString());
  }
}

/** Follows the documents' loads and saves (for `diskChanged`); the documents already open are noted now. */
export function trackDiskChanges(): vscode.Disposable {
  for (const doc of vscode.workspace.textDocuments) void noteDisk(doc);
  return vscode.Disposable.from(
    vscode.workspace.onDidOpenTextDocument((d) => void noteDisk(d)),
    vscode.workspace.onDidSaveTextDocument((d) => void noteDisk(d)),
    // a clean document reloaded from disk (the file changed while it had no unsaved text)
    vscode.workspace.onDidChangeTextDocument((e) => void noteDisk(e.document)),
    vscode.workspace.onDidCloseTextDocument((d) => void diskSeen.delete(d.uri.toString())),
  );
}

/** Whether the file of `doc` (dirty) changed on disk since the editor loaded or saved it. */
async function changedOnDisk(doc: vscode.TextDocument): Promise<boolean> {
  const seen = diskSeen.get(doc.uri.toString());
  if (seen === undefined || doc.uri.scheme !== "file") return false;
  try {
    return (await vscode.workspace.fs.stat(doc.uri)).mtime !== seen;
  } catch {
    return true; // gone from disk under the unsaved text
  }
}

/**
 * `fs/read_text_file`: the open document (unsaved text, version, dirty) or the disk (version null).
 * A dirty document whose file changed on disk since the editor loaded or saved it adds
 * `diskChanged: true` (docs/protocol.md "Buffer versions"): the agent reads the user's text, and is
 * told the disk holds other text.
 */
export async function readTextFile(params: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse> {
  const uri = absoluteUri(params.path);
  const doc = openDocument(uri);
  if (doc) {
    const bad = await notUtf8(uri, doc);
    if (bad) throw notUtf8Error(params.path, bad);
    const diskChanged = doc.isDirty && (await changedOnDisk(doc)); // awaited before the text is taken
    const text = doc.getText();
    if (!doc.isDirty) {
      // A clean document whose file changed on disk may not be reloaded yet: the disk wins — and a
      // file deleted on disk is gone (VS Code keeps its tab, but a write into it would create it again).
      const disk = await readDisk(uri);
      if (disk === undefined) throw RequestError.resourceNotFound(uri.toString());
      if (disk !== undefined && disk.replace(/^\ufeff/, "") !== text) {
        return { content: sliceLines(disk.replace(/^\ufeff/, ""), params.line, params.limit), _meta: { agentServer: { version: null, dirty: false } } };
      }
    }
    return { content: sliceLines(text, params.line, params.limit), _meta: { agentServer: { version: doc.version, dirty: doc.isDirty, ...(diskChanged ? { diskChanged: true } : {}) } } };
  }
  const disk = await readDisk(uri);
  if (disk === undefined) throw RequestError.resourceNotFound(uri.toString());
  return { content: sliceLines(disk.replace(/^\ufeff/, ""), params.line, params.limit), _meta: { agentServer: { version: null, dirty: false } } };
}

/**
 * `fs/write_text_file`: an open document is changed through a `WorkspaceEdit` (a dirty one stays
 * unsaved, a clean one is saved); a file that is not open is written with `workspace.fs`. With
 * `_meta.agentServer {version, sha256}` (the server's `accept-edits` write, docs/protocol.md) a
 * document whose version and text both moved on since the agent read it is refused as stale.
 */
export async function writeTextFile(params: acp.WriteTextFileRequest): Promise<acp.WriteTextFileResponse> {
  const uri = absoluteUri(params.path);
  const doc = openDocument(uri);
  const outside = () => {
    const why = lexicallyInside(uri) ? leadsOutside(uri) : undefined;
    if (why) throw new RequestError(-32603, `${why}; nothing was written`, { agentServer: { stale: true } });
  };
  if (!doc) {
    // The BOM is never text (docs/protocol.md): a file that had one keeps it.
    const old = await vscode.workspace.fs.readFile(uri).then((b) => b, () => undefined);
    const hadBom = old !== undefined && old[0] === 0xef && old[1] === 0xbb && old[2] === 0xbf;
    const body = new TextEncoder().encode(params.content);
    outside();
    await vscode.workspace.fs.writeFile(uri, hadBom ? new Uint8Array([0xef, 0xbb, 0xbf, ...body]) : body);
    return {};
  }
  const bad = await notUtf8(uri, doc);
  if (bad) throw notUtf8Error(params.path, bad); // saving would re-encode the whole file
  const wasDirty = doc.isDirty;
  const guard = (params._meta as { agentServer?: { version?: unknown; sha256?: unknown } } | null | undefined)?.agentServer;
  if (wasDirty && !modelHolds(params.content, lineBreakOf(doc))) {
    throw new RequestError(-32603, `${params.path}: the text brings line breaks VS Code's editor would turn into its own, and the editor holds unsaved text of it; nothing was written`);
  }
  const diskOnly = diskOnlyText(uri, doc, params.content);
  if (diskOnly) {
    // VS Code's model of it holds other line breaks than the file: the disk's bytes are the text (as
    // read), written in place; the clean document reloads from them
    if (guard && typeof guard.sha256 === "string" && sha256(diskOnly.text) !== guard.sha256) {
      throw new RequestError(-32603, `${params.path} changed on disk since the agent read it; nothing was written`, { agentServer: { stale: true } });
    }
    outside();
    writeDiskNow(uri, params.content, diskOnly.bom);
    return {};
  }
  if (guard && typeof guard.sha256 === "string" && doc.version !== guard.version && sha256(doc.getText()) !== guard.sha256) {
    throw new RequestError(-32603, `${params.path} changed in the editor since the agent read it; nothing was written`, { agentServer: { stale: true } });
  }
  if (guard && !wasDirty && uri.scheme === "file") {
    // the agent read a file: one deleted (or replaced) on disk since is not created again by saving
    const bytes = await vscode.workspace.fs.readFile(uri).then((b) => b, (err: unknown) => err);
    if (!(bytes instanceof Uint8Array)) {
      const code = bytes instanceof vscode.FileSystemError ? bytes.code : String(bytes);
      const what = code === "FileNotFound" ? "was deleted on disk" : code === "FileIsADirectory" ? "was replaced by a directory on disk" : "can no longer be read on disk";
      throw new RequestError(-32603, `${params.path} ${what} since the agent read it; nothing was written (it was not created again)`, { agentServer: { stale: true } });
    }
  }
  if (!wasDirty) outside(); // a clean document is saved after the edit: refused before it is changed
  const edit = new vscode.WorkspaceEdit();
  const all = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
  edit.replace(uri, all, params.content);
  if (!(await vscode.workspace.applyEdit(edit))) {
    throw RequestError.internalError({ details: `VS Code refused the edit of ${params.path}` });
  }
  if (doc.getText() !== params.content) {
    throw RequestError.internalError({ details: `${params.path} does not hold the written text after the edit` });
  }
  if (!wasDirty) {
    outside();
    const unsaved = sha256(doc.getText());
    await doc.save();
    // the save changed it (format-on-save): the text before it was exactly the one written (docs/protocol.md)
    if (sha256(doc.getText()) !== unsaved) return { _meta: { agentServer: { beforeSave: unsaved } } };
  }
  return {};
}
