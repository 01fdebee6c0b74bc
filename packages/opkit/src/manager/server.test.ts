import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { InformerHealth } from "../cache/informer.ts";
import { FakeClock } from "../clock/index.ts";
import { Metrics } from "../metrics/index.ts";
import { DuplicateCheckError, OpsServer, ServerListenError, cacheSyncedCheck } from "./server.ts";

async function get(port: number, path: string): Promise<{ status: number; body: string; type: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text(), type: res.headers.get("content-type") ?? "" };
}

test("/readyz is 503 naming each failing check and why, then 200 once all pass", async (t) => {
  const server = new OpsServer({ host: "127.0.0.1", port: 0 });
  let synced = false;
  server.addReadyCheck("informers", () => (synced ? { ok: true } : { ok: false, detail: "Pod: not synced" }));
  server.addReadyCheck("webhook", () => ({ ok: true }));
  server.addReadyCheck("rbac", () => {
    throw new Error("forbidden: cannot list secrets");
  });
  const { port } = await server.start();
  t.after(() => server.stop());

  let res = await get(port, "/readyz");
  assert.equal(res.status, 503);
  assert.equal(
    res.body,
    "[-]informers failed: Pod: not synced\n[+]webhook ok\n[-]rbac failed: forbidden: cannot list secrets\n" +
      "readyz check failed\n",
  );
  // A single check can be probed on its own.
  assert.equal((await get(port, "/readyz/webhook")).status, 200);
  assert.equal((await get(port, "/readyz/nope")).status, 404);

  // Liveness does not depend on readiness.
  res = await get(port, "/healthz");
  assert.deepEqual([res.status, res.body], [200, "ok"]);

  synced = true;
  res = await get(port, "/readyz/informers");
  assert.deepEqual([res.status, res.body], [200, "ok"]);
  assert.equal((await get(port, "/readyz")).status, 503, "rbac still fails");
});

test("/healthz fails when a liveness check fails; a hanging check times out instead of hanging", async (t) => {
  const server = new OpsServer({ host: "127.0.0.1", port: 0, checkTimeoutMs: 50 });
  let alive = true;
  server.addHealthCheck("ping", () => ({ ok: alive, detail: "stalled" }));
  server.addReadyCheck("slow", () => new Promise(() => {}));
  assert.throws(() => server.addHealthCheck("ping", () => ({ ok: true })), DuplicateCheckError);
  const { port } = await server.start();
  t.after(() => server.stop());

  assert.equal((await get(port, "/healthz")).status, 200);
  alive = false;
  const res = await get(port, "/healthz");
  assert.deepEqual([res.status, res.body], [503, "[-]ping failed: stalled\nhealthz check failed\n"]);
  const slow = await get(port, "/readyz");
  assert.deepEqual(
    [slow.status, slow.body],
    [503, "[-]slow failed: no answer within 50 ms\nreadyz check failed\n"],
  );
  assert.equal((await get(port, "/metrics")).status, 404, "no registry, no /metrics");
});

test("the check timeout runs on the injected clock: a hanging check fails when fake time passes", async (t) => {
  const clock = new FakeClock();
  const server = new OpsServer({ host: "127.0.0.1", port: 0, checkTimeoutMs: 60_000, clock });
  server.addReadyCheck("hangs", () => new Promise(() => {}));
  const { port } = await server.start();
  t.after(() => server.stop());
  const answer = get(port, "/readyz");
  // The request is on its way; wait (in real time) until the server armed the check's fake timer.
  while (clock.pendingTimers() === 0) await new Promise((r) => setTimeout(r, 5));
  clock.advance(60_000);
  const res = await answer;
  assert.deepEqual(
    [res.status, res.body],
    [503, "[-]hangs failed: no answer within 60000 ms\nreadyz check failed\n"],
  );
  assert.equal(clock.pendingTimers(), 0);
});

test("/metrics serves the registry; probes can be turned off; a taken port is a typed error", async (t) => {
  const metrics = new Metrics({ processMetrics: false });
  metrics.reconcile("c").start().end("success");
  const server = new OpsServer({ host: "127.0.0.1", port: 0, registry: metrics.registry, probes: false });
  const { port } = await server.start();
  t.after(() => server.stop());

  const res = await get(port, "/metrics");
  assert.equal(res.status, 200);
  assert.match(res.type, /^text\/plain; version=0\.0\.4/);
  assert.match(res.body, /^controller_runtime_reconcile_total\{controller="c",result="success"\} 1$/m);
  assert.equal((await get(port, "/healthz")).status, 404);

  const taken = new OpsServer({ host: "127.0.0.1", port });
  await assert.rejects(
    taken.start(),
    (err: unknown) => err instanceof ServerListenError && err.port === port,
  );
});

test("stop closes idle keep-alive connections so the process can exit", async () => {
  const server = new OpsServer({ host: "127.0.0.1", port: 0 });
  const { port } = await server.start();
  await get(port, "/healthz"); // fetch keeps the connection alive
  await server.stop();
  // The port is free again.
  const probe = createServer();
  await new Promise<void>((resolve, reject) =>
    probe.once("error", reject).listen(port, "127.0.0.1", resolve),
  );
  await new Promise((r) => probe.close(r));
});

test("cacheSyncedCheck names unsynced kinds and RBAC denials", async () => {
  const health: InformerHealth[] = [
    { kind: "v1/ConfigMap", synced: true, state: "watching", objects: 3, watchRequests: 1, relists: 0 },
    {
      kind: "v1/Secret",
      synced: false,
      state: "listing",
      forbidden: 'secrets is forbidden: User "op" cannot list resource "secrets"',
      objects: 0,
      watchRequests: 0,
      relists: 0,
    },
    { kind: "apps/v1/Deployment", synced: false, state: "listing", objects: 0, watchRequests: 0, relists: 0 },
  ];
  const check = cacheSyncedCheck({ health: () => health });
  assert.deepEqual(await check(), {
    ok: false,
    detail:
      'v1/Secret: forbidden: secrets is forbidden: User "op" cannot list resource "secrets"; ' +
      "apps/v1/Deployment: not synced (listing)",
  });
  assert.deepEqual(await cacheSyncedCheck({ health: () => [health[0]!] })(), { ok: true });
});
