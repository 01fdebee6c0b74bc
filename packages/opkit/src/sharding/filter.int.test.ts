/**
 * Shard filter swaps on a live informer against opkit env, on both filtering paths (the server's
 * `shardSelector`, needs the ShardedListAndWatch feature gate; and the client-side hash): while objects
 * change, the watch connection is cut right before or while a swap restarts the reflector with the new
 * selector. Afterwards the store holds exactly the live objects of the new shards at their live
 * resourceVersions, and what the handlers were told adds up to the store (no missed delete or add).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "../client/client.ts";
import { kindRef, objectKey, type KubeObject } from "../client/types.ts";
import { Informer, type InformerFilter } from "../cache/informer.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { ShardSpace } from "./hash.ts";
import { detectServerSharding, shardSelector } from "./router.ts";

const ConfigMaps = kindRef<KubeObject & { data?: Record<string, string> }>("v1", "ConfigMap");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe("shard filter swaps under cut connections", { timeout: 180_000 }, () => {
  let env: TestEnv;
  let serverHasGate = false;
  before(async () => {
    env = await useTestEnv();
    serverHasGate = await detectServerSharding(env.client, "default");
  });
  after(() => env?.cleanup());

  for (const [serverSide, streamingList] of [
    [true, true],
    [true, false],
    [false, true],
  ] as const) {
    const path = `${serverSide ? "server-side shardSelector" : "client-side filter"}, ${streamingList ? "streaming list" : "paged list"}`;
    it(`${path}: swaps while the watch is cut leave exactly the new shards`, async (t) => {
      if (serverSide && !serverHasGate) {
        t.skip("the API server has no ShardedListAndWatch gate");
        return;
      }
      const ns = await env.namespace("swap");
      const space = new ShardSpace(4);
      const filter = (shards: number[]): InformerFilter => {
        const set = new Set(shards);
        return {
          selector: serverSide ? shardSelector(space, "uid", set) : undefined,
          matches: (obj) => set.has(space.shardOf(obj.metadata.uid ?? "")),
        };
      };
      const names = Array.from({ length: 40 }, (_, i) => `cm-${i}`);
      for (const name of names)
        await env.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns } });

      const { proxy, kubeConfig } = await env.apiserverProxy();
      const client = await KubeClient.fromConfig(kubeConfig);
      const informer = new Informer(client, ConfigMaps, { namespace: ns, streamingList });
      // What the handlers were told, replayed into a map: it must end equal to the store.
      const told = new Map<string, string>();
      informer.addEventHandler({
        onAdd: (o) => void told.set(objectKey(o), o.metadata.resourceVersion ?? ""),
        onUpdate: (_, o) => void told.set(objectKey(o), o.metadata.resourceVersion ?? ""),
        onDelete: (o) => void told.delete(objectKey(o)),
      });
      t.after(async () => {
        await informer.stop();
        await client.close();
        await proxy.close();
      });
      let current = [0, 1];
      await informer.setFilter(filter(current));
      informer.start();
      await informer.waitForSync();

      // A writer changes, deletes and recreates objects all along.
      let writing = true;
      const writer = (async () => {
        for (let i = 0; writing; i++) {
          const name = names[i % names.length] as string;
          try {
            if (i % 7 === 3) {
              await env.client.delete(ConfigMaps, name, { namespace: ns });
              await env.client.create({
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name, namespace: ns },
              });
            } else {
              await env.client.patch(
                ConfigMaps,
                name,
                { data: { n: String(i) } },
                { namespace: ns, type: "merge" },
              );
            }
          } catch {
            // a name deleted and not yet recreated: skip it
          }
        }
      })();

      for (const [i, next] of [[1, 2], [3], [0, 2, 3], [2], [0, 1, 2, 3], [1]].entries()) {
        await sleep(300);
        if (i % 2 === 0) {
          // Cut first: the old reflector is in its reconnect back-off when the swap stops it.
          proxy.dropAll();
          await sleep(50);
          await informer.setFilter(filter(next));
        } else {
          // Cut while the new reflector lists with the new selector.
          const swapping = informer.setFilter(filter(next));
          await sleep(5);
          proxy.dropAll();
          await swapping;
        }
        current = next;
      }
      await sleep(500);
      proxy.dropAll();
      writing = false;
      await writer;

      const expected = async (): Promise<Map<string, string>> => {
        const set = new Set(current);
        const live = await env.client.list(ConfigMaps, { namespace: ns });
        return new Map(
          live.items
            .filter((c) => set.has(space.shardOf(c.metadata.uid ?? "")))
            .map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]),
        );
      };
      const cached = (): Map<string, string> =>
        new Map(informer.store.list().map((c) => [objectKey(c), c.metadata.resourceVersion ?? ""]));
      let want = new Map<string, string>();
      await eventually(
        "the store holds exactly the live objects of the last shards",
        async () => {
          want = await expected();
          const have = cached();
          return have.size === want.size && [...want].every(([k, v]) => have.get(k) === v);
        },
        30_000,
      );
      assert.deepEqual(cached(), want);
      assert.deepEqual(told, want, "the handlers were told every add and delete");
    });
  }
});
