/**
 * Leader election's timing logic with a fake clock and an in-memory Lease store (optimistic
 * concurrency like the API server's). The real API server is exercised in leaderelection.int.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../clock/index.ts";
import { ConflictError, ConnectionError, NotFoundError } from "../client/errors.ts";
import { WriteFence } from "../client/fence.ts";
import { microTime, type KindRef, type KubeObject } from "../client/types.ts";
import type { Lease } from "../client/builtins.ts";
import {
  LeaderElectionConfigError,
  LeaderElector,
  LeadershipLostError,
  type LeaseClient,
  type StoppedLeadingInfo,
} from "./leaderelection.ts";

class MemoryLeases {
  lease: Lease | undefined;
  rv = 0;
  writes = 0;
  failing = false;
  /** Requests never answer while set; they end only when their signal aborts (counted in `aborted`). */
  hanging = false;
  aborted = 0;

  client(): LeaseClient {
    const req = { method: "GET", path: "/leases" };
    const check = async (opts?: { signal?: AbortSignal }): Promise<void> => {
      if (this.failing) throw new ConnectionError(req, new Error("connect ECONNREFUSED"));
      if (!this.hanging) return;
      await new Promise<never>((_, reject) => {
        opts?.signal?.addEventListener("abort", () => {
          this.aborted++;
          reject(new Error("aborted"));
        });
      });
    };
    const clone = (l: Lease): Lease => structuredClone(l);
    return {
      get: (async (_kind: KindRef, _name: string, opts?: { signal?: AbortSignal }) => {
        await check(opts);
        if (!this.lease) throw new NotFoundError(404, { reason: "NotFound" }, req);
        return clone(this.lease);
      }) as LeaseClient["get"],
      create: (async (obj: KubeObject, opts?: { signal?: AbortSignal }) => {
        await check(opts);
        if (this.lease) throw new ConflictError(409, { reason: "AlreadyExists" }, req);
        this.lease = {
          ...clone(obj),
          metadata: { ...obj.metadata, resourceVersion: String(++this.rv) },
        };
        this.writes++;
        return clone(this.lease);
      }) as LeaseClient["create"],
      update: (async (obj: KubeObject, opts?: { signal?: AbortSignal }) => {
        await check(opts);
        if (!this.lease) throw new NotFoundError(404, { reason: "NotFound" }, req);
        if (obj.metadata.resourceVersion !== this.lease.metadata.resourceVersion) {
          throw new ConflictError(409, { reason: "Conflict" }, req);
        }
        this.lease = {
          ...clone(obj),
          metadata: { ...obj.metadata, resourceVersion: String(++this.rv) },
        };
        this.writes++;
        return clone(this.lease);
      }) as LeaseClient["update"],
    };
  }

  /** Another process writes the Lease directly. */
  set(spec: Lease["spec"]): void {
    this.lease = {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "l", namespace: "ns", resourceVersion: String(++this.rv) },
      spec,
    };
  }
}

/** Advance fake time in steps, letting the promise chains the timers start run in between. */
async function advance(clock: FakeClock, ms: number, step = 50): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(Math.min(step, ms - t));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  }
}

/** `jitter` 1 makes every wait the longest the jitter allows. */
function elector(
  store: MemoryLeases,
  clock: FakeClock,
  identity: string,
  jitter = 0,
  fence?: WriteFence,
): LeaderElector {
  return new LeaderElector({
    fence,
    client: store.client(),
    namespace: "ns",
    name: "l",
    identity,
    clock,
    wallClock: () => new Date(Date.UTC(2030, 0, 1) + clock.now()),
    random: () => jitter,
  });
}

interface Recorder {
  started: number[];
  stopped: StoppedLeadingInfo[];
  stoppedAt?: number;
  signal?: AbortSignal;
}

function callbacks(clock: FakeClock, rec: Recorder) {
  return {
    onStartedLeading: (signal: AbortSignal) => {
      rec.started.push(clock.now());
      rec.signal = signal;
    },
    onStoppedLeading: (info: StoppedLeadingInfo) => {
      rec.stopped.push(info);
      rec.stoppedAt = clock.now();
    },
  };
}

