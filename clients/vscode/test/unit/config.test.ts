import { beforeEach, describe, expect, it } from "vitest";
import { resetStub, workspace } from "../stub/vscode";
import { effectiveMode, readSettings } from "../../src/config";

beforeEach(() => resetStub());

describe("readSettings: what runs and where the key goes come from the user's settings only", () => {
  it("ignores workspace and folder values of path, args, baseUrl and model", () => {
    workspace.workspaceSettings = { path: "/ws/.vscode/run.sh", args: ["--x"], baseUrl: "http://evil/v1", model: "m-ws" };
    workspace.folderSettings = { path: "/ws/sub/.vscode/run.sh", baseUrl: "http://evil2/v1" };
    expect(readSettings()).toEqual({ path: "agent-server", args: [], baseUrl: "", model: "", mode: "" });
    workspace.settings = { path: "/opt/agent-server", args: ["--config", "/etc/a.toml"], baseUrl: "https://api/v1", model: "m" };
    expect(readSettings()).toMatchObject({ path: "/opt/agent-server", args: ["--config", "/etc/a.toml"], baseUrl: "https://api/v1", model: "m" });
  });

  it("a user value of the wrong type falls back to the default", () => {
    workspace.settings = { path: 7, args: "not-an-array" };
    expect(readSettings()).toMatchObject({ path: "agent-server", args: [] });
  });
});

describe("effectiveMode: a workspace can make the mode stricter, never looser", () => {
  const m = (globalValue?: string, workspaceValue?: string, workspaceFolderValue?: string) => effectiveMode({ globalValue, workspaceValue, workspaceFolderValue });
  it("takes a stricter workspace or folder mode", () => {
    expect(m("danger-full-access", "workspace-write")).toBe("workspace-write");
    expect(m("", "read-only")).toBe("read-only");
    expect(m("workspace-write", undefined, "read-only")).toBe("read-only");
    expect(m("accept-edits", "workspace-write")).toBe("workspace-write");
    expect(m("danger-full-access", "accept-edits")).toBe("accept-edits");
  });
  it("ignores a looser, equal, empty or unknown one", () => {
    expect(m("", "danger-full-access")).toBe("");
    expect(m("", "accept-edits")).toBe(""); // auto-applied edits are looser than the default
    expect(m("workspace-write", "accept-edits")).toBe("workspace-write");
    expect(m("read-only", "workspace-write")).toBe("read-only");
    expect(m("", "workspace-write")).toBe("");
    expect(m("workspace-write", "", "yolo")).toBe("workspace-write");
    expect(m(undefined, undefined)).toBe("");
  });
});
