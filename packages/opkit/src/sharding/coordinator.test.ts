/**
 * Shard membership, fair share and handover with a fake clock and an in-memory Lease store (optimistic
 * concurrency like the API server's). The real API server is exercised by the AppService sharding test.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../clock/index.ts";
import { ConflictError, NotFoundError } from "../client/errors.ts";
import type { DeleteOptions } from "../client/client.ts";
import type { KindRef, KubeList, KubeObject } from "../client/types.ts";
import type { Lease } from "../client/builtins.ts";
import {
  ShardConfigError,
  ShardCoordinator,
  fairShare,
  type ShardCallbacks,
  type ShardLeaseClient,
} from "./coordinator.ts";

const req = { method: "GET", path: "/leases" };

class MemoryLeases {
  readonly leases = new Map<string, Lease>();
  rv = 0;
  /** Names of Leases asked to be deleted, in order. */
  readonly deletes: string[] = [];
  /** Runs when a delete arrives, before its precondition is checked (a write racing the delete). */
  beforeDelete: ((name: string) => void) | undefined;

  /** A renewal by the holder itself (a new renewTime and resourceVersion), e.g. a replica cut off that is back. */
  renew(name: string): void {
    const l = this.leases.get(name);
    if (!l) return;
    this.leases.set(name, {
      ...l,
      metadata: { ...l.metadata, resourceVersion: String(++this.rv) },
      spec: { ...l.spec, renewTime: `renewed-${this.rv}` },
    });
  }

  /** The name of `identity`'s heartbeat Lease, undefined when there is none. */
  heartbeatOf(identity: string): string | undefined {
    for (const [name, l] of this.leases)
      if (l.metadata.labels?.["opkit.dev/shard-role"] === "member" && l.spec?.holderIdentity === identity)
        return name;
    return undefined;
  }

  client(): ShardLeaseClient {
    const clone = (l: Lease): Lease => structuredClone(l);
    const write = (obj: KubeObject): Lease => {
      const lease = {
        ...clone(obj),
        metadata: { ...obj.metadata, resourceVersion: String(++this.rv) },
      };
      this.leases.set(obj.metadata.name ?? "", lease);
      return clone(lease);
    };
    return {
      get: (async (_kind: KindRef, name: string) => {
        const l = this.leases.get(name);
        if (!l) throw new NotFoundError(404, { reason: "NotFound" }, req);
        return clone(l);
      }) as ShardLeaseClient["get"],
      list: (async () =>
        ({
          metadata: {},
          items: [...this.leases.values()].map(clone),
        }) satisfies KubeList<Lease>) as unknown as ShardLeaseClient["list"],
      create: (async (obj: KubeObject) => {
        if (this.leases.has(obj.metadata.name ?? ""))
          throw new ConflictError(409, { reason: "AlreadyExists" }, req);
        return write(obj);
      }) as ShardLeaseClient["create"],
      update: (async (obj: KubeObject) => {
        const cur = this.leases.get(obj.metadata.name ?? "");
        if (!cur) throw new NotFoundError(404, { reason: "NotFound" }, req);
        if (obj.metadata.resourceVersion !== cur.metadata.resourceVersion)
          throw new ConflictError(409, { reason: "Conflict" }, req);
        return write(obj);
      }) as ShardLeaseClient["update"],
      delete: async (_kind: KindRef, name: string, opts?: DeleteOptions) => {
        this.deletes.push(name);
        this.beforeDelete?.(name);
        const cur = this.leases.get(name);
        if (!cur) throw new NotFoundError(404, { reason: "NotFound" }, req);
        const rv = opts?.preconditions?.resourceVersion;
        if (rv !== undefined && rv !== cur.metadata.resourceVersion)
          throw new ConflictError(409, { reason: "Conflict" }, req);
        this.leases.delete(name);
        return {};
      },
    };
  }

  /** Shard index → holder, from the stored shard Leases. */
  holders(count: number): string[] {
    return Array.from(
      { length: count },
      (_, i) => this.leases.get(`op-shard-${i}`)?.spec?.holderIdentity ?? "",
    );
  }
}

