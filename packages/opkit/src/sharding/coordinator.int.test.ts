/**
 * Shard coordination against the real API server, with short timings (lease 3 s, renew deadline 2 s,
 * retry 0.5 s): a replica cut off from the API server (a hung connection, not a refused one) must stop
 * its shards' work before another replica can take them, and a stopping replica keeps its shards until
 * their in-flight work ended, however long that takes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "../client/client.ts";
import { Leases } from "../client/builtins.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { ShardCoordinator, type ShardCallbacks } from "./coordinator.ts";
import type { ShardLeaseClient } from "./coordinator.ts";

const LEASE_MS = 3_000;
const RENEW_MS = 2_000;
const RETRY_MS = 500;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function waitFor(what: string, cond: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await sleep(50);
  }
}

/** One replica: what it works on, and when each shard started and stopped (performance.now()). */
class Replica {
  readonly coordinator: ShardCoordinator;
  readonly working = new Set<number>();
  readonly log: { shard: number; what: "acquired" | "released" | "lost"; at: number }[] = [];
  /** While set, `releasing` waits for it (in-flight reconciles still running). */
  inflight: Promise<void> | undefined;

  constructor(client: ShardLeaseClient, namespace: string, group: string, identity: string, count: number) {
    this.coordinator = new ShardCoordinator({
      client,
      namespace,
      group,
      count,
      identity,
      leaseDurationMs: LEASE_MS,
      renewDeadlineMs: RENEW_MS,
      retryPeriodMs: RETRY_MS,
    });
  }

  callbacks(): ShardCallbacks {
    return {
      acquired: (shard) => {
        this.working.add(shard);
        this.log.push({ shard, what: "acquired", at: performance.now() });
      },
      releasing: async (shard) => {
        await this.inflight;
        this.working.delete(shard);
        this.log.push({ shard, what: "released", at: performance.now() });
      },
      lost: (shard) => {
        this.working.delete(shard);
        this.log.push({ shard, what: "lost", at: performance.now() });
      },
    };
  }

  start(): void {
    this.coordinator.start(this.callbacks());
  }
}

describe("shard coordination on the API server", { timeout: 60_000 }, () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("shards");
  });
  after(() => env?.cleanup());

  it("a replica behind a hung connection stops its shards before another replica takes them", async (t) => {
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const client = await KubeClient.fromConfig(kubeConfig, { maxRetries: 0 });
    const a = new Replica(client, ns, "hung", "a", 2);
    const b = new Replica(env.client, ns, "hung", "b", 2);
    t.after(async () => {
      await b.coordinator.stop();
      proxy.heal();
      await a.coordinator.stop();
      await client.transport.destroy();
      await proxy.close();
    });
    a.start();
    await waitFor("a holds both shards", () => a.working.size === 2);
    await sleep(1_000);

    // Every connection of a goes silent: requests neither answer nor fail.
    const cutAt = performance.now();
    proxy.blackhole();
    b.start();
    await waitFor("b holds both shards", () => b.working.size === 2, 20_000);
    for (const shard of [0, 1]) {
      const lost = a.log.find((e) => e.shard === shard && e.what === "lost");
      const taken = b.log.find((e) => e.shard === shard && e.what === "acquired");
      assert.ok(
        lost,
        `a never stopped shard ${shard} (b took it ${Math.round(taken!.at - cutAt)} ms after the cut)`,
      );
      t.diagnostic(
        `shard ${shard}: a stopped ${Math.round(lost.at - cutAt)} ms after the cut, b started ${Math.round(taken!.at - cutAt)} ms`,
      );
      assert.ok(lost.at < taken!.at, `shard ${shard}: b started before a stopped`);
      assert.ok(lost.at - cutAt <= RETRY_MS + RENEW_MS + 500, `a stopped too late: ${lost.at - cutAt} ms`);
    }
  });

  it("a stopping replica keeps renewing a shard whose in-flight work outlasts the lease", async (t) => {
    const a = new Replica(env.client, ns, "slowstop", "a", 1);
    const b = new Replica(env.client, ns, "slowstop", "b", 1);
    t.after(async () => {
      await a.coordinator.stop();
      await b.coordinator.stop();
    });
    a.start();
    await waitFor("a holds the shard", () => a.working.size === 1);
    b.start();
    await sleep(1_000);
    assert.equal(b.working.size, 0);

    // a stops while a reconcile runs for twice the lease duration.
    let finish!: () => void;
    a.inflight = new Promise<void>((r) => (finish = r));
    const stopped = a.coordinator.stop();
    await sleep(2 * LEASE_MS);
    assert.equal(b.working.size, 0, "b took the shard while a's work was still running");
    const lease = await env.client.get(Leases, "slowstop-shard-0", { namespace: ns });
    assert.equal(lease.spec?.holderIdentity, "a");
    const finishedAt = performance.now();
    finish();
    await stopped;
    await waitFor("b takes the shard", () => b.working.size === 1);
    const taken = b.log.find((e) => e.what === "acquired");
    assert.ok(taken && taken.at >= finishedAt);
  });
});
