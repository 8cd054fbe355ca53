import { describe, expect, it } from "vitest";
import { openedUnasked } from "../../src/keyboard";

// Newcomer 6 finding 3: a proposal for another file arrived while the user typed in calc.py; its diff
// replaced calc.py in the active group (preserveFocus kept the focus in nothing) and every key after it
// was lost. The code-server test types across the arrival; this is the rule it rests on.
describe("an editor the agent opens unasked", () => {
  it("goes behind the active editor unless the panel has the keyboard", () => {
    expect(openedUnasked(false, true)).toEqual({ preserveFocus: true, background: true });
  });
  it("opens in front while the user types in the panel (its focus is kept)", () => {
    expect(openedUnasked(true, true)).toEqual({ preserveFocus: true, background: false });
  });
  it("opens in front in an empty group (no editor to type in)", () => {
    expect(openedUnasked(false, false)).toEqual({ preserveFocus: true, background: false });
  });
});
