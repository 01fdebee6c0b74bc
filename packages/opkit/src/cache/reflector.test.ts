// The reflector against a fake API server (list and watch over an event log), as kube-rs tests its
// watcher: connections dropped mid-stream on the streaming and the plain watch path, 410 on a watch and
// on a paged list, bookmarks, a server that closes every watch at once. Timers go through a FakeClock,
// so nothing here sleeps.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ListOptions, WatchOptions } from "../client/client.ts";
import { BadRequestError, ConnectionError, GoneError } from "../client/errors.ts";
import { ProtobufDecodeError } from "../client/protobuf/decode.ts";
import type { KindRef, KubeList, KubeObject, WatchEvent } from "../client/types.ts";
import { FakeClock } from "../clock/index.ts";
import { Cache } from "./cache.ts";
import { Informer } from "./informer.ts";
import type { ListWatcher } from "./reflector.ts";

type CM = KubeObject & { data?: { v?: string } };
const ConfigMaps: KindRef<CM> = { apiVersion: "v1", kind: "ConfigMap" };

interface LogEntry {
  rv: number;
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK";
  obj: CM;
}

/** A fault the next watch request suffers. */
type Fault = { kind: "gone" } | { kind: "close-at-once" } | { kind: "bad-request" };

/** An in-memory API server for one kind: a store, an event log, list (paged) and watch. */
class FakeServer implements ListWatcher {
  rv = 100;
  readonly objects = new Map<string, CM>();
  readonly log: LogEntry[] = [];
  /** Oldest resourceVersion a watch may resume from (older: 410), as after a compaction. */
  compactedBefore = 0;
  watchFaults: Fault[] = [];
  /** Fail the request for the second page of the next paged list with 410 (expired continue). */
  expireContinue = 0;
  streaming = true;
  watches: WatchOptions[] = [];
  lists: ListOptions[] = [];
  /** The next lists fail with these, in turn, after handing over the first 3 items. */
  listErrors: Error[] = [];
  /** Open streams break (connection reset) after this many more events each, in turn: [12, 7]. */
  drops: number[] = [];
  /** Bumped to end every open watch (as a server-side timeout does). */
  private epoch = 0;
  private wake: (() => void)[] = [];

  /** End every open watch normally, as the server's timeoutSeconds does. */
  closeWatches(): void {
    this.epoch++;
    for (const w of this.wake.splice(0)) w();
  }

  /** A bookmark to open watches: the revision moved on (writes to other kinds), no object changed. */
  bookmark(): void {
    this.rv++;
    this.log.push({ rv: this.rv, type: "BOOKMARK", obj: { metadata: { resourceVersion: String(this.rv) } } });
    for (const w of this.wake.splice(0)) w();
  }

