// Issue 30, item 11: the proposal's diff showed its internal URI in the breadcrumb
// (`p1 › 0 › new › app.py`): the virtual file's path was `/<id>/<fileIndex>/<side>/<name>`. Now the
// path is the file's workspace-relative path (what the breadcrumb shows) and the ids ride in the query.
import { afterEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { commands, resetStub, workspace } from "./../stub/vscode";
import { diffTitle, parseProposalUri, proposalUri } from "../../src/diff";
import { Permissions } from "../../src/permissions";
import type { Proposal } from "../../src/proposals";

const realRelative = workspace.asRelativePath;
afterEach(() => {
  workspace.asRelativePath = realRelative;
  resetStub();
});

/** As VS Code's: relative to the folder holding the file (with its name when there are several), else the absolute path. */
function relativeTo(folders: string[]) {
  workspace.workspaceFolders = folders.map((f) => ({ uri: vscode.Uri.file(f) as never }));
  workspace.asRelativePath = ((u: { path: string }, withFolder?: boolean) => {
    const folder = folders.find((f) => u.path.startsWith(`${f}/`));
    if (!folder) return u.path;
    const rel = u.path.slice(folder.length + 1);
    return withFolder ? `${folder.split("/").pop()}/${rel}` : rel;
  }) as typeof workspace.asRelativePath;
}

const proposal = (id: string, label: string, ...paths: string[]) => ({ id, label, files: paths.map((p) => ({ uri: vscode.Uri.file(p) })) }) as unknown as Proposal;

describe("the proposal diff's breadcrumb", () => {
  it("the diff breadcrumb showed the proposal's internal uri", () => {
    relativeTo(["/home/u/proj"]);
    const p = proposal("p12", "Edit src/app.py", "/home/u/proj/src/app.py");
    const uri = proposalUri(p, 0, "new") as unknown as { scheme: string; path: string };
    expect(uri.scheme).toBe("agent-proposal");
    expect(uri.path).toBe("/src/app.py"); // the breadcrumb: src › app.py (no p12 › 0 › new)
    expect(parseProposalUri(uri as never)).toEqual({ id: "p12", fileIndex: 0, side: "new" });
    expect(parseProposalUri(proposalUri(p, 0, "old"))).toEqual({ id: "p12", fileIndex: 0, side: "old" });
    expect(diffTitle(p, 0)).toBe("Edit src/app.py (proposal)");
  });

  it("names the folder in a multi-root workspace, the absolute path outside it, and each file of a proposal", () => {
    relativeTo(["/home/u/proj", "/data/second"]);
    const p = proposal("p3", "Rename limit", "/data/second/second.py", "/etc/outside.conf");
    expect((proposalUri(p, 0, "new") as unknown as { path: string }).path).toBe("/second/second.py");
    expect((proposalUri(p, 1, "new") as unknown as { path: string }).path).toBe("/etc/outside.conf");
    expect(parseProposalUri(proposalUri(p, 1, "new"))).toEqual({ id: "p3", fileIndex: 1, side: "new" });
    expect(diffTitle(p, 0)).toBe("Rename limit: second/second.py (proposal)");
  });

  it("a URI of another scheme or without the ids is not a proposal's", () => {
    expect(parseProposalUri(vscode.Uri.file("/home/u/proj/app.py"))).toBeUndefined();
    expect(parseProposalUri(vscode.Uri.from({ scheme: "agent-proposal", path: "/app.py" }))).toBeUndefined();
  });
});

describe("the permission question's diff (plain ACP)", () => {
  it("its breadcrumb showed perm1 › 0 › new › a.py: now the file's workspace-relative path, and its texts by the query", async () => {
    relativeTo(["/home/u/proj"]);
    const permissions = new Permissions(() => {});
    const options = [{ optionId: "allow", name: "Allow", kind: "allow_once" as const }];
    void permissions.request({ sessionId: "s", options, toolCall: { toolCallId: "t", title: "Edit", content: [{ type: "diff", path: "/home/u/proj/src/a.py", oldText: "x = 1\n", newText: "x = 2\n" }] } as never }, new AbortController().signal);
    await new Promise((r) => setTimeout(r, 0));
    const diff = commands.executed.find((c) => c[0] === "vscode.diff")!;
    const [left, right] = [diff[1], diff[2]] as { scheme: string; path: string }[];
    expect([left!.path, right!.path]).toEqual(["/src/a.py", "/src/a.py"]);
    expect(diff[3]).toBe("src/a.py: change the agent asks to make");
    expect([permissions.provideTextDocumentContent(left as never), permissions.provideTextDocumentContent(right as never)]).toEqual(["x = 1\n", "x = 2\n"]);
  });
});
