/**
 * The retry policy of the transport, driven by a local HTTP server that answers with scripted status
 * codes (the policy is pure logic; the real API server's errors are covered by client.int.test.ts).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { Transport } from "./transport.ts";
import { ServerError, TooManyRequestsError } from "./errors.ts";

async function scripted(
  codes: number[],
  retryAfter?: string,
): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = createServer((req, res) => {
    const code = codes[Math.min(hits, codes.length - 1)] ?? 200;
    hits++;
    res.writeHead(code, {
      "content-type": "application/json",
      ...(retryAfter && code === 429 ? { "retry-after": retryAfter } : {}),
    });
    res.end(
      JSON.stringify(
        code === 200
          ? { ok: true }
          : {
              kind: "Status",
              code,
              reason: code === 429 ? "TooManyRequests" : "InternalError",
              message: "scripted",
            },
      ),
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hits: () => hits,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

function kubeConfig(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node refuses plain http unless TLS verification is explicitly off.
    clusters: [{ name: "c", server, skipTLSVerify: true }],
    users: [{ name: "u", token: "t0ken" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

describe("Transport retries", () => {
  it("retries GETs on 429 and 5xx, honouring Retry-After, then succeeds", async () => {
    const srv = await scripted([429, 503, 200], "2");
    const sleeps: number[] = [];
    const t = await Transport.create(kubeConfig(srv.url), { sleep: async (ms) => void sleeps.push(ms) });
    try {
      assert.deepEqual(await t.request({ method: "GET", path: "/x" }), { ok: true });
      assert.equal(srv.hits(), 3);
      assert.deepEqual(sleeps, [2000, 400], "Retry-After 2 s, then the doubling delay of attempt 1");
    } finally {
      await t.close();
      await srv.close();
    }
  });

  it("gives up after maxRetries with the typed error", async () => {
    const srv = await scripted([429]);
    const t = await Transport.create(kubeConfig(srv.url), { maxRetries: 2, sleep: async () => undefined });
    try {
      await assert.rejects(t.request({ method: "GET", path: "/x" }), TooManyRequestsError);
      assert.equal(srv.hits(), 3);
    } finally {
      await t.close();
      await srv.close();
    }
  });

  it("never retries writes (they may not be idempotent)", async () => {
    const srv = await scripted([500, 200]);
    const t = await Transport.create(kubeConfig(srv.url), { sleep: async () => undefined });
    try {
      await assert.rejects(t.request({ method: "POST", path: "/x", body: {} }), ServerError);
      assert.equal(srv.hits(), 1);
    } finally {
      await t.close();
      await srv.close();
    }
  });

  it("spaces requests by the optional client-side rate limit (qps 10, burst 2)", async () => {
    const srv = await scripted([200]);
    let clock = 0;
    const sleeps: number[] = [];
    const t = await Transport.create(kubeConfig(srv.url), {
      qps: 10,
      burst: 2,
      now: () => clock,
      sleep: async (ms) => {
        sleeps.push(Math.round(ms));
        clock += ms;
      },
    });
    try {
      for (let i = 0; i < 5; i++) await t.request({ method: "GET", path: "/x" });
      assert.equal(srv.hits(), 5);
      assert.deepEqual(sleeps, [100, 100, 100], "the burst passes at once; then one request per 100 ms");
    } finally {
      await t.close();
      await srv.close();
    }
  });
});
