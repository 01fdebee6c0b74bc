import { describe, it } from "node:test";
import assert from "node:assert/strict";
import * as Type from "typebox/type";
import { defineKind } from "../api/kind.ts";
import { conversion, type SpokeDefinition } from "../webhook/conversion.ts";
import type { ObjectOf } from "../api/kind.ts";
import { checkConversion, ConversionCheckError, ConversionRoundTripError } from "./conversion.ts";

const group = "lossy.opkit.dev";
/** The old version: a size, and a mode the new version dropped. */
const V1alpha1 = defineKind({
  group,
  version: "v1alpha1",
  kind: "Cache",
  spec: Type.Object({
    size: Type.Integer({ minimum: 0, maximum: 100 }),
    image: Type.String({ minLength: 1 }),
    legacyMode: Type.Optional(Type.Union([Type.Literal("fast"), Type.Literal("safe")])),
  }),
  status: Type.Object({ ready: Type.Optional(Type.Boolean()) }),
});
/** The hub: size renamed to replicas, and a tier the old version cannot express. */
const V1 = defineKind({
  group,
  version: "v1",
  kind: "Cache",
  storage: true,
  spec: Type.Object({
    replicas: Type.Integer({ minimum: 0, maximum: 100 }),
    image: Type.String({ minLength: 1 }),
    tier: Type.Optional(Type.Union([Type.Literal("gold"), Type.Literal("silver")])),
  }),
  status: Type.Object({ ready: Type.Optional(Type.Boolean()) }),
});
type Old = ObjectOf<typeof V1alpha1>;
type Hub = ObjectOf<typeof V1>;

function webhook(declared: Pick<SpokeDefinition<Hub, Old>, "spokeOnly" | "hubOnly">) {
  return conversion<Hub, [Old]>({
    hub: V1,
    spokes: [
      {
        kind: V1alpha1,
        toHub: (o) => ({ spec: { replicas: o.spec.size, image: o.spec.image }, status: o.status }),
        fromHub: (h) => ({ spec: { size: h.spec.replicas, image: h.spec.image }, status: h.status }),
        ...declared,
      },
    ],
  });
}

describe("checkConversion", () => {
  it("fails a conversion that drops a field, naming the field and what to declare", async () => {
    const err = await checkConversion(webhook({ hubOnly: [".spec.tier"] }), { numRuns: 300 }).then(
      () => assert.fail("expected the dropped field to be found"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConversionRoundTripError, String(err));
    assert.equal(err.path, ".spec.legacyMode");
    assert.equal(err.from, "v1alpha1");
    assert.match(
      err.message,
      /v1alpha1 → v1 → v1alpha1 is not lossless: \.spec\.legacyMode was "(fast|safe)", came back absent/,
    );
    assert.match(err.message, /declare \["\.spec\.legacyMode"\] in spokeOnly of the v1alpha1 spoke/);
  });

  it("fails the hub direction too: a hub field the spoke cannot hold", async () => {
    const err = await checkConversion(webhook({ spokeOnly: [".spec.legacyMode"] }), { numRuns: 300 }).catch(
      (e: unknown) => e,
    );
    assert.ok(err instanceof ConversionRoundTripError, String(err));
    assert.equal(err.path, ".spec.tier");
    assert.match(
      err.message,
      /v1 → v1alpha1 → v1 .*declare \["\.spec\.tier"\] in hubOnly of the v1alpha1 spoke/,
    );
  });

  it("passes once the lossy fields are declared: they survive the round trip in an annotation", async () => {
    const conv = webhook({ spokeOnly: [".spec.legacyMode"], hubOnly: [".spec.tier"] });
    await checkConversion(conv, { numRuns: 300 });
    const old = V1alpha1.new("c", { size: 3, image: "memcached", legacyMode: "safe" }, { namespace: "ns" });
    const hub = conv.convert(old, V1.apiVersion) as Hub;
    assert.deepEqual(hub.spec, { replicas: 3, image: "memcached" });
    assert.equal(hub.metadata.annotations?.["conversion.opkit.dev/v1alpha1"], '{".spec.legacyMode":"safe"}');
    const back = JSON.parse(JSON.stringify(conv.convert(hub, V1alpha1.apiVersion))) as Old;
    assert.deepEqual(back, old, "the field is back and the annotation gone");
  });

  it("drops a preserved value a user edited into something the schema refuses, and still converts", () => {
    const conv = webhook({ spokeOnly: [".spec.legacyMode"], hubOnly: [".spec.tier"] });
    const hub = V1.new(
      "c",
      { replicas: 1, image: "m" },
      { annotations: { "conversion.opkit.dev/v1alpha1": '{".spec.legacyMode":"reckless"}' } },
    );
    const old = conv.convert(hub, V1alpha1.apiVersion) as Old;
    assert.deepEqual(old.spec, { size: 1, image: "m" });
    assert.equal(old.metadata.annotations, undefined);
    const garbled = V1.new(
      "c",
      { replicas: 1, image: "m" },
      { annotations: { "conversion.opkit.dev/v1alpha1": "{not json" } },
    );
    assert.deepEqual((conv.convert(garbled, V1alpha1.apiVersion) as Old).spec, { size: 1, image: "m" });
  });

  it("refuses a malformed declared path when the webhook is defined", () => {
    assert.throws(
      () => webhook({ spokeOnly: ["spec.legacyMode"] }),
      /field path "spec.legacyMode" must be a dotted path into spec or status/,
    );
  });

  it("says when the kinds are not defineKind results", async () => {
    const fake = {
      ...webhook({}),
      hub: { apiVersion: `${group}/v1`, kind: "Cache", group, version: "v1", plural: "caches" },
    };
    await assert.rejects(checkConversion(fake), ConversionCheckError);
  });
});
