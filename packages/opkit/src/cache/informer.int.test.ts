/**
 * The informer against the real control plane: the cache stays exactly equal to the live list through
 * an apiserver restart, an etcd compaction (410 on resume), dropped and frozen connections on both watch
 * paths and a write burst, delivering each change once with resourceVersions only moving forward;
 * cached objects cannot be edited; a read of a kind that has not synced never answers "not found".
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../client/client.ts";
import { kindRef, objectKey, type KubeObject } from "../client/types.ts";
import { setControllerReference } from "../helpers/ownerrefs.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { Cache, NamespaceNotCachedError, NamespaceRequiredError, cacheKind } from "./cache.ts";
import { CacheNotSyncedError, SyncTimeoutError, type SharedInformer } from "./informer.ts";
import { eventually } from "../testenv/eventually.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const Secrets = kindRef<KubeObject>("v1", "Secret");

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

/** What handlers saw: per object, the resourceVersions delivered (adds and updates), and deletes. */
interface Seen {
  rvs: Map<string, bigint[]>;
  deletes: Map<string, number>;
}

function track(informer: SharedInformer<ConfigMap>): Seen {
  const seen: Seen = { rvs: new Map(), deletes: new Map() };
  const note = (o: { metadata: { namespace?: string; name?: string; resourceVersion?: string } }): void => {
    const key = objectKey(o);
    seen.rvs.set(key, [...(seen.rvs.get(key) ?? []), BigInt(o.metadata.resourceVersion ?? "0")]);
  };
  informer.addEventHandler({
    onAdd: (o) => note(o),
    onUpdate: (_old, o, resync) => (resync ? undefined : note(o)),
    onDelete: (o) => void seen.deletes.set(objectKey(o), (seen.deletes.get(objectKey(o)) ?? 0) + 1),
  });
  return seen;
}

function assertForwardOnly(seen: Seen): void {
  for (const [key, rvs] of seen.rvs)
    for (let i = 1; i < rvs.length; i++)
      assert.ok(
        (rvs[i] ?? 0n) > (rvs[i - 1] ?? 0n),
        `${key}: resourceVersions only move forward (${rvs.join(" → ")})`,
      );
  for (const [key, n] of seen.deletes) assert.equal(n, 1, `${key} reported deleted once`);
}

async function createConfigMaps(env: TestEnv, ns: string, names: string[]): Promise<void> {
  await inBatches(names, 25, (name) =>
    env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace: ns },
      data: { v: "0" },
    }),
  );
}