  write(type: Exclude<LogEntry["type"], "BOOKMARK">, name: string, v = ""): void {
    this.rv++;
    const obj: CM = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { namespace: "ns", name, resourceVersion: String(this.rv) },
      data: { v },
    };
    if (type === "DELETED") this.objects.delete(name);
    else this.objects.set(name, obj);
    this.log.push({ rv: this.rv, type, obj });
    for (const w of this.wake.splice(0)) w();
  }

  list<T extends KubeObject>(_kind: KindRef<T>, opts: ListOptions = {}): Promise<KubeList<T>> {
    this.lists.push(opts);
    const all = [...this.objects.values()].sort((a, b) =>
      (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""),
    );
    const start = opts.continue ? Number(opts.continue) : 0;
    if (opts.continue && this.expireContinue > 0) {
      this.expireContinue--;
      return Promise.reject(gone("continue token expired"));
    }
    const end = opts.limit ? start + opts.limit : all.length;
    const items = all.slice(start, end).map((o) => {
      const copy = structuredClone(o) as KubeObject;
      delete copy.apiVersion; // lists omit them on items
      delete copy.kind;
      if (opts.onItem && opts.omitManagedFields) delete copy.metadata.managedFields;
      return copy as T;
    });
    // As the real client: with onItem, items are handed over one by one and the list comes back without them.
    const onItem = opts.onItem as ((item: T) => void) | undefined;
    const failure = this.listErrors.shift();
    if (failure) {
      if (onItem) for (const item of items.slice(0, 3)) onItem(item);
      return Promise.reject(failure);
    }
    if (onItem) for (const item of items) onItem(item);
    return Promise.resolve({
      metadata: { resourceVersion: String(this.rv), continue: end < all.length ? String(end) : undefined },
      items: onItem ? [] : items,
    });
  }

  watch<T extends KubeObject>(
    _kind: KindRef<T>,
    opts: WatchOptions = {},
  ): Promise<AsyncIterable<WatchEvent<T>>> {
    this.watches.push(opts);
    const fault = this.watchFaults.shift();
    if (fault?.kind === "bad-request" || (opts.sendInitialEvents && !this.streaming))
      return Promise.reject(new BadRequestError(400, { message: "sendInitialEvents not supported" }, req()));
    if (fault?.kind === "gone") return Promise.reject(gone("too old resource version"));
    const from = Number(opts.resourceVersion ?? "0");
    if (!opts.sendInitialEvents && from < this.compactedBefore)
      return Promise.reject(gone("too old resource version"));
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the generator reads the server's state
    const server = this;
    const signal = opts.signal;
    const epoch = server.epoch;
    async function* stream(): AsyncGenerator<WatchEvent<T>> {
      if (fault?.kind === "close-at-once") return;
      let cursor: number;
      if (opts.sendInitialEvents) {
        for (const o of server.objects.values()) yield { type: "ADDED", object: structuredClone(o) as T };
        yield {
          type: "BOOKMARK",
          object: {
            metadata: {
              resourceVersion: String(server.rv),
              annotations: { "k8s.io/initial-events-end": "true" },
            },
          } as KubeObject as T,
        };
        cursor = server.rv;
      } else cursor = from;
      for (;;) {
        if (server.epoch !== epoch) return;
        const next = server.log.find((e) => e.rv > cursor);
        if (!next) {
          if (signal?.aborted) return;
          await new Promise<void>((resolve) => {
            server.wake.push(resolve);
            signal?.addEventListener("abort", () => resolve(), { once: true });
          });
          if (signal?.aborted) return;
          continue;
        }
        if (server.drops[0] === 0) {
          server.drops.shift();
          throw new ConnectionError(req(), new Error("ECONNRESET"));
        }
        if (server.drops[0] !== undefined) server.drops[0]--;
        cursor = next.rv;
        yield { type: next.type, object: structuredClone(next.obj) as T };
      }
    }
    return Promise.resolve(stream());
  }
}

function req(): { method: string; path: string } {
  return { method: "GET", path: "/api/v1/configmaps" };
}

function gone(message: string): GoneError {
  return new GoneError(410, { reason: "Expired", message, code: 410 }, req());
}

/** Run microtasks and the fake clock until `cond` holds (the reflector's backoffs are FakeClock timers). */
async function until(clock: FakeClock, what: string, cond: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
    clock.advance(250);
  }
  assert.fail(`timed out waiting for ${what}`);
}

interface Seen {
  /** resourceVersions each object was delivered with, in order. */
  rvs: Map<string, bigint[]>;
  deletes: Map<string, number>;
}

function track(inf: Informer<CM>): Seen {
  const seen: Seen = { rvs: new Map(), deletes: new Map() };
  const note = (o: { metadata: { name?: string; resourceVersion?: string } }): void => {
    const name = o.metadata.name ?? "";
    seen.rvs.set(name, [...(seen.rvs.get(name) ?? []), BigInt(o.metadata.resourceVersion ?? "0")]);
  };
  inf.addEventHandler({
    onAdd: (o) => note(o),
    onUpdate: (_old, o, resync) => (resync ? undefined : note(o)),
    onDelete: (o) => {
      const name = o.metadata.name ?? "";
      seen.deletes.set(name, (seen.deletes.get(name) ?? 0) + 1);
    },
  });
  return seen;
}

function assertOnceInOrder(seen: Seen, server: FakeServer): void {
  for (const [name, rvs] of seen.rvs) {
    for (let i = 1; i < rvs.length; i++)
      assert.ok(
        (rvs[i] ?? 0n) > (rvs[i - 1] ?? 0n),
        `${name}: resourceVersions only move forward (${rvs.join(",")})`,
      );
  }
  for (const [name, n] of seen.deletes) assert.equal(n, 1, `${name} deleted once`);
  const expected = [...server.log.filter((e) => e.type === "DELETED").map((e) => e.obj.metadata.name)].sort();
  assert.deepEqual([...seen.deletes.keys()].sort(), expected);
}

function setup(opts: { streaming: boolean; pageSize?: number }) {
  const server = new FakeServer();
  server.streaming = opts.streaming;
  for (let i = 0; i < 10; i++) server.write("ADDED", `cm-${i}`);
  const clock = new FakeClock();
  const inf = new Informer<CM>(server, ConfigMaps, {
    clock,
    random: () => 0,
    streamingList: opts.streaming,
    pageSize: opts.pageSize,
  });
  const seen = track(inf);
  return { server, clock, inf, seen };
}

