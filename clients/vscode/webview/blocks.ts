/**
 * Splits a streaming markdown text into blocks as it grows, so the panel renders each block's
 * markdown once, when it closes, and shows only the open block as plain text (CLIENTS.md "Streams").
 * A block closes at a blank line outside a code fence once the next line shows the block is over:
 * an indented line, or a list item after a list, continues it (a loose list stays one list).
 *
 * Must not: touch the DOM, or look at a line twice (each `feed` reads only the new complete lines).
 */

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const LIST_ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])([ \t]|$)/;

export class BlockSplitter {
  /** Offset of the first line not classified yet. */
  private scanned = 0;
  /** Where the open block starts (the plain-text tail starts here). */
  private start = 0;
  /** Offset of the blank line(s) after the open block's last line, or -1. */
  private blankAt = -1;
  private fence: { ch: string; len: number } | null = null;
  private inList = false;

  /** Where the open block starts in the text: everything after it is the tail. */
  get tailStart(): number {
    return this.start;
  }

  /** Takes the whole text so far (it only ever grows); returns the blocks that closed, in order. */
  feed(text: string): string[] {
    const out: string[] = [];
    let i = this.scanned;
    for (let nl = text.indexOf("\n", i); nl >= 0; nl = text.indexOf("\n", i)) {
      this.line(text, text.slice(i, text[nl - 1] === "\r" ? nl - 1 : nl), i, out);
      i = nl + 1;
    }
    this.scanned = i;
    return out;
  }

  /** Starts at `offset` as if all before it were placed already: only at a cut of `blockCuts` (the start of
   * a block after a blank line, outside any fence), and only before the first `feed`. */
  skipTo(offset: number): void {
    this.scanned = this.start = offset;
    this.blankAt = -1;
    this.fence = null;
    this.inList = false;
  }

  /** The text is complete: its blocks still open are closed (the tail is then empty). */
  finish(text: string): string[] {
    const out = this.feed(text.endsWith("\n") ? text : `${text}\n`); // the last line, ended or not
    const rest = text.slice(this.start);
    this.start = this.scanned = text.length;
    this.blankAt = -1;
    this.fence = null;
    if (rest.trim() !== "") out.push(rest);
    return out;
  }

  private line(text: string, line: string, at: number, out: string[]): void {
    if (this.fence) {
      const m = FENCE_CLOSE.exec(line);
      if (m && m[1]![0] === this.fence.ch && m[1]!.length >= this.fence.len) this.fence = null;
      return;
    }
    if (line.trim() === "") {
      if (this.blankAt < 0) this.blankAt = at;
      return;
    }
    if (this.blankAt >= 0) {
      const continues = /^[ \t]/.test(line) || (this.inList && LIST_ITEM.test(line));
      if (!continues) {
        const block = text.slice(this.start, this.blankAt).replace(/\r?\n$/, "");
        if (block.trim() !== "") out.push(block);
        this.start = at;
        this.inList = false;
      }
      this.blankAt = -1;
    }
    const f = FENCE_OPEN.exec(line);
    if (f) this.fence = { ch: f[1]![0]!, len: f[1]!.length };
    else if (LIST_ITEM.test(line)) this.inList = true;
  }
}

/** Markdown a paint renders at most (characters, each block counted at least `BLOCK_COST`): of a burst —
 * a fast provider, a `session/load` replay, 2 MB in one message — a paint draws the newest blocks within
 * it (the end the panel follows); the older ones wait as their markdown, each rendered once it comes near
 * the viewport (newcomer 3 finding 4, newcomer 4 finding 1). */
export const PAINT_BUDGET = 12 * 1024;
export const BLOCK_COST = 256;

/** What drawing one block costs of a paint's budget. */
export function blockCost(block: string): number {
  return Math.max(block.length, BLOCK_COST);
}

/**
 * Of parts in reading order costing `costs`, the index from which a paint draws them now: the newest
 * ones while `budget` lasts (the one that crosses it included); the older ones are left for when they
 * come into view. A budget spent already draws none.
 *
 * Must not: draw an older part while a newer one is left out (the end is what the panel shows).
 */
export function drawnFrom(costs: readonly number[], budget: number): number {
  let from = costs.length;
  while (from > 0 && budget > 0) budget -= costs[--from]!;
  return from;
}

/** A line (split at "\n" only, as `BlockSplitter` does) that opens or closes a fence, after its "\n" (the
 * text's first line is looked at with `FIRST_FENCE`): its run, and the rest of the line. */
const FENCE_LINE = /\n {0,3}(`{3,}|~{3,})([^\n]*)/g;
const FIRST_FENCE = /^ {0,3}(`{3,}|~{3,})([^\n]*)/;
const BLANK_RUN = /\r?\n(?:[ \t]*\r?\n)+/g;