/** A replica: its coordinator and the shards it works on per its callbacks (what a controller would dispatch). */
class Replica {
  readonly working = new Set<number>();
  readonly coordinator: ShardCoordinator;
  /** While set, `releasing` waits for this promise (in-flight reconciles still running). */
  inflight: Promise<void> | undefined;
  releases = 0;
  readonly id: string;
  constructor(id: string, store: MemoryLeases, clock: FakeClock, count: number) {
    this.id = id;
    let seed = id.length * 7919;
    this.coordinator = new ShardCoordinator({
      client: store.client(),
      namespace: "ns",
      group: "op",
      count,
      identity: id,
      leaseDurationMs: 6_000,
      renewDeadlineMs: 4_000,
      retryPeriodMs: 1_000,
      clock,
      random: () => (seed = (seed * 16807) % 2147483647) / 2147483647,
    });
  }
  callbacks(): ShardCallbacks {
    return {
      acquired: (shard) => this.working.add(shard),
      releasing: async (shard) => {
        this.releases++;
        // Stop dispatching first, then wait for what is in flight, as the manager does.
        await this.inflight;
        this.working.delete(shard);
      },
      lost: (shard) => this.working.delete(shard),
    };
  }
  start(): void {
    this.coordinator.start(this.callbacks());
  }
}

/** Advance fake time in steps, letting promise chains run, and check `invariant` after each step. */
async function advance(clock: FakeClock, ms: number, invariant: () => void, step = 100): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(Math.min(step, ms - t));
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
    invariant();
  }
}

/** No shard is worked on by two live replicas at once. */
function noOverlap(replicas: Replica[]): () => void {
  return () => {
    const owner = new Map<number, string>();
    for (const r of replicas)
      for (const s of r.working) {
        const other = owner.get(s);
        assert.equal(other, undefined, `shard ${s} worked on by ${other} and ${r.id} at once`);
        owner.set(s, r.id);
      }
  };
}

