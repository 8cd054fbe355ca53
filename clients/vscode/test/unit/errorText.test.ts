// A failed turn's error is shown once: agent-server's `data.details` repeats the human message
// (docs/protocol.md), and a message that already says the details ("… (gave up after 4 attempts)")
// must not get them glued on again ("HTTP 500: X (gave up after 4 attempts): HTTP 500: X").
import { describe, expect, it } from "vitest";
import * as acp from "@agentclientprotocol/sdk";
import { errorText } from "../../src/client";

describe("errorText", () => {
  it("shows a turn error once when its details repeat the message or a part of it", () => {
    const msg = "HTTP 500: offline endpoint: no scripted response left (gave up after 4 attempts)";
    expect(errorText(new acp.RequestError(-32603, msg, { code: "SERVER_ERROR", details: msg }))).toBe(msg);
    expect(errorText(new acp.RequestError(-32603, msg, { details: "HTTP 500: offline endpoint: no scripted response left" }))).toBe(msg);
  });

  it("keeps details that say more than the message", () => {
    expect(errorText(new acp.RequestError(-32603, "Internal error", { details: "disk full" }))).toBe("Internal error: disk full");
    expect(errorText(new acp.RequestError(-32603, "HTTP 429", { details: "HTTP 429: rate limited, retry in 20 s" }))).toBe("HTTP 429: rate limited, retry in 20 s");
  });
});
