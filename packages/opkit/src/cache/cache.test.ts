import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock } from "../clock/index.ts";
import type { KubeObject } from "../client/types.ts";
import { Backoff } from "./backoff.ts";
import { Store, OWNER_INDEX, deepFreeze } from "./store.ts";
import { diffRelist } from "./informer.ts";
import { watchTimeoutSeconds, type ListWatcher } from "./reflector.ts";
import { Cache } from "./cache.ts";

const cm = (
  ns: string,
  name: string,
  rv: string,
  extra: Partial<KubeObject["metadata"]> = {},
): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { namespace: ns, name, resourceVersion: rv, ...extra },
});

describe("Backoff (watch reconnects)", () => {
  it("doubles from 800 ms to a 30 s cap, with at most 50% jitter", () => {
    const b = new Backoff({ clock: new FakeClock(), random: () => 0 });
    assert.deepEqual(
      Array.from({ length: 8 }, () => b.next()),
      [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000],
    );
    const j = new Backoff({ clock: new FakeClock(), random: () => 0.999 });
    const d = j.next();
    assert.ok(d >= 800 && d < 1200, `jittered first delay ${d}`);
  });

  it("starts over after two minutes without failures", () => {
    const clock = new FakeClock();
    const b = new Backoff({ clock, random: () => 0 });
    b.next();
    b.next();
    clock.advance(119_000);
    assert.equal(b.next(), 3200, "still backing off within 2 min");
    clock.advance(120_000);
    assert.equal(b.next(), 800);
  });

  it("wait() resolves after the delay on the injected clock, or at once when aborted", async () => {
    const clock = new FakeClock();
    const b = new Backoff({ clock, random: () => 0 });
    let done = false;
    const p = b.wait().then(() => (done = true));
    clock.advance(799);
    await Promise.resolve();
    assert.equal(done, false);
    clock.advance(1);
    await p;
    const ac = new AbortController();
    const q = b.wait(ac.signal);
    ac.abort();
    await q;
  });
});

