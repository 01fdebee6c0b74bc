/**
 * The fault-injection TCP proxy on its own, against a local TCP server (no API server needed): bytes pass
 * unchanged, and a throttled connection is no faster than its rate.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, createServer, type Server } from "node:net";
import { startTcpProxy } from "./proxy.ts";

/** A server that sends `bytes` (a known pattern) to each connection, then ends it. */
async function sender(bytes: Buffer): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.end(bytes));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : 0 };
}

/** Everything the server sends through the proxy at `port`, and how long it took. */
function receive(port: number): Promise<{ data: Buffer; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const chunks: Buffer[] = [];
    const socket = connect(port, "127.0.0.1");
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("end", () => resolve({ data: Buffer.concat(chunks), ms: performance.now() - t0 }));
  });
}

describe("startTcpProxy", () => {
  const payload = Buffer.from(Array.from({ length: 60_000 }, (_, i) => i % 251));

  it("passes the bytes unchanged, and a throttled connection no faster than its rate", async (t) => {
    const { server, port } = await sender(payload);
    const proxy = await startTcpProxy(port);
    t.after(async () => {
      await proxy.close();
      await new Promise((r) => server.close(r));
    });
    const full = await receive(proxy.port);
    assert.deepEqual(full.data, payload);

    proxy.throttle(100_000);
    const slow = await receive(proxy.port);
    assert.deepEqual(slow.data, payload, "throttled bytes arrive unchanged and in order");
    // 60,000 bytes at 100,000 B/s: at least 0.6 s (a lower bound only, which a busy machine cannot break).
    assert.ok(slow.ms >= 550, `throttled transfer took ${slow.ms.toFixed(0)} ms, expected ≥ 600`);

    proxy.throttle(undefined);
    assert.deepEqual((await receive(proxy.port)).data, payload);
    assert.throws(() => proxy.throttle(0), /bytesPerSecond must be > 0/);
  });
});
