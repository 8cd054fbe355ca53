// `session/list` pages (listAllSessions) against a fake connection: the sessions picker only ever got
// the first page (50) — now every page in the server's order; a misbehaving server (a cursor sent
// again, cursors without end, a failing later page) ends the walk with a note, keeping what was listed.
import { describe, expect, it } from "vitest";
import type * as acp from "@agentclientprotocol/sdk";
import { MAX_SESSION_PAGES, listAllSessions } from "../../src/client";

const infos = (from: number, to: number): acp.SessionInfo[] =>
  Array.from({ length: to - from + 1 }, (_, i) => ({ sessionId: `s${String(from + i).padStart(3, "0")}`, cwd: "/w", title: `t${from + i}` }));
const ids = (sessions: acp.SessionInfo[]) => sessions.map((s) => s.sessionId);

/** A fake `session/list`: `answer(params, n)` for the n-th call (1-based); the params asked are kept. */
function serve(answer: (params: acp.ListSessionsRequest, n: number) => acp.ListSessionsResponse) {
  const asked: acp.ListSessionsRequest[] = [];
  const request = async (params: acp.ListSessionsRequest) => {
    asked.push(params);
    return answer(params, asked.length);
  };
  return { asked, request };
}

describe("session/list pages", () => {
  it("sessions picker reaches sessions past the first page: 63 sessions in two pages, in order", async () => {
    const { asked, request } = serve((p) => (p.cursor === undefined ? { sessions: infos(1, 50), nextCursor: "after-50" } : { sessions: infos(51, 63) }));
    const { sessions, note } = await listAllSessions(request, "/w");
    expect(ids(sessions)).toEqual(ids(infos(1, 63)));
    expect(note).toBeUndefined();
    expect(asked).toEqual([{ cwd: "/w" }, { cwd: "/w", cursor: "after-50" }]);
  });

  it("a null or empty nextCursor is the last page", async () => {
    for (const nextCursor of [null, ""]) {
      const { asked, request } = serve(() => ({ sessions: infos(1, 3), nextCursor }));
      expect(await listAllSessions(request, "/w")).toEqual({ sessions: infos(1, 3) });
      expect(asked).toHaveLength(1);
    }
  });

  it("a cursor sent again stops the walk and is said; a repeated session is kept once, where it came first", async () => {
    const { asked, request } = serve((p) => ({ sessions: p.cursor ? infos(50, 60) : infos(1, 50), nextCursor: "same" }));
    const { sessions, note } = await listAllSessions(request, "/w");
    expect(asked).toHaveLength(2);
    expect(ids(sessions)).toEqual(ids(infos(1, 60)));
    expect(note).toContain("cursor again");
  });

  it("cursors without end stop at the page cap, said", async () => {
    const { asked, request } = serve((_, n) => ({ sessions: infos(n * 10, n * 10), nextCursor: `c${n}` }));
    const { sessions, note } = await listAllSessions(request, "/w", 4);
    expect(asked).toHaveLength(4);
    expect(ids(sessions)).toEqual(["s010", "s020", "s030", "s040"]);
    expect(note).toContain("stopped after 4 pages");
    expect(MAX_SESSION_PAGES).toBe(100);
  });

  it("a failing later page keeps the pages before it and says so; a failing first page throws", async () => {
    const later = serve((p) => {
      if (p.cursor) throw new Error("disk on fire");
      return { sessions: infos(1, 50), nextCursor: "next" };
    });
    const { sessions, note } = await listAllSessions(later.request, "/w");
    expect(sessions).toHaveLength(50);
    expect(note).toContain("page 2 failed (disk on fire)");
    const first = serve(() => {
      throw new Error("bad cwd");
    });
    await expect(listAllSessions(first.request, "/w")).rejects.toThrow("bad cwd");
  });
});
