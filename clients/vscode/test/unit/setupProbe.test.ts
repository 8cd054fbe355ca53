// The first-run page ran `--check-config` without `--probe`: a wrong base URL (or a dead endpoint, a
// refused key) was found out only by the first prompt. The real agent-server of this checkout (its
// .venv) is asked here, as the extension asks it: once for the facts, then with --probe.
import { mkdtempSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkConfig, reachView } from "../../src/setup";

const SERVER = process.env.AGENT_SERVER_BIN ?? resolve(__dirname, "../../../../.venv/bin/agent-server");

function env(baseUrl: string): NodeJS.ProcessEnv {
  const home = mkdtempSync(join(tmpdir(), "setup-probe-"));
  return { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: home, AGENT_SERVER_STATE_DIR: home, AGENT_SERVER_BASE_URL: baseUrl, AGENT_SERVER_MODEL: "m", AGENT_SERVER_API_KEY: "k" };
}

describe("the first-run page asks the endpoint", () => {
  it("the_first_run_page_did_not_find_out_a_wrong_endpoint", async () => {
    const wrong = env("http://127.0.0.1:9/v1"); // nothing listens there
    const facts = await checkConfig(SERVER, [], wrong, tmpdir());
    expect(facts.ok).toBe(true);
    expect(reachView(facts)).toBeUndefined(); // the facts alone say nothing of the endpoint
    const probed = await checkConfig(SERVER, [], wrong, tmpdir(), true);
    const reach = reachView(probed)!;
    expect(reach.state).toBe("failed");
    expect(reach.text).toMatch(/^does not answer as an endpoint should, so a prompt would fail: .*cannot reach http:\/\/127\.0\.0\.1:9\/v1\/models/);
    expect(reach.text).not.toContain("Bearer");
  }, 30_000);

  it("an endpoint that lists its models answers", async () => {
    const server = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.url === "/v1/models" ? { data: [{ id: "m" }] } : { error: "no" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const port = (server.address() as AddressInfo).port;
      const reach = reachView(await checkConfig(SERVER, [], env(`http://127.0.0.1:${port}/v1`), tmpdir(), true))!;
      expect(reach.state).toBe("ok");
      expect(reach.text).toMatch(/^answers — The endpoint accepted the key/);
      expect(reach.text).not.toContain("k)");
    } finally {
      server.close();
    }
  }, 30_000);
});
