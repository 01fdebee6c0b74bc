/**
 * A value for a schema with every declared field set, at every depth, for round-trip tests: whatever
 * the API server prunes (a field a CRD schema forgot, a free-form object it does not preserve) shows up
 * as a difference between what was written and what is read back. Values are valid for the schema
 * (enums, formats, int-or-string, quantity patterns), and int-or-string fields alternate between an
 * integer and a string so both forms are exercised.
 *
 * It reads TypeBox/CRD schemas and also the API server's OpenAPI (pass `components`): sampling the
 * server's own description of a type checks that a generated schema left none of its fields out.
 */

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";

export interface SampleOptions {
  /** OpenAPI `components.schemas`, to follow `$ref`s. */
  components?: Record<string, unknown>;
}

interface State extends SampleOptions {
  n: number;
  /** The `$ref`s being expanded, to stop at recursion. */
  path: string[];
}

/** The sample for `schema`. */
export function fullSample(schema: unknown, options: SampleOptions = {}): unknown {
  return sample(schema, { ...options, n: 0, path: [] });
}

function intOrString(n: number, quantity: boolean): unknown {
  if (n % 2 === 0) return quantity ? 2 : 8000 + (n % 1000);
  return quantity ? `${n % 1000}Mi` : `port-${n}`;
}

function refOf(schema: Json): string | undefined {
  const ref =
    schema.$ref ?? (Array.isArray(schema.allOf) ? (schema.allOf[0] as Json | undefined)?.$ref : undefined);
  return typeof ref === "string" ? ref.slice(ref.lastIndexOf("/") + 1) : undefined;
}

function sample(schema: unknown, state: State): unknown {
  if (!isRecord(schema)) throw new Error(`not a schema: ${JSON.stringify(schema)}`);
  const n = ++state.n;
  const ref = refOf(schema);
  if (ref !== undefined) {
    if (ref === QUANTITY || ref === INT_OR_STRING) return intOrString(n, ref === QUANTITY);
    // A recursive type: its generated schema keeps unknown fields there, so any object survives.
    if (state.path.includes(ref)) return { recursion: n };
    const target = state.components?.[ref];
    if (target === undefined) throw new Error(`$ref ${ref} not found: pass the OpenAPI components`);
    state.path.push(ref);
    try {
      return sample(target, state);
    } finally {
      state.path.pop();
    }
  }
  if (schema["x-kubernetes-int-or-string"] === true || schema.format === "int-or-string") {
    // A quantity: the pattern sits on the string branch (TypeBox) or on the node (a CRD schema).
    const quantity = schema.pattern !== undefined || JSON.stringify(schema.anyOf ?? []).includes("pattern");
    return intOrString(n, quantity);
  }
  if (schema["x-kubernetes-embedded-resource"] === true)
    return { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `cm-${n}` }, data: { k: `v${n}` } };
  if (Array.isArray(schema.enum)) return schema.enum[n % schema.enum.length];
  switch (schema.type) {
    case "string":
      if (schema.format === "date-time") return `2026-0${(n % 9) + 1}-02T03:04:05Z`;
      if (schema.format === "byte") return Buffer.from(`bytes-${n}`).toString("base64");
      return `s${n}`;
    case "integer":
      return n;
    case "number":
      return n + 0.5;
    case "boolean":
      return n % 2 === 0;
    case "array":
      return [sample(schema.items, state)];
    case "object": {
      const out: Json = {};
      if (isRecord(schema.properties))
        for (const [name, child] of Object.entries(schema.properties)) out[name] = sample(child, state);
      else if (isRecord(schema.additionalProperties))
        out[`key-${n}`] = sample(schema.additionalProperties, state);
      // An object that declares no fields holds free-form JSON (RawExtension, FieldsV1): fill it even
      // when the schema forgot to say so, so that pruning it shows.
      else out.free = { nested: [n, `form-${n}`, { deep: true }] };
      return out;
    }
    case undefined:
      // Any JSON value (apiextensions' JSON).
      return { anyJson: [n, `any-${n}`] };
    default:
      throw new Error(`type ${JSON.stringify(schema.type)} has no sample`);
  }
}