test("expiry counts from when the record was seen to change, not from its renewTime", async () => {
  const clock = new FakeClock(1_000_000);
  const store = new MemoryLeases();
  // The holder's clock is an hour ahead: by its renewTime the lease is valid for another hour.
  store.set({
    holderIdentity: "other",
    leaseDurationSeconds: 15,
    renewTime: microTime(new Date(Date.UTC(2030, 0, 1, 1))),
    acquireTime: microTime(new Date(Date.UTC(2030, 0, 1, 1))),
    leaseTransitions: 4,
  });
  const e = elector(store, clock, "me");
  const rec: Recorder = { started: [], stopped: [] };
  const leaders: string[] = [];
  const done = e.run({ ...callbacks(clock, rec), onNewLeader: (id) => leaders.push(id) });

  await advance(clock, 14_000);
  assert.equal(rec.started.length, 0, "must wait a full lease duration from the first observation");
  assert.equal(e.isLeader(), false);
  assert.equal(e.leader(), "other");
  await advance(clock, 3_000); // first attempt after 15 s on our clock, retries every 2 s
  assert.equal(rec.started.length, 1);
  assert.ok(rec.started[0]! - 1_000_000 >= 15_000 && rec.started[0]! - 1_000_000 <= 17_000);
  assert.equal(e.isLeader(), true);
  assert.equal(store.lease?.spec?.holderIdentity, "me");
  assert.equal(store.lease?.spec?.leaseTransitions, 5, "a takeover is a transition");
  assert.deepEqual(leaders, ["other", "me"]);

  // Renewals keep acquireTime and the transition count.
  const acquired = store.lease?.spec?.acquireTime;
  await advance(clock, 5_000);
  assert.equal(store.lease?.spec?.acquireTime, acquired);
  assert.notEqual(store.lease?.spec?.renewTime, acquired);
  assert.equal(store.lease?.spec?.leaseTransitions, 5);

  await e.stop();
  await done;
  assert.deepEqual(rec.stopped, [{ lost: false, reason: "stopped" }]);
  assert.equal(rec.signal?.aborted, true);
  assert.equal(e.isLeader(), false);
});

test("a standby takes a lease over the moment it expires on its clock, not at its next jittered attempt", async () => {
  const clock = new FakeClock(1_000_000);
  const store = new MemoryLeases();
  store.set({ holderIdentity: "other", leaseDurationSeconds: 15, renewTime: "a", leaseTransitions: 0 });
  // The longest jitter: reads 2.2 s apart (0, 2.2, ... 13.2, then 15.4 s without the expiry).
  const e = elector(store, clock, "me", 1);
  const rec: Recorder = { started: [], stopped: [] };
  const done = e.run(callbacks(clock, rec));
  await advance(clock, 14_950, 50);
  assert.equal(rec.started.length, 0, "not before the lease expired");
  await advance(clock, 500, 50);
  assert.equal(rec.started.length, 1);
  assert.ok(rec.started[0]! - 1_000_000 <= 15_150, `took over at ${rec.started[0]! - 1_000_000} ms`); // fake time moves in 50 ms steps
  await e.stop();
  await done;
});

test("a standby sees the last renewal within 2.2 s, so it takes over at most 17.2 s after it", async () => {
  const clock = new FakeClock(1_000_000);
  const store = new MemoryLeases();
  store.set({ holderIdentity: "other", leaseDurationSeconds: 15, renewTime: "r0", leaseTransitions: 0 });
  const e = elector(store, clock, "me", 1); // the longest jitter
  const rec: Recorder = { started: [], stopped: [] };
  const done = e.run(callbacks(clock, rec));
  // The holder renews every 2 s until 18 s, then dies. With reads every 4.4 s (client-go's longest
  // period) the standby would see that last renewal only at 22 s and take over at 37 s.
  for (let i = 1; i <= 9; i++) {
    await advance(clock, 2_000);
    store.set({ holderIdentity: "other", leaseDurationSeconds: 15, renewTime: `r${i}`, leaseTransitions: 0 });
  }
  await advance(clock, 22_000);
  assert.equal(rec.started.length, 1);
  const at = rec.started[0]! - 1_000_000;
  assert.ok(at >= 33_000 && at <= 18_000 + 15_000 + 2_200 + 100, `took over at ${at} ms`);
  await e.stop();
  await done;
});

