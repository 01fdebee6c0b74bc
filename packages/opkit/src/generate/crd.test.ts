import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import { type TSchema } from "typebox";
import { parse } from "yaml";
import { defineKind, defineKindVersions } from "../api/kind.ts";
import {
  cel,
  embeddedResource,
  intOrString,
  listType,
  mapType,
  nullable,
  preserveUnknownFields,
  quantity,
  QUANTITY_PATTERN,
} from "../api/k8s.ts";
import { crdFor, crdsFor, crdYaml, schemaFor, SchemaError } from "./crd.ts";
import type { JSONSchemaProps } from "./crd-types.ts";
import * as batchv1 from "../api/schemas/batch/v1.ts";

function specSchema(spec: TSchema): JSONSchemaProps {
  const def = defineKind({
    group: "t.example.com",
    version: "v1",
    kind: "T",
    spec: Type.Object({ f: spec }),
  });
  return schemaFor(def).properties?.spec?.properties?.f as JSONSchemaProps;
}

function specError(spec: TSchema): SchemaError {
  const def = defineKind({
    group: "t.example.com",
    version: "v1",
    kind: "T",
    spec: Type.Object({ f: spec }),
  });
  try {
    schemaFor(def);
  } catch (err) {
    assert.ok(err instanceof SchemaError, String(err));
    return err;
  }
  assert.fail("expected a SchemaError");
}

/** Every node has a type (or is int-or-string / preserve-unknown), no TypeBox markers leak. */
function assertStructural(node: JSONSchemaProps, path = ""): void {
  assert.ok(
    node.type || node["x-kubernetes-int-or-string"] || node["x-kubernetes-preserve-unknown-fields"],
    `${path} has no type`,
  );
  for (const key of Object.keys(node))
    assert.ok(!key.startsWith("~") && !key.startsWith("$"), `${path} has ${key}`);
  assert.equal(Object.getOwnPropertySymbols(node).length, 0);
  for (const [k, v] of Object.entries(node.properties ?? {})) assertStructural(v, `${path}.${k}`);
  if (node.items) assertStructural(node.items, `${path}[]`);
  if (typeof node.additionalProperties === "object")
    assertStructural(node.additionalProperties, `${path}[*]`);
}

const Memcached = defineKind({
  group: "cache.example.com",
  version: "v1alpha1",
  kind: "Memcached",
  shortNames: ["mc"],
  categories: ["all"],
  description: "Memcached runs a memcached cluster.",
  spec: Type.Object({
    size: Type.Integer({ minimum: 1, maximum: 10, default: 1, description: "Number of pods." }),
    mode: Type.Union([Type.Literal("fast"), Type.Literal("safe")], { default: "safe" }),
    image: Type.Optional(Type.String({ minLength: 1 })),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    port: Type.Optional(intOrString()),
    template: Type.Optional(embeddedResource()),
  }),
  status: Type.Object({ replicas: Type.Optional(Type.Integer()), phase: Type.Optional(Type.String()) }),
  printerColumns: [{ name: "Size", type: "integer", jsonPath: ".spec.size" }],
  scale: { specReplicasPath: ".spec.size", statusReplicasPath: ".status.replicas" },
  validations: [
    {
      rule: "self.spec.size <= 5 || self.spec.mode == 'fast'",
      message: "big needs fast",
      fieldPath: ".spec.size",
    },
  ],
});

