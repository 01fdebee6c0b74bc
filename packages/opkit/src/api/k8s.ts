/**
 * Schema helpers for what Kubernetes understands beyond plain JSON Schema. Each returns a TypeBox schema
 * whose static type is what travels in JSON, and whose extra `x-kubernetes-*` keywords the CRD
 * generator copies verbatim (TypeBox ignores unknown keywords when it validates, so runtime checks keep
 * working). Plain JSON Schema constraints (minimum, maxLength, pattern, format, ...) are TypeBox options.
 */
import * as Type from "typebox/type";
import { type Static, type TSchema, type TUnsafe } from "typebox";

/** A CEL rule (`x-kubernetes-validations`): `self` is the value of the node the rule is attached to. */
export interface CelRule {
  /** The CEL expression; true means valid. */
  rule: string;
  /** Shown to the user when the rule fails; defaults to the server's generic message. */
  message?: string;
  /** A CEL expression producing the message (lets the message include values). */
  messageExpression?: string;
  /** Which field the error is reported on, relative to the node (e.g. `.spec.size`). */
  fieldPath?: string;
  /** The machine-readable reason the server reports. */
  reason?: "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  /** Evaluate the rule on updates only when the old value exists (transition rules). */
  optionalOldSelf?: boolean;
}

/** The JSON type of a Kubernetes "int-or-string" value. */
export type IntOrString = number | string;

/**
 * The keywords a schema may carry for Kubernetes. Kept as a plain record so `Type.Unsafe` carries them.
 */
type K8sKeywords = Record<string, unknown>;

/** Add keywords to a schema without losing its static type; TypeBox schemas are plain objects. */
function withKeywords<T extends TSchema>(schema: T, keywords: K8sKeywords): T {
  // A copy, so reusing one schema in two places does not leak keywords between them.
  const copy = Object.create(Object.getPrototypeOf(schema) as object) as T;
  Object.defineProperties(copy, Object.getOwnPropertyDescriptors(schema));
  Object.assign(copy, keywords);
  return copy;
}

/**
 * `schema` with its description replaced: how the generated built-in schemas give a referenced type the
 * description of the field that holds it. A function rather than an object spread, so the call can be
 * marked pure and a bundler can drop the schemas an operator does not use (it keeps every spread).
 */
export function described<T extends TSchema>(schema: T, description: string): T {
  return withKeywords(schema, { description });
}

/** An integer or a string (a port number or name, a percentage), like Go's `intstr.IntOrString`. */
export function intOrString(options: { description?: string; default?: IntOrString; pattern?: string } = {}) {
  const { pattern, ...rest } = options;
  return Type.Unsafe<IntOrString>({
    ...rest,
    // The pattern sits on the string branch so runtime validation applies it; the CRD generator hoists
    // it to the node, where the server applies it to strings only.
    anyOf: [{ type: "integer" }, pattern === undefined ? { type: "string" } : { type: "string", pattern }],
    "x-kubernetes-int-or-string": true,
  });
}

/** kubebuilder's pattern for `resource.Quantity` strings ("500m", "1Gi", "2e3"). */
export const QUANTITY_PATTERN =
  "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$";

/** A resource quantity (CPU, memory): a number or a string such as "500m" or "1Gi". */
export function quantity(options: { description?: string; default?: IntOrString } = {}) {
  return intOrString({ ...options, pattern: QUANTITY_PATTERN });
}

/**
 * Keep fields the schema does not declare instead of pruning them. Without a schema it accepts any JSON
 * value (typed `unknown`); with an object schema it keeps unknown fields next to the declared ones.
 */
export function preserveUnknownFields(): TUnsafe<unknown>;
/**
 * Keep fields `schema` does not declare next to the declared ones (`x-kubernetes-preserve-unknown-fields`),
 * e.g. for a config block whose known keys you still want typed and validated.
 */
export function preserveUnknownFields<T extends TSchema>(schema: T): T;
export function preserveUnknownFields(schema?: TSchema): TSchema {
  if (!schema) return Type.Unsafe<unknown>({ "x-kubernetes-preserve-unknown-fields": true });
  return withKeywords(schema, { "x-kubernetes-preserve-unknown-fields": true });
}

/** The JSON shape of an embedded Kubernetes object (a Pod template, a raw manifest). */
export interface EmbeddedObject {
  /**
   * The embedded object's API version, e.g. "apps/v1"; the server checks it is present when the field is set.
   */
  apiVersion?: string;
  /** The embedded object's kind, e.g. "Deployment". */
  kind?: string;
  /** The embedded object's metadata; its name, labels and annotations are kept as written. */
  metadata?: Record<string, unknown>;
  /** Every other field of the embedded object, kept as is (not pruned by the server). */
  [field: string]: unknown;
}

/**
 * A whole Kubernetes object embedded in a field: the server checks apiVersion/kind/metadata and keeps
 * every other field.
 */
export function embeddedResource(options: { description?: string } = {}) {
  return Type.Unsafe<EmbeddedObject>({
    ...options,
    type: "object",
    "x-kubernetes-embedded-resource": true,
    "x-kubernetes-preserve-unknown-fields": true,
  });
}

/**
 * How server-side apply merges a list: "atomic" replaces it whole, "set" merges unique scalars, "map"
 * merges items by `mapKeys` (which must be required fields of the items, or have defaults).
 */
