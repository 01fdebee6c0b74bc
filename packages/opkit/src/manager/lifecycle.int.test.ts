/**
 * The manager's own lifecycle in process, against opkit env: a stop that arrives while start() is still
 * opening servers and informers leaves nothing behind, and a stop while the API server has gone silent
 * ends in seconds, not after a request's whole timeout; a leader embedded with an onLeadershipLost hook
 * (so the process lives on) writes nothing after its Lease is taken, Events included.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createConnection } from "node:net";
import { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import { EventsV1 } from "../events/recorder.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { controller } from "../controller/index.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { takeOverLease } from "./testdata/takeover.ts";
import { createLogger } from "../logging/index.ts";
import { GracefulShutdownTimeoutError, Manager } from "./manager.ts";

const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");

/** True when something accepts TCP connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ port, host: "127.0.0.1" });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

describe("manager lifecycle", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  it("a stop that arrives during start() leaves no server listening and no informer running", async () => {
    const ns = await env.namespace("stop-early");
    // Stop at several moments of start(): before it is even called (-1: a signal handler that ran
    // first), before the servers listen, while controllers are wired, while informers list. Whatever
    // start() had opened must be closed when both have returned.
    for (const delayMs of [-1, 0, 1, 5, 20, 60, 150]) {
      const client = await KubeClient.load(env.kubeconfigPath);
      const mgr = await Manager.create({
        client,
        name: `stop-early-${delayMs}`,
        logger: createLogger({ name: "stop-early", level: "silent" }),
        metrics: { host: "127.0.0.1", port: 0 },
        health: { host: "127.0.0.1", port: 0 },
        cache: { namespace: ns },
        leaderElection: false,
      });
      let reconciles = 0;
      mgr.add(
        controller("noop")
          .for(ConfigMaps)
          .reconcile(() => {
            reconciles++;
            return Promise.resolve();
          }),
      );
      if (delayMs < 0) {
        await mgr.stop();
        await mgr.start();
      } else {
        const starting = mgr.start();
        await new Promise((r) => setTimeout(r, delayMs));
        await mgr.stop();
        await starting;
      }
      for (const [name, port] of Object.entries(mgr.ports)) {
        if (port !== undefined)
          assert.equal(
            await listening(port),
            false,
            `${name} port ${port} still open (stop at ${delayMs} ms)`,
          );
      }
      for (const h of mgr.cache.health())
        assert.ok(
          h.state === "stopped" || h.state === "idle",
          `informer ${h.kind} is ${h.state} after stop at ${delayMs} ms`,
        );
      const after = reconciles;
      await env.client.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { generateName: "late-", namespace: ns },
      });
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(reconciles, after, `no reconcile after the stop at ${delayMs} ms`);
    }
  });

  it("a leader stops within seconds when the API server has gone silent", async (t) => {
    const ns = await env.namespace("silent");
    const { proxy, kubeConfig } = await env.apiserverProxy();
    t.after(() => proxy.close());
    const client = await KubeClient.fromConfig(kubeConfig);
    const lost: unknown[] = [];
    const mgr = await Manager.create({
      client,
      name: "silent-server",
      logger: createLogger({ name: "silent", level: "silent" }),
      metrics: false,
      health: false,
      cache: { namespace: ns },
      leaderElection: {
        name: "silent-server",
        namespace: ns,
        leaseDurationMs: 15_000,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2_000,
      },
      onLeadershipLost: (err) => lost.push(err),
    });
    mgr.add(
      controller("noop")
        .for(ConfigMaps)
        .reconcile(() => Promise.resolve()),
    );
    await mgr.start();
    await eventually("leadership", () => mgr.leading, 30_000, 100);
    // Nothing fails fast from here on: open connections carry nothing, new ones are accepted and ignored.
    proxy.blackhole();
    const stoppingAt = Date.now();
    await mgr.stop();
    const tookS = (Date.now() - stoppingAt) / 1000;
    t.diagnostic(`stop with a silent API server took ${tookS.toFixed(1)} s`);
    // Bounded by the lease release (at most the renew deadline) plus the client's close grace (5 s);
    // before, closing waited for every in-flight request's own timeout (a minute).
    assert.ok(tookS < 18, `stopped in ${tookS} s`);
  });

  it("a leader kept alive by an onLeadershipLost hook writes nothing after its Lease is taken, Events included", async (t) => {
    const ns = await env.namespace("hooked");
    const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
    let lostAt = 0;
    let started = false;
    let lateWrite: unknown;
    const mgr = await Manager.create({
      client,
      name: "hooked",
      logger: createLogger({ name: "hooked", level: "silent" }),
      metrics: false,
      health: false,
      cache: { namespace: ns },
      gracefulShutdownMs: 10_000,
      leaderElection: {
        name: "hooked",
        namespace: ns,
        leaseDurationMs: 5_000,
        renewDeadlineMs: 4_000,
        retryPeriodMs: 1_000,
      },
      onLeadershipLost: () => (lostAt = Date.now()),
    });
    mgr.add(
      controller("slow")
        .for(ConfigMaps)
        .reconcile(async (req, ctx) => {
          if (req.name !== "trigger") return;
          started = true;
          // Ignores ctx.signal, then writes as if it still led: an Event and an object.
          await new Promise((r) => setTimeout(r, 4_000));
          const cm = ctx.cache.get(ConfigMaps, req.name, { namespace: req.namespace });
          if (cm) await ctx.recorder.record(cm, { type: "Normal", reason: "LateWrite", action: "Reconcile" });
          await ctx.client
            .create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late", namespace: ns } })
            .catch((err: unknown) => (lateWrite = err));
        }),
    );
    t.after(() => mgr.stop());
    await mgr.start();
    await eventually("leadership", () => mgr.leading, 30_000, 100);
    await env.client.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "trigger", namespace: ns },
    });
    await eventually("the slow reconcile started", () => started, 30_000, 50);
    await takeOverLease(env.client, ns, "hooked");
    const takenAt = Date.now();
    await eventually("leadership lost", () => lostAt > 0, 10_000, 20);
    t.diagnostic(`leadership lost ${lostAt - takenAt} ms after the Lease was taken (retry period 1 s)`);
    assert.ok(lostAt - takenAt <= 4_000 + 1_000, "lost within the renew deadline + 1 s");
    await mgr.done;
    const events = await env.client.list(EventsV1, { namespace: ns });
    assert.deepEqual(
      events.items.filter((e) => e.reason === "LateWrite").map((e) => e.note ?? e.reason),
      [],
      "no Event recorded after leadership was lost",
    );
    await assert.rejects(env.client.get(ConfigMaps, "late", { namespace: ns }), NotFoundError);
    assert.ok(lateWrite, "the late create failed (its signal was aborted)");
  });

  it("run() rejects when the grace period ends with a reconcile still running, and resolves after a clean stop", async () => {
    const ns = await env.namespace("grace");
    const runOnce = async (name: string, reconcileMs: number) => {
      const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
      const mgr = await Manager.create({
        client,
        name,
        logger: createLogger({ name, level: "silent" }),
        metrics: false,
        health: false,
        cache: { namespace: ns },
        leaderElection: false,
        gracefulShutdownMs: 300,
      });
      let started = false;
      mgr.add(
        controller(name)
          .for(ConfigMaps)
          .reconcile(async (req) => {
            if (req.name !== name) return;
            started = true;
            // Ignores ctx.signal on purpose.
            await new Promise((r) => setTimeout(r, reconcileMs));
          }),
      );
      const running = mgr.run();
      await env.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns } });
      await eventually(`${name}: the reconcile started`, () => started, 30_000, 20);
      void mgr.stop();
      return running;
    };
    const err = await runOnce("stuck", 3_000).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof GracefulShutdownTimeoutError, `rejected with ${String(err)}`);
    assert.deepEqual(err.unfinished, ["stuck"]);
    assert.match(err.message, /300 ms grace period; still running: stuck/);
    await runOnce("quick", 50);
  });
});
