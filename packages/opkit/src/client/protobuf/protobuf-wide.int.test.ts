/**
 * Protobuf lists against the real control plane, on objects made to reach what the fixed set of
 * protobuf.int.test.ts does not: nil pointers Go's JSON writes as null (a gRPC probe's service, a PVC's
 * dataSource.apiGroup, a scaleIO source's secretRef), times at the Unix epoch, map keys named __proto__,
 * every volume source, conversions (autoscaling/v1 HPAs stored as v2), server-set status (quotas, jobs).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import type { Material } from "../config.ts";
import { useTestEnv, type TestEnv } from "../../testenv/testing.ts";
import { KubeClient } from "../client.ts";
import { kindRef, type KubeObject } from "../types.ts";

const EPOCH = "1970-01-01T00:00:00Z";

function objects(ns: string): KubeObject[] {
  const podSpec = {
    restartPolicy: "Never",
    terminationGracePeriodSeconds: 0,
    nodeSelector: { "example.com/none": "none" }, // never scheduled: the object stays as written
    containers: [
      {
        name: "main",
        image: "example.com/app:1.0",
        readinessProbe: { grpc: { port: 9000 } },
        livenessProbe: { grpc: { port: 9001, service: "" } },
        startupProbe: { exec: { command: ["true"] } },
        resizePolicy: [{ resourceName: "cpu", restartPolicy: "NotRequired" }],
        resources: { limits: { cpu: "1", memory: "1Gi" } },
      },
    ],
    volumes: [
      { name: "csi", csi: { driver: "x.example.com", volumeAttributes: { ["__proto__"]: "p", a: "" } } },
      { name: "nfs", nfs: { server: "s", path: "/p" } },
      { name: "host", hostPath: { path: "/tmp" } },
      { name: "dapi", downwardAPI: { items: [{ path: "p", fieldRef: { fieldPath: "metadata.name" } }] } },
      { name: "sec", secret: { secretName: "s", items: [{ key: "k", path: "p", mode: 0o400 }] } },
      {
        name: "eph",
        ephemeral: {
          volumeClaimTemplate: {
            metadata: { labels: { a: "b" } },
            spec: {
              accessModes: ["ReadWriteOnce"],
              resources: { requests: { storage: "1Gi" } },
              dataSource: { kind: "PersistentVolumeClaim", name: "src" },
            },
          },
        },
      },
      { name: "img", image: { reference: "example.com/data:1", pullPolicy: "IfNotPresent" } },
      {
        name: "proj",
        projected: {
          sources: [
            { serviceAccountToken: { path: "t", expirationSeconds: 3600 } },
            { clusterTrustBundle: { path: "b", signerName: "example.com/s", labelSelector: {} } },
          ],
        },
      },
    ],
  };
  return [
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "pod", namespace: ns },
      spec: podSpec,
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "clone", namespace: ns },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        dataSource: { kind: "PersistentVolumeClaim", name: "src" },
        storageClassName: "none",
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: `${ns}-pv` },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        scaleIO: { gateway: "g", system: "s", volumeName: "v", secretRef: { name: "x" } },
        storageClassName: "none",
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "proto", namespace: ns },
      data: { ["__proto__"]: "x", constructor: "y", "0": "z" },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "bin", namespace: ns },
      data: { ["__proto__"]: Buffer.from([0, 1, 2, 255]).toString("base64") },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "old", namespace: ns },
      involvedObject: { kind: "Pod", namespace: ns, name: "pod" },
      reason: "Epoch",
      message: "at the epoch",
      type: "Normal",
      firstTimestamp: EPOCH,
      lastTimestamp: "1969-12-31T23:59:59Z",
      count: 1,
      source: { component: "review" },
    } as KubeObject,
    {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "epoch", namespace: ns },
      spec: {
        holderIdentity: "me",
        renewTime: "1970-01-01T00:00:00.000000Z",
        acquireTime: "1970-01-01T00:00:00.000001Z",
      },
    } as KubeObject,
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: `${ns}-sc` },
      provisioner: "x.example.com/p",
      parameters: { ["__proto__"]: "a", b: "" },
      allowedTopologies: [{ matchLabelExpressions: [{ key: "zone", values: ["a"] }] }],
      mountOptions: [],
    } as KubeObject,
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSIDriver",
      metadata: { name: `${ns}.csi.example.com` },
      spec: {
        attachRequired: false,
        podInfoOnMount: true,
        volumeLifecycleModes: ["Ephemeral"],
        tokenRequests: [{ audience: "" }],
      },
    } as KubeObject,
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "IngressClass",
      metadata: { name: `${ns}-ic` },
      spec: { controller: "example.com/ic", parameters: { kind: "Params", name: "p" } },
    } as KubeObject,
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name: "ing", namespace: ns },
      spec: {
        defaultBackend: { resource: { kind: "Bucket", name: "b" } },
        rules: [
          {
            host: "a.example.com",
            http: {
              paths: [
                { path: "/", pathType: "Prefix", backend: { service: { name: "s", port: { number: 80 } } } },
              ],
            },
          },
        ],
      },
    } as KubeObject,
    {
      apiVersion: "node.k8s.io/v1",
      kind: "RuntimeClass",
      metadata: { name: `${ns}-rc` },
      handler: "runc",
      overhead: { podFixed: { cpu: "250m", memory: "0" } },
      scheduling: { nodeSelector: { a: "b" }, tolerations: [{ operator: "Exists" }] },
    } as KubeObject,
    {
      apiVersion: "scheduling.k8s.io/v1",
      kind: "PriorityClass",
      metadata: { name: `${ns}-neg` },
      value: -2147483648,
    } as KubeObject,
    {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "job", namespace: ns },
      spec: {
        suspend: true,
        backoffLimitPerIndex: 1,
        completionMode: "Indexed",
        completions: 2,
        parallelism: 2,
        podFailurePolicy: {
          rules: [
            { action: "FailJob", onExitCodes: { operator: "In", values: [1, 2147483647] } },
            { action: "Ignore", onPodConditions: [{ type: "DisruptionTarget" }] },
          ],
        },
        template: { spec: { ...podSpec, volumes: [] } },
      },
    } as KubeObject,
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "hpa", namespace: ns },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "dep" },
        maxReplicas: 3,
        metrics: [
          {
            type: "Pods",
            pods: {
              metric: { name: "qps", selector: {} },
              target: { type: "AverageValue", averageValue: "1k" },
            },
          },
          { type: "External", external: { metric: { name: "q" }, target: { type: "Value", value: "1" } } },
        ],
        behavior: {
          scaleUp: {
            stabilizationWindowSeconds: 0,
            selectPolicy: "Disabled",
            policies: [{ type: "Pods", value: 1, periodSeconds: 1 }],
          },
          scaleDown: { tolerance: "0.05", policies: [{ type: "Percent", value: 10, periodSeconds: 60 }] },
        },
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "ResourceQuota",
      metadata: { name: "rq", namespace: ns },
      spec: {
        hard: { pods: "10", "count/configmaps": "100" },
        scopeSelector: { matchExpressions: [{ scopeName: "PriorityClass", operator: "Exists" }] },
      },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "LimitRange",
      metadata: { name: "lr", namespace: ns },
      spec: { limits: [{ type: "Container", max: { cpu: "2" }, min: { memory: "0" } }] },
    } as KubeObject,
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: `${ns}-vap` },
      spec: {
        failurePolicy: "Ignore",
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] },
          ],
        },
        validations: [{ expression: "true", messageExpression: "'x'" }],
        auditAnnotations: [{ key: "k", valueExpression: "'v'" }],
        variables: [{ name: "v", expression: "1" }],
      },
    } as KubeObject,
    {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: "eps", namespace: ns },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.0.0.1"], conditions: {}, hints: { forZones: [{ name: "a" }] } }],
      ports: [{ port: 80 }, { name: "b" }],
    } as KubeObject,
  ];
}

// A minimal protobuf encoder, to write what only a protobuf client can: a string with invalid UTF-8.
function varint(n: number): Buffer {
  const out: number[] = [];
  do {
    const b = n % 128;
    n = Math.floor(n / 128);
    out.push(n ? b | 128 : b);
  } while (n);
  return Buffer.from(out);
}
const field = (num: number, value: Buffer | string): Buffer => {
  const b = typeof value === "string" ? Buffer.from(value) : value;
  return Buffer.concat([varint((num << 3) | 2), varint(b.length), b]);
};

function pem(m: Material | undefined): Buffer | undefined {
  if (!m) return undefined;
  return "data" in m ? Buffer.from(m.data) : readFileSync(m.file);
}

/** Create a ConfigMap through the protobuf API, as a Go client would. */
async function createWithProtobuf(env: TestEnv, ns: string, name: string, data: Record<string, Buffer>) {
  const c = env.client.config;
  const configMap = Buffer.concat([
    field(1, Buffer.concat([field(1, name), field(3, ns)])),
    ...Object.entries(data).map(([k, v]) => field(2, Buffer.concat([field(1, k), field(2, v)]))),
  ]);
  const body = Buffer.concat([
    Buffer.from("k8s\0", "latin1"),
    field(1, Buffer.concat([field(1, "v1"), field(2, "ConfigMap")])),
    field(2, configMap),
  ]);
  const agent = new Agent({
    connect: { ca: pem(c.certificateAuthority), cert: pem(c.clientCertificate), key: pem(c.clientKey) },
  });
  try {
    const res = await request(`${c.server}/api/v1/namespaces/${ns}/configmaps`, {
      method: "POST",
      body,
      headers: { "content-type": "application/vnd.kubernetes.protobuf", accept: "application/json" },
      dispatcher: agent,
    });
    const text = await res.body.text();
    assert.equal(res.statusCode, 201, text);
  } finally {
    await agent.close();
  }
}

