import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import { defineKind, defineKindVersions } from "../api/kind.ts";
import { cel } from "../api/k8s.ts";
import { crdFor } from "./crd.ts";
import {
  checkCompatibility,
  CompatConfigError,
  formatFinding,
  type CompatOptions,
  type CompatRule,
} from "./compat.ts";
import type { CustomResourceDefinition, JSONSchemaProps } from "./crd-types.ts";

const NAME = "widgets.t.example.com";

/** A one-version CRD generated from a spec schema, as `opkit generate` writes it. */
function crdOf(spec: Parameters<typeof Type.Object>[0], version = "v1"): CustomResourceDefinition {
  return crdFor(defineKind({ group: "t.example.com", version, kind: "Widget", spec: Type.Object(spec) }));
}

/** The rules and paths of the findings between two specs. */
function breaks(
  before: Parameters<typeof Type.Object>[0],
  after: Parameters<typeof Type.Object>[0],
  options?: CompatOptions,
) {
  const report = checkCompatibility([crdOf(before)], [crdOf(after)], options);
  return report.breaking.map((f) => ({ rule: f.rule, path: f.path, version: f.version }));
}

function only(rule: CompatRule, path: string) {
  return [{ rule, path, version: "v1" }];
}

describe("checkCompatibility: additive changes pass", () => {
  it("passes identical CRDs, a new optional field, loosened bounds, a new enum value and a changed description", () => {
    assert.deepEqual(breaks({ a: Type.String() }, { a: Type.String() }), []);
    assert.deepEqual(
      breaks({ a: Type.String() }, { a: Type.String(), b: Type.Optional(Type.Integer()) }),
      [],
    );
    assert.deepEqual(
      breaks(
        { n: Type.Integer({ minimum: 1, maximum: 5 }) },
        { n: Type.Integer({ minimum: 0, maximum: 9 }) },
      ),
      [],
    );
    assert.deepEqual(
      breaks(
        { e: Type.Union([Type.Literal("a")]) },
        { e: Type.Union([Type.Literal("a"), Type.Literal("b")]) },
      ),
      [],
    );
    assert.deepEqual(
      breaks({ s: Type.String({ description: "old" }) }, { s: Type.String({ description: "new" }) }),
      [],
    );
    assert.deepEqual(breaks({ s: Type.String({ pattern: "^a" }) }, { s: Type.String() }), []);
  });

  it("passes a new required field that has a default, and a new transition rule", () => {
    assert.deepEqual(breaks({ a: Type.String() }, { a: Type.String(), b: Type.Integer({ default: 3 }) }), []);
    assert.deepEqual(
      breaks(
        { a: Type.String() },
        { a: cel(Type.String(), [{ rule: "self == oldSelf", message: "immutable" }]) },
      ),
      [],
    );
    assert.deepEqual(
      breaks(
        { a: Type.String() },
        { a: cel(Type.String(), [{ rule: "self.size() < 5", optionalOldSelf: true }]) },
      ),
      [],
    );
  });

  it("passes a new CRD and a new version", () => {
    assert.deepEqual(checkCompatibility([], [crdOf({ a: Type.String() })]).findings, []);
    const two = crdFor(
      defineKindVersions([
        defineKind({
          group: "t.example.com",
          version: "v1",
          kind: "Widget",
          spec: Type.Object({ a: Type.String() }),
          storage: true,
        }),
        defineKind({
          group: "t.example.com",
          version: "v2",
          kind: "Widget",
          spec: Type.Object({ a: Type.String() }),
          storage: false,
        }),
      ]),
    );
    assert.deepEqual(checkCompatibility([crdOf({ a: Type.String() })], [two]).findings, []);
  });
});