function cachedRvs(inf: Informer<CM>): Record<string, string> {
  return Object.fromEntries(inf.list().map((o) => [o.metadata.name ?? "", o.metadata.resourceVersion ?? ""]));
}

function liveRvs(server: FakeServer): Record<string, string> {
  return Object.fromEntries([...server.objects].map(([n, o]) => [n, o.metadata.resourceVersion ?? ""]));
}

describe("Reflector against a fake server", () => {
  for (const streaming of [false, true]) {
    const path = streaming ? "streaming list, then watch" : "list, then plain watch";
    it(`${path}: a watch dropped mid-stream resumes after the last delivered event, twice over`, async () => {
      const { server, clock, inf, seen } = setup({ streaming });
      inf.start();
      await until(clock, "sync", () => inf.hasSynced());
      // 30 changes and a delete; the connection drops after 12 of them, then again after 7 more.
      server.drops.push(12, 7);
      for (let i = 0; i < 30; i++) server.write("MODIFIED", `cm-${i % 9}`, String(i));
      server.write("DELETED", "cm-9");
      await until(
        clock,
        "all changes",
        () => JSON.stringify(cachedRvs(inf)) === JSON.stringify(liveRvs(server)),
      );
      assert.equal(server.drops.length, 0, "both drops happened");
      assertOnceInOrder(seen, server);
      // Every change after the sync was delivered exactly once: no replay after either drop.
      const delivered = [...seen.rvs.values()].reduce((n, r) => n + r.length, 0);
      assert.equal(delivered, 10 + 30, "10 initial adds and 30 updates, each once");
      const resumes = server.watches
        .filter((w) => !w.sendInitialEvents)
        .map((w) => Number(w.resourceVersion));
      assert.ok(resumes.length >= 2, `watch reopened after each drop (${resumes.join(",")})`);
      for (let i = 1; i < resumes.length; i++)
        assert.ok(
          (resumes[i] ?? 0) > (resumes[i - 1] ?? 0),
          `resume points move forward: ${resumes.join(",")}`,
        );
      assert.equal(inf.reflector.relists, 0, "a dropped watch resumes; it does not relist");
      await inf.stop();
    });
  }

  it("410 on a watch relists, and objects deleted meanwhile are delivered as deletes once", async () => {
    const { server, clock, inf, seen } = setup({ streaming: false });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    // The open watch ends (server timeout); meanwhile etcd was compacted, so the resume gets 410.
    server.write("DELETED", "cm-3");
    server.write("MODIFIED", "cm-4", "x");
    server.compactedBefore = server.rv + 1;
    server.closeWatches();
    server.write("MODIFIED", "cm-5", "y");
    await until(clock, "relisted", () => JSON.stringify(cachedRvs(inf)) === JSON.stringify(liveRvs(server)));
    assertOnceInOrder(seen, server);
    await inf.stop();
  });

  it("by default the sync is one unpaged list, even where watch-list works; managedFields are skipped unless a transform is given", async () => {
    for (const transform of [undefined, (o: CM) => o]) {
      const server = new FakeServer();
      server.streaming = true;
      for (let i = 0; i < 4; i++) server.write("ADDED", `cm-${i}`);
      for (const o of server.objects.values())
        o.metadata.managedFields = [{ manager: "m", operation: "Apply" }];
      const clock = new FakeClock();
      const inf = new Informer<CM>(server, ConfigMaps, { clock, random: () => 0, transform });
      inf.start();
      await until(clock, "sync", () => inf.hasSynced());
      assert.deepEqual(
        server.lists.map((l) => [l.limit, l.omitManagedFields]),
        [[undefined, transform === undefined]],
        "one list request, no page size",
      );
      assert.equal(server.watches.filter((w) => w.sendInitialEvents).length, 0, "no watch-list");
      assert.equal(inf.list().length, 4);
      const kept = inf.list().filter((o) => o.metadata.managedFields !== undefined).length;
      assert.equal(kept, transform ? 4 : 0, "managedFields only where a custom transform may want them");
      await inf.stop();
    }
  });

  it("a protobuf list the client could not decode is listed again at once (as JSON by the client), only once", async () => {
    const { server, clock, inf, seen } = setup({ streaming: false });
    const errors: unknown[] = [];
    inf.onError = (err) => errors.push(err);
    server.listErrors = [new ProtobufDecodeError("field 99 is not in message 378")];
    const started = clock.now();
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    // (`until` moves the fake clock 250 ms per turn it waits; a backoff is 800 ms at least.)
    assert.ok(clock.now() - started < 800, `no backoff (${clock.now() - started} ms)`);
    assert.deepEqual(errors, [], "nothing to report: the client reads the kind as JSON now");
    assert.equal(server.lists.length, 2);
    assert.deepEqual(cachedRvs(inf), liveRvs(server));
    assert.ok(
      [...seen.rvs.values()].every((rvs) => rvs.length === 1),
      "each object added once",
    );
    await inf.stop();
    // A second one (the client failing again) takes the ordinary path: reported, backed off.
    const again = setup({ streaming: false });
    const reported: unknown[] = [];
    again.inf.onError = (err) => reported.push(err);
    again.server.listErrors = [new ProtobufDecodeError("a"), new ProtobufDecodeError("b")];
    const t0 = again.clock.now();
    again.inf.start();
    await until(again.clock, "sync", () => again.inf.hasSynced());
    assert.equal(reported.length, 1);
    assert.ok(again.clock.now() - t0 >= 800, "backed off before the third list");
    await again.inf.stop();
  });

  it("an expired continue token (410 during a paged list) falls back to one unpaged list", async () => {
    const { server, clock, inf } = setup({ streaming: false, pageSize: 3 });
    server.expireContinue = 1;
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    assert.equal(inf.list().length, 10);
    const pages = server.lists.map((l) => `${l.limit ?? "all"}:${l.continue ?? ""}`);
    assert.deepEqual(pages, ["3:", "3:3", "all:"], "first page, the expired second page, then one full list");
    await inf.stop();
  });

  it("relists that follow each other without a working watch back off instead of spinning", async () => {
    const { server, clock, inf } = setup({ streaming: false });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    const listsBefore = server.lists.length;
    // Every watch is refused with 410 for a while: each relist must wait longer than the last.
    server.compactedBefore = Number.MAX_SAFE_INTEGER;
    server.closeWatches();
    const started = clock.now();
    await until(clock, "several relists", () => server.lists.length >= listsBefore + 5);
    const elapsed = clock.now() - started;
    assert.ok(elapsed >= 800 + 1600 + 3200, `relists backed off (${elapsed} ms for 5 relists)`);
    server.compactedBefore = 0;
    await inf.stop();
  });

  it("bookmarks advance the resume point without events", async () => {
    const { server, clock, inf } = setup({ streaming: false });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    server.bookmark();
    const bookmarkRv = String(server.rv);
    await until(clock, "the bookmark", () => inf.reflector.resumeResourceVersion === bookmarkRv);
    assert.equal(inf.lastResourceVersion, bookmarkRv);
    // The next watch resumes from the bookmark, not from the list.
    server.closeWatches();
    await until(clock, "a new watch", () => server.watches.length >= 2);
    assert.equal(server.watches.at(-1)?.resourceVersion, bookmarkRv);
    await inf.stop();
  });

  it("every watch asks the server to end it within 40 s, and treats 50 s of silence as a dead connection", async () => {
    for (const streaming of [false, true]) {
      const server = new FakeServer();
      server.write("ADDED", "a");
      const clock = new FakeClock();
      let r = 0;
      // Random draws spread over [0, 1): the timeouts must cover [20, 40) and never reach 40.
      const draws = [0, 0.5, 0.999999];
      const inf = new Informer<CM>(server, ConfigMaps, {
        clock,
        random: () => draws[r++ % 3] ?? 0,
        streamingList: streaming,
      });
      inf.start();
      await until(clock, "sync", () => inf.hasSynced());
      for (let i = 0; i < 3; i++) {
        const before = server.watches.length;
        server.closeWatches();
        await until(clock, "a new watch", () => server.watches.length > before);
      }
      const timeouts = server.watches.map((w) => w.timeoutSeconds ?? Infinity);
      assert.ok(
        timeouts.every((t) => t >= 20 && t < 40),
        `watch timeouts in [20, 40): ${timeouts.join(",")}`,
      );
      assert.ok(
        timeouts.includes(20) && timeouts.includes(39),
        `the whole range is used: ${timeouts.join(",")}`,
      );
      // A healthy stream ends by its timeout, so 10 s beyond the longest one only a dead connection reaches.
      assert.ok(server.watches.every((w) => w.idleTimeoutMs === 50_000));
      await inf.stop();
    }
  });

  it("a longer watch timeout moves the progress deadline with it", async () => {
    const server = new FakeServer();
    const clock = new FakeClock();
    const inf = new Informer<CM>(server, ConfigMaps, {
      clock,
      random: () => 0,
      streamingList: false,
      minWatchTimeoutSeconds: 300,
    });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    await until(clock, "a watch", () => server.watches.length > 0);
    assert.equal(server.watches[0]?.timeoutSeconds, 300);
    assert.equal(server.watches[0]?.idleTimeoutMs, 610_000);
    await inf.stop();
  });

  it("a server that ends every watch at once is not hammered", async () => {
    const { server, clock, inf } = setup({ streaming: false });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    const before = server.watches.length;
    for (let i = 0; i < 6; i++) server.watchFaults.push({ kind: "close-at-once" });
    server.closeWatches();
    const started = clock.now();
    await until(clock, "six empty watches", () => server.watches.length >= before + 6);
    assert.ok(clock.now() - started >= 800 + 1600 + 3200, "empty watches back off");
    await inf.stop();
  });

  it("a server that refuses the streaming list gets a paged list instead", async () => {
    const { server, clock, inf } = setup({ streaming: true });
    server.streaming = false;
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    assert.equal(inf.list().length, 10);
    assert.equal(server.watches[0]?.sendInitialEvents, true);
    assert.ok(server.lists.length >= 1);
    await inf.stop();
  });

  it("stamps metadata-only objects with the informer's kind, and freezes what it stores", async () => {
    const server = new FakeServer();
    server.streaming = false;
    server.write("ADDED", "a");
    const original = server.list.bind(server);
    server.list = <T extends KubeObject>(kind: KindRef<T>, opts?: ListOptions) =>
      original(kind, opts).then((l) => ({
        ...l,
        items: l.items.map((i) => ({ ...i, apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata" })),
      }));
    const clock = new FakeClock();
    const inf = new Informer<CM>(server, ConfigMaps, { clock, streamingList: false, metadataOnly: true });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    const a = inf.get("ns", "a");
    assert.equal(a?.apiVersion, "v1");
    assert.equal(a?.kind, "ConfigMap");
    assert.ok(Object.isFrozen(a) && Object.isFrozen(a?.metadata), "stored objects are frozen");
    await inf.stop();
  });

  it("a handler that throws or rejects is reported; the informer and other handlers go on", async () => {
    const { server, clock, inf } = setup({ streaming: false });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.message);
    process.on("warning", onWarning);
    const seen: string[] = [];
    inf.addEventHandler({ onUpdate: () => Promise.reject(new Error("async boom")) });
    inf.addEventHandler({
      onUpdate: () => {
        throw new Error("sync boom");
      },
    });
    inf.addEventHandler({ onUpdate: (_o, n) => void seen.push(n.metadata.name ?? "") });
    inf.start();
    await until(clock, "sync", () => inf.hasSynced());
    server.write("MODIFIED", "cm-1", "x");
    server.write("MODIFIED", "cm-2", "y");
    await until(clock, "both updates and their warnings", () => seen.length === 2 && warnings.length >= 4);
    process.off("warning", onWarning);
    assert.deepEqual(seen, ["cm-1", "cm-2"]);
    assert.ok(
      warnings.some((w) => w.includes("async boom")) && warnings.some((w) => w.includes("sync boom")),
    );
    await inf.stop();
  });

  it("removeInformer stops the informer and drops it; the next use starts a fresh one", async () => {
    const server = new FakeServer();
    server.streaming = false;
    server.write("ADDED", "a");
    const clock = new FakeClock();
    const cache = new Cache(server, { clock });
    const first = cache.informer(ConfigMaps);
    cache.start();
    await until(clock, "sync", () => first.hasSynced());
    assert.equal(await cache.removeInformer(ConfigMaps), true);
    assert.equal(await cache.removeInformer(ConfigMaps), false, "already gone");
    const watchesBefore = server.watches.length;
    server.write("MODIFIED", "a", "after-removal");
    await new Promise((r) => setImmediate(r));
    assert.equal(first.health()[0]?.state, "stopped");
    const second = cache.informer(ConfigMaps);
    assert.notEqual(second, first);
    await until(clock, "the new informer's sync", () => second.hasSynced());
    assert.equal(second.get("ns", "a")?.data?.v, "after-removal");
    assert.ok(server.watches.length > watchesBefore);
    await cache.stop();
  });
});

describe("Reflector state", () => {
  for (const streaming of [false, true]) {
    it(`${streaming ? "streaming list" : "list"}: once synced, an open watch reports "watching"`, async () => {
      const { server, clock, inf } = setup({ streaming });
      inf.start();
      await until(clock, "sync", () => inf.hasSynced());
      server.write("MODIFIED", "cm-1", "x");
      await until(clock, "the change", () => inf.get("ns", "cm-1")?.data?.v === "x");
      assert.equal(inf.health()[0]?.state, "watching");
      await inf.stop();
    });
  }
});
