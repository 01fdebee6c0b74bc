/**
 * The informer against the real control plane: the cache stays exactly equal to the live list through
 * an apiserver restart, an etcd compaction (410 on resume), dropped connections and a write burst,
 * without duplicate deletes or a reconnect storm.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../client/client.ts";
import { kindRef, objectKey, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { Cache } from "./cache.ts";
import { SyncTimeoutError } from "./informer.ts";
import { eventually } from "../testenv/eventually.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const Secrets = kindRef<KubeObject>("v1", "Secret");

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

describe("informer cache against opkit env", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  it("stays equal to the live list through restart, compaction, dropped connections and a write burst", async (t) => {
    const ns = await env.namespace("informer");
    const names = Array.from({ length: 500 }, (_, i) => `cm-${String(i).padStart(3, "0")}`);
    await inBatches(names, 25, (name) =>
      env.client.create<ConfigMap>({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, namespace: ns },
        data: { v: "0" },
      }),
    );

    // The informer's client goes through a TCP proxy the test can cut.
    const { proxy, kubeConfig } = await env.apiserverProxy();
    let watchRequests = 0;
    const client = await KubeClient.fromConfig(kubeConfig, {
      onRequest: (e) => (e.watch ? watchRequests++ : undefined),
    });
    const cache = new Cache(client, { kinds: { "v1/ConfigMap": { namespace: ns } } });
    // Stop everything even when an assertion fails, or the open watch keeps the test process alive.
    t.after(async () => {
      await cache.stop();
      await client.close();
      await proxy.close();
    });
    const informer = cache.informer(ConfigMaps);
    const deletes = new Map<string, number>();
    informer.addEventHandler({
      onDelete: (o) => deletes.set(objectKey(o), (deletes.get(objectKey(o)) ?? 0) + 1),
    });
    cache.start();
    await cache.waitForSync(60_000);

    const live = async (): Promise<Map<string, string>> => {
      const l = await env.client.listAll(ConfigMaps, { namespace: ns, limit: 200 });
      return new Map(l.items.map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]));
    };
    const cached = (): Map<string, string> =>
      new Map(informer.list().map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]));
    const converged = async (what: string): Promise<void> => {
      let lastLive = new Map<string, string>();
      await eventually(what, async () => {
        lastLive = await live();
        const c = cached();
        return c.size === lastLive.size && [...lastLive].every(([k, v]) => c.get(k) === v);
      });
      assert.deepEqual(cached(), lastLive);
    };
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
    const relistsBefore = informer.reflector.relists;
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
    assert.ok(informer.reflector.relists > relistsBefore, "a 410 on resume forces a relist");

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

    // Every deleted object was reported deleted exactly once; nothing else was.
    assert.deepEqual([...deletes.keys()].sort(), [...deleted].sort());
    assert.ok(
      [...deletes.values()].every((c) => c === 1),
      "no duplicate deletes",
    );
    // One watch per reconnect: restart, compaction and the drop each cost a few, never a loop.
    assert.ok(watchRequests <= 15, `watch requests bounded (got ${watchRequests})`);
    assert.ok(watchRequests >= 4, `watches were re-opened (got ${watchRequests})`);
    t.diagnostic(
      `watch requests: ${watchRequests}, relists: ${informer.reflector.relists}, list requests: ${informer.reflector.listRequests}`,
    );
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
    const m = meta.get(ns, "p-1") as ConfigMap;
    assert.equal(m.metadata.name, "p-1");
    assert.equal(m.data, undefined, "metadata-only objects carry no data");
    assert.equal((inf.get(ns, "p-1") as ConfigMap).data?.big?.length, 100);

    const updated = await client.patch(
      ConfigMaps,
      "p-7",
      { data: { big: "new" } },
      { namespace: ns, type: "merge" },
    );
    await cache.waitForResourceVersion(ConfigMaps, updated.metadata.resourceVersion ?? "", 10_000);
    // The shared informer for this namespace has seen the write as soon as the wait returns.
    assert.equal((inf.get(ns, "p-7") as ConfigMap).data?.big, "new");
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
      assert.match(err.message, /Secret\.v1: forbidden/);
      assert.match(err.message, /opkit-nobody/);
      assert.match(err.message, /cannot (list|watch) resource "secrets"/);
      return true;
    });
    assert.equal(errors.length, 1, "reported once, not once per retry");
    const health = cache.health()[0];
    assert.ok(health?.forbidden);
  });
});