describe("checkCompatibility: each breaking change is named with its version and path", () => {
  it("a removed field, with a rename hint when a new field has the same schema", () => {
    assert.deepEqual(
      breaks({ a: Type.String(), b: Type.Integer() }, { a: Type.String() }),
      only("field-removed", ".spec.b"),
    );
    const [renamed] = checkCompatibility(
      [crdOf({ size: Type.Integer() })],
      [crdOf({ replicas: Type.Integer() })],
    ).breaking;
    assert.match(renamed?.message ?? "", /renamed to "replicas"/);
  });

  it("a nested removed field inside arrays and maps", () => {
    assert.deepEqual(
      breaks(
        { l: Type.Array(Type.Object({ x: Type.String(), y: Type.String() })) },
        { l: Type.Array(Type.Object({ x: Type.String() })) },
      ),
      only("field-removed", ".spec.l[].y"),
    );
    assert.deepEqual(
      breaks(
        { m: Type.Record(Type.String(), Type.Object({ x: Type.String(), y: Type.String() })) },
        { m: Type.Record(Type.String(), Type.Object({ x: Type.String() })) },
      ),
      only("field-removed", ".spec.m[*].y"),
    );
  });

  it("a changed type, without findings below it", () => {
    assert.deepEqual(breaks({ a: Type.String() }, { a: Type.Integer() }), only("type-changed", ".spec.a"));
    assert.deepEqual(
      breaks({ a: Type.Object({ x: Type.String() }) }, { a: Type.String() }),
      only("type-changed", ".spec.a"),
    );
  });

  it("a field made required without a default", () => {
    assert.deepEqual(
      breaks({ a: Type.String(), b: Type.Optional(Type.String()) }, { a: Type.String(), b: Type.String() }),
      only("required-added", ".spec.b"),
    );
    assert.deepEqual(
      breaks({ a: Type.String() }, { a: Type.String(), b: Type.String() }),
      only("required-added", ".spec.b"),
    );
  });

  it("an enum value removed, and an enum where there was none", () => {
    assert.deepEqual(
      breaks(
        { e: Type.Union([Type.Literal("a"), Type.Literal("b")]) },
        { e: Type.Union([Type.Literal("a")]) },
      ),
      only("enum-value-removed", ".spec.e"),
    );
    assert.deepEqual(
      breaks({ e: Type.String() }, { e: Type.Union([Type.Literal("a")]) }),
      only("enum-added", ".spec.e"),
    );
  });

  it("each tighter bound", () => {
    const cases: [JSONSchemaProps, JSONSchemaProps][] = [
      [{ minimum: 1 }, { minimum: 2 }],
      [{ maximum: 9 }, { maximum: 8 }],
      [{}, { maximum: 8 }],
      [{ maxLength: 9 }, { maxLength: 8 }],
      [{ minLength: 1 }, { minLength: 2 }],
      [{ maxItems: 9 }, { maxItems: 3 }],
      [{ minimum: 1 }, { minimum: 1, exclusiveMinimum: true }],
    ];
    for (const [was, is] of cases) {
      const report = checkCompatibility([withSpec(was)], [withSpec(is)]);
      assert.deepEqual(
        report.breaking.map((f) => [f.rule, f.path]),
        [["bound-tightened", ".spec.f"]],
        JSON.stringify([was, is]),
      );
    }
  });

  it("any change of pattern or format", () => {
    assert.deepEqual(
      breaks({ s: Type.String({ pattern: "^a" }) }, { s: Type.String({ pattern: "^b" }) }),
      only("pattern-changed", ".spec.s"),
    );
    assert.deepEqual(
      breaks({ s: Type.String() }, { s: Type.String({ pattern: "^b" }) }),
      only("pattern-changed", ".spec.s"),
    );
    assert.deepEqual(
      breaks({ s: Type.String({ format: "date-time" }) }, { s: Type.String({ format: "date" }) }),
      only("format-changed", ".spec.s"),
    );
    assert.deepEqual(
      breaks({ s: Type.String({ format: "date" }) }, { s: Type.String() }),
      only("format-changed", ".spec.s"),
    );
  });

  it("a new CEL rule that is not a transition rule, and a changed rule", () => {
    assert.deepEqual(
      breaks({ a: Type.String() }, { a: cel(Type.String(), [{ rule: "self.size() < 5" }]) }),
      only("cel-rule-added", ".spec.a"),
    );
    assert.deepEqual(
      breaks(
        { a: cel(Type.String(), [{ rule: "self.size() < 9" }]) },
        { a: cel(Type.String(), [{ rule: "self.size() < 5" }]) },
      ),
      only("cel-rule-added", ".spec.a"),
    );
  });

  it("notes ratcheting for the declared minimum Kubernetes version, but only from 1.33 and not for required fields", () => {
    const tighter = (min?: string) =>
      checkCompatibility(
        [crdOf({ n: Type.Integer({ maximum: 9 }), r: Type.Optional(Type.String()) })],
        [crdOf({ n: Type.Integer({ maximum: 5 }), r: Type.String() })],
        {
          minKubernetesVersion: min,
        },
      ).breaking;
    const on = tighter("1.33");
    assert.match(on.find((f) => f.rule === "bound-tightened")?.ratcheting ?? "", /1\.33.*stay writable/);
    assert.equal(on.find((f) => f.rule === "required-added")?.ratcheting, undefined);
    assert.equal(
      on.length,
      2,
      "ratcheting does not make a tightening pass: clients writing old values still break",
    );
    assert.equal(tighter("1.32")[0]?.ratcheting, undefined);
    assert.equal(tighter(undefined)[0]?.ratcheting, undefined);
  });

  it("undeclared fields no longer kept, nullable removed, list type changed", () => {
    assert.deepEqual(
      checkCompatibility(
        [withSpec({ type: "object", "x-kubernetes-preserve-unknown-fields": true })],
        [withSpec({ type: "object" })],
      ).breaking.map((f) => f.rule),
      ["unknown-fields-pruned"],
    );
    assert.deepEqual(
      checkCompatibility([withSpec({ nullable: true })], [withSpec({})]).breaking.map((f) => f.rule),
      ["nullable-removed"],
    );
    assert.deepEqual(
      checkCompatibility(
        [withSpec({ type: "array", items: { type: "string" }, "x-kubernetes-list-type": "atomic" })],
        [withSpec({ type: "array", items: { type: "string" }, "x-kubernetes-list-type": "set" })],
      ).breaking.map((f) => f.rule),
      ["list-type-changed"],
    );
  });
});

