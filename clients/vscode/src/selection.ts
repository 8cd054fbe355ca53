/**
 * A selection as the protocol's embedded `resource` block: the file URI with a 1-based inclusive
 * `#L10-L20` fragment and the selected text (docs/protocol.md "Selections in prompts").
 *
 * Must not: send a range past the document (it is clamped) or an empty selection's nothing (an empty
 * selection sends its whole line).
 */

import type * as vscode from "vscode";

export interface SelectionLike {
  start: { line: number; character: number };
  end: { line: number; character: number };
  isEmpty: boolean;
}

export interface DocumentLike {
  uri: vscode.Uri;
  lineCount: number;
  languageId?: string;
  lineAt(line: number): { text: string };
  getText(range?: vscode.Range): string;
}

/** 1-based inclusive line range of a selection; a selection ending at column 0 leaves that line out. */
export function selectionLines(sel: SelectionLike, lineCount: number): { first: number; last: number } {
  const max = Math.max(lineCount - 1, 0);
  const start = Math.min(Math.max(sel.start.line, 0), max);
  let end = Math.min(Math.max(sel.end.line, 0), max);
  if (!sel.isEmpty && end > start && sel.end.character === 0) end -= 1;
  return { first: start + 1, last: end + 1 };
}

/** The `resource` content block of the selection, its lines for a label (`10-20`, `7`) and its URI fragment (`L10-L20`). */
export function selectionBlock(doc: DocumentLike, sel: SelectionLike): { block: { type: "resource"; resource: { uri: string; text: string; mimeType: string } }; lines: string; range: string } {
  const { first, last } = selectionLines(sel, doc.lineCount);
  const lines: string[] = [];
  if (sel.isEmpty) {
    lines.push(doc.lineAt(first - 1).text);
  } else {
    for (let l = first - 1; l <= last - 1; l++) {
      const text = doc.lineAt(l).text;
      const from = l === sel.start.line ? Math.min(sel.start.character, text.length) : 0;
      const to = l === sel.end.line ? Math.min(sel.end.character, text.length) : text.length;
      lines.push(text.slice(from, to));
    }
  }
  const range = `L${first}-L${last}`;
  const uri = `${doc.uri.with({ fragment: "" }).toString()}#${range}`;
  return { block: { type: "resource", resource: { uri, text: lines.join("\n"), mimeType: "text/plain" } }, lines: first === last ? `${first}` : `${first}-${last}`, range };
}
