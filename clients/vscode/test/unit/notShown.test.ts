// A proposal of a session the panel does not show (the user switched to another session while its turn
// ran) opened its diff over what the user worked on, and the accept shortcut with no diff in front took
// it too. Now its diff opens once the panel shows its session; the shortcut takes only the shown one's.
import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { StubDocument, commands, files, resetStub, workspace } from "./../stub/vscode";
import { DiffView } from "../../src/diff";
import { sha256 } from "../../src/proposalModel";
import { type Proposal, ProposalManager } from "../../src/proposals";

const PATH = "/ws/a.txt";
const URI = `file://${PATH}`;
const BASE = "one\ntwo\n";

let view: DiffView;
let manager: ProposalManager;
let shownSession: string;
let told: Proposal[];
beforeEach(() => {
  resetStub();
  told = [];
  shownSession = "B";
  view = new DiffView({ isShown: (p) => p.params.sessionId === shownSession, proposalShown: (p) => told.push(p), proposalChanged() {}, proposalFinished() {} });
  manager = new ProposalManager(view, () => {});
  view.manager = manager;
});

async function propose(sessionId: string): Promise<Proposal> {
  files.set(PATH, BASE);
  workspace.textDocuments.push(new StubDocument(vscode.Uri.file(PATH) as never, BASE, 1, false));
  void manager.handle({ sessionId, edit: { documentChanges: [{ textDocument: { uri: URI, version: 1 }, edits: [{ range: { start: { line: 1, character: 0 }, end: { line: 1, character: 3 } }, newText: "TWO" }] }] }, baseHashes: { [URI]: sha256(BASE) } }, new AbortController().signal, "utf-16");
  for (let i = 0; i < 50 && told.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  return told[0]!;
}

const diffsOpened = () => commands.executed.filter((c) => c[0] === "vscode.diff").length;

describe("a proposal of a session the panel does not show", () => {
  it("a_proposal_of_a_session_not_shown_opened_its_diff_over_the_users_work: no diff until its session is shown", async () => {
    const p = await propose("A");
    expect(p.params.sessionId).toBe("A");
    expect(diffsOpened()).toBe(0);
    view.sessionShown("C"); // another session: still nothing
    expect(diffsOpened()).toBe(0);
    shownSession = "A";
    view.sessionShown("A");
    await new Promise((r) => setTimeout(r, 0));
    expect(diffsOpened()).toBe(1);
    view.sessionShown("A"); // once
    await new Promise((r) => setTimeout(r, 0));
    expect(diffsOpened()).toBe(1);
  });

  it("the shown session's proposal opens its diff at once", async () => {
    shownSession = "A";
    await propose("A");
    expect(diffsOpened()).toBe(1);
  });

  it("the accept shortcut with no diff in front never takes a proposal of a session not shown", async () => {
    const p = await propose("A");
    expect(view.activeProposalId()).toBeUndefined();
    shownSession = "A";
    expect(view.activeProposalId()).toBe(p.id);
  });
});

describe("a permission question of a session the panel does not show", () => {
  it("a_permission_question_of_a_session_not_shown_opened_its_diff_over_the_users_work", async () => {
    const { Permissions } = await import("../../src/permissions");
    let shown = "B";
    const permissions = new Permissions(() => {}, (id) => id === shown);
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" as const }];
    void permissions.request({ sessionId: "A", options, toolCall: { toolCallId: "t", title: "a.txt: keep yours or take the checkpoint?", content: [{ type: "diff", path: "/ws/a.txt", oldText: "x\n", newText: "y\n" }] } as never }, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 0));
    expect(diffsOpened()).toBe(0);
    shown = "A";
    permissions.repost("A");
    await new Promise((r) => setTimeout(r, 0));
    expect(diffsOpened()).toBe(1);
    permissions.repost("A"); // once
    await new Promise((r) => setTimeout(r, 0));
    expect(diffsOpened()).toBe(1);
  });
});