describe("checkCompatibility: versions", () => {
  const v = (
    name: string,
    served: boolean,
    storage: boolean,
    spec: JSONSchemaProps = objectSpec({ a: { type: "string" } }),
  ) => ({
    name,
    served,
    storage,
    schema: { openAPIV3Schema: { type: "object" as const, properties: { spec } } },
  });
  const crd = (
    versions: ReturnType<typeof v>[],
    strategy?: "None" | "Webhook",
  ): CustomResourceDefinition => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: NAME },
    spec: {
      group: "t.example.com",
      names: { kind: "Widget", plural: "widgets" },
      scope: "Namespaced",
      versions,
      ...(strategy ? { conversion: { strategy } } : {}),
    },
  });

  it("a served version dropped or no longer served", () => {
    const rules = (before: CustomResourceDefinition, after: CustomResourceDefinition) =>
      checkCompatibility([before], [after], { storedVersions: { [NAME]: ["v2"] } }).breaking.map(
        (f) => `${f.version} ${f.rule}`,
      );
    assert.deepEqual(rules(crd([v("v1", true, false), v("v2", true, true)]), crd([v("v2", true, true)])), [
      "v1 version-removed",
    ]);
    assert.deepEqual(
      rules(
        crd([v("v1", true, false), v("v2", true, true)]),
        crd([v("v1", false, false), v("v2", true, true)]),
      ),
      ["v1 version-unserved"],
    );
  });

  it("a version dropped while status.storedVersions may hold it, from the cluster or from the snapshot", () => {
    const before = crd([v("v1", true, true), v("v2", true, false)]);
    const after = crd([v("v2", true, true)], "Webhook");
    const fromSnapshot = checkCompatibility([before], [after]).breaking;
    assert.deepEqual(
      fromSnapshot.map((f) => `${f.version} ${f.rule}`),
      ["v1 stored-version-removed"],
    );
    assert.match(fromSnapshot[0]?.message ?? "", /opkit migrate/);
    const migrated = checkCompatibility([before], [after], { storedVersions: { [NAME]: ["v2"] } }).breaking;
    assert.deepEqual(
      migrated.map((f) => `${f.version} ${f.rule}`),
      ["v1 version-removed"],
    );
  });

  it("the storage version changed without a conversion webhook when the schemas differ", () => {
    const before = crd([v("v1", true, true), v("v2", true, false, objectSpec({ b: { type: "string" } }))]);
    const moved = [v("v1", true, false), v("v2", true, true, objectSpec({ b: { type: "string" } }))];
    assert.deepEqual(
      checkCompatibility([before], [crd(moved)]).breaking.map((f) => f.rule),
      ["storage-changed-without-conversion"],
    );
    assert.deepEqual(checkCompatibility([before], [crd(moved, "Webhook")]).breaking, []);
    const same = crd([v("v1", true, true), v("v2", true, false)]);
    assert.deepEqual(
      checkCompatibility([same], [crd([v("v1", true, false), v("v2", true, true)])]).breaking,
      [],
      "identical schemas need no conversion",
    );
  });

  it("a CRD removed and a scope changed", () => {
    assert.deepEqual(
      checkCompatibility([crd([v("v1", true, true)])], []).breaking.map((f) => f.rule),
      ["crd-removed"],
    );
    const cluster = crd([v("v1", true, true)]);
    cluster.spec.scope = "Cluster";
    assert.deepEqual(
      checkCompatibility([crd([v("v1", true, true)])], [cluster]).breaking.map((f) => f.rule),
      ["scope-changed"],
    );
  });
});

