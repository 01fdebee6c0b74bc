/**
 * Protobuf lists against the real control plane: for every GA built-in kind the server serves, the objects
 * decoded from its protobuf answer are the objects of its JSON answer at the same resourceVersion, byte for
 * byte once serialized (same keys, same values, same order). The env's own objects (nodes, leases, events,
 * controller revisions, the system's pods and config) are compared along with a set made to reach the
 * special forms: inlined volume sources, int-or-string in both forms, quantities, binary data, raw
 * extensions, micro times, negative numbers, empty and missing values.
 *
 * Watches likewise: the same objects created, changed and deleted, seen through a protobuf watch and a
 * JSON watch from one resourceVersion, give the same events in the same order, byte for byte.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Cache } from "../../cache/cache.ts";
import { useTestEnv, type TestEnv } from "../../testenv/testing.ts";
import { KUBERNETES_VERSION } from "../../testenv/versions.ts";
import { KubeClient } from "../client.ts";
import { InvalidError, UnknownKindError } from "../errors.ts";
import { ProtobufDecodeError } from "./decode.ts";
import { kindRef, type KubeObject, type WatchEvent } from "../types.ts";
import { KINDS } from "./messages.ts";

function objects(ns: string): KubeObject[] {
  const labels = { app: "proto", "example.com/empty": "" };
  const podSpec = {
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 0,
    tolerations: [{ key: "k", operator: "Exists", effect: "NoExecute", tolerationSeconds: 5 }],
    securityContext: { runAsUser: 1000, fsGroup: 2000, sysctls: [] },
    volumes: [
      { name: "cache", emptyDir: { medium: "Memory", sizeLimit: "64Mi" } },
      { name: "cfg", configMap: { name: "cfg", defaultMode: 0o440, optional: true } },
      {
        name: "proj",
        projected: {
          sources: [{ downwardAPI: { items: [{ path: "l", fieldRef: { fieldPath: "metadata.labels" } }] } }],
        },
      },
    ],
    containers: [
      {
        name: "main",
        image: "example.com/app:1.0",
        args: ["--flag=é😀", ""],
        ports: [{ name: "http", containerPort: 8080 }],
        env: [
          { name: "EMPTY", value: "" },
          { name: "CPU", valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } } },
        ],
        resources: { requests: { cpu: "0.1", memory: "1e3" }, limits: { cpu: "1500m", memory: "1.5Gi" } },
        readinessProbe: { httpGet: { path: "/", port: "http" }, periodSeconds: 3 },
        livenessProbe: { tcpSocket: { port: 8080 }, initialDelaySeconds: 0 },
        volumeMounts: [{ name: "cache", mountPath: "/cache" }],
      },
    ],
  };
  return [
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cfg", namespace: ns, labels },
      data: { a: "", b: "x" },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "bin", namespace: ns },
      binaryData: { raw: Buffer.from([0, 255, 128, 10]).toString("base64") },
      immutable: false,
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s", namespace: ns },
      type: "Opaque",
      data: { k: Buffer.from("secret\n").toString("base64"), empty: "" },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "svc", namespace: ns },
      spec: {
        selector: { app: "proto" },
        ports: [
          { name: "a", port: 80, targetPort: "http" },
          { name: "b", port: 81, targetPort: 9000, protocol: "UDP" },
        ],
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "pod", namespace: ns, labels },
      spec: podSpec,
    } as KubeObject,
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "dep", namespace: ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: "proto" } },
        strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "50%", maxUnavailable: 0 } },
        template: { metadata: { labels }, spec: podSpec },
      },
    } as KubeObject,
    {
      apiVersion: "apps/v1",
      kind: "StatefulSet",
      metadata: { name: "sts", namespace: ns },
      spec: {
        replicas: 0,
        serviceName: "svc",
        selector: { matchLabels: { app: "proto" } },
        template: { metadata: { labels }, spec: podSpec },
        volumeClaimTemplates: [
          {
            metadata: { name: "data" },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
          },
        ],
      },
    } as KubeObject,
    {
      apiVersion: "apps/v1",
      kind: "ControllerRevision",
      metadata: { name: "rev", namespace: ns },
      revision: 3,
      data: { spec: { template: { nested: [1, "two", null, { three: true }] } } },
    } as KubeObject,
    {
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "cron", namespace: ns },
      spec: {
        schedule: "*/5 * * * *",
        suspend: true,
        jobTemplate: {
          spec: { backoffLimit: 0, template: { spec: { ...podSpec, restartPolicy: "Never" } } },
        },
      },
    } as KubeObject,
    {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "lease", namespace: ns },
      spec: {
        holderIdentity: "me",
        leaseDurationSeconds: 15,
        acquireTime: "2026-01-02T03:04:05.123456Z",
        renewTime: "2026-01-02T03:04:06.000001Z",
        leaseTransitions: 0,
      },
    } as KubeObject,
    {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: "ev", namespace: ns },
      eventTime: "2026-01-02T03:04:05.000000Z",
      reportingController: "example.com/proto",
      reportingInstance: "i",
      action: "Test",
      reason: "Tested",
      type: "Normal",
      regarding: { kind: "Pod", namespace: ns, name: "pod" },
      note: "a note",
    } as KubeObject,
    {
      apiVersion: "scheduling.k8s.io/v1",
      kind: "PriorityClass",
      metadata: { name: `${ns}-low` },
      value: -5,
      preemptionPolicy: "Never",
    } as KubeObject,
    {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: { name: "pdb", namespace: ns },
      spec: { minAvailable: "30%", selector: { matchLabels: { app: "proto" } } },
    } as KubeObject,
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "np", namespace: ns },
      spec: {
        podSelector: {},
        ingress: [{ ports: [{ port: "http" }, { port: 53, endPort: 60, protocol: "UDP" }] }],
      },
    } as KubeObject,
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "hpa", namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "dep" },
        minReplicas: 1,
        maxReplicas: 3,
        metrics: [
          {
            type: "Resource",
            resource: { name: "cpu", target: { type: "AverageValue", averageValue: "250m" } },
          },
        ],
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "rq", namespace: ns },
      spec: { hard: { pods: "100", "requests.memory": "10Gi", "limits.cpu": "0" } },
    } as KubeObject,
  ];
}