describe("crdFor", () => {
  it("builds a CRD with names, scope, subresources and printer columns", () => {
    const crd = crdFor(Memcached);
    assert.equal(crd.metadata.name, "memcacheds.cache.example.com");
    assert.deepEqual(crd.spec.names, {
      kind: "Memcached",
      listKind: "MemcachedList",
      plural: "memcacheds",
      singular: "memcached",
      shortNames: ["mc"],
      categories: ["all"],
    });
    assert.equal(crd.spec.scope, "Namespaced");
    const [v] = crd.spec.versions;
    assert.ok(v);
    assert.equal(v.storage, true);
    assert.deepEqual(v.subresources, {
      status: {},
      scale: { specReplicasPath: ".spec.size", statusReplicasPath: ".status.replicas" },
    });
    assert.deepEqual(v.additionalPrinterColumns, [
      { name: "Size", type: "integer", jsonPath: ".spec.size" },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ]);
    const root = v.schema?.openAPIV3Schema as JSONSchemaProps;
    assertStructural(root);
    assert.equal(root.description, "Memcached runs a memcached cluster.");
    assert.deepEqual(root.properties?.metadata, { type: "object" });
    assert.deepEqual(root.required, ["spec"]);
    assert.deepEqual(root["x-kubernetes-validations"], [
      {
        rule: "self.spec.size <= 5 || self.spec.mode == 'fast'",
        message: "big needs fast",
        fieldPath: ".spec.size",
      },
    ]);
    const spec = root.properties?.spec as JSONSchemaProps;
    assert.deepEqual(spec.required, ["size", "mode"]);
    assert.deepEqual(spec.properties?.size, {
      description: "Number of pods.",
      type: "integer",
      default: 1,
      minimum: 1,
      maximum: 10,
    });
    assert.deepEqual(spec.properties?.mode, { type: "string", default: "safe", enum: ["fast", "safe"] });
    assert.deepEqual(spec.properties?.labels, { type: "object", additionalProperties: { type: "string" } });
    assert.deepEqual(spec.properties?.port, {
      anyOf: [{ type: "integer" }, { type: "string" }],
      "x-kubernetes-int-or-string": true,
    });
    assert.deepEqual(spec.properties?.template, {
      type: "object",
      "x-kubernetes-embedded-resource": true,
      "x-kubernetes-preserve-unknown-fields": true,
    });
  });

  it("converts each validation keyword to the server's form", () => {
    assert.deepEqual(specSchema(Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1, multipleOf: 0.5 })), {
      type: "number",
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 1,
      exclusiveMaximum: true,
      multipleOf: 0.5,
    });
    assert.deepEqual(
      specSchema(Type.String({ minLength: 1, maxLength: 3, pattern: "^a", format: "date-time" })),
      {
        type: "string",
        format: "date-time",
        minLength: 1,
        maxLength: 3,
        pattern: "^a",
      },
    );
    assert.deepEqual(specSchema(Type.Array(Type.String(), { minItems: 1, maxItems: 2, uniqueItems: true })), {
      type: "array",
      minItems: 1,
      maxItems: 2,
      items: { type: "string" },
      "x-kubernetes-list-type": "set",
    });
    assert.deepEqual(specSchema(Type.Object({}, { minProperties: 1, maxProperties: 2 })), {
      type: "object",
      minProperties: 1,
      maxProperties: 2,
    });
    assert.deepEqual(specSchema(Type.Enum(["a", "b"])), { type: "string", enum: ["a", "b"] });
    assert.deepEqual(specSchema(Type.Literal(3)), { type: "number", enum: [3] });
    assert.deepEqual(specSchema(nullable(Type.String())), { type: "string", nullable: true });
    assert.deepEqual(specSchema(quantity()), {
      pattern: QUANTITY_PATTERN,
      anyOf: [{ type: "integer" }, { type: "string" }],
      "x-kubernetes-int-or-string": true,
    });
    assert.deepEqual(specSchema(preserveUnknownFields()), { "x-kubernetes-preserve-unknown-fields": true });
    assert.deepEqual(specSchema(preserveUnknownFields(Type.Object({ a: Type.String() }))), {
      type: "object",
      properties: { a: { type: "string" } },
      required: ["a"],
      "x-kubernetes-preserve-unknown-fields": true,
    });
    const items = Type.Object({ name: Type.String(), v: Type.Optional(Type.Integer()) });
    assert.deepEqual(specSchema(listType(Type.Array(items), "map", ["name"])), {
      type: "array",
      items: {
        type: "object",
        properties: { name: { type: "string" }, v: { type: "integer" } },
        required: ["name"],
      },
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
    });
    assert.deepEqual(specSchema(mapType(Type.Object({}), "atomic")), {
      type: "object",
      "x-kubernetes-map-type": "atomic",
    });
    assert.deepEqual(
      specSchema(
        cel(Type.String(), [{ rule: "self != 'x'", message: "not x", reason: "FieldValueForbidden" }]),
      ),
      {
        type: "string",
        "x-kubernetes-validations": [
          { rule: "self != 'x'", message: "not x", reason: "FieldValueForbidden" },
        ],
      },
    );
    assert.deepEqual(specSchema(Type.Object({ a: Type.String() }, { additionalProperties: false })), {
      type: "object",
      properties: { a: { type: "string" } },
      required: ["a"],
    });
  });

  it("throws SchemaError naming the field for what the server would reject", () => {
    const cases: [TSchema, RegExp][] = [
      [Type.Union([Type.String(), Type.Integer()]), /spec\.f: .*use intOrString\(\)/],
      [
        Type.Union([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]),
        /spec\.f: .*not a structural schema/,
      ],
      [Type.Unknown(), /spec\.f: has no type/],
      [Type.Object({ deep: Type.Array(Type.Any()) }), /spec\.f\.deep\[\]: has no type/],
      [Type.Integer({ minimum: 1, default: 0 }), /spec\.f: default 0 does not satisfy/],
      [Type.Union([Type.Literal("a"), Type.Literal(1)]), /spec\.f: enum values .* mix JSON types/],
      [Type.Null(), /spec\.f: .*only be null/],
      [Type.Record(Type.String({ pattern: "^x" }), Type.String()), /spec\.f: patternProperties/],
      [Type.Array(Type.Object({}), { uniqueItems: true }), /spec\.f: a set list .* needs scalar items/],
      [
        listType(Type.Array(Type.Object({ k: Type.Optional(Type.String()) })), "map", ["k"]),
        /spec\.f\[\]\.k: is a list map key/,
      ],
      [
        Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]),
        /spec\.f: allOf/,
      ],
      [Type.Tuple([Type.String(), Type.Integer()]), /spec\.f/],
      [Type.Object({ x: Type.String({ foo: 1 }) }), /spec\.f\.x: "foo" is not a keyword/],
    ];
    for (const [schema, re] of cases) assert.match(specError(schema).message, re);
    assert.equal(specError(Type.Object({ x: Type.Unknown() })).path, "spec.f.x");
  });

  it("checks scale and printer column paths against the schema", () => {
    const base = {
      group: "t.example.com",
      version: "v1",
      kind: "T",
      spec: Type.Object({ n: Type.Integer() }),
      status: Type.Object({ n: Type.Optional(Type.Integer()), s: Type.Optional(Type.String()) }),
    };
    assert.throws(
      () =>
        crdFor(
          defineKind({
            ...base,
            scale: { specReplicasPath: ".spec.missing", statusReplicasPath: ".status.n" },
          }),
        ),
      /spec\.missing: scale specReplicasPath must point to an integer/,
    );
    assert.throws(
      () =>
        crdFor(
          defineKind({ ...base, scale: { specReplicasPath: ".spec.n", statusReplicasPath: ".status.s" } }),
        ),
      /status\.s: scale statusReplicasPath/,
    );
    assert.throws(
      () =>
        crdFor(
          defineKind({ ...base, printerColumns: [{ name: "X", type: "string", jsonPath: ".status.nope" }] }),
        ),
      /status\.nope: printer column "X"/,
    );
  });

  it("builds several versions with exactly one storage version", () => {
    const spec = Type.Object({ a: Type.String() });
    const v1 = defineKind({ group: "t.example.com", version: "v1", kind: "T", spec, storage: true });
    const v2 = defineKind({ group: "t.example.com", version: "v2", kind: "T", spec });
    const crd = crdFor(defineKindVersions([v1, v2]));
    assert.deepEqual(
      crd.spec.versions.map((v) => [v.name, v.served, v.storage]),
      [
        ["v1", true, true],
        ["v2", true, false],
      ],
    );
    assert.deepEqual(crd.spec.conversion, { strategy: "None" });
    assert.deepEqual(crdFor([v1, v2]), crd);
    assert.throws(
      () => crdFor([v2, defineKind({ group: "t.example.com", version: "v3", kind: "T", spec })]),
      /exactly one version/,
    );
    const other = defineKind({ group: "t.example.com", version: "v1", kind: "U", spec });
    assert.deepEqual(
      crdsFor([v1, other, v2]).map((c) => [c.metadata.name, c.spec.versions.length]),
      [
        ["ts.t.example.com", 2],
        ["us.t.example.com", 1],
      ],
    );
  });

  it("serves a misspelt deprecated version beside the right one, same schema, with its warning", () => {
    const spec = Type.Object({ a: Type.String() });
    const right = defineKind({ group: "t.example.com", version: "v1alpha1", kind: "T", spec, storage: true });
    const misspelt = defineKind({
      group: "t.example.com",
      version: "v1alapha1",
      kind: "T",
      spec,
      deprecated: true,
      deprecationWarning: "t.example.com/v1alapha1 is misspelt: use t.example.com/v1alpha1",
    });
    const crd = crdFor([right, misspelt]);
    const [v, old] = crd.spec.versions;
    assert.deepEqual(
      [old?.name, old?.served, old?.storage, old?.deprecated, old?.deprecationWarning],
      ["v1alapha1", true, false, true, "t.example.com/v1alapha1 is misspelt: use t.example.com/v1alpha1"],
    );
    assert.equal(v?.deprecated, undefined);
    assert.deepEqual(old?.schema, v?.schema);
    assert.deepEqual(crd.spec.conversion, { strategy: "None" });
  });

  it("YAML output is deterministic and round-trips", () => {
    const a = crdYaml([Memcached]);
    const b = crdYaml(Memcached);
    assert.equal(a, b);
    assert.deepEqual(parse(a), JSON.parse(JSON.stringify(crdFor(Memcached))));
    assert.ok(!a.includes("~kind") && !a.includes("$id"));
  });
});