describe("checkCompatibility: intended breaks", () => {
  it("passes a break recorded with its reason, and still lists it", () => {
    const report = checkCompatibility(
      [crdOf({ a: Type.String(), b: Type.String() })],
      [crdOf({ a: Type.String() })],
      {
        allowed: [
          { crd: NAME, rule: "field-removed", path: ".spec.b", reason: "b never worked; announced in 0.3" },
        ],
      },
    );
    assert.deepEqual(report.breaking, []);
    assert.equal(report.findings.length, 1);
    assert.match(
      formatFinding(report.findings[0]!),
      /widgets\.t\.example\.com v1 \.spec\.b: field-removed: .*\[allowed: b never worked/,
    );
  });

  it("does not pass a break recorded for another path, and refuses an empty reason or an unknown rule", () => {
    const allowedElsewhere = checkCompatibility(
      [crdOf({ a: Type.String(), b: Type.String() })],
      [crdOf({ a: Type.String() })],
      {
        allowed: [{ crd: NAME, rule: "field-removed", path: ".spec.c", reason: "other" }],
      },
    );
    assert.equal(allowedElsewhere.breaking.length, 1);
    assert.throws(
      () => checkCompatibility([], [], { allowed: [{ crd: NAME, rule: "field-removed", reason: " " }] }),
      CompatConfigError,
    );
    assert.throws(
      () =>
        checkCompatibility([], [], {
          allowed: [{ crd: NAME, rule: "field-gone" as CompatRule, reason: "x" }],
        }),
      /unknown rule "field-gone"/,
    );
  });
});

function objectSpec(properties: Record<string, JSONSchemaProps>): JSONSchemaProps {
  return { type: "object", properties };
}

/** A hand-written CRD whose spec has one field `f` with the given schema (type defaults to integer). */
function withSpec(f: JSONSchemaProps): CustomResourceDefinition {
  const field: JSONSchemaProps = { type: "integer", ...f };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: NAME },
    spec: {
      group: "t.example.com",
      names: { kind: "Widget", plural: "widgets" },
      scope: "Namespaced",
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: "object", properties: { spec: objectSpec({ f: field }) } } },
        },
      ],
    },
  };
}
