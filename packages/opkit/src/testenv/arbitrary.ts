/**
 * fast-check arbitraries derived from a kind's structural schema (the one the CRD generator writes from the
 * TypeBox definition): every value they produce fits the schema's types, enums, formats, bounds, patterns and
 * required fields, so property tests exercise the shapes real objects have. CEL rules are not evaluated.
 *
 * fast-check is passed in (loaded lazily by the caller): it is a test-time dependency of the user's project,
 * never of an operator at run time.
 */
import type * as FastCheck from "fast-check";
import type { JSONSchemaProps } from "../generate/crd-types.ts";

type Fc = typeof FastCheck;
type Arb = FastCheck.Arbitrary<unknown>;

/** Sizes kept small so that a property runs hundreds of cases in a second; bounds in the schema still win. */
const MAX_ITEMS = 3;
const MAX_STRING = 12;

/** An arbitrary of the values `schema` accepts. */
export function arbitraryOf(fc: Fc, schema: JSONSchemaProps): Arb {
  const base = baseArbitrary(fc, schema);
  return schema.nullable ? fc.option(base, { nil: null, freq: 8 }) : base;
}

function baseArbitrary(fc: Fc, s: JSONSchemaProps): Arb {
  if (s.enum?.length) return fc.constantFrom(...s.enum);
  if (s["x-kubernetes-int-or-string"]) return fc.oneof(fc.integer({ min: 0, max: 65535 }), stringOf(fc, s));
  if (s["x-kubernetes-embedded-resource"]) return embeddedObject(fc);
  switch (s.type) {
    case "string":
      return stringOf(fc, s);
    case "integer":
      return integerOf(fc, s);
    case "number":
      return numberOf(fc, s);
    case "boolean":
      return fc.boolean();
    case "array":
      return arrayOf(fc, s);
    case "object":
      return objectOf(fc, s);
    default:
      return s["x-kubernetes-preserve-unknown-fields"] ? jsonObject(fc) : fc.constant(null);
  }
}

function stringOf(fc: Fc, s: JSONSchemaProps): Arb {
  const min = s.minLength ?? 0;
  const max = Math.max(min, Math.min(s.maxLength ?? MAX_STRING, min + MAX_STRING));
  let arb: FastCheck.Arbitrary<string>;
  if (s.pattern !== undefined) {
    arb = fc
      .stringMatching(new RegExp(s.pattern))
      .filter((v) => v.length >= min && v.length <= (s.maxLength ?? Infinity));
  } else {
    arb = formatted(fc, s.format) ?? fc.string({ minLength: min, maxLength: max });
  }
  return arb;
}

/** Values of the formats the API server checks; other formats are plain strings. */
function formatted(fc: Fc, format: string | undefined): FastCheck.Arbitrary<string> | undefined {
  const date = fc.date({
    min: new Date("1970-01-01T00:00:00Z"),
    max: new Date("2099-12-31T23:59:59Z"),
    noInvalidDate: true,
  });
  switch (format) {
    case "date-time":
      return date.map((d) => d.toISOString().replace(/\.\d{3}Z$/, "Z"));
    case "date":
      return date.map((d) => d.toISOString().slice(0, 10));
    case "byte":
      return fc.uint8Array({ maxLength: 16 }).map((b) => Buffer.from(b).toString("base64"));
    case "uuid":
      return fc.uuid();
    case "hostname":
      return fc.domain();
    case "email":
      return fc.emailAddress();
    case "uri":
      return fc.webUrl();
    default:
      return undefined;
  }
}

function integerOf(fc: Fc, s: JSONSchemaProps): Arb {
  const int32 = s.format === "int32";
  let min = s.minimum ?? (int32 ? -(2 ** 31) : Number.MIN_SAFE_INTEGER);
  let max = s.maximum ?? (int32 ? 2 ** 31 - 1 : Number.MAX_SAFE_INTEGER);
  if (s.exclusiveMinimum) min = Math.floor(min) + 1;
  if (s.exclusiveMaximum) max = Math.ceil(max) - 1;
  const step = s.multipleOf;
  if (step)
    return fc.integer({ min: Math.ceil(min / step), max: Math.floor(max / step) }).map((n) => n * step);
  return fc.integer({ min: Math.ceil(min), max: Math.floor(max) });
}

function numberOf(fc: Fc, s: JSONSchemaProps): Arb {
  return fc
    .double({
      min: s.minimum ?? -1e9,
      max: s.maximum ?? 1e9,
      minExcluded: s.exclusiveMinimum ?? false,
      maxExcluded: s.exclusiveMaximum ?? false,
      noNaN: true,
      noDefaultInfinity: true,
    })
    .map((n) => (Object.is(n, -0) ? 0 : n)); // JSON has no -0
}

function arrayOf(fc: Fc, s: JSONSchemaProps): Arb {
  const item = s.items ? arbitraryOf(fc, s.items) : fc.string();
  const minLength = s.minItems ?? 0;
  const maxLength = Math.max(minLength, Math.min(s.maxItems ?? MAX_ITEMS, minLength + MAX_ITEMS));
  const listType = s["x-kubernetes-list-type"];
  if (listType === "set") return fc.uniqueArray(item, { minLength, maxLength, comparator: "SameValueZero" });
  if (listType === "map") {
    const keys = s["x-kubernetes-list-map-keys"] ?? [];
    return fc.uniqueArray(item, {
      minLength,
      maxLength,
      selector: (v) => JSON.stringify(keys.map((k) => (v as Record<string, unknown>)[k])),
    });
  }
  return fc.array(item, { minLength, maxLength });
}

function objectOf(fc: Fc, s: JSONSchemaProps): Arb {
  const props = s.properties ?? {};
  if (Object.keys(props).length === 0) {
    if (typeof s.additionalProperties === "object") {
      const maxKeys = Math.min(s.maxProperties ?? MAX_ITEMS, MAX_ITEMS);
      return fc.dictionary(
        fc.string({ minLength: 1, maxLength: 8 }),
        arbitraryOf(fc, s.additionalProperties),
        {
          minKeys: Math.min(s.minProperties ?? 0, maxKeys),
          maxKeys,
        },
      );
    }
    return s["x-kubernetes-preserve-unknown-fields"] ? jsonObject(fc) : fc.constant({});
  }
  const model: Record<string, Arb> = {};
  for (const [key, child] of Object.entries(props)) model[key] = arbitraryOf(fc, child);
  return fc.record(model, { requiredKeys: (s.required ?? []).filter((k) => k in props) });
}

/** A small JSON object, normalised through JSON so that it survives a round trip unchanged. */
function jsonObject(fc: Fc): Arb {
  return fc
    .dictionary(fc.string({ minLength: 1, maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })
    .map((v) => JSON.parse(JSON.stringify(v)) as unknown);
}

function embeddedObject(fc: Fc): Arb {
  return fc.record({
    apiVersion: fc.constant("v1"),
    kind: fc.constant("ConfigMap"),
    metadata: fc.record({ name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/) }),
  });
}