/**
 * Offsets in `text` before `to` where it can be cut into parts of at least `size` characters, each
 * part whole blocks: the start of a line after blank lines, outside any code fence, that starts a block
 * whatever came before it (not indented, not a list item). A long text placed at once (a replay's 2 MB
 * answer) is cut this way instead of being split into its ~30,000 blocks in one paint; each part is
 * rendered whole when it comes near the viewport (newcomer 4 finding 1).
 *
 * Must not: cut inside a fence, a list or an indented block (`BlockSplitter` would not close a block there).
 */
export function blockCuts(text: string, to: number, size: number): number[] {
  // the fences, from the text's start (an unclosed one runs to the end)
  const fenced: [number, number][] = [];
  let open: { at: number; ch: string; len: number } | undefined;
  FENCE_LINE.lastIndex = 0;
  for (let m = FIRST_FENCE.exec(text) ?? FENCE_LINE.exec(text); m; m = FENCE_LINE.exec(text)) {
    const run = m[1]!;
    if (!open) open = { at: m.index, ch: run[0]!, len: run.length };
    else if (run[0] === open.ch && run.length >= open.len && /^[ \t]*\r?$/.test(m[2]!)) {
      fenced.push([open.at, m.index + m[0].length]);
      open = undefined;
    }
  }
  if (open) fenced.push([open.at, text.length]);
  const cuts: number[] = [];
  let f = 0;
  BLANK_RUN.lastIndex = size;
  for (let m = BLANK_RUN.exec(text); m; m = BLANK_RUN.exec(text)) {
    const at = m.index + m[0].length; // the next line's start
    if (at >= to) break;
    while (f < fenced.length && fenced[f]![1] <= at) f++;
    if (f < fenced.length && fenced[f]![0] <= m.index) { // inside a fence: on after it
      BLANK_RUN.lastIndex = fenced[f]![1];
      continue;
    }
    const nl = text.indexOf("\n", at);
    const line = text.slice(at, nl < 0 ? text.length : nl);
    if (/^[ \t]/.test(line) || LIST_ITEM.test(line) || line.trim() === "") continue;
    cuts.push(at);
    BLANK_RUN.lastIndex = at + size;
  }
  return cuts;
}

/** Characters a piece of streaming plain text (the open block, a thought) holds before the next piece
 * starts, at a line's end. */
export const TAIL_PIECE = 2048;

/**
 * Where a streaming plain text's new `data` goes: `[toLast, ...pieces]` — what is appended to the last
 * piece (`lastLength` characters long, ending a line or not), then the new pieces, each cut after a
 * line's end once it holds `size` characters. Each piece is a box of its own, so what arrives lays
 * out only the last one: one text node of a 30,000-line code block still streaming was laid out whole
 * at every chunk, and the window froze for minutes (newcomer 6 finding 8).
 *
 * Must not: cut inside a line (a box's end is a line break), or lose or reorder a character.
 */
export function tailPieces(lastLength: number, lastEnded: boolean, data: string, size = TAIL_PIECE): string[] {
  const out: string[] = [];
  let at = 0;
  let room = size - lastLength;
  let ended = lastEnded || lastLength === 0;
  let current = "";
  while (at < data.length) {
    if (room <= 0 && ended) { // full at a line's end: the next piece
      out.push(current);
      current = "";
      room = size;
    }
    // to `room` characters, then on to the next line's end (a piece is cut only after one)
    const nl = data.indexOf("\n", Math.max(at, at + room - 1));
    const to = nl < 0 ? data.length : nl + 1;
    current += data.slice(at, to);
    room -= to - at;
    ended = data[to - 1] === "\n";
    at = to;
  }
  out.push(current);
  return out;
}

/** What starts a `<pre>` that goes on with a long code block (`render.ts` draws one as several). */
const CODE_NEXT = '<pre class="code-part code-next';

/**
 * A block's HTML in parts to draw one by one: cut before a `<pre>` that goes on with a long code block,
 * once a part holds `size` characters (a block without such a `<pre>` is one part). Drawn at once, the
 * 150 `<pre>`s of a 30,000-line block were all laid out in the paint that closed it (newcomer 6 finding 8);
 * the parts before the last are drawn when they come near the viewport.
 *
 * Must not: cut anywhere else (inside a `<pre>`, or between other elements), or lose a character.
 */
export function htmlParts(html: string, size: number): string[] {
  const parts: string[] = [];
  let from = 0;
  for (let cut = html.indexOf(CODE_NEXT, from + size); cut >= 0; cut = html.indexOf(CODE_NEXT, from + size)) {
    parts.push(html.slice(from, cut));
    from = cut;
  }
  parts.push(html.slice(from));
  return parts;
}