test("a lease that keeps changing is never taken over", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const e = elector(store, clock, "me");
  const rec: Recorder = { started: [], stopped: [] };
  store.set({ holderIdentity: "other", leaseDurationSeconds: 15, renewTime: "a", leaseTransitions: 0 });
  const done = e.run(callbacks(clock, rec));
  for (let i = 0; i < 20; i++) {
    await advance(clock, 2_000);
    store.set({ holderIdentity: "other", leaseDurationSeconds: 15, renewTime: `r${i}`, leaseTransitions: 0 });
  }
  assert.equal(rec.started.length, 0);
  await e.stop({ release: true });
  await done;
  assert.equal(rec.stopped.length, 0, "never led, so never stopped leading");
  assert.equal(store.lease?.spec?.holderIdentity, "other", "release only touches a lease we hold");
});

test("renewals that fail for renewDeadline lose leadership before the lease can expire for others", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const e = elector(store, clock, "me");
  const rec: Recorder = { started: [], stopped: [] };
  const done = e.run(callbacks(clock, rec));
  await advance(clock, 100);
  assert.equal(e.isLeader(), true, "an absent lease is created at once");
  await advance(clock, 4_100);

  store.failing = true;
  const failedAt = clock.now();
  await advance(clock, 20_000);
  await done;
  assert.equal(rec.stopped.length, 1);
  assert.equal(rec.stopped[0]?.lost, true);
  assert.match(rec.stopped[0]?.reason ?? "", /ECONNREFUSED/);
  assert.ok(rec.signal?.reason instanceof LeadershipLostError);
  // Lost by the deadline: at most retryPeriod (waiting for the next round) + renewDeadline, which is
  // before anyone who saw the last renewal may take over (leaseDuration).
  const lostAfter = rec.stoppedAt! - failedAt;
  assert.ok(lostAfter >= 10_000 && lostAfter <= 12_100, `lost after ${lostAfter} ms`);
  assert.ok(lostAfter < 15_000);
  assert.equal(e.isLeader(), false);
});

test("a renewal that hangs is aborted at its deadline; the fence closes at the renew deadline after the last renewal was sent", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const fence = new WriteFence({ clock });
  const e = elector(store, clock, "me", 0, fence);
  const rec: Recorder = { started: [], stopped: [] };
  assert.equal(fence.isOpen(), false, "closed before the first acquire");
  const done = e.run(callbacks(clock, rec));
  await advance(clock, 10, 10);
  assert.equal(fence.isOpen(), true, "opened by the acquire");
  // Renewals are sent at 2 s, 4 s, ...; the one of 4 s is the last answered.
  await advance(clock, 4_100 - clock.now(), 10);
  store.hanging = true;
  await advance(clock, 13_990 - clock.now(), 10);
  assert.equal(fence.isOpen(), true);
  const inflight = fence.admit({ method: "PUT", path: "/x" });
  await advance(clock, 20, 10);
  assert.equal(fence.isOpen(), false, "closed 10 s after the last successful renewal was sent");
  assert.equal(inflight.aborted, true, "a write in flight is cut then");
  assert.equal(rec.stopped.length, 0, "still leading: a renewal may yet succeed, but nothing is written");
  assert.equal(store.aborted, 0);
  // The round that began at 6 s ends at 16 s: its hanging request is aborted, and leadership is lost.
  await advance(clock, 16_010 - clock.now(), 10);
  await done;
  assert.equal(store.aborted, 1, "the hanging renewal was aborted at the round's deadline");
  assert.equal(rec.stopped[0]?.lost, true);
  assert.match(rec.stopped[0]?.reason ?? "", /timed out after 10000 ms/);
  assert.equal(e.isLeader(), false);
  store.hanging = false;
  assert.throws(() => fence.admit({ method: "PUT", path: "/x" }), /closed: leadership lost/);
});

