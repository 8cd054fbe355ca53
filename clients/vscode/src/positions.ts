/**
 * Position-encoding conversion between the negotiated encoding of the wire (LSP's `utf-16`,
 * `utf-8`, `utf-32`) and VS Code's own columns (UTF-16 code units).
 *
 * Must not: import `vscode` (pure, unit-tested), do arithmetic on a column without its line's text.
 */

export type PositionEncoding = "utf-16" | "utf-8" | "utf-32";

/** Encodings this client announces, in order of preference (VS Code is UTF-16 natively). */
export const CLIENT_ENCODINGS: readonly PositionEncoding[] = ["utf-16", "utf-8"];

/** A zero-based position; `character` is in the unit of the encoding it belongs to. */
export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

/** The negotiated encoding named by the server, defaulting to `utf-16` as LSP does. */
export function parseEncoding(value: unknown): PositionEncoding {
  return value === "utf-8" || value === "utf-32" ? value : "utf-16";
}

function unitsOf(codePoint: number, encoding: PositionEncoding): number {
  if (encoding === "utf-32") return 1;
  if (encoding === "utf-16") return codePoint > 0xffff ? 2 : 1;
  if (codePoint < 0x80) return 1;
  if (codePoint < 0x800) return 2;
  if (codePoint < 0x10000) return 3;
  return 4;
}

/**
 * UTF-16 column of `column` (in `encoding` units) within `lineText` (the line without its end).
 * A column past the end, or one that falls inside a character, is clamped to the next character
 * boundary at or before it (never splits a surrogate pair).
 */
export function toUtf16Column(lineText: string, column: number, encoding: PositionEncoding): number {
  if (column <= 0) return 0;
  if (encoding === "utf-16") return Math.min(column, lineText.length);
  let units = 0;
  let offset = 0;
  for (const ch of lineText) {
    const cp = ch.codePointAt(0) ?? 0;
    const next = units + unitsOf(cp, encoding);
    if (next > column) break;
    units = next;
    offset += ch.length;
  }
  return offset;
}

/** Column in `encoding` units of the UTF-16 `column16` within `lineText` (clamped to the line). */
export function fromUtf16Column(lineText: string, column16: number, encoding: PositionEncoding): number {
  const end = Math.max(0, Math.min(column16, lineText.length));
  if (encoding === "utf-16") return end;
  let units = 0;
  let offset = 0;
  for (const ch of lineText) {
    if (offset + ch.length > end) break;
    units += unitsOf(ch.codePointAt(0) ?? 0, encoding);
    offset += ch.length;
  }
  return units;
}

/** Lines of `text` without their ends; `\r\n`, `\n` and `\r` all end a line (as in VS Code). */
export function splitLines(text: string): string[] {
  return text.split(/\r\n|\n|\r/);
}

/** Converts a position of the wire to a UTF-16 position, clamped to the text's lines. */
export function positionToUtf16(lines: readonly string[], pos: Position, encoding: PositionEncoding): Position {
  if (lines.length === 0) return { line: 0, character: 0 };
  if (pos.line >= lines.length) {
    const last = lines.length - 1;
    return { line: last, character: lines[last]!.length };
  }
  const line = Math.max(0, pos.line);
  return { line, character: toUtf16Column(lines[line]!, pos.character, encoding) };
}

/** Converts a UTF-16 position to the wire's encoding. */
export function positionFromUtf16(lines: readonly string[], pos: Position, encoding: PositionEncoding): Position {
  const text = lines[pos.line] ?? "";
  return { line: pos.line, character: fromUtf16Column(text, pos.character, encoding) };
}

/** Converts a wire range to UTF-16 (see {@link positionToUtf16}). */
export function rangeToUtf16(lines: readonly string[], range: Range, encoding: PositionEncoding): Range {
  return { start: positionToUtf16(lines, range.start, encoding), end: positionToUtf16(lines, range.end, encoding) };
}
