// The streaming markdown splitter: blocks close at blank lines outside fences (a loose list and an
// indented continuation stay one block), each line is read once, and the result does not depend on
// how the text was cut into deltas. Also the host's joining of text chunks.
import { describe, expect, it } from "vitest";
import { BlockSplitter, blockCuts, htmlParts, tailPieces } from "../../webview/blocks";
import { CODE_PART_LINES, renderMarkdown } from "../../webview/render";
import { appendEvent } from "../../src/chatView";
import type { ChatEvent } from "../../src/protocol";

function split(text: string, step: number): { blocks: string[]; tails: string[] } {
  const s = new BlockSplitter();
  const blocks: string[] = [];
  const tails: string[] = [];
  for (let i = step; i < text.length + step; i += step) {
    const sofar = text.slice(0, i);
    blocks.push(...s.feed(sofar));
    tails.push(sofar.slice(s.tailStart));
  }
  blocks.push(...s.finish(text));
  return { blocks, tails };
}

const TEXT = [
  "# Title",
  "",
  "A paragraph with **bold**",
  "on two lines.",
  "",
  "```py",
  "def f():",
  "",
  "    return 1",
  "```",
  "",
  "1. one",
  "",
  "2. two",
  "   still two",
  "",
  "    indented continuation",
  "",
  "Last words",
].join("\n");

describe("BlockSplitter", () => {
  it("closes blocks at blank lines outside fences, keeps loose lists and fences whole", () => {
    const { blocks } = split(TEXT, TEXT.length);
    expect(blocks).toEqual([
      "# Title",
      "A paragraph with **bold**\non two lines.",
      "```py\ndef f():\n\n    return 1\n```",
      "1. one\n\n2. two\n   still two\n\n    indented continuation",
      "Last words",
    ]);
  });

  it("gives the same blocks whatever the deltas, and joined they are the text without blank lines between", () => {
    const whole = split(TEXT, TEXT.length).blocks;
    for (const step of [1, 2, 3, 7, 16]) expect(split(TEXT, step).blocks).toEqual(whole);
  });

  it("shows the open block as the tail and never a closed one again", () => {
    const s = new BlockSplitter();
    expect(s.feed("first para\n\nsecond")).toEqual([]); // the blank line alone does not close it yet
    expect(s.feed("first para\n\nsecond par\n")).toEqual(["first para"]);
    expect("first para\n\nsecond par\n".slice(s.tailStart)).toBe("second par\n");
  });

  it("treats CRLF like LF and an unclosed fence as one block at the end", () => {
    const s = new BlockSplitter();
    expect(s.feed("a\r\n\r\n```\r\nx\r\n\r\ny\r\n")).toEqual(["a"]);
    expect(s.finish("a\r\n\r\n```\r\nx\r\n\r\ny\r\n")).toEqual(["```\r\nx\r\n\r\ny\r\n"]);
  });
});

describe("blockCuts (newcomer 4 finding 1: a replay's 2 MB answer is cut into parts, not split into 30,000 blocks in one paint)", () => {
  const whole = (text: string, from = 0) => {
    const s = new BlockSplitter();
    if (from > 0) s.skipTo(from);
    return [...s.feed(text), ...s.finish(text)];
  };
  // fences with blank lines inside (one ~~~, one unclosed at the end), loose lists, indented blocks, CRLF
  const parts = [
    "# Title\n\nSome words.\n\n",
    "```py\ndef f():\n\n    return 1\n\n\n```\n\n",
    "- one\n\n- two\n\n  still two\n\n",
    "    indented\n\n",
    "~~~~\na\n\n~~~\nb\n\n~~~~\n\n",
    "Para with a \u2028 separator\n\n",
    "CRLF para\r\n\r\nnext\r\n\r\n",
  ];
  const text = Array.from({ length: 60 }, (_, i) => parts[i % parts.length]).join("") + "```\nunclosed\n\nfence\n";

  it("cuts only where a block starts whatever came before: the blocks after each cut are the whole text's", () => {
    const all = whole(text);
    const cuts = blockCuts(text, text.length, 40);
    expect(cuts.length).toBeGreaterThan(20);
    for (const cut of cuts) {
      const after = whole(text, cut);
      expect(after.length).toBeGreaterThan(0);
      expect(all.slice(all.length - after.length)).toEqual(after);
      // and the text before it is whole blocks
      expect(whole(text.slice(0, cut)).map((b) => b.trimEnd())).toEqual(all.slice(0, all.length - after.length).map((b) => b.trimEnd()));
    }
  });

  it("never cuts inside a fence, a list, an indented block, or after `to`, and keeps parts at least `size` apart", () => {
    const cuts = blockCuts(text, text.length - 500, 40);
    const line = (at: number) => text.slice(at, text.indexOf("\n", at));
    for (const cut of cuts) {
      expect(line(cut)).not.toMatch(/^[ \t]|^[-*+] |^(a|b|def f|unclosed|fence)$/);
      expect(cut).toBeLessThan(text.length - 500);
    }
    cuts.forEach((c, i) => expect(c - (cuts[i - 1] ?? 0)).toBeGreaterThanOrEqual(40));
  });
});