test("a fence reopens when a late renewal succeeds within the round, and closes for good on stop", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const fence = new WriteFence({ clock });
  const e = elector(store, clock, "me", 0, fence);
  const done = e.run(callbacks(clock, { started: [], stopped: [] }));
  await advance(clock, 100, 10);
  // From 100 ms the renewals of 2, 4, 6 and 8 s fail: the fence, opened by the acquire of 0 s, closes at
  // 10 s; the round's retry of 10 s (its deadline is 12 s) then succeeds and reopens it.
  store.failing = true;
  await advance(clock, 9_000 - clock.now(), 10);
  const sent = fence.admit({ method: "PUT", path: "/x" });
  await advance(clock, 9_990 - clock.now(), 10);
  store.failing = false;
  await advance(clock, 10_100 - clock.now(), 10);
  assert.equal(sent.aborted, true, "the write sent before 10 s was cut when the fence closed");
  assert.equal(e.isLeader(), true);
  assert.equal(fence.isOpen(), true, "reopened by the renewal that succeeded");
  await e.stop({ release: true });
  await done;
  assert.equal(fence.isOpen(), false, "closed once leading ended");
  assert.equal(store.lease?.spec?.holderIdentity, "", "released after the fence closed");
});

test("a leader that sees another holder stops at once, without waiting out the deadline", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const e = elector(store, clock, "me");
  const rec: Recorder = { started: [], stopped: [] };
  const done = e.run(callbacks(clock, rec));
  await advance(clock, 100);
  assert.equal(e.isLeader(), true);
  store.set({ holderIdentity: "usurper", leaseDurationSeconds: 15, renewTime: "x", leaseTransitions: 9 });
  await advance(clock, 2_100);
  await done;
  assert.deepEqual(rec.stopped, [{ lost: true, reason: "lease is held by usurper" }]);
  assert.equal(e.isLeader(), false);
});

test("release hands over at once; a second candidate takes it on its next attempt", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const a = elector(store, clock, "a");
  const b = elector(store, clock, "b");
  const ra: Recorder = { started: [], stopped: [] };
  const rb: Recorder = { started: [], stopped: [] };
  const doneA = a.run(callbacks(clock, ra));
  await advance(clock, 100);
  const doneB = b.run(callbacks(clock, rb));
  await advance(clock, 6_000);
  assert.deepEqual([a.isLeader(), b.isLeader()], [true, false]);

  const releasedAt = clock.now();
  await a.stop({ release: true });
  await doneA;
  assert.deepEqual(store.lease?.spec?.holderIdentity, "");
  assert.equal(store.lease?.spec?.leaseDurationSeconds, 1);
  await advance(clock, 2_100);
  assert.equal(b.isLeader(), true);
  assert.ok(rb.started[0]! - releasedAt <= 2_100, "within one retry period");
  assert.equal(store.lease?.spec?.leaseTransitions, 1);
  await b.stop();
  await doneB;
});

test("timings are checked as client-go checks them", () => {
  const client = new MemoryLeases().client();
  const base = { client, namespace: "ns", name: "l" };
  assert.throws(() => new LeaderElector({ ...base, leaseDurationMs: 10_000 }), LeaderElectionConfigError);
  assert.throws(() => new LeaderElector({ ...base, renewDeadlineMs: 2_000 }), LeaderElectionConfigError);
  assert.match(new LeaderElector(base).identity, /^.+_[0-9a-f-]{36}$/);
  assert.equal(microTime(new Date(Date.UTC(2030, 0, 1, 0, 0, 0, 123))), "2030-01-01T00:00:00.123000Z");
});

test("a candidate stopped while an acquire attempt is in flight gives back the Lease that attempt won", async () => {
  const clock = new FakeClock();
  const store = new MemoryLeases();
  const client = store.client();
  // The first read is slow (a loaded API server): the candidate is stopped before it answers, and the
  // attempt goes on to create the Lease, as a request already on the wire does.
  let answer: () => void = () => undefined;
  const slow = new Promise<void>((r) => (answer = r));
  let reads = 0;
  const e = new LeaderElector({
    client: {
      ...client,
      get: (async (...args: Parameters<LeaseClient["get"]>) => {
        if (reads++ === 0) await slow;
        return client.get(...args);
      }) as LeaseClient["get"],
    },
    namespace: "ns",
    name: "l",
    identity: "standby",
    clock,
    random: () => 0,
  });
  const rec: Recorder = { started: [], stopped: [] };
  const done = e.run(callbacks(clock, rec));
  await advance(clock, 100);
  const stopped = e.stop(); // a standby's stop: no release asked for
  answer();
  await stopped;
  await done;
  await advance(clock, 100);
  assert.equal(rec.started.length, 0, "it never led");
  assert.notEqual(
    store.lease?.spec?.holderIdentity,
    "standby",
    "a stopped candidate must not keep a Lease: successors would wait a whole lease duration",
  );
});
