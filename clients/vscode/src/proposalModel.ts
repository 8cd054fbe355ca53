/**
 * The edit-proposal model of `_agent_server/apply_workspace_edit` (docs/protocol.md "Edit proposals",
 * CLIENTS.md "A proposal's life"): the stale rule, hunks (one `TextEdit` each) in document order,
 * applying a chosen subset to a text, and shifting later hunks after an earlier one landed.
 *
 * Must not: import `vscode` (pure, unit-tested), draw anything, or decide for the user.
 */

import { createHash } from "node:crypto";
import { diffLines } from "diff";
import { type PositionEncoding, type Position, type Range, positionFromUtf16, rangeToUtf16, splitLines } from "./positions";

/** sha256 hex of the UTF-8 bytes of `text` (the protocol's `baseHashes` / `versions[].sha256`). */
export function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * The protocol's stale rule. Stale only when the document's version differs from the proposal's
 * **and** the hash of its current text differs from `baseHash`; with a `null` proposal version (the
 * agent read the disk) the hash alone decides. Without a hash, a null version is never stale and a
 * numbered one is stale exactly when the version differs.
 */
export function isStale(
  current: { version: number | null; text: string },
  proposalVersion: number | null | undefined,
  baseHash: string | undefined,
): boolean {
  const hashDiffers = baseHash === undefined ? undefined : sha256(current.text) !== baseHash;
  if (proposalVersion === null || proposalVersion === undefined) return hashDiffers === true;
  const versionDiffers = current.version !== proposalVersion;
  return versionDiffers && hashDiffers !== false;
}

/**
 * The one line break a VS Code text model holding `text` keeps: `"\r\n"` or `"\n"`, `""` for a text
 * without any; undefined when `text` has a mix of CRLF and LF, or a lone CR (old Mac) — a model holds
 * one kind, so it rewrites some of them on load (its `getText()`, and a save, are other bytes).
 */
export function modelLineBreak(text: string): "\r\n" | "\n" | "" | undefined {
  if (/\r(?!\n)/.test(text)) return undefined;
  const crlf = text.includes("\r\n");
  const lf = /(^|[^\r])\n/.test(text);
  return crlf && lf ? undefined : crlf ? "\r\n" : lf ? "\n" : "";
}

/** Whether VS Code's text model changes the line breaks of `text` when it loads it (`modelLineBreak`). */
export function modelChangesLineBreaks(text: string): boolean {
  return modelLineBreak(text) === undefined;
}

/** Whether a text model whose line break is `eol` holds `text` byte for byte (an edit's inserted
 * line breaks are turned into the model's). */
export function modelHolds(text: string, eol: "\r\n" | "\n"): boolean {
  const kind = modelLineBreak(text);
  return kind === "" || kind === eol;
}

/** A text edit of the wire (positions in the negotiated encoding). */
export interface WireTextEdit {
  range: Range;
  newText: string;
}

export type HunkState = "pending" | "accepted" | "rejected";

/** One hunk: the wire edit as sent, and its range in UTF-16 against the document's current text. */
export interface Hunk {
  index: number;
  wire: WireTextEdit;
  range: Range;
  newText: string;
  state: HunkState;
}

/** Hunks of one text document's edits, ordered by position, ranges converted to UTF-16. */
export function makeHunks(baseText: string, edits: readonly WireTextEdit[], encoding: PositionEncoding): Hunk[] {
  const lines = splitLines(baseText);
  const hunks = edits.map((wire, i) => ({
    index: i,
    wire,
    range: rangeToUtf16(lines, wire.range, encoding),
    newText: wire.newText,
    state: "pending" as HunkState,
  }));
  hunks.sort((a, b) => comparePositions(a.range.start, b.range.start) || a.index - b.index);
  hunks.forEach((h, i) => (h.index = i));
  return hunks;
}

export function comparePositions(a: Position, b: Position): number {
  return a.line - b.line || a.character - b.character;
}

/** Offset in `text` of a UTF-16 position, clamped; line ends as in {@link splitLines}. */
export function offsetAt(text: string, pos: Position): number {
  const re = /\r\n|\n|\r/g;
  let lineStart = 0;
  for (let line = 0; line < pos.line; line++) {
    const m = re.exec(text);
    if (!m) return text.length;
    lineStart = m.index + m[0].length;
  }
  re.lastIndex = lineStart;
  const m = re.exec(text);
  const lineEnd = m ? m.index : text.length;
  return Math.min(lineStart + Math.max(0, pos.character), lineEnd);
}

