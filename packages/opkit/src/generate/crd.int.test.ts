/**
 * The generated CRDs against a real API server: accepted as structural, defaults applied, every
 * validation keyword enforced with the field path in the error, descriptions in `kubectl explain`,
 * printer columns, status and scale subresources, and two versions served from one storage version.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as Type from "typebox/type";
import { defineKind, type ObjectOf } from "../api/kind.ts";
import { intOrString, listType } from "../api/k8s.ts";
import { InvalidError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { eventually } from "../testenv/eventually.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { binDir } from "../testenv/versions.ts";
import { crdFor } from "./crd.ts";

const run = promisify(execFile);
const group = `g${Date.now().toString(36)}.test.opkit.dev`;

const Widget = defineKind({
  group,
  version: "v1",
  kind: "Widget",
  shortNames: ["wdg"],
  description: "A widget for the CRD generator tests.",
  spec: Type.Object({
    name: Type.String({ minLength: 2, maxLength: 8, description: "The widget's display name." }),
    size: Type.Integer({
      minimum: 1,
      maximum: 10,
      default: 1,
      description: "How many replicas the widget runs.",
    }),
    mode: Type.Union([Type.Literal("fast"), Type.Literal("safe")], { default: "safe" }),
    ratio: Type.Optional(Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1 })),
    step: Type.Optional(Type.Integer({ multipleOf: 2 })),
    code: Type.Optional(Type.String({ pattern: "^[a-z]+$" })),
    when: Type.Optional(Type.String({ format: "date-time" })),
    tags: Type.Optional(
      listType(Type.Array(Type.String(), { minItems: 1, maxItems: 3, uniqueItems: true }), "set"),
    ),
    labels: Type.Optional(Type.Record(Type.String(), Type.String(), { minProperties: 1, maxProperties: 2 })),
    port: Type.Optional(intOrString()),
  }),
  status: Type.Object({ replicas: Type.Optional(Type.Integer()), phase: Type.Optional(Type.String()) }),
  printerColumns: [
    { name: "Size", type: "integer", jsonPath: ".spec.size", description: "replicas wanted" },
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
  ],
  scale: { specReplicasPath: ".spec.size", statusReplicasPath: ".status.replicas" },
  validations: [
    {
      rule: "self.spec.size <= 5 || self.spec.mode == 'fast'",
      message: "more than 5 needs mode fast",
      fieldPath: ".spec.size",
    },
  ],
});
type WidgetObject = ObjectOf<typeof Widget>;

const gadgetSpec = Type.Object({ color: Type.String({ default: "red" }) });
const GadgetV1 = defineKind({ group, version: "v1", kind: "Gadget", spec: gadgetSpec, storage: true });
const GadgetV2 = defineKind({ group, version: "v2", kind: "Gadget", spec: gadgetSpec });

const Crds = kindRef<KubeObject>("apiextensions.k8s.io/v1", "CustomResourceDefinition");

describe("generated CRDs on the API server", () => {
  let env: TestEnv;
  let ns: string;
  const crds = [crdFor(Widget), crdFor([GadgetV1, GadgetV2])];

  before(async () => {
    env = await useTestEnv();
    ns = await env.namespace("crd");
    await env.installCrds(crds);
  });
  after(async () => {
    for (const crd of crds) await env.client.delete(Crds, crd.metadata.name ?? "").catch(() => undefined);
    await env.cleanup();
  });

  function kubectl(...args: string[]): Promise<string> {
    return run(`${binDir()}/kubectl`, ["--kubeconfig", env.kubeconfigPath, ...args]).then((r) => r.stdout);
  }

  function widget(name: string, spec: Record<string, unknown>): WidgetObject {
    return {
      apiVersion: Widget.apiVersion,
      kind: Widget.kind,
      metadata: { name, namespace: ns },
      spec,
    } as WidgetObject;
  }

  it("applies defaults", async () => {
    const created = await env.client.create(widget("defaults", { name: "ab" }));
    assert.equal(created.spec.size, 1);
    assert.equal(created.spec.mode, "safe");
  });

  const invalid: [string, Record<string, unknown>, string, RegExp?][] = [
    ["enum", { mode: "slow" }, "spec.mode", /supported values/i],
    ["minimum", { size: 0 }, "spec.size"],
    ["maximum", { size: 11, mode: "fast" }, "spec.size"],
    ["exclusiveMinimum", { ratio: 0 }, "spec.ratio"],
    ["exclusiveMaximum", { ratio: 1 }, "spec.ratio"],
    ["multipleOf", { step: 3 }, "spec.step"],
    ["minLength", { name: "a" }, "spec.name"],
    ["maxLength", { name: "much-too-long" }, "spec.name"],
    ["pattern", { code: "ABC" }, "spec.code"],
    ["format", { when: "yesterday" }, "spec.when"],
    ["minItems", { tags: [] }, "spec.tags"],
    ["maxItems", { tags: ["a", "b", "c", "d"] }, "spec.tags"],
    ["uniqueItems (set)", { tags: ["a", "a"] }, "spec.tags[1]", /duplicate/i],
    ["minProperties", { labels: {} }, "spec.labels"],
    ["maxProperties", { labels: { a: "1", b: "2", c: "3" } }, "spec.labels"],
    ["int-or-string", { port: true }, "spec.port"],
    ["required", { name: undefined }, "spec.name", /required/i],
    ["CEL rule", { size: 7 }, "spec.size", /more than 5 needs mode fast/],
  ];
  for (const [feature, change, field, message] of invalid) {
    it(`rejects an invalid ${feature} with the field path`, async () => {
      const spec: Record<string, unknown> = { name: "ok", ...change };
      if ("name" in change && change.name === undefined) delete spec.name;
      const err = await env.client
        .create(widget(`bad-${feature.replace(/[^a-z]+/gi, "-").toLowerCase()}`, spec))
        .then(() => assert.fail(`${feature}: the server accepted ${JSON.stringify(spec)}`))
        .catch((e: unknown) => e);
      assert.ok(err instanceof InvalidError, `${feature}: expected InvalidError, got ${String(err)}`);
      const causes = err.causes.filter((c) => c.field === field);
      assert.ok(causes.length > 0, `${feature}: no cause for ${field} in ${JSON.stringify(err.causes)}`);
      if (message)
        assert.ok(
          causes.some((c) => message.test(c.message ?? "")),
          `${feature}: ${JSON.stringify(causes)}`,
        );
    });
  }

  it("publishes field descriptions to kubectl explain", async () => {
    const out = await eventually(
      "kubectl explain to show the description",
      async () => {
        const text = await kubectl("explain", "widgets.spec.size", `--api-version=${group}/v1`);
        return text.includes("How many replicas the widget runs.") ? text : undefined;
      },
      30_000,
      500,
    );
    assert.match(out, /FIELD:\s+size/);
  });

  it("shows printer columns in kubectl get", async () => {
    await env.client.create(widget("columns", { name: "cols", size: 3 }));
    const out = await kubectl("get", `widgets.${group}`, "-n", ns);
    const header = out.split("\n")[0] ?? "";
    assert.match(header, /NAME\s+SIZE\s+PHASE\s+AGE/);
    assert.match(out, /columns\s+3\s+/);
  });

  it("serves the status and scale subresources", async () => {
    await env.client.create(widget("scaled", { name: "sc", size: 4 }));
    // The main resource ignores status; only the subresource writes it.
    const patched = await env.client.patch(
      Widget,
      "scaled",
      { status: { replicas: 2, phase: "Running" } },
      { type: "merge", namespace: ns, subresource: "status" },
    );
    assert.deepEqual(patched.status, { replicas: 2, phase: "Running" });
    const scale = await env.client.raw<{ spec: { replicas: number }; status: { replicas: number } }>(
      "GET",
      `/apis/${group}/v1/namespaces/${ns}/widgets/scaled/scale`,
    );
    assert.equal(scale.spec.replicas, 4);
    assert.equal(scale.status.replicas, 2);
    await env.client.patch(
      Widget,
      "scaled",
      { spec: { replicas: 5 } },
      { type: "merge", namespace: ns, subresource: "scale" },
    );
    assert.equal((await env.client.get(Widget, "scaled", { namespace: ns })).spec.size, 5);
  });

  it("serves two versions from one storage version", async () => {
    await env.client.create(GadgetV1.new("g", { color: "blue" }, { namespace: ns }));
    const v2 = await env.client.get(GadgetV2, "g", { namespace: ns });
    assert.equal(v2.apiVersion, `${group}/v2`);
    assert.equal(v2.spec.color, "blue");
    const fromV2 = await env.client.create({ ...GadgetV2.new("h", { color: "green" }, { namespace: ns }) });
    assert.equal(fromV2.apiVersion, `${group}/v2`);
    const v1 = await env.client.get(GadgetV1, "h", { namespace: ns });
    assert.equal(v1.spec.color, "green");
  });
});
