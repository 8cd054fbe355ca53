/**
 * `fs/read_text_file` and `fs/write_text_file` from the editor's documents: the unsaved text of an
 * open document with its `version` and `isDirty` (the `_meta.agentServer` block of PROTOCOL.md
 * "Buffer versions"), else `workspace.fs`.
 *
 * Must not: decide anything about proposals.
 */

import * as vscode from "vscode";
import type * as acp from "@agentclientprotocol/sdk";
import { RequestError } from "@agentclientprotocol/sdk";

/** The open (not closed) text document of `uri`, if any. */
export function openDocument(uri: vscode.Uri): vscode.TextDocument | undefined {
  const key = uri.toString();
  return vscode.workspace.textDocuments.find((d) => !d.isClosed && d.uri.toString() === key);
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

async function readDisk(uri: vscode.Uri): Promise<string | undefined> {
  try {
    return new TextDecoder("utf-8").decode(await vscode.workspace.fs.readFile(uri));
  } catch (err) {
    if (err instanceof vscode.FileSystemError && err.code === "FileNotFound") return undefined;
    throw err;
  }
}

/** `fs/read_text_file`: the open document (unsaved text, version, dirty) or the disk (version null). */
export async function readTextFile(params: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse> {
  const uri = absoluteUri(params.path);
  const doc = openDocument(uri);
  if (doc) {
    const text = doc.getText();
    if (!doc.isDirty) {
      // A clean document whose file changed on disk may not be reloaded yet: the disk wins.
      const disk = await readDisk(uri);
      if (disk !== undefined && disk.replace(/^\ufeff/, "") !== text) {
        return { content: sliceLines(disk.replace(/^\ufeff/, ""), params.line, params.limit), _meta: { agentServer: { version: null, dirty: false } } };
      }
    }
    return { content: sliceLines(text, params.line, params.limit), _meta: { agentServer: { version: doc.version, dirty: doc.isDirty } } };
  }
  const disk = await readDisk(uri);
  if (disk === undefined) throw RequestError.resourceNotFound(uri.toString());
  return { content: sliceLines(disk.replace(/^\ufeff/, ""), params.line, params.limit), _meta: { agentServer: { version: null, dirty: false } } };
}

/**
 * `fs/write_text_file`: an open document is changed through a `WorkspaceEdit` (a dirty one stays
 * unsaved, a clean one is saved); a file that is not open is written with `workspace.fs`.
 */
export async function writeTextFile(params: acp.WriteTextFileRequest): Promise<acp.WriteTextFileResponse> {
  const uri = absoluteUri(params.path);
  const doc = openDocument(uri);
  if (!doc) {
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode(params.content));
    return {};
  }
  const wasDirty = doc.isDirty;
  const edit = new vscode.WorkspaceEdit();
  const all = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
  edit.replace(uri, all, params.content);
  if (!(await vscode.workspace.applyEdit(edit))) {
    throw RequestError.internalError({ details: `VS Code refused the edit of ${params.path}` });
  }
  if (doc.getText() !== params.content) {
    throw RequestError.internalError({ details: `${params.path} does not hold the written text after the edit` });
  }
  if (!wasDirty) await doc.save();
  return {};
}