/** Each kind of `objects`, plus kinds the server itself fills (nodes, conversions). */
const KINDS: [string, string][] = [
  ["v1", "Pod"],
  ["v1", "PersistentVolumeClaim"],
  ["v1", "PersistentVolume"],
  ["v1", "ConfigMap"],
  ["v1", "Secret"],
  ["v1", "Event"],
  ["events.k8s.io/v1", "Event"],
  ["coordination.k8s.io/v1", "Lease"],
  ["storage.k8s.io/v1", "StorageClass"],
  ["storage.k8s.io/v1", "CSIDriver"],
  ["networking.k8s.io/v1", "IngressClass"],
  ["networking.k8s.io/v1", "Ingress"],
  ["node.k8s.io/v1", "RuntimeClass"],
  ["scheduling.k8s.io/v1", "PriorityClass"],
  ["batch/v1", "Job"],
  ["autoscaling/v2", "HorizontalPodAutoscaler"],
  ["autoscaling/v1", "HorizontalPodAutoscaler"],
  ["v1", "ResourceQuota"],
  ["v1", "LimitRange"],
  ["admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"],
  ["discovery.k8s.io/v1", "EndpointSlice"],
  ["flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"],
  ["v1", "Node"],
];

describe("protobuf lists against opkit env, unusual objects", () => {
  let env: TestEnv;
  let ns: string;
  let json: KubeClient;
  const clusterScoped: [string, string, string][] = [];
  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("pbwide");
    const refused: string[] = [];
    for (const o of objects(ns)) {
      await env.client.create(o).catch((err: unknown) => refused.push(String(err)));
      if (!o.metadata.namespace)
        clusterScoped.push([o.apiVersion ?? "", o.kind ?? "", o.metadata.name ?? ""]);
    }
    assert.deepEqual(refused, []);
    // A Go client's truncated text: an emoji and a euro sign cut inside their bytes.
    await createWithProtobuf(env, ns, "utf8", {
      emoji: Buffer.from([0x61, 0xf0, 0x9f, 0x98]),
      euro: Buffer.from([0xe2, 0x82, 0x41]),
    });
    json = await KubeClient.fromConfig(env.client.config, { protobuf: false });
  });
  after(async () => {
    await json?.close();
    for (const [apiVersion, kind, name] of clusterScoped)
      await env.client.delete(kindRef(apiVersion, kind), name).catch(() => undefined);
    await env?.cleanup();
  });

  for (const [apiVersion, kind] of KINDS) {
    it(`${apiVersion} ${kind}: the protobuf objects are the JSON objects`, async () => {
      const ref = kindRef<KubeObject>(apiVersion, kind);
      const { metadata } = await json.list(ref, { limit: 1 });
      const at = { resourceVersion: metadata.resourceVersion, resourceVersionMatch: "Exact" as const };
      const fromProtobuf: KubeObject[] = [];
      const fromJson: KubeObject[] = [];
      await env.client.list(ref, { ...at, onItem: (o: KubeObject) => fromProtobuf.push(o) });
      await json.list(ref, { ...at, onItem: (o: KubeObject) => fromJson.push(o) });
      assert.ok(fromJson.length > 0);
      assert.equal(fromProtobuf.length, fromJson.length);
      for (let i = 0; i < fromJson.length; i++)
        assert.equal(JSON.stringify(fromProtobuf[i]), JSON.stringify(fromJson[i]), `item ${i}`);
      // As a cache compares them, too (own keys only: a __proto__ key must be one).
      assert.deepStrictEqual(fromProtobuf, fromJson);
      // As the cache reads them: frozen below the top, sub-objects shared between items.
      const forCache: KubeObject[] = [];
      await env.client.list(ref, { ...at, freezeNested: true, onItem: (o: KubeObject) => forCache.push(o) });
      assert.deepStrictEqual(forCache, fromJson);
    });
  }
});
