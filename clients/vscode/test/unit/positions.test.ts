import { describe, expect, it } from "vitest";
import { fromUtf16Column, positionToUtf16, splitLines, toUtf16Column } from "../../src/positions";

describe("position-encoding conversion", () => {
  const line = "a😀e\u0301b"; // a, emoji (2 UTF-16 units, 4 bytes), e + combining acute (1+1 units, 1+2 bytes), b

  it("converts UTF-8 byte columns to UTF-16 columns through the line's text", () => {
    expect(toUtf16Column(line, 0, "utf-8")).toBe(0);
    expect(toUtf16Column(line, 1, "utf-8")).toBe(1); // after a
    expect(toUtf16Column(line, 5, "utf-8")).toBe(3); // after the emoji
    expect(toUtf16Column(line, 6, "utf-8")).toBe(4); // after e
    expect(toUtf16Column(line, 8, "utf-8")).toBe(5); // after the combining mark
    expect(toUtf16Column(line, 9, "utf-8")).toBe(6); // after b = end
  });

  it("never splits a character: a column inside one lands before it", () => {
    expect(toUtf16Column(line, 3, "utf-8")).toBe(1); // inside the emoji's 4 bytes
    expect(toUtf16Column(line, 7, "utf-8")).toBe(4); // inside the combining mark's 2 bytes
  });

  it("round-trips UTF-16 ↔ UTF-8 and UTF-32", () => {
    for (let c16 = 0; c16 <= line.length; c16++) {
      if (c16 === 2) continue; // inside the surrogate pair
      for (const enc of ["utf-8", "utf-32"] as const) {
        expect(toUtf16Column(line, fromUtf16Column(line, c16, enc), enc)).toBe(c16);
      }
    }
    expect(fromUtf16Column(line, 3, "utf-32")).toBe(2); // a + emoji = 2 code points
  });

  it("clamps past the line end and past the last line", () => {
    expect(toUtf16Column("abc", 99, "utf-16")).toBe(3);
    expect(toUtf16Column("abc", 99, "utf-8")).toBe(3);
    expect(positionToUtf16(["ab", "c"], { line: 7, character: 0 }, "utf-16")).toEqual({ line: 1, character: 1 });
  });

  it("splits CRLF, LF and CR line ends like VS Code", () => {
    expect(splitLines("a\r\nb\nc\rd")).toEqual(["a", "b", "c", "d"]);
    expect(positionToUtf16(splitLines("x\r\né😀z"), { line: 1, character: 6 }, "utf-8")).toEqual({ line: 1, character: 3 });
  });
});
