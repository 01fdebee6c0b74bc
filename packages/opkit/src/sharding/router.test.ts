/**
 * ShardRouter without a server: the selectors it builds, the filters it sets, and its gate — keys of a
 * shard are admitted only once the shard is active, a shard being handed back waits for its in-flight
 * reconciles, and a lost shard aborts them.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { InformerFilter } from "../cache/informer.ts";
import { FakeClock } from "../clock/index.ts";
import type { KindRef, KubeObject } from "../client/types.ts";
import { ShardSpace } from "./hash.ts";
import { ShardRouter, shardSelector } from "./router.ts";

const Things: KindRef = { apiVersion: "example.com/v1", kind: "Thing" };

function fakeCache() {
  const filters: (InformerFilter | undefined)[] = [];
  return {
    filters,
    cache: {
      setFilter: async (_kind: KindRef, f: InformerFilter | undefined): Promise<void> => {
        filters.push(f);
        await new Promise((r) => setImmediate(r));
      },
    },
  };
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
};

/** A namespace that falls into `shard` of `space`. */
function namespaceIn(space: ShardSpace, shard: number): string {
  for (let i = 0; ; i++) if (space.shardOf(`ns-${i}`) === shard) return `ns-${i}`;
}

describe("shard router", () => {
  it("writes one shardRange per run of adjacent shards, as the API server parses them", () => {
    const space = new ShardSpace(4);
    assert.equal(shardSelector(space, "namespace", []), undefined);
    assert.equal(
      shardSelector(space, "uid", [3, 0, 1]),
      "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || " +
        "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')",
    );
  });

  it("admits a shard's keys only once its informers listed it; drains before release; aborts on loss", async () => {
    const { cache, filters } = fakeCache();
    const activated: number[] = [];
    const router = new ShardRouter({
      count: 4,
      cache,
      kinds: [{ kind: Things, field: "namespace" }],
      serverSide: true,
      onActivated: (s) => activated.push(s),
    });
    await router.initialize();
    assert.match(filters.at(-1)?.selector ?? "", /'0x0000000000000000', '0x0000000000000001'/);
    const ns1 = namespaceIn(router.space, 1);
    const ns2 = namespaceIn(router.space, 2);
    const obj = (ns: string): KubeObject => ({ metadata: { namespace: ns, name: "x" } });
    const gate = router.gate((key) => router.space.shardOf(key.split("/")[0] ?? ""));
    const cb = router.callbacks();

    cb.acquired(1);
    assert.equal(gate.admit(`${ns1}/a`), undefined, "not before its informers listed it");
    assert.equal(router.ready(), false);
    await settle();
    assert.deepEqual(activated, [1]);
    assert.equal(router.ready(), true);
    const f = filters.at(-1) as InformerFilter;
    assert.equal(f.matches(obj(ns1)), true);
    assert.equal(f.matches(obj(ns2)), false);
    assert.match(f.selector ?? "", /0x4000000000000000', '0x8000000000000000'/);

    // A reconcile in flight holds the release back.
    const running = gate.admit(`${ns1}/a`);
    assert.ok(running);
    assert.equal(gate.admit(`${ns2}/b`), undefined, "a shard not held");
    let released = false;
    const releasing = cb.releasing(1).then(() => (released = true));
    await settle();
    assert.equal(gate.admit(`${ns1}/c`), undefined, "no new key of a shard being handed back");
    assert.equal(released, false, "the in-flight reconcile has not finished");
    running.done();
    await releasing;
    assert.equal(released, true);
    await settle();
    assert.equal((filters.at(-1) as InformerFilter).matches(obj(ns1)), false, "its objects leave the cache");

    // A lost shard aborts what runs under it at once.
    cb.acquired(2);
    await settle();
    const inflight = gate.admit(`${ns2}/b`);
    assert.ok(inflight);
    cb.lost(2, "lease is held by someone else");
    assert.equal(inflight.signal.aborted, true);
    assert.equal(gate.admit(`${ns2}/b`), undefined);
  });

  it("retries a rejected filter swap with backoff, reports it, and activates the shard once it applied", async () => {
    const clock = new FakeClock(0);
    const attempts: number[] = [];
    let failuresLeft = 3;
    const cache = {
      setFilter: async (): Promise<void> => {
        attempts.push(clock.now());
        await new Promise((r) => setImmediate(r));
        if (failuresLeft-- > 0) throw new Error("list Things: 500 etcdserver: request timed out");
      },
    };
    const activated: number[] = [];
    const router = new ShardRouter({
      count: 4,
      cache,
      kinds: [{ kind: Things, field: "namespace" }],
      serverSide: true,
      onActivated: (s) => activated.push(s),
      clock,
      retryInitialMs: 500,
      retryMaxMs: 1_500,
    });
    const gate = router.gate((key) => router.space.shardOf(key.split("/")[0] ?? ""));
    const ns1 = namespaceIn(router.space, 1);
    failuresLeft = 0;
    await router.initialize();
    failuresLeft = 3;
    attempts.length = 0;

    router.callbacks().acquired(1);
    await settle();
    assert.deepEqual(attempts, [0]);
    assert.equal(router.ready(), false, "not ready while the swap failed");
    assert.match(router.filterError() ?? "", /etcdserver: request timed out/);
    assert.equal(gate.admit(`${ns1}/a`), undefined, "no key of a shard whose caches do not hold it");
    assert.deepEqual(activated, []);

    // Backoff 500, 1000, then capped at 1500 ms; nothing before each is due.
    for (const [wait, tries] of [
      [499, 1],
      [1, 2],
      [999, 2],
      [1, 3],
      [1_499, 3],
      [1, 4],
    ] as const) {
      clock.advance(wait);
      await settle();
      assert.equal(attempts.length, tries, `after ${clock.now()} ms: ${attempts.join(", ")}`);
    }
    assert.deepEqual(attempts, [0, 500, 1500, 3000]);
    assert.equal(router.ready(), true, "ready once the retry applied the filter");
    assert.equal(router.filterError(), undefined);
    assert.deepEqual(activated, [1]);
    assert.ok(gate.admit(`${ns1}/a`), "its keys are admitted now");

    // No retry is left armed after success, and a stopped router never retries.
    clock.advance(60_000);
    await settle();
    assert.equal(attempts.length, 4);
    failuresLeft = 1;
    router.callbacks().acquired(2);
    await settle();
    assert.equal(attempts.length, 5);
    router.stop();
    clock.advance(60_000);
    await settle();
    assert.equal(attempts.length, 5, "stopped: no more retries");
  });
});