/** `text` with the (non-overlapping, UTF-16) edits applied together, bottom up. */
export function applyToText(text: string, edits: readonly { range: Range; newText: string }[]): string {
  const sorted = [...edits].sort((a, b) => comparePositions(b.range.start, a.range.start));
  let out = text;
  for (const e of sorted) {
    out = out.slice(0, offsetAt(out, e.range.start)) + e.newText + out.slice(offsetAt(out, e.range.end));
  }
  return out;
}

/** Where `pos` (at or after `applied`'s end) lands once `applied` replaced its range. */
export function shiftPosition(pos: Position, applied: { range: Range; newText: string }): Position {
  const { start, end } = applied.range;
  if (comparePositions(pos, end) < 0) return pos;
  const inserted = splitLines(applied.newText);
  const lastLen = inserted[inserted.length - 1]!.length;
  const newEndLine = start.line + inserted.length - 1;
  const newEndChar = inserted.length === 1 ? start.character + lastLen : lastLen;
  if (pos.line === end.line) return { line: newEndLine, character: newEndChar + (pos.character - end.character) };
  return { line: pos.line + (newEndLine - end.line), character: pos.character };
}

/** Shifts every pending hunk after `applied` (in place): later hunks keep their original anchors. */
export function shiftPending(hunks: Hunk[], applied: Hunk): void {
  for (const h of hunks) {
    if (h === applied || h.state !== "pending") continue;
    if (comparePositions(h.range.start, applied.range.end) < 0) continue;
    h.range = { start: shiftPosition(h.range.start, applied), end: shiftPosition(h.range.end, applied) };
  }
}

/** The text the document would hold with every still-pending hunk applied (the diff's right side). */
export function proposedText(current: string, hunks: readonly Hunk[]): string {
  return applyToText(current, hunks.filter((h) => h.state === "pending"));
}

export type Outcome = "applied" | "partial" | "rejected" | "stale" | "cancelled" | "failed";

/** The outcome once every hunk is decided: all accepted → applied, none → rejected, else partial. */
export function outcomeOf(hunks: readonly Hunk[]): "applied" | "partial" | "rejected" {
  const accepted = hunks.filter((h) => h.state === "accepted").length;
  if (hunks.length > 0 && accepted === hunks.length) return "applied";
  return accepted === 0 ? "rejected" : "partial";
}

/** The UTF-16 position of `offset` in `text` (line ends as in {@link splitLines}). */
export function positionAt(text: string, offset: number): Position {
  const re = /\r\n|\n|\r/g;
  let line = 0;
  let lineStart = 0;
  for (let m = re.exec(text); m && m.index + m[0].length <= offset; m = re.exec(text)) {
    line++;
    lineStart = m.index + m[0].length;
  }
  return { line, character: offset - lineStart };
}

/**
 * The edits (UTF-16 ranges against `oldText`, non-overlapping, in document order) that turn
 * `oldText` into `newText`, one per run of changed lines (a line diff, as the server makes its hunks).
 * Used when the user edited the proposed text: its hunks are recomputed, and `applied` is rebuilt.
 */
export function lineEdits(oldText: string, newText: string): { range: Range; newText: string }[] {
  const out: { range: Range; newText: string }[] = [];
  // Only the lines between the texts' common start and end are diffed (a 30 MB file with one line
  // changed is not diffed whole): the common start, back to a line start; the common end, from one.
  let p = 0;
  const n = Math.min(oldText.length, newText.length);
  while (p < n && oldText.charCodeAt(p) === newText.charCodeAt(p)) p++;
  while (p > 0 && !"\n\r".includes(oldText[p - 1]!)) p--;
  if (p > 0 && oldText[p - 1] === "\r" && oldText[p] === "\n") p--; // never between \r and \n
  while (p > 0 && !"\n\r".includes(oldText[p - 1]!)) p--;
  let s = 0;
  while (s < n - p && oldText.charCodeAt(oldText.length - 1 - s) === newText.charCodeAt(newText.length - 1 - s)) s++;
  while (s > 0 && !"\n\r".includes(oldText[oldText.length - s - 1]!)) s--;
  if (s > 0 && oldText[oldText.length - s - 1] === "\r" && oldText[oldText.length - s] === "\n") s--;
  while (s > 0 && !"\n\r".includes(oldText[oldText.length - s - 1]!)) s--;
  const oldMiddle = oldText.slice(p, oldText.length - s);
  const newMiddle = newText.slice(p, newText.length - s);
  let offset = p;
  let run: { start: number; end: number; text: string } | undefined;
  const flush = () => {
    if (run) out.push({ range: { start: positionAt(oldText, run.start), end: positionAt(oldText, run.end) }, newText: run.text });
    run = undefined;
  };
  for (const change of diffLines(oldMiddle, newMiddle)) {
    if (!change.added && !change.removed) {
      flush();
      offset += change.value.length;
      continue;
    }
    run ??= { start: offset, end: offset, text: "" };
    if (change.removed) {
      offset += change.value.length;
      run.end = offset;
    } else {
      run.text += change.value;
    }
  }
  flush();
  return out;
}

