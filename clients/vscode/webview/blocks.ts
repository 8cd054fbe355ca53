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

/** Markdown a paint renders at most (characters, each block counted at least `BLOCK_COST`): a burst —
 * a fast provider, a `session/load` replay, 750 KB in one message — is drawn over several frames, and
 * input, Stop and the host's messages are handled between them (newcomer 3, finding 4). */
export const PAINT_BUDGET = 12 * 1024;
export const BLOCK_COST = 256;

/**
 * Closed blocks waiting to be rendered, taken a paint's budget at a time (oldest first).
 *
 * Must not: hand out more than the budget in one `take` (beyond the one block that crosses it), or
 * reorder blocks.
 */
export class BlockQueue {
  private blocks: string[] = [];
  private at = 0;

  push(blocks: string[]): void {
    for (const b of blocks) this.blocks.push(b);
  }

  get pending(): number {
    return this.blocks.length - this.at;
  }

  /** Blocks to render now within `budget` (see `PAINT_BUDGET`), and what is left of the budget;
   * `enough` (the paint's time is up: a loaded machine) ends it early, after at least one block. */
  take(budget: number, enough: () => boolean = () => false): { blocks: string[]; left: number } {
    const out: string[] = [];
    while (this.at < this.blocks.length && budget > 0 && (out.length === 0 || !enough())) {
      const b = this.blocks[this.at++]!;
      budget -= Math.max(b.length, BLOCK_COST);
      out.push(b);
    }
    if (this.at === this.blocks.length) {
      this.blocks = [];
      this.at = 0;
    }
    return { blocks: out, left: budget };
  }

  clear(): void {
    this.blocks = [];
    this.at = 0;
  }
}