describe("informer cache against opkit env", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  /** A cache whose client goes through a TCP proxy the test can cut or freeze. */
  async function proxiedCache(
    t: { after(fn: () => Promise<void>): void },
    ns: string,
    opts: { streamingList?: boolean } = {},
  ) {
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const counts = { watches: 0 };
    const client = await KubeClient.fromConfig(kubeConfig, {
      onRequest: (e) => (e.watch ? counts.watches++ : undefined),
    });
    const cache = new Cache(client, { kinds: [cacheKind(ConfigMaps, { namespace: ns })], ...opts });
    // Stop everything even when an assertion fails, or the open watch keeps the test process alive.
    t.after(async () => {
      await cache.stop();
      await client.close();
      await proxy.close();
    });
    const informer = cache.informer(ConfigMaps);
    const live = async (): Promise<Map<string, string>> => {
      const l = await env.client.listAll(ConfigMaps, { namespace: ns, limit: 200 });
      return new Map(l.items.map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]));
    };
    const cached = (): Map<string, string> =>
      new Map(informer.list().map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]));
    const converged = async (what: string, timeoutMs?: number): Promise<void> => {
      let lastLive = new Map<string, string>();
      await eventually(
        what,
        async () => {
          lastLive = await live();
          const c = cached();
          return c.size === lastLive.size && [...lastLive].every(([k, v]) => c.get(k) === v);
        },
        timeoutMs,
      );
      assert.deepEqual(cached(), lastLive);
    };
    return { proxy, client, cache, informer, counts, converged };
  }

  for (const streamingList of [false, true]) {
    const path = streamingList ? "streaming list + watch" : "paged list + plain watch";
    it(`${path}: a watch cut mid-stream resumes, each change delivered once, resourceVersions only forward`, async (t) => {
      const ns = await env.namespace("resume");
      const names = Array.from({ length: 50 }, (_, i) => `cm-${String(i).padStart(2, "0")}`);
      await createConfigMaps(env, ns, names);
      const { proxy, cache, informer, converged } = await proxiedCache(t, ns, { streamingList });
      const seen = track(informer);
      cache.start();
      await cache.waitForSync(60_000);

      // 150 updates while the connection is cut twice in the middle of the stream: the first cut
      // lands on the watch that follows the list (the streaming one on that path), the second on the
      // plain watch that resumed after it.
      let writes = 0;
      const update = async (i: number): Promise<void> => {
        await env.client.patch(
          ConfigMaps,
          names[i % names.length] ?? "",
          { data: { v: String(i) } },
          {
            namespace: ns,
            type: "merge",
          },
        );
        writes++;
      };
      for (let i = 0; i < 150; i++) {
        await update(i);
        if (i === 50 || i === 100) {
          // Wait until the informer is mid-way through what was written, then cut.
          await eventually("events flowing", () => informer.list().some((c) => c.data?.v === String(i - 5)));
          proxy.dropAll();
        }
      }
      await converged("after two cuts");
      assertForwardOnly(seen);
      const updates = [...seen.rvs.values()].reduce((n, r) => n + r.length, 0) - names.length;
      const health = informer.health()[0];
      assert.equal(health?.relists, 0, "a cut watch resumes; it never relists");
      assert.equal(updates, writes, `each of the ${writes} changes delivered exactly once (got ${updates})`);
      t.diagnostic(`${path}: ${writes} writes, ${health?.watchRequests} watch requests`);
    });
  }

  it("stays equal to the live list through restart, compaction, dropped connections and a write burst", async (t) => {
    const ns = await env.namespace("informer");
    const names = Array.from({ length: 500 }, (_, i) => `cm-${String(i).padStart(3, "0")}`);
    await createConfigMaps(env, ns, names);
    const { proxy, cache, informer, counts, converged } = await proxiedCache(t, ns);
    const seen = track(informer);
    cache.start();
    await cache.waitForSync(60_000);
    await converged("initial sync");
    assert.equal(informer.list().filter((c) => c.metadata.name?.startsWith("cm-")).length, 500);
    assert.equal(
      informer.list()[0]?.metadata.managedFields,
      undefined,
      "managedFields are stripped by default",
    );

    const deleted: string[] = [];
    const deleteSome = async (from: number, count: number): Promise<void> => {
      const batch = names.slice(from, from + count);
      await inBatches(batch, 10, (n) => env.client.delete(ConfigMaps, n, { namespace: ns }));
      deleted.push(...batch.map((n) => `${ns}/${n}`));
    };

    // 1. kube-apiserver restart, with changes before and after.
    await deleteSome(0, 10);
    await env.restart("kube-apiserver");
    await deleteSome(10, 10);
    await converged("after apiserver restart");

    // 2. etcd compaction: writes elsewhere move the revision on without events for this informer, so its
    //    resume from the old resourceVersion is refused with 410 and it must relist.
    const relistsBefore = informer.health()[0]?.relists ?? 0;
    for (let i = 0; i < 5; i++) {
      await env.client.create({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { generateName: "bump-", namespace: ns },
      });
    }
    await env.compact();
    await deleteSome(20, 10);
    await converged("after compaction");
    assert.ok((informer.health()[0]?.relists ?? 0) > relistsBefore, "a 410 on resume forces a relist");

    // 3. a dropped connection in the middle of the watch.
    proxy.dropAll();
    await deleteSome(30, 10);
    await converged("after a dropped connection");

    // 4. a burst of 1,000 writes.
    const survivors = names.slice(40);
    const writes = Array.from({ length: 1000 }, (_, i) => survivors[i % survivors.length] as string);
    let n = 0;
    await inBatches(writes, 25, (name) =>
      env.client.patch(ConfigMaps, name, { data: { v: String(++n) } }, { namespace: ns, type: "merge" }),
    );
    await converged("after 1,000 writes");

    // Every deleted object was reported deleted exactly once; nothing else was; nothing went backwards.
    assertForwardOnly(seen);
    assert.deepEqual([...seen.deletes.keys()].sort(), [...deleted].sort());
    // One watch per reconnect: restart, compaction and the drop each cost a few, never a loop.
    assert.ok(counts.watches <= 15, `watch requests bounded (got ${counts.watches})`);
    assert.ok(counts.watches >= 4, `watches were re-opened (got ${counts.watches})`);
    t.diagnostic(`watch requests: ${counts.watches}, relists: ${informer.health()[0]?.relists}`);
  });

  it("notices a frozen connection within a minute and resumes", async (t) => {
    const ns = await env.namespace("frozen");
    await createConfigMaps(env, ns, ["a"]);
    const { proxy, cache, informer, converged } = await proxiedCache(t, ns, { streamingList: false });
    cache.start();
    await cache.waitForSync(30_000);
    // The TCP connection stays up but carries nothing any more: without a progress deadline the
    // informer would serve stale data until the OS gave up on the socket.
    proxy.freezeAll();
    const frozenAt = Date.now();
    await env.client.patch(
      ConfigMaps,
      "a",
      { data: { v: "after-freeze" } },
      { namespace: ns, type: "merge" },
    );
    await eventually(
      "the change behind the frozen connection",
      () => informer.get(ns, "a")?.data?.v === "after-freeze",
      120_000,
      500,
    );
    const noticedS = (Date.now() - frozenAt) / 1000;
    t.diagnostic(`frozen watch noticed and resumed after ${noticedS.toFixed(1)} s`);
    assert.ok(
      noticedS <= 60,
      `noticed within a minute: the 50 s progress deadline plus a reconnect (took ${noticedS} s)`,
    );
    await converged("after the freeze");
  });

  it("hands out frozen objects: an edit throws and the cache and its indexes stay unchanged", async (t) => {
    const ns = await env.namespace("frozen-objects");
    await createConfigMaps(env, ns, ["a"]);
    const client = await KubeClient.load(env.kubeconfigPath);
    const cache = new Cache(client, { namespace: ns });
    t.after(async () => {
      await cache.stop();
      await client.close();
    });
    cache.informer(ConfigMaps);
    cache.start();
    await cache.waitForSync(30_000);
    const cm = cache.get(ConfigMaps, "a", { namespace: ns });
    assert.ok(cm);
    const owner = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "o", namespace: ns, uid: "u-1" } };
    assert.throws(() => {
      // @ts-expect-error -- cached objects are deeply readonly: this line does not compile
      cm.metadata.labels = { edited: "yes" };
    }, TypeError);
    assert.throws(
      // @ts-expect-error -- the cached object is readonly, so it is not a valid (mutable) child
      () => setControllerReference(owner, cm),
      TypeError,
      "setControllerReference on a cached object fails instead of editing the cache",
    );
    const again = cache.get(ConfigMaps, "a", { namespace: ns });
    assert.equal(again?.data?.v, "0");
    assert.equal(again?.metadata.labels, undefined);
    assert.equal(again?.metadata.ownerReferences, undefined);
    assert.equal(cache.list(ConfigMaps, { index: { name: "controllerOwnerUid", value: "u-1" } }).length, 0);
    // The documented way: a mutable copy.
    const { deepCopy } = await import("../client/types.ts");
    const copy = deepCopy(cm);
    copy.data = { v: "mine" };
    setControllerReference(owner, copy);
    assert.equal(copy.metadata.ownerReferences?.[0]?.uid, "u-1");
    assert.equal(cache.get(ConfigMaps, "a", { namespace: ns })?.data?.v, "0");
  });

  it("a first read of a kind that has not synced throws CacheNotSyncedError, never 'not found'", async (t) => {
    const ns = await env.namespace("unsynced");
    await createConfigMaps(env, ns, ["exists"]);
    const client = await KubeClient.load(env.kubeconfigPath);
    const cache = new Cache(client, { namespaces: [ns, "default"] });
    t.after(async () => {
      await cache.stop();
      await client.close();
    });
    cache.start();
    // The first read starts the informer: its answer must not be "undefined" for an existing object.
    let err: unknown;
    try {
      cache.get(ConfigMaps, "exists", { namespace: ns });
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof CacheNotSyncedError, `a typed error, got ${String(err)}`);
    await err.whenSynced();
    assert.equal(cache.get(ConfigMaps, "exists", { namespace: ns })?.metadata.name, "exists");
    // whenSynced names the informer that refused (this namespace's); the other one may still be listing.
    await cache.waitForSync(30_000);
    // Two namespaces cached as one: lists join them, a namespace outside them is an error naming them.
    assert.ok(cache.list(ConfigMaps).some((c) => c.metadata.namespace === ns));
    assert.ok(
      cache.list(ConfigMaps, { namespace: "default" }).every((c) => c.metadata.namespace === "default"),
    );
    assert.throws(
      () => cache.get(ConfigMaps, "x", { namespace: "kube-system" }),
      (e: unknown) =>
        e instanceof NamespaceNotCachedError && /cached only in namespaces default, /.test(e.message),
    );
    assert.equal(
      cache.health().filter((h) => h.kind === "ConfigMap.v1").length,
      2,
      "one informer per namespace",
    );
    // A namespaced kind read by name alone is an error, not "not found" (the name is ambiguous).
    assert.throws(
      () => cache.get(ConfigMaps, "exists"),
      (e: unknown) => e instanceof NamespaceRequiredError && /needs \{ namespace \}/.test(e.message),
    );
    // A cluster-scoped kind ignores a namespace given by mistake, as controller-runtime's reader does.
    const Namespaces = kindRef<KubeObject>("v1", "Namespace");
    const wide = new Cache(client);
    t.after(() => wide.stop());
    wide.start();
    assert.throws(() => wide.get(Namespaces, ns), CacheNotSyncedError);
    await wide.waitForSync(30_000);
    assert.equal(wide.get(Namespaces, ns, { namespace: "default" })?.metadata.name, ns);
  });

  it("pages lists, serves indexes and metadata-only informers, and reads its own writes", async (t) => {
    const ns = await env.namespace("paging");
    let lists = 0;
    const client = await KubeClient.load({
      kubeconfig: env.kubeconfigPath,
      onRequest: (e) =>
        e.method === "GET" && !e.watch && e.path.endsWith("/configmaps") ? lists++ : undefined,
    });
    await inBatches(
      Array.from({ length: 120 }, (_, i) => i),
      20,
      (i) =>
        client.create<ConfigMap>({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `p-${i}`, namespace: ns, labels: { shard: String(i % 3) } },
          data: { big: "x".repeat(100) },
        }),
    );
    const all = await client.listAll(ConfigMaps, { namespace: ns, limit: 50 });
    assert.equal(all.items.filter((c) => c.metadata.name?.startsWith("p-")).length, 120);
    assert.equal(lists, 3, "120 objects in pages of 50 take 3 requests");

    const cache = new Cache(client, { streamingList: false });
    t.after(async () => {
      await cache.stop();
      await client.close();
    });
    cache.indexField(ConfigMaps, "shard", (c) => (c.metadata.labels?.shard ? [c.metadata.labels.shard] : []));
    const inf = cache.informer(ConfigMaps, { namespace: ns });
    const meta = cache.informer(ConfigMaps, { namespace: ns, metadataOnly: true });
    assert.notEqual(inf, meta);
    assert.equal(
      cache.informer(ConfigMaps, { namespace: ns }),
      inf,
      "one shared informer per kind and scope",
    );
    cache.start();
    await cache.waitForSync(30_000);
    assert.equal(inf.list({ index: { name: "shard", value: "1" } }).length, 40);
    assert.equal(inf.list({ labelSelector: "shard in (0,2)" }).length, 80);
    const m = meta.get(ns, "p-1");
    assert.equal(m?.metadata.name, "p-1");
    assert.equal(m?.data, undefined, "metadata-only objects carry no data");
    assert.equal(m?.apiVersion, "v1", "metadata-only objects carry the kind's apiVersion, not meta.k8s.io's");
    assert.equal(m?.kind, "ConfigMap", "…and its kind, not PartialObjectMetadata");
    assert.equal(inf.get(ns, "p-1")?.data?.big?.length, 100);

    const updated = await client.patch(
      ConfigMaps,
      "p-7",
      { data: { big: "new" } },
      { namespace: ns, type: "merge" },
    );
    await cache.waitForResourceVersion(ConfigMaps, updated.metadata.resourceVersion ?? "", {
      namespace: ns,
      timeoutMs: 10_000,
    });
    // The shared informer for this namespace has seen the write as soon as the wait returns.
    assert.equal(inf.get(ns, "p-7")?.data?.big, "new");
  });

  it("reports a forbidden list once, clearly, instead of a bare sync timeout", async (t) => {
    const kc = new KubeConfig();
    kc.loadFromFile(env.kubeconfigPath);
    const user = kc.getCurrentUser();
    assert.ok(user);
    (user as { impersonateUser?: string }).impersonateUser = "opkit-nobody";
    const client = await KubeClient.fromConfig(kc);
    const errors: string[] = [];
    const cache = new Cache(client, { onError: (err) => errors.push(String(err)) });
    t.after(async () => {
      await cache.stop();
      await client.close();
    });
    cache.informer(Secrets, { namespace: "default" });
    cache.start();
    await assert.rejects(cache.waitForSync(4_000), (err: unknown) => {
      assert.ok(err instanceof SyncTimeoutError);
      assert.match(err.message, /Secret\.v1 in default: forbidden/);
      assert.match(err.message, /opkit-nobody/);
      assert.match(err.message, /cannot (list|watch) resource "secrets"/);
      return true;
    });
    assert.equal(errors.length, 1, "reported once, not once per retry");
    const health = cache.health()[0];
    assert.ok(health?.forbidden);
  });
});