describe("Store", () => {
  it("indexes by namespace, controller owner and custom fields, and keeps indexes right on update and delete", () => {
    const s = new Store<KubeObject>();
    s.addIndex("app", (o) => (o.metadata.labels?.app ? [o.metadata.labels.app] : []));
    s.upsert(
      cm("a", "x", "1", {
        labels: { app: "web" },
        ownerReferences: [{ apiVersion: "v1", kind: "K", name: "o", uid: "u1", controller: true }],
      }),
    );
    s.upsert(cm("a", "y", "2", { labels: { app: "db" } }));
    s.upsert(cm("b", "x", "3", { labels: { app: "web" } }));
    assert.equal(s.list({ namespace: "a" }).length, 2);
    assert.equal(s.list({ index: { name: "app", value: "web" } }).length, 2);
    assert.equal(s.list({ index: { name: OWNER_INDEX, value: "u1" } })[0]?.metadata.name, "x");
    s.upsert(cm("a", "x", "4", { labels: { app: "db" } }));
    assert.equal(s.list({ index: { name: "app", value: "web" } }).length, 1);
    assert.equal(s.list({ index: { name: OWNER_INDEX, value: "u1" } }).length, 0);
    // An update that keeps every index value leaves the key where it was.
    s.upsert(cm("b", "x", "5", { labels: { app: "web" } }));
    assert.deepEqual(
      s.list({ index: { name: "app", value: "web" } }).map((o) => o.metadata.resourceVersion),
      ["5"],
    );
    assert.equal(s.list({ namespace: "b" }).length, 1);
    s.remove("a/y");
    assert.deepEqual(
      s.list({ index: { name: "app", value: "db" } }).map((o) => o.metadata.name),
      ["x"],
    );
    assert.throws(() => s.list({ index: { name: "nope", value: "" } }), /register it with indexField/);
  });

  it("deepFreeze freezes everything reachable, also below a child that was already frozen", () => {
    const inner = { list: [{ v: 1 }] };
    const obj = deepFreeze({ a: Object.freeze({ inner }), b: [[{ c: "x" }]] });
    assert.ok(Object.isFrozen(obj) && Object.isFrozen(obj.b[0]?.[0]));
    assert.ok(Object.isFrozen(inner) && Object.isFrozen(inner.list[0]));
  });

  it("a store of decoded objects freezes each one's open members whole and does not walk frozen ones again", () => {
    const s = new Store<KubeObject>({ decodedObjects: true });
    // As the protobuf decoder hands them over with freezeNested: all below the top frozen but the top.
    const spec = Object.freeze({ containers: Object.freeze([Object.freeze({ name: "web" })]) });
    const labels = { app: "web" };
    const input = { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "n", labels }, spec };
    const { obj } = s.upsert(input);
    assert.ok(Object.isFrozen(obj) && Object.isFrozen(obj.metadata) && Object.isFrozen(labels));
    assert.equal((obj as unknown as { spec: unknown }).spec, spec, "kept as it came");
    // A frozen member is taken as frozen all the way down: this store is only for decoders' objects.
    const shallow = { open: true };
    s.upsert({
      metadata: { name: "q", namespace: "n" },
      x: Object.freeze({ shallow }),
    } as unknown as KubeObject);
    assert.ok(!Object.isFrozen(shallow));
    // The default store walks everything (a transform may have frozen the top of a member only).
    const walked = { open: true };
    new Store<KubeObject>().upsert({
      metadata: { name: "q" },
      x: Object.freeze({ walked }),
    } as unknown as KubeObject);
    assert.ok(Object.isFrozen(walked));
  });

  it("indexes always equal a rebuild from scratch, whatever the updates change (property)", () => {
    // A multi-valued index whose values change order, repeat or vanish between versions, and owners
    // that come and go: after every step each index must list exactly what a fresh store would.
    const version = fc.record({
      ns: fc.constantFrom("a", "b"),
      name: fc.constantFrom("p", "q", "r", "s"),
      tags: fc.array(fc.constantFrom("x", "y", "z"), { maxLength: 3 }),
      owner: fc.option(fc.constantFrom("u1", "u2"), { nil: undefined }),
    });
    const op = fc.oneof(
      { weight: 5, arbitrary: fc.record({ t: fc.constant("upsert" as const), v: version }) },
      { weight: 1, arbitrary: fc.record({ t: fc.constant("remove" as const), v: version }) },
      {
        weight: 1,
        arbitrary: fc.record({
          t: fc.constant("replace" as const),
          // A list holds each object once.
          vs: fc.uniqueArray(version, { selector: (v) => `${v.ns}/${v.name}` }),
        }),
      },
    );
    type V = { ns: string; name: string; tags: string[]; owner: string | undefined };
    let rv = 0;
    const make = (v: V): KubeObject =>
      cm(v.ns, v.name, String(++rv), {
        annotations: { tags: v.tags.join(",") },
        ...(v.owner
          ? { ownerReferences: [{ apiVersion: "v1", kind: "K", name: "o", uid: v.owner, controller: true }] }
          : {}),
      });
    const tags = (o: { metadata: { annotations?: Record<string, string> } }): string[] =>
      o.metadata.annotations?.tags ? o.metadata.annotations.tags.split(",") : [];
    const listed = (s: Store<KubeObject>, name: string, value: string): string[] =>
      s
        .list({ index: { name, value } })
        .map((o) => `${o.metadata.namespace}/${o.metadata.name}@${o.metadata.resourceVersion}`)
        .sort();
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const s = new Store<KubeObject>();
        s.addIndex("tags", tags);
        for (const o of ops) {
          if (o.t === "upsert") s.upsert(make(o.v));
          else if (o.t === "remove") s.remove(`${o.v.ns}/${o.v.name}`);
          else s.replace(o.vs.map(make));
          const fresh = new Store<KubeObject>();
          fresh.addIndex("tags", tags);
          fresh.replace(s.list().map((x) => structuredClone(x) as KubeObject));
          for (const value of ["x", "y", "z"])
            assert.deepEqual(listed(s, "tags", value), listed(fresh, "tags", value));
          for (const value of ["u1", "u2"])
            assert.deepEqual(listed(s, OWNER_INDEX, value), listed(fresh, OWNER_INDEX, value));
          for (const ns of ["a", "b"])
            assert.deepEqual(
              s
                .list({ namespace: ns })
                .map((x) => x.metadata.name)
                .sort(),
              fresh
                .list({ namespace: ns })
                .map((x) => x.metadata.name)
                .sort(),
            );
        }
      }),
    );
  });

  it("replace swaps content and indexes at once and returns the old content", () => {
    const s = new Store<KubeObject>();
    s.upsert(cm("a", "old", "1"));
    const { old } = s.replace([cm("a", "new", "2")]);
    assert.deepEqual([...old.keys()], ["a/old"]);
    assert.deepEqual(
      s.list({ namespace: "a" }).map((o) => o.metadata.name),
      ["new"],
    );
  });
});

describe("diffRelist", () => {
  it("reports adds, changed objects and missing objects as deletes — each once (property)", () => {
    const entries = fc.uniqueArray(
      fc.tuple(fc.integer({ min: 0, max: 30 }), fc.integer({ min: 1, max: 3 })),
      {
        selector: (t) => t[0],
        maxLength: 20,
      },
    );
    fc.assert(
      fc.property(entries, entries, (before, after) => {
        const old = new Map(before.map(([n, rv]) => [`ns/o${n}`, cm("ns", `o${n}`, String(rv))]));
        const items = after.map(([n, rv]) => cm("ns", `o${n}`, String(rv)));
        const changes = diffRelist(old, items);
        const keyOf = (o: KubeObject): string => `ns/${o.metadata.name}`;
        const adds = changes.filter((c) => c.type === "add").map((c) => keyOf(c.obj));
        const dels = changes.filter((c) => c.type === "delete").map((c) => keyOf(c.obj));
        const upds = changes.filter((c) => c.type === "update").map((c) => keyOf(c.obj));
        const afterKeys = new Set(items.map(keyOf));
        assert.deepEqual(adds.sort(), [...afterKeys].filter((k) => !old.has(k)).sort());
        assert.deepEqual(dels.sort(), [...old.keys()].filter((k) => !afterKeys.has(k)).sort());
        const changed = items.filter(
          (o) =>
            old.has(keyOf(o)) && old.get(keyOf(o))?.metadata.resourceVersion !== o.metadata.resourceVersion,
        );
        assert.deepEqual(upds.sort(), changed.map(keyOf).sort());
      }),
      { numRuns: 300 },
    );
  });
});