export function listType<T extends TSchema>(array: T, type: "atomic" | "set" | "map", mapKeys?: string[]): T {
  if (type === "map" && (!mapKeys || mapKeys.length === 0))
    throw new TypeError('listType(array, "map") needs mapKeys: pass the item fields that identify an item');
  if (type !== "map" && mapKeys)
    throw new TypeError(`listType(array, "${type}") takes no mapKeys: they only apply to "map" lists`);
  const keywords: K8sKeywords = { "x-kubernetes-list-type": type };
  if (mapKeys) keywords["x-kubernetes-list-map-keys"] = mapKeys;
  return withKeywords(array, keywords);
}

/** How server-side apply merges an object: "granular" merges field by field, "atomic" replaces it whole. */
export function mapType<T extends TSchema>(object: T, type: "granular" | "atomic"): T {
  return withKeywords(object, { "x-kubernetes-map-type": type });
}

/** Attach CEL rules (`x-kubernetes-validations`) to a schema node; they add to rules already there. */
export function cel<T extends TSchema>(schema: T, rules: CelRule[]): T {
  const existing = (schema as Record<string, unknown>)["x-kubernetes-validations"];
  const prior = Array.isArray(existing) ? (existing as CelRule[]) : [];
  return withKeywords(schema, { "x-kubernetes-validations": [...prior, ...rules] });
}

/**
 * Allow `null` for a field. A union with null, so runtime validation accepts null; the CRD generator
 * turns it into `nullable: true`.
 */
export function nullable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  return Type.Unsafe<Static<T> | null>(Type.Union([schema, Type.Null()]));
}

/** A string restricted to the given values: `Type.Union` of literals, which becomes `type` + `enum`. */
export function stringEnum<const V extends readonly [string, ...string[]]>(
  values: V,
  options: { description?: string; default?: V[number] } = {},
) {
  return Type.Unsafe<V[number]>({ ...options, type: "string", enum: [...values] });
}

/**
 * The standard `status.conditions` list, keyed by `type` as Kubernetes' own APIs are. It fits both
 * metav1.Condition (what setCondition, manageError and manageSuccess write) and the older
 * Deployment-style conditions (`lastUpdateTime`, reason and message optional), so a status that mirrors a
 * DeploymentStatus keeps every field instead of having some pruned by the API server.
 */
export function conditions(options: { description?: string } = {}) {
  return listType(
    Type.Array(
      Type.Object({
        type: Type.String({ description: "Type of condition in CamelCase, e.g. Ready.", maxLength: 316 }),
        // Typed string, not the union: the built-in types (DeploymentCondition) declare a string, and a
        // status that copies theirs must type-check. The server still allows only these three values.
        status: Type.Unsafe<string>({
          type: "string",
          enum: ["True", "False", "Unknown"],
          description: "Status of the condition: True, False or Unknown.",
        }),
        reason: Type.Optional(
          Type.String({
            description: "Machine-readable reason for the last transition, in CamelCase.",
            maxLength: 1024,
          }),
        ),
        message: Type.Optional(
          Type.String({
            description: "Human-readable details about the last transition.",
            maxLength: 32768,
          }),
        ),
        observedGeneration: Type.Optional(
          Type.Integer({ minimum: 0, description: "The generation the condition was set for." }),
        ),
        lastTransitionTime: Type.Optional(
          Type.String({ format: "date-time", description: "When the status last changed." }),
        ),
        lastUpdateTime: Type.Optional(
          Type.String({
            format: "date-time",
            description: "When the condition was last updated (Deployment-style conditions).",
          }),
        ),
      }),
      { description: options.description ?? "Standard conditions, e.g. Ready." },
    ),
    "map",
    ["type"],
  );
}

/** The schema keywords whose values are schemas (the rest hold data, which may use any key). */
const SUBSCHEMA_MAPS = ["properties", "patternProperties"] as const;
const SUBSCHEMAS = ["items", "additionalProperties", "not"] as const;
const SUBSCHEMA_LISTS = ["anyOf", "oneOf", "allOf"] as const;

/**
 * The schema without descriptions, at every depth; `description` sets the top one. For large embedded
 * types (a PodTemplateSpec inlines hundreds of described fields) when the CRD must stay small; the
 * cost is that `kubectl explain` has nothing to say about those fields. Shared sub-schemas stay shared.
 */
export function withoutDescriptions<T extends TSchema>(schema: T, options: { description?: string } = {}): T {
  const done = new WeakMap<object, object>();
  const strip = (node: unknown): unknown => {
    if (typeof node !== "object" || node === null || Array.isArray(node)) return node;
    const seen = done.get(node);
    if (seen) return seen;
    // Own keys with their descriptors, so TypeBox's hidden markers (`~optional`, `~kind`) survive.
    const copy = Object.create(Object.getPrototypeOf(node) as object) as Record<string | symbol, unknown>;
    done.set(node, copy);
    for (const key of Reflect.ownKeys(node)) {
      if (key === "description") continue;
      const descriptor = Object.getOwnPropertyDescriptor(node, key) as PropertyDescriptor;
      const value: unknown = descriptor.value;
      if ((SUBSCHEMA_MAPS as readonly (string | symbol)[]).includes(key) && isPlainRecord(value)) {
        const map: Record<string, unknown> = {};
        for (const [name, child] of Object.entries(value)) map[name] = strip(child);
        descriptor.value = map;
      } else if ((SUBSCHEMAS as readonly (string | symbol)[]).includes(key)) {
        descriptor.value = strip(value);
      } else if ((SUBSCHEMA_LISTS as readonly (string | symbol)[]).includes(key) && Array.isArray(value)) {
        descriptor.value = value.map(strip);
      }
      Object.defineProperty(copy, key, descriptor);
    }
    return copy;
  };
  const out = strip(schema) as T;
  return options.description === undefined ? out : withKeywords(out, { description: options.description });
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
