/**
 * The streamed list decode against the real control plane: items decoded as they arrive (with managedFields
 * cut out of their text) equal the plain list's, whatever the objects' strings hold; a list whose
 * connection is cut midway fails with ConnectionError and is not sent again; an informer whose first list
 * is cut midway lists again and ends with each object exactly once.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Cache, cacheKind } from "../cache/cache.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { KubeClient } from "./client.ts";
import { ConnectionError } from "./errors.ts";
import { kindRef, objectKey, type KubeObject } from "./types.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");

/** Strings that look like the structure the scanner tracks. */
const HOSTILE = '"managedFields":[{"a":1}],{"metadata":{"x":"]}"}},"items":[\\"é😀\\\\';

describe("streamed list decode against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  const names = Array.from({ length: 40 }, (_, i) => `cm-${String(i).padStart(2, "0")}`);
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("liststream");
    // ~64 KiB each: the answer (~2.6 MB) arrives in many chunks, so a cut lands midway.
    for (let i = 0; i < names.length; i += 10)
      await Promise.all(
        names.slice(i, i + 10).map((name) =>
          env.client.create<ConfigMap>({
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name, namespace: ns, annotations: { note: HOSTILE }, labels: { a: "b" } },
            data: { big: `${HOSTILE}${'x\\"'.repeat(16_000)}`, managedFields: HOSTILE },
          }),
        ),
      );
  });
  after(async () => {
    await env?.cleanup();
  });

  it("decodes the real server's answer item by item, cutting only metadata.managedFields", async () => {
    const plain = await env.client.list(ConfigMaps, { namespace: ns });
    assert.ok(plain.items.length > names.length, "ours and the namespace's kube-root-ca.crt");
    assert.ok(plain.items.every((c) => (c.metadata.managedFields?.length ?? 0) > 0));
    const items: ConfigMap[] = [];
    const streamed = await env.client.list(ConfigMaps, {
      namespace: ns,
      onItem: (c: ConfigMap) => items.push(c),
      omitManagedFields: true,
    });
    assert.deepEqual(streamed.items, []);
    assert.ok(streamed.metadata.resourceVersion, "the list's own metadata is read");
    const want = plain.items.map((c) => {
      const copy = structuredClone(c);
      delete copy.metadata.managedFields;
      return copy;
    });
    // The same objects, unchanged since: equal field for field (data, annotations and all).
    assert.deepEqual(items, want);
  });

  it("a list cut midway throws ConnectionError and is not sent again; an informer lists again, each object once", async (t) => {
    const { proxy, kubeConfig } = await env.apiserverProxy();
    // 2 MiB/s: the ~2.6 MB answer is still on its way when the cut comes (at full speed it can sit whole in
    // the socket buffers before the third item is decoded, and then nothing is cut).
    proxy.throttle(2 * 2 ** 20);
    let lists = 0;
    const client = await KubeClient.fromConfig(kubeConfig, {
      onRequest: (e) => (!e.watch && e.path.endsWith("/configmaps") ? lists++ : undefined),
    });
    t.after(async () => {
      await client.close();
      await proxy.close();
    });

    let got = 0;
    await assert.rejects(
      client.list(ConfigMaps, {
        namespace: ns,
        omitManagedFields: true,
        onItem: () => {
          // A cut lands between two reads of the socket, as a network's does.
          if (++got === 3) setImmediate(() => proxy.dropAll());
        },
      }),
      ConnectionError,
    );
    assert.ok(got >= 3 && got < names.length, `cut midway (${got} items)`);
    const total = (await env.client.list(ConfigMaps, { namespace: ns })).items.length;
    assert.equal(lists, 1, "a body consumed midway is not retried");

    // The informer's first list is cut after a few objects: it lists again and replaces nothing twice.
    let decoded = 0;
    const cache = new Cache(client, {
      kinds: [
        cacheKind(ConfigMaps, {
          namespace: ns,
          transform: (c) => {
            if (++decoded === 5) setImmediate(() => proxy.dropAll());
            delete c.metadata.managedFields;
            return c;
          },
        }),
      ],
    });
    t.after(() => cache.stop());
    const informer = cache.informer(ConfigMaps);
    const adds = new Map<string, number>();
    informer.addEventHandler({
      onAdd: (c) => void adds.set(objectKey(c), (adds.get(objectKey(c)) ?? 0) + 1),
    });
    lists = 0;
    cache.start();
    // Over HTTP/1.1, which the client speaks, the reset fails the body at once. The bound stays 90 s, past
    // the request's 60 s body timeout, from when it spoke HTTP/2: there a body whose connection was reset
    // while its reader was busy sometimes never errored, and only that timeout ended the cut list. The
    // cause is in Node: a WINDOW_UPDATE write that fails at once with ECONNRESET leaves the TLS socket
    // thinking a write is still in progress, and the HTTP/2 session stops reading while a write is in
    // progress, so it never sees the reset (scripts/probe-h2-reset-stall.ts explains the mechanism).
    await cache.waitForSync(90_000);
    assert.ok(lists >= 2, `the cut list was followed by another (${lists} lists)`);
    assert.equal(informer.list().length, total);
    assert.deepEqual(
      [...adds.values()].filter((n) => n !== 1),
      [],
      "each object added once",
    );
    assert.equal(adds.size, total);
  });

  it("a list body silent past its idle timeout drops the connection: the next request does not wait on it", async (t) => {
    // A frozen connection stands for one that can neither read nor write any more, as after Node's
    // stuck write (scripts/probe-h2-reset-stall.ts): nothing but the body timeout notices it.
    const { proxy, kubeConfig } = await env.apiserverProxy();
    const client = await KubeClient.fromConfig(kubeConfig);
    t.after(async () => {
      await client.close();
      await proxy.close();
    });
    let chunks = 0;
    const started = performance.now();
    await assert.rejects(
      client.transport.request(
        { method: "GET", path: `/api/v1/namespaces/${ns}/configmaps`, idleTimeoutMs: 2_000 },
        async (body) => {
          for await (const _chunk of body) if (++chunks === 2) proxy.freezeAll();
        },
      ),
      ConnectionError,
    );
    assert.ok(performance.now() - started >= 2_000, "ended by the idle timeout");
    // Without dropping the connection, the next request waited for undici's probe of it (the idle timeout
    // again), and on a connection stuck as above, for its own timeout too.
    const next = performance.now();
    await client.get(ConfigMaps, names[0]!, { namespace: ns });
    const ms = performance.now() - next;
    assert.ok(ms < 1_000, `the next request took ${ms.toFixed(0)} ms`);
  });
});