describe("shard coordination", () => {
  it("computes the fair share as ceil(shards / replicas)", () => {
    assert.equal(fairShare(16, 1), 16);
    assert.equal(fairShare(16, 3), 6);
    assert.equal(fairShare(16, 5), 4);
    assert.equal(fairShare(16, 0), 16);
  });

  it("rejects timings that could let two holders overlap, naming them", () => {
    const make = (o: { leaseDurationMs?: number; renewDeadlineMs?: number; count?: number }) =>
      new ShardCoordinator({
        client: new MemoryLeases().client(),
        namespace: "ns",
        group: "op",
        identity: "a",
        count: o.count ?? 4,
        ...o,
      });
    assert.throws(() => make({ leaseDurationMs: 5_000, renewDeadlineMs: 5_000 }), ShardConfigError);
    assert.throws(() => make({ count: 0 }), /shards.count must be a whole number/);
  });

  it("spreads 16 shards over 3 replicas, takes over a dead one's, rebalances to 5 after draining", async () => {
    const clock = new FakeClock(1_000_000);
    const store = new MemoryLeases();
    const replicas = ["a", "bb", "ccc"].map((id) => new Replica(id, store, clock, 16));
    const all = [...replicas];
    for (const r of replicas) r.start();
    await advance(clock, 20_000, noOverlap(all));

    const counts = (rs: Replica[]) => rs.map((r) => r.working.size);
    assert.deepEqual(
      counts(replicas).reduce((a, b) => a + b),
      16,
      `every shard worked on once: ${counts(replicas).join(",")}`,
    );
    for (const r of replicas) assert.ok(r.working.size <= 6, `${r.id} holds ${r.working.size} > 6`);
    for (const r of replicas)
      for (const s of r.working)
        assert.equal(store.holders(16)[s], r.id, `lease of shard ${s} names ${r.id}`);

    // "Kill" one replica: its timers stop, its Leases are never released.
    const dead = replicas[0] as Replica;
    dead.coordinator["stopped"] = true;
    const orphaned = [...dead.working];
    dead.working.clear();
    const alive = replicas.slice(1);
    // Within lease duration + a couple of retries, the survivors hold everything.
    await advance(clock, 6_000 + 3_000, noOverlap(alive));
    assert.equal(
      counts(alive).reduce((a, b) => a + b),
      16,
      `survivors took over ${orphaned.join(",")}: ${counts(alive).join(",")}`,
    );
    for (const r of alive) assert.ok(r.working.size <= 8);

    // Scale to 4 live replicas (3 → 5 counting the dead one's replacement): extras drain before release.
    const finish: (() => void)[] = [];
    for (const r of alive) r.inflight = new Promise<void>((resolve) => finish.push(resolve));
    const joiners = ["dddd", "eeeee", "ffffff"].map((id) => new Replica(id, store, clock, 16));
    for (const r of joiners) r.start();
    const everyone = [...alive, ...joiners];
    await advance(clock, 5_000, noOverlap(everyone));
    // While in-flight work has not finished, the old holders keep their Leases: joiners wait.
    assert.ok(
      alive.some((r) => r.releases > 0),
      "extras are being handed back",
    );
    for (const r of alive) for (const s of r.working) assert.equal(store.holders(16)[s], r.id);
    const joinedEarly = joiners.reduce((n, r) => n + r.working.size, 0);
    assert.ok(joinedEarly <= 16 - counts(alive).reduce((a, b) => a + b));
    // In-flight work finishes: the Leases go, the joiners take them.
    for (const r of alive) r.inflight = undefined;
    for (const f of finish) f();
    await advance(clock, 20_000, noOverlap(everyone));
    assert.equal(
      counts(everyone).reduce((a, b) => a + b),
      16,
      `after rebalancing: ${counts(everyone).join(",")}`,
    );
    for (const r of everyone) assert.ok(r.working.size <= 4, `${r.id} holds ${r.working.size} > ceil(16/5)`);

    // A graceful stop hands everything back at once and deletes the heartbeats.
    await Promise.all(everyone.map((r) => r.coordinator.stop()));
    assert.deepEqual(store.holders(16), Array(16).fill(""));
    const members = [...store.leases.values()].filter(
      (l) => l.metadata.labels?.["opkit.dev/shard-role"] === "member",
    );
    assert.deepEqual(
      members.map((l) => l.spec?.holderIdentity),
      [],
      "no heartbeat Lease left after the graceful stops (the killed replica's was collected)",
    );
  });

  it("deletes a dead replica's heartbeat only well after it expired, and never one renewed meanwhile", async () => {
    const clock = new FakeClock(1_000_000);
    const store = new MemoryLeases();
    const [a, b, c] = ["a", "bb", "ccc"].map((id) => new Replica(id, store, clock, 4)) as [
      Replica,
      Replica,
      Replica,
    ];
    for (const r of [a, b, c]) r.start();
    await advance(clock, 5_000, () => undefined);
    const bHeartbeat = store.heartbeatOf("bb") as string;
    const cHeartbeat = store.heartbeatOf("ccc") as string;
    assert.ok(bHeartbeat && cHeartbeat, "every replica has a heartbeat Lease");

    // b and c are killed: their heartbeats stop changing. Lease 6 s, grace 3 × 6 s.
    for (const r of [b, c]) r.coordinator["stopped"] = true;
    // c comes back (its renewal lands) just as a's delete of its heartbeat arrives.
    store.beforeDelete = (name) => {
      if (name === cHeartbeat) store.renew(name);
    };
    await advance(clock, 20_000, () => undefined);
    assert.ok(store.leases.has(bHeartbeat), "not deleted 20 s after the last renewal (< 6 s + 18 s)");
    assert.equal(a.coordinator.held().length, 4, "the survivor took every shard meanwhile");
    await advance(clock, 6_000, () => undefined);
    assert.ok(!store.leases.has(bHeartbeat), "deleted once expired for longer than the grace");
    assert.ok(store.deletes.includes(cHeartbeat), "the delete of c's heartbeat was tried");
    assert.ok(store.leases.has(cHeartbeat), "c renewed before the delete arrived: the precondition kept it");
    store.beforeDelete = undefined;
    // c's renewal counts as a change: its grace starts over.
    const tries = store.deletes.filter((n) => n === cHeartbeat).length;
    await advance(clock, 20_000, () => undefined);
    assert.equal(store.deletes.filter((n) => n === cHeartbeat).length, tries, "no delete before the grace");
    await advance(clock, 6_000, () => undefined);
    assert.ok(!store.leases.has(cHeartbeat), "then it is collected");
    assert.ok(store.leases.has(store.heartbeatOf("a") ?? "-"), "the live replica's own heartbeat stays");

    await a.coordinator.stop();
    assert.equal(store.heartbeatOf("a"), undefined, "a clean stop deletes its own heartbeat");
  });

  it("a replica restarted with the same identity takes back the shard Leases that still name it", async () => {
    const clock = new FakeClock(1_000_000);
    const store = new MemoryLeases();
    const first = new Replica("op-0", store, clock, 2);
    first.start();
    await advance(clock, 3_000, () => undefined);
    assert.equal(first.working.size, 2);
    // It crashes: its Leases still name it. A new process with the same identity (a StatefulSet pod)
    // starts, alone: nobody else will ever take those Leases.
    first.coordinator["stopped"] = true;
    const second = new Replica("op-0", store, clock, 2);
    second.start();
    await advance(clock, 20_000, () => undefined);
    assert.deepEqual([...second.working].sort(), [0, 1]);
    assert.deepEqual(store.holders(2), ["op-0", "op-0"]);
  });

  it("a replica whose heartbeat Lease cannot be written keeps its renewed shards; nobody overlaps it", async () => {
    const clock = new FakeClock(1_000_000);
    const store = new MemoryLeases();
    const replicas = ["a", "bb", "ccc"].map((id) => new Replica(id, store, clock, 12));
    // a's heartbeat writes are refused (e.g. a webhook or RBAC on that name); its shard writes work.
    const a = replicas[0] as Replica;
    const inner = store.client();
    const heartbeat = a.coordinator["heartbeat"] as unknown as { name: string; client: ShardLeaseClient };
    const refuse = (obj: KubeObject): boolean => obj.metadata.name === heartbeat.name;
    const forbidden = new ConflictError(403, { reason: "Forbidden" }, req);
    heartbeat.client = {
      ...inner,
      create: (async (obj: KubeObject) => {
        if (refuse(obj)) throw forbidden;
        return inner.create(obj);
      }) as ShardLeaseClient["create"],
      update: (async (obj: KubeObject) => {
        if (refuse(obj)) throw forbidden;
        return inner.update(obj);
      }) as ShardLeaseClient["update"],
    };
    for (const r of replicas) r.start();
    await advance(clock, 30_000, noOverlap(replicas));
    const total = replicas.reduce((n, r) => n + r.working.size, 0);
    assert.equal(total, 12, `every shard worked on once: ${replicas.map((r) => r.working.size).join(",")}`);
    assert.ok(a.working.size > 0, "a keeps working on shards it renews");
    assert.equal(store.leases.get(heartbeat.name), undefined, "a's heartbeat was never written");
    for (const r of replicas)
      for (const s of r.working)
        assert.equal(store.holders(12)[s], r.id, `lease of shard ${s} names ${r.id}`);
  });

  it("a replica whose list of Leases fails keeps its view of the others and takes nothing meanwhile", async () => {
    const clock = new FakeClock(1_000_000);
    const store = new MemoryLeases();
    const replicas = ["a", "bb"].map((id) => new Replica(id, store, clock, 4));
    for (const r of replicas) r.start();
    await advance(clock, 10_000, noOverlap(replicas));
    const a = replicas[0] as Replica;
    assert.equal(a.coordinator.replicas(), 2);
    // a's lists fail from now on (its renewals still work): it must not count itself alone.
    let gets = 0;
    const client = a.coordinator["client"];
    const inner = store.client();
    (a.coordinator as unknown as { client: ShardLeaseClient }).client = {
      ...client,
      list: async () => {
        throw new ConflictError(500, { reason: "InternalError" }, req);
      },
    };
    for (const s of a.coordinator["shards"] as unknown as { lock: { client: ShardLeaseClient } }[])
      s.lock.client = {
        ...inner,
        get: ((...args: Parameters<ShardLeaseClient["get"]>) => {
          gets++;
          return inner.get(...args);
        }) as ShardLeaseClient["get"],
      };
    await advance(clock, 20_000, noOverlap(replicas));
    assert.equal(a.coordinator.replicas(), 2, "a still counts two replicas");
    assert.equal(gets, 0, "a tried to take no shard while it could not see the others");
    assert.equal(a.working.size + (replicas[1] as Replica).working.size, 4);
  });
});
