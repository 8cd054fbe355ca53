import { beforeEach, describe, expect, it } from "vitest";
import { commands, resetStub } from "./../stub/vscode";
import { openedUnasked } from "../../src/keyboard";
import { Permissions } from "../../src/permissions";

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

describe("the rest of the class: a permission question's diff", () => {
  beforeEach(() => resetStub());
  it("opens where the keyboard rule says (behind the user's editor)", async () => {
    const permissions = new Permissions(() => {}, () => true, () => {}, () => openedUnasked(false, true));
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" as const }];
    void permissions.request({ sessionId: "s", options, toolCall: { toolCallId: "t", title: "Edit", content: [{ type: "diff", path: "/ws/a.py", oldText: "x = 1\n", newText: "x = 2\n" }] } as never }, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 0));
    const diff = commands.executed.find((c) => c[0] === "vscode.diff")!;
    expect(diff[4]).toEqual({ preview: true, preserveFocus: true, background: true });
  });
});
