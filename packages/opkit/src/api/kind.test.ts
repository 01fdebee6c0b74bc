import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import fc from "fast-check";
import {
  defineKind,
  defineKindVersions,
  defaultPlural,
  KindDefinitionError,
  pointerToPath,
  type ObjectOf,
} from "./kind.ts";
import { cel, intOrString, listType, nullable, quantity, stringEnum } from "./k8s.ts";

const Memcached = defineKind({
  group: "cache.example.com",
  version: "v1alpha1",
  kind: "Memcached",
  shortNames: ["mc"],
  spec: Type.Object({
    size: Type.Integer({ minimum: 1, maximum: 10, default: 1, description: "pods" }),
    mode: Type.Union([Type.Literal("fast"), Type.Literal("safe")]),
    image: Type.Optional(Type.String({ minLength: 1 })),
    port: Type.Optional(intOrString()),
    memory: Type.Optional(quantity()),
    tags: Type.Optional(listType(Type.Array(Type.String(), { uniqueItems: true }), "set")),
    items: Type.Optional(Type.Array(Type.Object({ name: Type.String({ pattern: "^[a-z]+$" }) }))),
    note: Type.Optional(nullable(Type.String())),
    level: Type.Optional(stringEnum(["low", "high"])),
  }),
  status: Type.Object({ replicas: Type.Optional(Type.Integer()) }),
});
type MemcachedObject = ObjectOf<typeof Memcached>;

