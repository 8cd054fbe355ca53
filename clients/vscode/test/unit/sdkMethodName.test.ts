// Pins the name under which the official TypeScript SDK (2.x) delivers our extension request to a
// client handler: the full `_agent_server/apply_workspace_edit` (the 1.x SDK stripped the leading `_`).
import * as acp from "@agentclientprotocol/sdk";
import { describe, expect, it } from "vitest";
import { APPLY_WORKSPACE_EDIT, type ClientHandlers, buildClientApp } from "../../src/client";

function pipePair() {
  const a = new TransformStream<Uint8Array, Uint8Array>();
  const b = new TransformStream<Uint8Array, Uint8Array>();
  return { client: acp.ndJsonStream(a.writable, b.readable), agent: acp.ndJsonStream(b.writable, a.readable) };
}

describe("the SDK delivers the extension method", () => {
  it("under its full name, with params, to the handler registered for it", async () => {
    expect(APPLY_WORKSPACE_EDIT).toBe("_agent_server/apply_workspace_edit");
    const seen: unknown[] = [];
    const handlers: ClientHandlers = {
      readTextFile: async () => ({ content: "" }),
      writeTextFile: async () => ({}),
      requestPermission: async () => ({ outcome: { outcome: "cancelled" } }),
      applyWorkspaceEdit: async (params, _signal, encoding) => {
        seen.push({ label: params.label, encoding });
        return { outcome: "rejected" };
      },
    };
    const { client, agent } = pipePair();
    const conn = buildClientApp(handlers, () => {}, () => "utf-8").connect(client);
    const answer = await acp.agent().connectWith(agent, (ctx) =>
      ctx.request<{ outcome: string }>("_agent_server/apply_workspace_edit", { sessionId: "s", label: "Edit a.py", edit: { documentChanges: [] } }),
    );
    expect(answer).toEqual({ outcome: "rejected" });
    expect(seen).toEqual([{ label: "Edit a.py", encoding: "utf-8" }]);
    // the name without the underscore is NOT routed there
    const { client: c2, agent: a2 } = pipePair();
    const conn2 = buildClientApp(handlers, () => {}, () => "utf-16").connect(c2);
    await expect(acp.agent().connectWith(a2, (ctx) => ctx.request("agent_server/apply_workspace_edit", { edit: {} }))).rejects.toMatchObject({ code: -32601 });
    expect(seen).toHaveLength(1);
    conn.close();
    conn2.close();
  });
});
