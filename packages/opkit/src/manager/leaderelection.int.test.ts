/**
 * Leader election against the real API server, with short timings (lease 3 s, renew deadline 2 s,
 * retry 0.5 s): exactly one leader, takeover after expiry, fast handover on release, and loss of
 * leadership when renewals fail (network partition, or the Lease taken by someone else).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "../client/client.ts";
import { AlreadyExistsError } from "../client/errors.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { Leases } from "../client/builtins.ts";
import {
  LeaderElector,
  LeadershipLostError,
  type LeaseClient,
  type StoppedLeadingInfo,
} from "./leaderelection.ts";
import { Metrics } from "../metrics/index.ts";

const LEASE_MS = 3_000;
const RENEW_MS = 2_000;
const RETRY_MS = 500;
// client-go jitters acquire retries by up to 1.2 × retryPeriod.
const MAX_RETRY_WAIT_MS = RETRY_MS * 2.2;
const SLACK_MS = 1_000;

interface Candidate {
  elector: LeaderElector;
  startedAt?: number;
  stopped?: StoppedLeadingInfo;
  stoppedAt?: number;
  signal?: AbortSignal;
  done: Promise<void>;
}

function candidate(
  client: LeaseClient,
  namespace: string,
  name: string,
  identity: string,
  metrics?: Metrics,
): Candidate {
  const elector = new LeaderElector({
    client,
    namespace,
    name,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_MS,
    retryPeriodMs: RETRY_MS,
    onLeaderStatus: metrics?.leaderStatus(name),
  });
  const c: Candidate = { elector, done: Promise.resolve() };
  c.done = elector.run({
    onStartedLeading: (signal) => {
      c.startedAt = performance.now();
      c.signal = signal;
    },
    onStoppedLeading: (info) => {
      c.stopped = info;
      c.stoppedAt = performance.now();
    },
  });
  return c;
}

async function waitFor(what: string, fn: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!fn()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("leader election (real API server)", { timeout: 120_000 }, () => {
  let env: TestEnv;
  let ns: string;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("le");
  });
  after(() => env.cleanup());

  it("two candidates: exactly one leads, and the Lease names it", async (t) => {
    const metrics = new Metrics({ processMetrics: false });
    const a = candidate(env.client, ns, "one-leader", "a", metrics);
    const b = candidate(env.client, ns, "one-leader", "b", metrics);
    t.after(() => Promise.all([a.elector.stop(), b.elector.stop()]));

    await waitFor("a leader", () => a.elector.isLeader() || b.elector.isLeader());
    // Watch for 4 s (more than a lease duration): never two leaders, never a change of leader.
    const leader = a.elector.isLeader() ? a : b;
    const follower = leader === a ? b : a;
    for (const end = performance.now() + 4_000; performance.now() < end;) {
      assert.equal(leader.elector.isLeader(), true);
      assert.equal(follower.elector.isLeader(), false);
      await sleep(50);
    }
    assert.equal(follower.startedAt, undefined, "the follower never started leading");
    assert.equal(follower.elector.leader(), leader.elector.identity);
    const lease = await env.client.get(Leases, "one-leader", { namespace: ns });
    assert.equal(lease.spec?.holderIdentity, leader.elector.identity);
    assert.equal(lease.spec?.leaseDurationSeconds, 3);
    assert.match(lease.spec?.renewTime ?? "", /\.\d{6}Z$/);
    assert.match(await metrics.text(), /^leader_election_master_status\{name="one-leader"\} 1$/m);
  });

  it("stopping the leader without release: the other takes over once the lease expires", async (t) => {
    const a = candidate(env.client, ns, "expiry", "a");
    await waitFor("a leads", () => a.elector.isLeader());
    const b = candidate(env.client, ns, "expiry", "b");
    t.after(() => Promise.all([a.elector.stop(), b.elector.stop()]));
    await sleep(1_500); // b observes a renewing

    const stoppedAt = performance.now();
    await a.elector.stop();
    assert.deepEqual(a.stopped, { lost: false, reason: "stopped" });
    await waitFor("b leads", () => b.elector.isLeader());
    const takeover = b.startedAt! - stoppedAt;
    t.diagnostic(`takeover ${Math.round(takeover)} ms after the leader stopped without release`);
    // Not before the lease expired (a's last renewal was at most one retry period before it stopped)...
    assert.ok(takeover >= LEASE_MS - RETRY_MS - 100, `took over too early: ${takeover} ms`);
    // ...and soon after: lease duration + one (jittered) retry period + slack.
    assert.ok(takeover <= LEASE_MS + MAX_RETRY_WAIT_MS + SLACK_MS, `took over too late: ${takeover} ms`);
    const lease = await env.client.get(Leases, "expiry", { namespace: ns });
    assert.equal(lease.spec?.holderIdentity, "b");
    assert.equal(lease.spec?.leaseTransitions, 1);
  });

  it("stopping the leader with release: the other takes over within a retry period or two", async (t) => {
    const a = candidate(env.client, ns, "release", "a");
    await waitFor("a leads", () => a.elector.isLeader());
    const b = candidate(env.client, ns, "release", "b");
    t.after(() => Promise.all([a.elector.stop(), b.elector.stop()]));
    await sleep(1_500);

    const stoppedAt = performance.now();
    await a.elector.stop({ release: true });
    const released = await env.client.get(Leases, "release", { namespace: ns });
    assert.equal(released.spec?.holderIdentity ?? "", "");
    await waitFor("b leads", () => b.elector.isLeader());
    const takeover = b.startedAt! - stoppedAt;
    t.diagnostic(`takeover ${Math.round(takeover)} ms after the leader released the lease`);
    assert.ok(takeover <= MAX_RETRY_WAIT_MS + 500, `took over too late: ${takeover} ms`);
    assert.equal((await env.client.get(Leases, "release", { namespace: ns })).spec?.holderIdentity, "b");
  });

  it("a leader cut off from the API server loses leadership within the renew deadline", async (t) => {
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const client = await KubeClient.fromConfig(kubeConfig, { maxRetries: 0 });
    const a = candidate(client, ns, "partition", "a");
    t.after(async () => {
      await a.elector.stop();
      await client.transport.destroy();
      await proxy.close();
    });
    await waitFor("a leads", () => a.elector.isLeader());
    await sleep(1_000);

    const cutAt = performance.now();
    proxy.partition();
    await waitFor("a stops leading", () => a.stopped !== undefined, 10_000);
    await a.done;
    const lostAfter = a.stoppedAt! - cutAt;
    t.diagnostic(`leadership lost ${Math.round(lostAfter)} ms after the partition: ${a.stopped?.reason}`);
    assert.equal(a.stopped?.lost, true);
    assert.ok(a.signal?.reason instanceof LeadershipLostError);
    assert.equal(a.elector.isLeader(), false);
    // The next renewal round starts at most one retry period after the cut; it has renewDeadline.
    assert.ok(lostAfter <= RETRY_MS + RENEW_MS + 400, `lost too late: ${lostAfter} ms`);
    // ...which is before anyone else could take over (lease duration after the last renewal).
    assert.ok(lostAfter < LEASE_MS);
  });

  it("a leader whose Lease is deleted and recreated by another identity stops at once", async (t) => {
    const a = candidate(env.client, ns, "usurped", "a");
    t.after(() => a.elector.stop());
    await waitFor("a leads", () => a.elector.isLeader());

    const takenAt = performance.now();
    // The leader may renew in the gap between delete and create and so recreate the Lease itself
    // (client-go does the same); then the impostor deletes it again.
    for (let attempt = 0; ; attempt++) {
      await env.client.delete(Leases, "usurped", { namespace: ns });
      try {
        await env.client.create({
          apiVersion: Leases.apiVersion,
          kind: Leases.kind,
          metadata: { name: "usurped", namespace: ns },
          spec: { holderIdentity: "impostor", leaseDurationSeconds: 3, leaseTransitions: 7 },
        });
        break;
      } catch (err) {
        if (!(err instanceof AlreadyExistsError) || attempt >= 5) throw err;
      }
    }
    await waitFor("a stops leading", () => a.stopped !== undefined, 10_000);
    const lostAfter = a.stoppedAt! - takenAt;
    t.diagnostic(`leadership lost ${Math.round(lostAfter)} ms after the takeover: ${a.stopped?.reason}`);
    assert.deepEqual(a.stopped, { lost: true, reason: "lease is held by impostor" });
    assert.ok(lostAfter <= RETRY_MS + RENEW_MS, `lost too late: ${lostAfter} ms`);
    const lease = await env.client.get(Leases, "usurped", { namespace: ns });
    assert.equal(lease.spec?.holderIdentity, "impostor", "the deposed leader did not fight back");
  });
});
