/** Admission handlers, review decoding and conversion as pure logic: no server, no API server. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import * as Type from "typebox/type";
import { defineKind, type KubeObject } from "../index.ts";
import { FakeClock } from "../clock/index.ts";
import {
  allow,
  conversion,
  decodeAdmissionReview,
  decodeConversionReview,
  defaulter,
  deny,
  denyIssues,
  jsonPatch,
  MalformedReviewError,
  roundTrip,
  validator,
  webhookConfigurations,
  ValidationError,
  WebhookDefinitionError,
  type AdmissionRequest,
} from "./index.ts";

const Thing = defineKind({
  group: "unit.opkit.dev",
  version: "v1",
  kind: "Thing",
  spec: Type.Object({
    pattern: Type.String(),
    size: Type.Optional(Type.Integer()),
    tags: Type.Optional(Type.Record(Type.String(), Type.String())),
  }),
});
type ThingObject = ReturnType<typeof Thing.new>;

function request(op: AdmissionRequest["operation"], obj?: KubeObject, old?: KubeObject): AdmissionRequest {
  return {
    uid: "u-1",
    kind: { group: "unit.opkit.dev", version: "v1", kind: "Thing" },
    resource: { group: "unit.opkit.dev", version: "v1", resource: "things" },
    operation: op,
    userInfo: { username: "alice" },
    object: obj ?? null,
    oldObject: old ?? null,
    namespace: "ns",
    name: obj?.metadata.name ?? old?.metadata.name,
  };
}

const thing = (pattern: string, extra: Partial<ThingObject["spec"]> = {}): ThingObject =>
  Thing.new("t", { pattern, ...extra }, { namespace: "ns" });

const patternValidator = validator(Thing, {
  create: (obj) => {
    try {
      new RegExp(obj.spec.pattern);
    } catch (err) {
      throw new ValidationError(`is not a valid regular expression: ${(err as Error).message}`, {
        field: "spec.pattern",
      });
    }
    return obj.spec.pattern === ".*" ? allow(["matches every Job"]) : undefined;
  },
  update: (oldObj, newObj) =>
    oldObj.spec.size !== undefined && newObj.spec.size === undefined
      ? deny("cannot be removed once set", { field: "spec.size" })
      : allow(),
});

describe("validator", () => {
  it("allows, with warnings, and derives the operations from the functions given", async () => {
    assert.deepEqual(patternValidator.operations, ["CREATE", "UPDATE"]);
    const r = await patternValidator.admit(request("CREATE", thing(".*")));
    assert.deepEqual(r, { uid: "u-1", allowed: true, warnings: ["matches every Job"] });
  });

  it("denies with a message naming the field and a cause for it", async () => {
    const r = await patternValidator.admit(request("CREATE", thing("job-(")));
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 403);
    assert.match(
      r.status?.message ?? "",
      /^spec\.pattern: is not a valid regular expression: .*Unterminated group/,
    );
    assert.equal(r.status?.details?.causes?.[0]?.field, "spec.pattern");
  });

  it("gets old and new object on update; an operation without a function is allowed uncalled", async () => {
    const r = await patternValidator.admit(request("UPDATE", thing("a"), thing("a", { size: 2 })));
    assert.equal(r.allowed, false);
    assert.equal(r.status?.message, "spec.size: cannot be removed once set");
    assert.equal((await patternValidator.admit(request("DELETE", undefined, thing("(")))).allowed, true);
  });

  it("an exception denies with its message and never escapes", async () => {
    const boom = validator(Thing, {
      create: () => {
        throw new TypeError("cannot read properties of undefined");
      },
      delete: async () => Promise.reject(new Error("lookup failed")),
    });
    const r = await boom.admit(request("CREATE", thing("a")));
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 500);
    assert.equal(r.status?.message, "webhook handler failed: cannot read properties of undefined");
    const d = await boom.admit(request("DELETE", undefined, thing("a")));
    assert.equal(d.status?.message, "webhook handler failed: lookup failed");
  });

  it("a handler that does not answer within its timeout is denied (injected clock)", async () => {
    const clock = new FakeClock();
    let aborted = false;
    const slow = validator(
      Thing,
      {
        create: (_obj, ctx) =>
          new Promise(() => {
            ctx.signal.addEventListener("abort", () => (aborted = true));
          }),
      },
      { timeoutSeconds: 3 },
    );
    const pending = slow.admit(request("CREATE", thing("a")), { clock, timeoutMs: 60_000 });
    await Promise.resolve();
    clock.advance(2999);
    clock.advance(1);
    const r = await pending;
    assert.equal(r.allowed, false);
    assert.equal(r.status?.message, "webhook handler did not answer within 3s");
    assert.ok(aborted, "the handler's signal was aborted");
  });

  it("refuses a request for another kind (a misconfigured rule) instead of validating it", async () => {
    const req = request("CREATE", thing("a"));
    req.kind = { group: "apps", version: "v1", kind: "Deployment" };
    const r = await patternValidator.admit(req);
    assert.equal(r.allowed, false);
    assert.match(r.status?.message ?? "", /serves unit.opkit.dev\/v1 Thing but was sent apps\/v1 Deployment/);
  });

  it("is callable from a reconcile: the same verdicts without a request", async () => {
    assert.equal((await patternValidator.validate(thing("ok"))).allowed, true);
    const bad = await patternValidator.validate(thing("("));
    assert.equal(bad.allowed, false);
    assert.equal(bad.issues?.[0]?.path, "spec.pattern");
    const upd = await patternValidator.validate(thing("a"), thing("a", { size: 1 }));
    assert.equal(upd.message, "spec.size: cannot be removed once set");
    // Schema issues from the kind itself become a verdict too.
    const issues = Thing.validate({ spec: { pattern: 3 } });
    assert.equal(denyIssues(issues).allowed, false);
    assert.match(denyIssues(issues).message ?? "", /spec\.pattern/);
  });

  it("rejects bad definitions with the option named", () => {
    assert.throws(() => validator(Thing, {}), /give at least one of create, update, delete/);
    assert.throws(
      () => validator(Thing, { create: () => undefined }, { timeoutSeconds: 31 }),
      /timeoutSeconds 31/,
    );
    assert.throws(
      () => validator(Thing, { create: () => undefined }, { name: "short.name" }),
      WebhookDefinitionError,
    );
    assert.throws(
      () => validator(Thing, { create: () => undefined }, { path: "no-slash" }),
      /must start with "\/"/,
    );
  });
});

describe("defaulter", () => {
  const withDefaults = defaulter(Thing, (obj) => {
    obj.spec.size ??= 1;
    obj.spec.tags = { ...obj.spec.tags, "a/b~c": "escaped" };
    delete obj.metadata.annotations?.["remove-me"];
  });

  it("answers with the JSON Patch from the object received to the defaulted one", async () => {
    const original = thing("x");
    original.metadata.annotations = { "remove-me": "1", keep: "2" };
    const r = await withDefaults.admit(request("CREATE", original));
    assert.equal(r.allowed, true);
    assert.equal(r.patchType, "JSONPatch");
    const ops = JSON.parse(Buffer.from(r.patch ?? "", "base64").toString()) as jsonpatch.Operation[];
    assert.ok(
      ops.some((o) => o.path === "/spec/tags"),
      JSON.stringify(ops),
    );
    const patched = jsonpatch.applyPatch(structuredClone(original), ops).newDocument;
    assert.deepEqual(patched, await withDefaults.applyDefaults(original));
    assert.equal(patched.spec.size, 1);
    assert.equal(patched.spec.tags?.["a/b~c"], "escaped");
    assert.deepEqual(patched.metadata.annotations, { keep: "2" });
    assert.equal(original.spec.size, undefined, "the input is not changed");
  });

  it("sends no patch when nothing changes, and denies when the function throws", async () => {
    const done = thing("x", { size: 3, tags: { "a/b~c": "escaped" } });
    const r = await withDefaults.admit(request("UPDATE", done, done));
    assert.deepEqual(r, { uid: "u-1", allowed: true });
    const failing = defaulter(Thing, () => {
      throw new ValidationError("size cannot be defaulted", { field: "spec.size" });
    });
    const f = await failing.admit(request("CREATE", thing("x")));
    assert.equal(f.allowed, false);
    assert.equal(f.status?.message, "spec.size: size cannot be defaulted");
  });

  it("jsonPatch: a property test — applying the diff to the first value gives the second", () => {
    // "__proto__" keys are left out: fast-json-patch's applyPatch (used here to check) refuses them on
    // purpose; the API server applies the patch in Go, where the key is ordinary.
    const json = fc
      .jsonValue({ maxDepth: 3 })
      .filter((v) => typeof v === "object" && v !== null && !Array.isArray(v))
      .filter((v) => !JSON.stringify(v).includes('"__proto__"'));
    fc.assert(
      fc.property(json, json, (a, b) => {
        const ops = jsonPatch(a, b);
        const out = jsonpatch.applyPatch(structuredClone(a), ops).newDocument;
        assert.deepEqual(JSON.parse(JSON.stringify(out)), JSON.parse(JSON.stringify(b)));
      }),
      { numRuns: 300 },
    );
  });
});

describe("review decoding", () => {
  const good = JSON.stringify({
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: request("CREATE", thing("a")),
  });

  it("decodes a valid AdmissionReview v1", () => {
    const req = decodeAdmissionReview(good);
    assert.equal(req.uid, "u-1");
    assert.equal(req.operation, "CREATE");
  });

  const cases: [string, string, RegExp][] = [
    ["empty", "", /request body is empty/],
    ["not JSON", "{nope", /not valid JSON/],
    ["truncated", good.slice(0, good.length - 10), /not valid JSON/],
    ["an array", "[]", /must be a JSON object/],
    [
      "v1beta1",
      good.replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1"),
      /speaks AdmissionReview admission.k8s.io\/v1 only/,
    ],
    [
      "another kind",
      good.replace('"kind":"AdmissionReview"', '"kind":"ConversionReview"'),
      /accepts a AdmissionReview/,
    ],
    [
      "no request",
      JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }),
      /request is missing/,
    ],
    ["no uid", good.replace('"uid":"u-1"', '"uid":""'), /request\.uid must be a non-empty string/],
    [
      "bad operation",
      good.replace('"operation":"CREATE"', '"operation":"PATCH"'),
      /operation "PATCH" is not one of/,
    ],
    [
      "CREATE without object",
      JSON.stringify({
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: request("CREATE"),
      }),
      /object is required for CREATE/,
    ],
  ];
  for (const [name, body, message] of cases) {
    it(`refuses ${name} with a clear message`, () => {
      assert.throws(
        () => decodeAdmissionReview(body),
        (err: unknown) => {
          assert.ok(err instanceof MalformedReviewError);
          assert.match(err.message, message);
          return true;
        },
      );
    });
  }

  it("decodes ConversionReview v1 and refuses a broken one", () => {
    const req = decodeConversionReview(
      JSON.stringify({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "ConversionReview",
        request: {
          uid: "c",
          desiredAPIVersion: "g.example/v2",
          objects: [{ apiVersion: "g.example/v1", kind: "K", metadata: {} }],
        },
      }),
    );
    assert.equal(req.objects.length, 1);
    assert.throws(
      () =>
        decodeConversionReview(
          JSON.stringify({
            apiVersion: "apiextensions.k8s.io/v1",
            kind: "ConversionReview",
            request: { uid: "c", desiredAPIVersion: "v2", objects: [] },
          }),
        ),
      /desiredAPIVersion "v2" must be group\/version/,
    );
  });
});

describe("conversion (hub and spoke)", () => {
  const V1 = defineKind({
    group: "conv.opkit.dev",
    version: "v1",
    kind: "Port",
    spec: Type.Object({ address: Type.String() }),
  });
  const V2 = defineKind({
    group: "conv.opkit.dev",
    version: "v2",
    kind: "Port",
    storage: true,
    spec: Type.Object({ host: Type.String(), port: Type.Optional(Type.Integer()) }),
  });
  const V3 = defineKind({
    group: "conv.opkit.dev",
    version: "v3",
    kind: "Port",
    spec: Type.Object({ endpoint: Type.Object({ host: Type.String(), port: Type.Integer() }) }),
  });
  const conv = conversion({
    hub: V2,
    spokes: [
      {
        kind: V1,
        toHub: (o) => {
          const m = /^(.*):(\d+)$/.exec(o.spec.address);
          return { spec: m ? { host: m[1] ?? "", port: Number(m[2]) } : { host: o.spec.address } };
        },
        fromHub: (h) => ({
          spec: { address: h.spec.port === undefined ? h.spec.host : `${h.spec.host}:${h.spec.port}` },
        }),
      },
      {
        kind: V3,
        // v3 requires a port; "no port" is kept in an annotation so the round trip is exact.
        toHub: (o) => {
          const annotations = { ...o.metadata.annotations };
          const noPort = annotations["conv.opkit.dev/no-port"] === "true";
          delete annotations["conv.opkit.dev/no-port"];
          return {
            metadata: { annotations },
            spec: noPort
              ? { host: o.spec.endpoint.host }
              : { host: o.spec.endpoint.host, port: o.spec.endpoint.port },
          };
        },
        fromHub: (h) => ({
          metadata:
            h.spec.port === undefined
              ? { annotations: { ...h.metadata.annotations, "conv.opkit.dev/no-port": "true" } }
              : { annotations: h.metadata.annotations },
          spec: { endpoint: { host: h.spec.host, port: h.spec.port ?? 0 } },
        }),
      },
    ],
  });

  it("converts spoke to spoke through the hub, keeping metadata and setting apiVersion", () => {
    const v1 = V1.new("p", { address: "db:5432" }, { namespace: "ns", labels: { a: "b" } });
    v1.metadata.uid = "uid-1";
    const v3 = conv.convert(v1, "conv.opkit.dev/v3");
    assert.equal(v3.apiVersion, "conv.opkit.dev/v3");
    assert.equal(v3.kind, "Port");
    assert.deepEqual((v3 as ReturnType<typeof V3.new>).spec, { endpoint: { host: "db", port: 5432 } });
    assert.equal(v3.metadata.uid, "uid-1");
    assert.deepEqual(v3.metadata.labels, { a: "b" });
    assert.equal(conv.convert(v1, "conv.opkit.dev/v1"), v1, "same version: unchanged");
  });

  it("is round-trip safe for every spoke (property test)", () => {
    const host = fc.stringMatching(/^[a-z][a-z0-9.-]{0,20}$/);
    const port = fc.option(fc.integer({ min: 0, max: 65535 }), { nil: undefined });
    fc.assert(
      fc.property(host, port, (h, p) => {
        const hub = V2.new("x", p === undefined ? { host: h } : { host: h, port: p }, { namespace: "ns" });
        for (const via of ["conv.opkit.dev/v1", "conv.opkit.dev/v3"])
          assert.deepEqual(roundTrip(conv, hub, via), hub);
        const v1 = conv.convert(hub, "conv.opkit.dev/v1");
        assert.deepEqual(roundTrip(conv, v1, "conv.opkit.dev/v3"), v1);
      }),
      { numRuns: 300 },
    );
  });

  it("answers a review; a failure names the object and versions, not a crash", () => {
    const ok = conv.review({
      uid: "r",
      desiredAPIVersion: "conv.opkit.dev/v1",
      objects: [V2.new("a", { host: "h", port: 1 })],
    });
    assert.equal(ok.result.status, "Success");
    assert.equal((ok.convertedObjects[0] as ReturnType<typeof V1.new>).spec.address, "h:1");
    const bad = conv.review({
      uid: "r",
      desiredAPIVersion: "conv.opkit.dev/v9",
      objects: [V2.new("a", { host: "h" })],
    });
    assert.equal(bad.result.status, "Failure");
    assert.match(
      bad.result.message ?? "",
      /Port a from conv.opkit.dev\/v2 to conv.opkit.dev\/v9: conv.opkit.dev\/v9 is not one of/,
    );
    const throwing = conversion({
      hub: V2,
      spokes: [
        {
          kind: V1,
          toHub: () => ({ spec: { host: "" } }),
          fromHub: () => {
            throw new Error("no address");
          },
        },
      ],
    });
    const t = throwing.review({
      uid: "r",
      desiredAPIVersion: "conv.opkit.dev/v1",
      objects: [V2.new("a", { host: "h" })],
    });
    assert.match(t.result.message ?? "", /fromHub of v1 failed for Port a: no address/);
  });

  it("refuses a spoke of another kind", () => {
    assert.throws(
      () =>
        conversion({
          hub: V2,
          spokes: [
            {
              kind: Thing,
              toHub: () => ({ spec: { host: "" } }),
              fromHub: () => ({ spec: { pattern: "" } }),
            },
          ],
        }),
      /is not a version of conv.opkit.dev Port/,
    );
  });
});

describe("webhook configurations", () => {
  const defaults = defaulter(Thing, () => undefined, { failurePolicy: "Ignore", timeoutSeconds: 5 });
  const V2 = defineKind({
    group: "unit.opkit.dev",
    version: "v2",
    kind: "Thing",
    storage: true,
    spec: Type.Object({}),
  });
  const conv = conversion({
    hub: V2,
    spokes: [{ kind: Thing, toHub: () => ({ spec: {} }), fromHub: () => ({ spec: { pattern: "" } }) }],
  });

  it("derives rules, policies and client config from the handlers (URL with caBundle)", () => {
    const c = webhookConfigurations([patternValidator, defaults, conv], {
      name: "op",
      target: { url: "https://127.0.0.1:9443/", caBundle: "PEM" },
    });
    const v = c.validating as KubeObject & { webhooks: Record<string, unknown>[] };
    assert.equal(v.kind, "ValidatingWebhookConfiguration");
    assert.deepEqual(v.webhooks[0], {
      name: "vthing-v1.unit.opkit.dev",
      admissionReviewVersions: ["v1"],
      clientConfig: {
        url: "https://127.0.0.1:9443/validate-unit-opkit-dev-v1-thing",
        caBundle: Buffer.from("PEM").toString("base64"),
      },
      rules: [
        {
          apiGroups: ["unit.opkit.dev"],
          apiVersions: ["v1"],
          resources: ["things"],
          operations: ["CREATE", "UPDATE"],
          scope: "Namespaced",
        },
      ],
      matchPolicy: "Equivalent",
      failurePolicy: "Fail",
      sideEffects: "None",
      timeoutSeconds: 10,
    });
    const m = c.mutating as KubeObject & { webhooks: Record<string, unknown>[] };
    assert.equal(m.webhooks[0]?.failurePolicy, "Ignore");
    assert.equal(m.webhooks[0]?.timeoutSeconds, 5);
    assert.equal(m.webhooks[0]?.reinvocationPolicy, "Never");
    assert.deepEqual(c.conversions, [
      {
        crdName: "things.unit.opkit.dev",
        conversion: {
          strategy: "Webhook",
          webhook: {
            clientConfig: {
              url: "https://127.0.0.1:9443/convert-unit-opkit-dev-thing",
              caBundle: Buffer.from("PEM").toString("base64"),
            },
            conversionReviewVersions: ["v1"],
          },
        },
      },
    ]);
  });

  it("points at a Service in the cluster; refuses plain http and duplicate paths", () => {
    const c = webhookConfigurations([patternValidator], {
      name: "op",
      target: { service: { name: "op-webhook", namespace: "op-system" } },
    });
    const v = c.validating as KubeObject & { webhooks: { clientConfig: unknown }[] };
    assert.deepEqual(v.webhooks[0]?.clientConfig, {
      service: {
        name: "op-webhook",
        namespace: "op-system",
        path: "/validate-unit-opkit-dev-v1-thing",
        port: 443,
      },
    });
    assert.equal(c.mutating, undefined);
    assert.throws(
      () => webhookConfigurations([patternValidator], { name: "op", target: { url: "http://x" } }),
      /must start with https:\/\//,
    );
    assert.throws(
      () =>
        webhookConfigurations([patternValidator, patternValidator], {
          name: "op",
          target: { url: "https://x" },
        }),
      /two webhooks use path/,
    );
  });
});