describe("appendEvent", () => {
  const chunk = (sessionUpdate: string, text: string): ChatEvent => ({ kind: "update", update: { sessionUpdate, content: { type: "text", text } } });

  it("joins consecutive text chunks of one kind, never across kinds or other events", () => {
    const events: ChatEvent[] = [];
    const first = chunk("agent_message_chunk", "a");
    for (const e of [first, chunk("agent_message_chunk", "b"), chunk("agent_thought_chunk", "t"), chunk("agent_thought_chunk", "u"), { kind: "turn-end" } as ChatEvent, chunk("agent_message_chunk", "c")]) {
      appendEvent(events, e);
    }
    expect(events).toEqual([chunk("agent_message_chunk", "ab"), chunk("agent_thought_chunk", "tu"), { kind: "turn-end" }, chunk("agent_message_chunk", "c")]);
    expect(first).toEqual(chunk("agent_message_chunk", "a")); // shared with the other list: never changed in place
  });

  it("joins chunks of one message only, and keeps their messageId (a slash command's answer between them split the answer)", () => {
    const events: ChatEvent[] = [];
    const of = (text: string, messageId?: string): ChatEvent => ({ kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text }, ...(messageId ? { messageId } : {}) } });
    for (const e of [of("a", "msg-1"), of("b", "msg-1"), of("Mode: x."), of("c", "msg-1"), of("d", "msg-2")]) appendEvent(events, e);
    expect(events).toEqual([of("ab", "msg-1"), of("Mode: x."), of("c", "msg-1"), of("d", "msg-2")]);
    // a retry notice (its _meta) is never joined into the text before it
    appendEvent(events, { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "retrying" }, _meta: { agentServer: { retry: {} } } } });
    expect(events).toHaveLength(5);
  });

  it("leaves a chunk with annotations or a non-text block as it is", () => {
    const events: ChatEvent[] = [];
    appendEvent(events, chunk("agent_message_chunk", "a"));
    appendEvent(events, { kind: "update", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "b", annotations: { priority: 1 } } } });
    expect(events).toHaveLength(2);
  });
});

describe("tailPieces (newcomer 6 finding 8: one long code block froze the window)", () => {
  /** Streams `text` in `step`-character deltas into pieces as the panel does; the pieces. */
  function stream(text: string, step: number, size: number): string[] {
    const pieces: string[] = [];
    for (let i = 0; i < text.length; i += step) {
      const last = pieces[pieces.length - 1] ?? "";
      const [toLast, ...more] = tailPieces(last.length, last === "" || last.endsWith("\n"), text.slice(i, i + step), size);
      if (pieces.length > 0) pieces[pieces.length - 1] += toLast!;
      else pieces.push(toLast!);
      pieces.push(...more);
    }
    return pieces;
  }

  it("a 30,000-line code block still streaming was one text node laid out whole at every chunk: it is pieces of whole lines", () => {
    const lines = Array.from({ length: 30_000 }, (_, n) => `def f${n}(x):  return x * ${n} + len('<b>${n}</b>')  # c\n`);
    const text = "Here:\n\n```python\n" + lines.join("");
    for (const step of [1, 97, 2900, 65_536]) {
      const pieces = stream(text, step, 2048);
      expect(pieces.join("")).toBe(text);
      expect(pieces.length).toBeGreaterThan(500);
      expect(pieces.slice(0, -1).every((p) => p.endsWith("\n") && p.length <= 2048 + 60)).toBe(true);
    }
  });

  it("a line longer than a piece stays whole, and text without line ends stays one piece", () => {
    const long = "x".repeat(5000);
    expect(stream(`a\n${long}\nb\n`, 100, 2048)).toEqual([`a\n${long}\n`, "b\n"]);
    expect(stream("y".repeat(9000), 1000, 2048)).toEqual(["y".repeat(9000)]);
    expect(tailPieces(2048, true, "next\n", 2048)).toEqual(["", "next\n"]);
    expect(tailPieces(2048, false, "tail\nnext\n", 2048)).toEqual(["tail\n", "next\n"]);
  });
});

describe("htmlParts (newcomer 6 finding 8: a closed 30,000-line code block was laid out whole in the paint that closed it)", () => {
  it("a 30,000-line code block closed was drawn whole at once: its HTML is in parts cut before a <pre> going on with it, and the part drawn at once holds one <pre>", () => {
    const lines = Array.from({ length: 30_000 }, (_, n) => `def f${n}(x):  return x * ${n} + len('<b>${n}</b>')  # c\n`);
    const html = renderMarkdown("```python\n" + lines.join("") + "```\n");
    const parts = htmlParts(html, 8000);
    expect(parts.join("")).toBe(html);
    // what the close draws now: the last part, one <pre> of at most CODE_PART_LINES lines; the other 149 wait
    expect(parts.length).toBe(30_000 / CODE_PART_LINES);
    expect(parts.at(-1)!.match(/<pre/g)!.length).toBe(1);
    expect(parts.at(-1)!.split("\n").length - 1).toBeLessThanOrEqual(CODE_PART_LINES + 1);
    expect(parts.slice(1).every((p) => p.startsWith('<pre class="code-part code-next'))).toBe(true);
  });

  it("HTML without a long code block is one part, and a part holds at least `size` characters", () => {
    const html = renderMarkdown("para\n\n```js\nshort\n```\n");
    expect(htmlParts(html, 10)).toEqual([html]);
    const code = renderMarkdown("```\n" + "x\n".repeat(1000) + "```\n"); // 5 pres of 200 lines, ~400 characters each
    const parts = htmlParts(code, 1000);
    expect(parts.join("")).toBe(code);
    expect(parts.length).toBe(2);
    expect(parts[0]!.match(/<pre/g)!.length).toBe(3);
  });
});
