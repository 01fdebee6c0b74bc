/**
 * Fault test of opkit's webhook server with hostile bodies, generated with fast-check (seeded): random
 * JSON, valid AdmissionReview and ConversionReview bodies truncated at a random byte, with random bytes
 * flipped, with a random field replaced by random JSON, and oversized ones. Each gets a 4xx, or a 200
 * carrying a well-formed review response (a review whose object is nonsense is denied or fails inside
 * the review); never a 5xx, never a dropped connection, and the server answers a valid review after.
 * The handlers are the AcmeNamespace operator's real defaulter and a two-version conversion. No
 * control plane needed. The server's unit tests name each malformed case; this one throws volume at it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:https";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import * as Type from "typebox/type";
import {
  WebhookServer,
  conversion,
  defineKind,
  writeServingCertificate,
  type ServingCertificate,
} from "opkit";
import { tierDefaulter } from "../operators/acme-namespace/src/operator.ts";
import { report, scaled } from "./harness.ts";

const SEED = Number(process.env.FAULT_SEED ?? "1313");
const MAX_BYTES = 64 * 1024;

const V1 = defineKind({
  group: "faults.opkit.dev",
  version: "v1",
  kind: "Endpoint",
  spec: Type.Object({ address: Type.String() }),
});
const V2 = defineKind({
  group: "faults.opkit.dev",
  version: "v2",
  kind: "Endpoint",
  storage: true,
  spec: Type.Object({ host: Type.String(), port: Type.Optional(Type.Integer()) }),
});
const endpoints = conversion({
  hub: V2,
  spokes: [
    {
      kind: V1,
      toHub: (v1) => {
        const m = /^(.*):(\d+)$/.exec(v1.spec.address);
        return { spec: m ? { host: m[1] ?? "", port: Number(m[2]) } : { host: v1.spec.address } };
      },
      fromHub: (v2) => ({
        spec: { address: v2.spec.port === undefined ? v2.spec.host : `${v2.spec.host}:${v2.spec.port}` },
      }),
    },
  ],
});

const admission = (uid: string) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid,
    kind: { group: "tenancy.acme.com", version: "v1alpha1", kind: "AcmeNamespace" },
    resource: { group: "tenancy.acme.com", version: "v1alpha1", resource: "acmenamespaces" },
    operation: "CREATE",
    userInfo: { username: "kim" },
    object: {
      apiVersion: "tenancy.acme.com/v1alpha1",
      kind: "AcmeNamespace",
      metadata: { name: "a" },
      spec: { namespaceName: "a-ns", adminUsername: "kim" },
    },
  },
});
const conversionReview = (uid: string) => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "ConversionReview",
  request: {
    uid,
    desiredAPIVersion: "faults.opkit.dev/v2",
    objects: [
      {
        apiVersion: "faults.opkit.dev/v1",
        kind: "Endpoint",
        metadata: { name: "e" },
        spec: { address: "h:80" },
      },
    ],
  },
});

/** Set `value` at a random path of `obj` (a copy). */
function replaceAt(obj: unknown, pick: number, value: unknown): unknown {
  const copy = structuredClone(obj) as Record<string, unknown>;
  const paths: [Record<string, unknown>, string][] = [];
  const walk = (o: unknown) => {
    if (o && typeof o === "object")
      for (const [k, v] of Object.entries(o)) {
        paths.push([o as Record<string, unknown>, k]);
        walk(v);
      }
  };
  walk(copy);
  const [parent, key] = paths[pick % paths.length] as [Record<string, unknown>, string];
  parent[key] = value;
  return copy;
}

/** Hostile bodies built from one valid review. */
function hostile(valid: (uid: string) => object): fc.Arbitrary<[string, Buffer]> {
  const text = (uid: string) => Buffer.from(JSON.stringify(valid(uid)));
  return fc.oneof(
    fc.jsonValue().map((v): [string, Buffer] => ["random JSON", Buffer.from(JSON.stringify(v) ?? "null")]),
    fc.nat().map((n): [string, Buffer] => {
      const b = text("t");
      return ["truncated", b.subarray(0, n % b.length)];
    }),
    fc
      .array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 })
      .map((flips): [string, Buffer] => {
        const b = Buffer.from(text("f"));
        for (const [at, byte] of flips) b[at % b.length] = byte;
        return ["bytes flipped", b];
      }),
    fc
      .tuple(fc.nat(), fc.jsonValue())
      .map(([pick, v]): [string, Buffer] => [
        "a field replaced",
        Buffer.from(JSON.stringify(replaceAt(valid("r"), pick, v))),
      ]),
    fc
      .integer({ min: MAX_BYTES + 1, max: 4 * MAX_BYTES })
      .map((n): [string, Buffer] => ["oversized", Buffer.alloc(n, "{")]),
  );
}

function post(
  port: number,
  ca: string,
  path: string,
  body: Buffer,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "POST",
        ca,
        agent: false,
        headers: { "content-type": "application/json" },
      },
      (res) => {
        let data = "";
        res.on("data", (d: Buffer) => (data += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: data }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("faults: hostile bodies against the webhook server", () => {
  let dir: string;
  let cert: ServingCertificate;
  let server: WebhookServer;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "opkit-fault-webhook-"));
    cert = await writeServingCertificate(dir);
    server = new WebhookServer({
      handlers: [tierDefaulter, endpoints],
      host: "127.0.0.1",
      port: 0,
      certDir: dir,
      maxRequestBytes: MAX_BYTES,
      maxConversionBytes: MAX_BYTES,
    });
    await server.start();
  });
  after(async () => {
    await server?.stop(0);
    await rm(dir, { recursive: true, force: true });
  });

  for (const [name, handler, valid, kind] of [
    ["AdmissionReview", tierDefaulter, admission, "AdmissionReview"],
    ["ConversionReview", endpoints, conversionReview, "ConversionReview"],
  ] as const) {
    it(`${name}: every hostile body gets a 4xx or a well-formed review response; never a 5xx or a crash`, async () => {
      const startedAt = Date.now();
      const n = scaled(300);
      const bodies = fc.sample(hostile(valid), { numRuns: n, seed: SEED });
      const wrong: string[] = [];
      const codes = new Map<number, number>();
      for (const [what, body] of bodies) {
        let r: { status: number; body: string };
        try {
          r = await post(server.port, cert.caPem, handler.path, body);
        } catch (err) {
          wrong.push(`${what}: connection failed: ${(err as Error).message}`);
          continue;
        }
        codes.set(r.status, (codes.get(r.status) ?? 0) + 1);
        if (r.status >= 400 && r.status < 500) continue;
        let ok = false;
        if (r.status === 200) {
          try {
            const review = JSON.parse(r.body) as { kind?: string; response?: { uid?: unknown } };
            ok = review.kind === kind && typeof review.response?.uid === "string";
          } catch {
            ok = false;
          }
        }
        if (!ok)
          wrong.push(`${what}: ${r.status} ${r.body.slice(0, 200)} for ${body.subarray(0, 120).toString()}`);
      }
      const after = await post(
        server.port,
        cert.caPem,
        handler.path,
        Buffer.from(JSON.stringify(valid("last"))),
      );
      report(`webhook-${name}`, {
        load: `${n} hostile bodies (seed ${SEED})`,
        faults: "random JSON, truncated, flipped bytes, replaced fields, oversized",
        lost: wrong.length,
        startedAt,
        extra: `answers ${[...codes].map(([c, k]) => `${c}×${k}`).join(", ")}`,
      });
      assert.deepEqual(wrong, [], "only 4xx or well-formed review responses");
      assert.equal(after.status, 200, "still answering a valid review");
    });
  }
});