describe("watch timeouts", () => {
  it("are spread over [5, 10) minutes", () => {
    assert.equal(
      watchTimeoutSeconds(300, () => 0),
      300,
    );
    assert.equal(
      watchTimeoutSeconds(300, () => 0.999999),
      599,
    );
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (r) => {
        const t = watchTimeoutSeconds(300, () => r);
        return t >= 300 && t < 600;
      }),
    );
  });
});

describe("Cache.waitForSync", () => {
  it("gives up when its signal aborts and leaves no timer armed", async () => {
    const clock = new FakeClock();
    // A server that never answers: the cache cannot sync.
    const silent: ListWatcher = {
      list: () => new Promise(() => undefined),
      watch: () => new Promise(() => undefined),
    };
    const cache = new Cache(silent, { clock, streamingList: false, resyncPeriodMs: 0 });
    cache.informer({ apiVersion: "v1", kind: "ConfigMap" });
    const stop = new AbortController();
    const waiting = cache.waitForSync(120_000, { signal: stop.signal });
    assert.equal(clock.pendingTimers(), 1, "the sync timeout");
    stop.abort(new Error("stopping"));
    await assert.rejects(waiting, /stopping/);
    assert.equal(clock.pendingTimers(), 0, "an armed timeout would hold the process until it fired");
  });
});

/** A fake server's watch: no event until the watch is stopped. */
const quietWatch = async (_kind: unknown, opts?: { signal?: AbortSignal }) => ({
  async *[Symbol.asyncIterator]() {
    await new Promise((resolve) => opts?.signal?.addEventListener("abort", resolve));
    yield* [];
  },
});

describe("Cache.setFilter (sharded informers)", () => {
  it("keeps only matching objects, sends the selector, and relists on a change: leavers deleted, joiners added", async () => {
    const items = [cm("a", "one", "1"), cm("b", "two", "2")];
    const selectors: (string | undefined)[] = [];
    const server: ListWatcher = {
      list: (async (_kind: unknown, opts?: { shardSelector?: string }) => {
        selectors.push(opts?.shardSelector);
        return { metadata: { resourceVersion: "2" }, items: structuredClone(items) };
      }) as unknown as ListWatcher["list"],
      watch: quietWatch,
    };
    const kind = { apiVersion: "v1", kind: "ConfigMap" };
    const cache = new Cache(server, { streamingList: false, resyncPeriodMs: 0 });
    const inNamespace = (ns: string) => ({
      selector: `sel-${ns}`,
      matches: (o: { metadata: { namespace?: string } }) => o.metadata.namespace === ns,
    });
    await cache.setFilter(kind, inNamespace("a"));
    const seen: string[] = [];
    const inf = cache.informer(kind);
    inf.addEventHandler({
      onAdd: (o) => void seen.push(`add ${o.metadata.namespace}`),
      onDelete: (o) => void seen.push(`delete ${o.metadata.namespace}`),
    });
    cache.start();
    await cache.waitForSync(5_000);
    assert.deepEqual(
      inf.list().map((o) => o.metadata.name),
      ["one"],
    );
    await cache.setFilter(kind, inNamespace("b"));
    assert.deepEqual(
      inf.list().map((o) => o.metadata.name),
      ["two"],
    );
    assert.deepEqual(seen.sort(), ["add a", "add b", "delete a"]);
    assert.deepEqual(selectors, ["sel-a", "sel-b"]);
    assert.equal(inf.health()[0]?.received, 4, "both lists counted before the client-side filter");
    await cache.stop();
  });
});

describe("Cache with another ListWatcher than KubeClient", () => {
  it("freezes what it lists all the way down, also below a member frozen at its top only", async () => {
    const list = [{ name: "one" }];
    const server: ListWatcher = {
      list: (async () => ({
        metadata: { resourceVersion: "2" },
        // As a fake server might hand it over: a member frozen at its top, open below.
        items: [
          { metadata: { name: "x", namespace: "a" }, spec: Object.freeze({ list }) },
        ] as unknown as KubeObject[],
      })) as unknown as ListWatcher["list"],
      watch: quietWatch,
    };
    const kind = { apiVersion: "v1", kind: "ConfigMap" };
    const cache = new Cache(server, { streamingList: false, resyncPeriodMs: 0 });
    cache.informer(kind);
    cache.start();
    await cache.waitForSync(5_000);
    assert.ok(Object.isFrozen(list) && Object.isFrozen(list[0]));
    await cache.stop();
  });
});