describe("defineKind", () => {
  it("is a KindRef with derived names", () => {
    assert.equal(Memcached.apiVersion, "cache.example.com/v1alpha1");
    assert.equal(Memcached.kind, "Memcached");
    assert.equal(Memcached.plural, "memcacheds");
    assert.equal(Memcached.singular, "memcached");
    assert.equal(Memcached.scope, "Namespaced");
  });

  it("new() builds a typed object", () => {
    const obj: MemcachedObject = Memcached.new(
      "m",
      { size: 2, mode: "fast" },
      { namespace: "ns", labels: { a: "b" } },
    );
    assert.deepEqual(obj, {
      apiVersion: "cache.example.com/v1alpha1",
      kind: "Memcached",
      metadata: { name: "m", namespace: "ns", labels: { a: "b" } },
      spec: { size: 2, mode: "fast" },
    });
    assert.deepEqual(Memcached.validate(obj), []);
  });

  it("validate() reports issues with dotted paths", () => {
    const issues = Memcached.validate({
      spec: {
        size: 0,
        mode: "slow",
        image: "",
        port: true,
        memory: "1Gx",
        tags: ["a", "a"],
        items: [{ name: "ok" }, { name: "BAD" }, {}],
        level: "mid",
      },
      status: { replicas: 1.5 },
    });
    const byPath = new Map(issues.map((i) => [i.path, i.message]));
    assert.match(byPath.get("spec.size") ?? "", />= 1/);
    assert.equal(byPath.get("spec.mode"), 'must be one of "fast", "safe"');
    assert.ok(byPath.has("spec.image"));
    assert.ok(byPath.has("spec.port"));
    assert.ok(byPath.has("spec.memory"));
    assert.ok(byPath.has("spec.tags"));
    assert.ok(byPath.has("spec.items[1].name"));
    assert.equal(byPath.get("spec.items[2].name"), "is required");
    assert.equal(byPath.get("spec.level"), 'must be one of "low", "high"');
    assert.ok(byPath.has("status.replicas"));
    assert.ok(!byPath.has("spec.note"));
    assert.deepEqual(Memcached.validate({}), [{ path: "spec", message: "is required" }]);
    assert.deepEqual(Memcached.validate({ spec: { size: 1, mode: "fast", note: null } }), []);
  });

  it("rejects bad names with a message naming the option", () => {
    const spec = Type.Object({});
    assert.throws(() => defineKind({ group: "nodot", version: "v1", kind: "X", spec }), /group "nodot"/);
    assert.throws(() => defineKind({ group: "a.b", version: "1", kind: "X", spec }), /version "1"/);
    assert.throws(() => defineKind({ group: "a.b", version: "v1", kind: "x", spec }), /UpperCamelCase/);
    assert.throws(
      () => defineKind({ group: "a.b", version: "v1", kind: "X", spec, shortNames: ["Bad"] }),
      /shortNames "Bad"/,
    );
    assert.throws(
      () =>
        defineKind({
          group: "a.b",
          version: "v1",
          kind: "X",
          spec,
          scale: { specReplicasPath: ".spec.r", statusReplicasPath: ".status.r" },
        }),
      KindDefinitionError,
    );
  });

  it("defineKindVersions needs exactly one storage version", () => {
    const spec = Type.Object({ a: Type.String() });
    const v1 = defineKind({ group: "a.b", version: "v1", kind: "X", spec, storage: true });
    const v2 = defineKind({ group: "a.b", version: "v2", kind: "X", spec });
    const v2s = defineKind({ group: "a.b", version: "v2", kind: "X", spec, storage: true });
    assert.equal(defineKindVersions([v1, v2]).storageVersion, v1);
    assert.throws(() => defineKindVersions([v1, v2s]), /exactly one version must set storage: true, found 2/);
    assert.throws(
      () => defineKindVersions([v2, defineKind({ group: "a.b", version: "v3", kind: "X", spec })]),
      /found 0/,
    );
    assert.throws(
      () => defineKindVersions([v1, defineKind({ group: "c.d", version: "v2", kind: "X", spec })]),
      /group/,
    );
  });

  it("a deprecated version may keep a misspelt name, with a warning naming the right version", () => {
    const spec = Type.Object({ a: Type.String() });
    const base = { group: "tenancy.acme.com", kind: "Tenant", spec };
    const right = defineKind({ ...base, version: "v1alpha1", storage: true });
    const misspelt = defineKind({
      ...base,
      version: "v1alapha1",
      deprecated: true,
      deprecationWarning: "tenancy.acme.com/v1alapha1 is a misspelling: use tenancy.acme.com/v1alpha1",
    });
    assert.equal(misspelt.apiVersion, "tenancy.acme.com/v1alapha1");
    assert.equal(misspelt.deprecated, true);
    assert.equal(defineKindVersions([right, misspelt]).storageVersion, right);
    // Not deprecated: still the typo guard.
    assert.throws(
      () => defineKind({ ...base, version: "v1alapha1" }),
      /version "v1alapha1" must look like v1, v1beta1 or v2alpha3 \(only a deprecated version/,
    );
    // Deprecated, but not a name the API server accepts.
    assert.throws(
      () => defineKind({ ...base, version: "V1_alpha", deprecated: true }),
      /version "V1_alpha" must be a DNS label/,
    );
    assert.throws(
      () => defineKind({ ...base, version: "v2", deprecationWarning: "old" }),
      /deprecationWarning needs deprecated: true/,
    );
    assert.throws(
      () => defineKind({ ...base, version: "v2", deprecated: true, deprecationWarning: "x".repeat(257) }),
      /257 characters; the API server allows 256/,
    );
  });

  it("cel() appends rules", () => {
    const s = cel(cel(Type.Object({}), [{ rule: "a" }]), [{ rule: "b" }]) as unknown as Record<
      string,
      unknown
    >;
    assert.deepEqual(s["x-kubernetes-validations"], [{ rule: "a" }, { rule: "b" }]);
  });

  it("pointerToPath and defaultPlural", () => {
    assert.equal(pointerToPath("spec", "/a/0/b~1c"), 'spec.a[0]["b/c"]');
    assert.equal(defaultPlural("Policy"), "policies");
    assert.equal(defaultPlural("Ingress"), "ingresses");
    assert.equal(defaultPlural("Gateway"), "gateways");
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.nat({ max: 50 }), fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/)), { maxLength: 5 }),
        (tokens) => {
          const path = pointerToPath("spec", tokens.map((t) => `/${t}`).join(""));
          assert.equal((path.match(/\[/g) ?? []).length, tokens.filter((t) => typeof t === "number").length);
        },
      ),
    );
  });
});