describe("embedded built-in templates", () => {
  const Cron = defineKind({
    group: "t.example.com",
    version: "v1",
    kind: "Cron",
    spec: Type.Object({ jobTemplate: batchv1.JobTemplateSpec }),
    status: Type.Object({ n: Type.Optional(Type.Integer()) }),
  });
  const template = (opts = {}) =>
    schemaFor(Cron, opts).properties?.spec?.properties?.jobTemplate as JSONSchemaProps;

  it("restricts embedded ObjectMeta to name, namespace, labels, annotations, finalizers", () => {
    const jobMeta = template().properties?.metadata;
    const podMeta = template().properties?.spec?.properties?.template?.properties?.metadata;
    for (const meta of [jobMeta, podMeta])
      assert.deepEqual(Object.keys(meta?.properties ?? {}).sort(), [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
      ]);
    assert.deepEqual(podMeta?.properties?.labels, {
      type: "object",
      additionalProperties: { type: "string" },
    });
  });

  it("leaves out the descriptions inside built-in schemas unless asked; the embedding field keeps its own", () => {
    const t = template();
    assert.match(t.description ?? "", /JobTemplateSpec describes/);
    const backoff = t.properties?.spec?.properties?.backoffLimit;
    assert.equal(backoff?.description, undefined);
    assert.match(
      template({ builtinDescriptions: true }).properties?.spec?.properties?.backoffLimit?.description ?? "",
      /retries/,
    );
  });

  it("gives spec and status a description when the definition has none, and keeps the definition's", () => {
    const s = schemaFor(Cron);
    assert.equal(s.properties?.spec?.description, "Spec is the desired state of the Cron.");
    assert.match(s.properties?.status?.description ?? "", /observed state of the Cron/);
    const own = defineKind({
      group: "t.example.com",
      version: "v1",
      kind: "Own",
      spec: Type.Object({}, { description: "What the user wants." }),
    });
    assert.equal(schemaFor(own).properties?.spec?.description, "What the user wants.");
  });
});