/**
 * The user's edits that turned `expected` (the text `hunks` are placed on) into `now`, merged with the
 * hunks (docs/protocol.md "Merged with the user's edits of other lines"): each hunk's range moved onto
 * `now` by the lines the user inserted or deleted above it. Undefined when an edit touches or
 * neighbours a hunk — a line diff's changed line that a hunk changes, lines inserted inside, right
 * before or right after a hunk's lines (a hunk that inserts lines neighbours both lines around it), or
 * characters changed up to the hunk's range (a line break deleted or typed next to it).
 */
export function mergeUserEdits(expected: string, now: string, hunks: readonly Hunk[]): Map<Hunk, Range> | undefined {
  const user = lineEdits(expected, now).map((e) => {
    const { start, end } = e.range;
    const count = comparePositions(start, end) === 0 ? 0 : (end.character === 0 ? end.line : end.line + 1) - start.line;
    const [s0, s1] = [offsetAt(expected, start), offsetAt(expected, end)];
    // the characters that differ: typing at a line's end is not its line break, joining two lines is
    let [n0, n1, t1] = [s0, s1, e.newText.length];
    for (let t0 = 0; n0 < n1 && t0 < t1 && expected.charCodeAt(n0) === e.newText.charCodeAt(t0); t0++) n0++;
    const t0 = n0 - s0;
    while (n1 > n0 && t1 > t0 && expected.charCodeAt(n1 - 1) === e.newText.charCodeAt(t1 - 1)) [n1, t1] = [n1 - 1, t1 - 1];
    return { first: start.line, count, end: s1, n0, n1, delta: e.newText.length - (s1 - s0) };
  });
  const moved = new Map<Hunk, Range>();
  for (const h of hunks) {
    const { start, end } = h.range;
    const empty = comparePositions(start, end) === 0;
    const first = empty && start.character === 0 ? start.line - 1 : start.line;
    const last = empty ? start.line : end.character === 0 && end.line > start.line ? end.line - 1 : end.line;
    const at = offsetAt(expected, start);
    const to = offsetAt(expected, end);
    for (const u of user) {
      if (u.count > 0 ? u.first <= last && u.first + u.count - 1 >= first : u.first >= first && u.first <= last + 1) return undefined;
      if (u.n0 <= to && u.n1 >= at) return undefined; // touches the hunk's range
    }
    const shift = user.filter((u) => u.end <= at).reduce((sum, u) => sum + u.delta, 0);
    moved.set(h, { start: positionAt(now, at + shift), end: positionAt(now, to + shift) });
  }
  return moved;
}

/**
 * What the card says when the editor's save (format-on-save, trim trailing whitespace, a final newline:
 * save participants) changed the text after Accept: how many more lines than the proposal, counted
 * between the accepted text and the saved one (`undefined`: the save changed nothing).
 */
export function saveChangedNote(accepted: string, saved: string): string | undefined {
  if (accepted === saved) return undefined;
  let added = 0;
  let removed = 0;
  for (const c of diffLines(accepted, saved)) {
    if (c.added) added += c.count ?? 0;
    else if (c.removed) removed += c.count ?? 0;
  }
  const lines = Math.max(added, removed, 1);
  return `the editor's save (format-on-save or another save participant) changed ${lines} more line${lines === 1 ? "" : "s"} than the proposal (+${added} −${removed}); the file holds the saved text`;
}

/** What the card says when the editor's save of a document without the user's unsaved text did not complete. */
export const SAVE_FAILED_NOTE =
  "the editor's save did not complete (a save participant such as format-on-save may still be running, or the write failed): the file on disk keeps its old text";

/** `edits` (UTF-16 ranges against `text`) in the wire's `encoding`. */
export function toWireEdits(text: string, edits: readonly { range: Range; newText: string }[], encoding: PositionEncoding): WireTextEdit[] {
  const lines = splitLines(text);
  return edits.map((e) => ({
    range: { start: positionFromUtf16(lines, e.range.start, encoding), end: positionFromUtf16(lines, e.range.end, encoding) },
    newText: e.newText,
  }));
}
