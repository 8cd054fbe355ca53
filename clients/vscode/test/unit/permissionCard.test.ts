// The permission card: the question (the command) is on the card from the moment it is asked, also
// when the agent gives no words for it; once answered it names the option chosen ("Allow once"), not
// its id ("Answered: reject_once").
import { beforeEach, describe, expect, it } from "vitest";
import { TabInputTextDiff, Uri, resetStub, window } from "../stub/vscode";
import { Permissions } from "../../src/permissions";
import type { ChatEvent } from "../../src/protocol";
import { fold, initialState, permissionAnswer, type Item } from "../../webview/state";

beforeEach(() => resetStub());

const OPTIONS = [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" as const },
  { optionId: "reject_once", name: "Reject", kind: "reject_once" as const },
];

function ask(rawInput: unknown, content: unknown[] = []) {
  const posted: ChatEvent[] = [];
  const permissions = new Permissions((e) => posted.push(e));
  const answer = permissions.request(
    { sessionId: "s1", options: OPTIONS, toolCall: { toolCallId: "t1", title: "Write perm1", kind: "execute", status: "pending", rawInput, content } as never },
    new AbortController().signal,
  );
  return { posted, permissions, answer };
}

const card = (events: ChatEvent[]) => events.reduce(fold, initialState()).items.find((i): i is Extract<Item, { type: "permission" }> => i.type === "permission")!;

describe("the permission card", () => {
  it("shows the command before it is answered even when the agent sent no text for it", () => {
    const { posted } = ask({ command: "echo first > perm1.txt" });
    expect(card(posted).command).toBe("echo first > perm1.txt");
    expect(card(posted).outcome).toBeUndefined();
  });

  it("keeps the agent's own words when it gave them, the command shown once (whole, by the card)", () => {
    const { posted } = ask({ command: "echo first > perm1.txt" }, [{ type: "content", content: { type: "text", text: "Not sandboxed:\n```sh\necho first > perm1.txt\n```" } }]);
    expect(card(posted).reason).toBe("Not sandboxed:");
    expect(card(posted).command).toBe("echo first > perm1.txt");
  });

  it("says the chosen option's name once answered, not its raw option id", async () => {
    const { posted, permissions, answer } = ask({ command: "echo first > perm1.txt" });
    const id = (posted[0] as { id: string }).id;
    permissions.answer(id, "reject_once");
    expect(await answer).toEqual({ outcome: { outcome: "selected", optionId: "reject_once" } });
    expect(permissionAnswer(card(posted))).toBe("Answered: Reject");
  });

  it("a question never answered says it was denied", () => {
    const { posted, permissions } = ask({ command: "ls" });
    permissions.cancelAll();
    expect(permissionAnswer(card(posted))).toBe("Not answered: denied");
  });

  it("the plain-ACP permission diff closes after the answer (it stayed open, showing a decided change)", () => {
    const { posted, permissions } = ask({}, [{ type: "diff", path: "/ws/a.py", oldText: "x = 1\n", newText: "x = 2\n" }]);
    const id = (posted[0] as { id: string }).id;
    const mine = { input: new TabInputTextDiff(Uri.from({ scheme: "agent-permission", path: "/ws/a.py", query: `${id}/0/old` }), Uri.from({ scheme: "agent-permission", path: "/ws/a.py", query: `${id}/0/new` })) };
    const other = { input: new TabInputTextDiff(Uri.file("/ws/b.py"), Uri.file("/ws/b.py")) };
    const closed: unknown[] = [];
    const groups = window.tabGroups as unknown as { all: unknown[]; close: (t: unknown[]) => Promise<boolean> };
    const saved = { all: groups.all, close: groups.close };
    groups.all = [{ tabs: [mine, other] }];
    groups.close = async (tabs: unknown[]) => (closed.push(...tabs), true);
    try {
      permissions.answer(id, "allow_once");
    } finally {
      Object.assign(groups, saved);
    }
    expect(closed).toEqual([mine]);
  });
});