describe("protobuf lists against opkit env", () => {
  let env: TestEnv;
  let ns: string;
  let json: KubeClient;
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("protobuf");
    for (const o of objects(ns)) await env.client.create(o);
    json = await KubeClient.fromConfig(env.client.config, { protobuf: false });
  });
  after(async () => {
    await json?.close();
    if (env && ns)
      await env.client
        .delete(kindRef("scheduling.k8s.io/v1", "PriorityClass"), `${ns}-low`)
        .catch(() => undefined);
    await env?.cleanup();
  });

  it("decodes every served GA kind to exactly its JSON objects", async () => {
    let kinds = 0;
    let items = 0;
    for (const key of Object.keys(KINDS)) {
      const slash = key.lastIndexOf("/");
      const ref = kindRef<KubeObject>(key.slice(0, slash), key.slice(slash + 1));
      try {
        if (!(await env.client.mapping(ref)).verbs.includes("list")) continue;
      } catch (err) {
        if (err instanceof UnknownKindError) continue; // not served by this server
        throw err;
      }
      // freezeNested (as the cache asks) also shares sub-objects between items: the same objects still.
      for (const [omitManagedFields, freezeNested] of [
        [false, false],
        [true, false],
        [true, true],
      ] as const) {
        // One snapshot for both answers.
        const { metadata } = await json.list(ref, { limit: 1 });
        // (ComponentStatus lists have no resourceVersion.)
        const at = metadata.resourceVersion
          ? { resourceVersion: metadata.resourceVersion, resourceVersionMatch: "Exact" as const }
          : {};
        const fromProtobuf: KubeObject[] = [];
        const fromJson: KubeObject[] = [];
        const a = await env.client.list(ref, {
          ...at,
          omitManagedFields,
          freezeNested,
          onItem: (o: KubeObject) => fromProtobuf.push(o),
        });
        const b = await json.list(ref, {
          ...at,
          omitManagedFields,
          onItem: (o: KubeObject) => fromJson.push(o),
        });
        assert.equal(fromProtobuf.length, fromJson.length, key);
        // (ComponentStatuses come in any order.)
        const byName = (x: KubeObject, y: KubeObject): number =>
          `${x.metadata.namespace}/${x.metadata.name}`.localeCompare(
            `${y.metadata.namespace}/${y.metadata.name}`,
          );
        fromProtobuf.sort(byName);
        fromJson.sort(byName);
        for (let i = 0; i < fromJson.length; i++)
          assert.equal(JSON.stringify(fromProtobuf[i]), JSON.stringify(fromJson[i]), `${key} item ${i}`);
        assert.deepEqual(a.metadata, b.metadata, `${key} list metadata`);
        assert.deepEqual(a.items, []);
        if (freezeNested)
          for (const o of fromProtobuf) assert.ok(Object.isFrozen(o.metadata) && !Object.isFrozen(o), key);
        if (!omitManagedFields) items += fromJson.length;
      }
      kinds++;
    }
    assert.ok(kinds >= 40, `compared ${kinds} kinds`);
    assert.ok(items >= 30, `compared ${items} objects`);
  });

  it("watches every kind of the set as protobuf: the JSON stream's events, in order, byte for byte", async () => {
    const ws = await env.namespace("pbwatch");
    const mine = objects(ws).filter((o) => o.metadata.namespace === ws);
    const kinds = [...new Map(mine.map((o) => [`${o.apiVersion}/${o.kind}`, o])).values()].map((o) =>
      kindRef<KubeObject>(o.apiVersion ?? "", o.kind ?? ""),
    );
    const rv = (await json.list(kindRef<KubeObject>("v1", "ConfigMap"), { namespace: ws })).metadata
      .resourceVersion;
    const abort = new AbortController();
    /** Per kind, the events of each stream, until every object of that kind was seen deleted. */
    const collect = async (client: KubeClient, ref: (typeof kinds)[number], omitManagedFields: boolean) => {
      const names = new Set(mine.filter((o) => o.kind === ref.kind).map((o) => o.metadata.name));
      const seen: WatchEvent<KubeObject>[] = [];
      const deleted = new Set<string>();
      for await (const ev of await client.watch(ref, {
        namespace: ws,
        resourceVersion: rv,
        allowWatchBookmarks: false,
        omitManagedFields,
        signal: abort.signal,
      })) {
        seen.push(ev);
        if (ev.type === "DELETED") deleted.add(ev.object.metadata.name ?? "");
        if ([...names].every((n) => deleted.has(n ?? ""))) return seen;
      }
      return seen;
    };
    const streams = kinds.flatMap((ref) =>
      [false, true].map((omit) => ({
        key: `${ref.apiVersion}/${ref.kind}${omit ? " (managedFields left out)" : ""}`,
        both: Promise.all([collect(env.client, ref, omit), collect(json, ref, omit)]),
      })),
    );
    const timer = setTimeout(
      () => abort.abort(new Error("the watches did not see every deletion in 60 s")),
      60_000,
    );
    try {
      for (const o of mine) await env.client.create(o);
      for (const o of mine) {
        const ref = kindRef<KubeObject>(o.apiVersion ?? "", o.kind ?? "");
        await env.client.patch(
          ref,
          o.metadata.name ?? "",
          { metadata: { labels: { changed: "yes" } } },
          {
            namespace: ws,
            type: "merge",
          },
        );
      }
      for (const o of mine)
        await env.client.delete(
          kindRef<KubeObject>(o.apiVersion ?? "", o.kind ?? ""),
          o.metadata.name ?? "",
          {
            namespace: ws,
          },
        );
      let events = 0;
      for (const { key, both } of streams) {
        const [fromProtobuf, fromJson] = await both;
        assert.equal(fromProtobuf.length, fromJson.length, key);
        for (let i = 0; i < fromJson.length; i++)
          assert.equal(JSON.stringify(fromProtobuf[i]), JSON.stringify(fromJson[i]), `${key} event ${i}`);
        events += fromJson.length;
      }
      assert.ok(kinds.length >= 12, `watched ${kinds.length} kinds`);
      assert.ok(events >= 3 * 2 * mine.length, `compared ${events} events`);
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  });

  it("watches as protobuf: the initial events and the bookmark that closes them, as the JSON stream has them", async () => {
    const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
    const initial = async (client: KubeClient) => {
      const added: WatchEvent<KubeObject>[] = [];
      const abort = new AbortController();
      try {
        for await (const ev of await client.watch(ConfigMaps, {
          namespace: ns,
          sendInitialEvents: true,
          allowWatchBookmarks: true,
          signal: abort.signal,
        })) {
          if (ev.type === "ADDED") added.push(ev);
          else if (ev.type === "BOOKMARK") {
            if (ev.object.metadata.annotations?.["k8s.io/initial-events-end"] !== "true") continue;
            added.sort((a, b) => (a.object.metadata.name ?? "").localeCompare(b.object.metadata.name ?? ""));
            // Each request reads its own resourceVersion.
            const { resourceVersion, ...rest } = ev.object.metadata;
            assert.match(resourceVersion ?? "", /^\d+$/);
            return { added, bookmark: { ...ev.object, metadata: rest } };
          }
        }
        throw new Error("the watch ended before its initial events did");
      } finally {
        abort.abort();
      }
    };
    const [a, b] = [await initial(env.client), await initial(json)];
    assert.ok(a.added.length >= 3, "cfg, bin and kube-root-ca.crt");
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });

  it("watches every served GA kind as protobuf: its bookmark is the JSON stream's (each kind's zero values)", async () => {
    // A bookmark is a new, empty object of the kind but for its resourceVersion: every member Go's JSON
    // writes for a zero object (a null list, an empty struct) must come out of the protobuf the same.
    let kinds = 0;
    for (const key of Object.keys(KINDS)) {
      const slash = key.lastIndexOf("/");
      const ref = kindRef<KubeObject>(key.slice(0, slash), key.slice(slash + 1));
      try {
        if (!(await env.client.mapping(ref)).verbs.includes("watch")) continue;
      } catch (err) {
        if (err instanceof UnknownKindError) continue; // not served by this server
        throw err;
      }
      const bookmark = async (client: KubeClient): Promise<KubeObject> => {
        const abort = new AbortController();
        try {
          // No object matches: the first event is the bookmark that closes the (empty) initial events.
          for await (const ev of await client.watch(ref, {
            labelSelector: "opkit.example.com/none=x",
            sendInitialEvents: true,
            allowWatchBookmarks: true,
            signal: abort.signal,
          })) {
            assert.equal(ev.type, "BOOKMARK", key);
            const { resourceVersion, ...rest } = ev.object.metadata;
            assert.match(resourceVersion ?? "", /^\d+$/, key);
            return { ...ev.object, metadata: rest };
          }
          throw new Error(`${key}: the watch ended before its bookmark`);
        } finally {
          abort.abort();
        }
      };
      let fromProtobuf: string;
      try {
        fromProtobuf = JSON.stringify(await bookmark(env.client));
      } catch (err) {
        // A newer release's field the pinned messages do not describe: the client reads the kind as JSON
        // from then on (the fallback under test on such a release), so the next watch must succeed.
        if (!(err instanceof ProtobufDecodeError) || env.kubernetesVersion === KUBERNETES_VERSION) throw err;
        process.stderr.write(`${key} on ${env.kubernetesVersion}: ${err.message}; read as JSON since\n`);
        fromProtobuf = JSON.stringify(await bookmark(env.client));
      }
      const fromJson = JSON.stringify(await bookmark(json));
      // The messages are generated from the default release's Go types: another release may write a zero
      // member its types do not omit (1.34's ResourceSlice writes "devices": null; 1.36 omits it), which
      // protobuf cannot tell from an absent one. There the two agree once nulls are dropped.
      if (env.kubernetesVersion !== KUBERNETES_VERSION && fromProtobuf !== fromJson) {
        assert.equal(
          fromProtobuf,
          JSON.stringify(JSON.parse(fromJson, (_, v: unknown) => v ?? undefined)),
          key,
        );
        process.stderr.write(
          `${key} on ${env.kubernetesVersion}: a null member reads as absent from protobuf\n`,
        );
      } else assert.equal(fromProtobuf, fromJson, key);
      kinds++;
    }
    assert.ok(kinds >= 40, `compared ${kinds} kinds`);
  });

  it("turns a failure answered in protobuf into its typed error, with the server's message", async () => {
    await assert.rejects(
      env.client.list(kindRef<KubeObject>("v1", "ConfigMap"), {
        namespace: ns,
        resourceVersionMatch: "Exact",
        onItem: () => undefined,
      }),
      (err: unknown) =>
        err instanceof InvalidError &&
        /resourceVersionMatch is forbidden unless resourceVersion is provided/.test(err.message) &&
        err.status.reason === "Invalid",
    );
  });

  it("feeds the cache: an informer syncs the objects the JSON answer holds", async () => {
    const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
    const cache = new Cache(env.client, { namespace: ns });
    cache.informer(ConfigMaps);
    cache.start();
    try {
      await cache.waitForSync(30_000);
      const want = (await json.list(ConfigMaps, { namespace: ns })).items.map((o) => {
        delete o.metadata.managedFields; // the cache's default transform
        return { ...o, apiVersion: "v1", kind: "ConfigMap" };
      });
      const got = cache.list(ConfigMaps);
      assert.equal(got.length, want.length);
      assert.ok(got.length >= 3, "cfg, bin and the namespace's kube-root-ca.crt");
      for (const o of want) {
        const cached = got.find((c) => c.metadata.name === o.metadata.name);
        assert.deepEqual(cached, o, o.metadata.name);
      }
      // Then its watch (protobuf too): a new object arrives as the JSON answer has it.
      await env.client.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "later", namespace: ns, labels: { app: "proto" } },
        data: { k: "v" },
      } as KubeObject);
      const later = await json.get(ConfigMaps, "later", { namespace: ns });
      delete later.metadata.managedFields;
      for (let i = 0; i < 100 && !cache.get(ConfigMaps, "later", { namespace: ns }); i++)
        await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual(cache.get(ConfigMaps, "later", { namespace: ns }), later);
    } finally {
      await cache.stop();
    }
  });
});
