/**
 * CRDs from kind definitions (controller-gen's `crd` generator for opkit). The TypeBox schemas become
 * STRUCTURAL OpenAPI v3 schemas — what the API server needs to prune, default and validate — and
 * anything the server would reject fails here first with a `SchemaError` naming the field.
 */
import { stringify } from "yaml";
import { Value } from "typebox/value";
import type { TSchema } from "typebox";
import { isKindVersions, KindDefinitionError, type KindDefinition, type KindVersions } from "../api/kind.ts";
import type {
  CustomResourceColumnDefinition,
  CustomResourceDefinition,
  CustomResourceDefinitionVersion,
  JSONSchemaProps,
} from "./crd-types.ts";

/** A schema the API server would reject; `path` names the field (`spec.items[].name`). */
export class SchemaError extends Error {
  /** The kind whose schema is wrong. */
  readonly kind: string;
  /** The version whose schema is wrong. */
  readonly version: string;
  /** The field that is wrong, e.g. `spec.items[].name` ("" for the root). */
  readonly path: string;
  constructor(kind: string, version: string, path: string, problem: string) {
    super(`${kind} ${version} ${path || "<root>"}: ${problem}`);
    this.name = "SchemaError";
    this.kind = kind;
    this.version = version;
    this.path = path;
  }
}

/** What `crdFor` accepts: one version, several versions of one kind, or a `defineKindVersions` result. */
export type CrdSource = KindDefinition | KindVersions | readonly KindDefinition[];

type Json = Record<string, unknown>;

const SCALAR_TYPES = new Set(["string", "integer", "number", "boolean"]);

/** The output key order, so the YAML reads like kubebuilder's and never depends on how options were written. */
const KEY_ORDER = [
  "description",
  "title",
  "type",
  "format",
  "nullable",
  "default",
  "example",
  "enum",
  "minimum",
  "exclusiveMinimum",
  "maximum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "anyOf",
  "items",
  "properties",
  "additionalProperties",
  "required",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-int-or-string",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
  "x-kubernetes-validations",
] as const;

/** Keywords TypeBox or users may add that carry no meaning for the server; dropped silently. */
const IGNORED_KEYS = new Set([
  "$id",
  "$schema",
  "$comment",
  "examples",
  "readOnly",
  "writeOnly",
  "deprecated",
]);

/** JSON Schema keywords the server does not support; each says what to use instead. */
const UNSUPPORTED: Record<string, string> = {
  $ref: "references are not allowed in CRDs; inline the schema",
  $defs: "definitions are not allowed in CRDs; inline the schema",
  definitions: "definitions are not allowed in CRDs; inline the schema",
  oneOf: "oneOf is not structural; use optional fields plus a CEL rule (cel()) to require exactly one",
  allOf: "allOf (Type.Intersect) is not structural; merge the objects into one Type.Object",
  not: "not is not structural; express the constraint as a CEL rule (cel())",
  if: "if/then/else is not supported; express the constraint as a CEL rule (cel())",
  prefixItems: "tuples are not supported; use Type.Array with one item schema",
  additionalItems: "tuples are not supported; use Type.Array with one item schema",
  dependencies: "dependencies are not supported; use a CEL rule (cel())",
  dependentRequired: "dependentRequired is not supported; use a CEL rule (cel())",
  const: "const is converted to enum; this should not be reached",
};

/** How `crdFor` and friends render schemas. */
export interface CrdOptions {
  /**
   * Keep the field descriptions inside embedded built-in schemas (a Job or Pod template, a Condition).
   * Default false, as most of a template's size is descriptions: the field holding the template keeps
   * its own description, its sub-fields have none (`kubectl explain` shows the built-in kind's own
   * documentation for them).
   */
  builtinDescriptions?: boolean;
}

interface Ctx {
  kind: string;
  version: string;
  /** Keep descriptions below embedded built-in schemas. */
  builtinDescriptions?: boolean;
  /** Converting the inside of an embedded built-in schema. */
  inBuiltin?: boolean;
}

/** The fields of an embedded ObjectMeta that the server keeps, as controller-gen's generateEmbeddedObjectMeta. */
const EMBEDDED_META_FIELDS = ["annotations", "finalizers", "labels", "name", "namespace"];

/** A schema from `opkit/schemas` (made with Type.Unsafe, which marks it), or a described copy of one. */
function isBuiltinSchema(node: Json): boolean {
  return (
    Object.prototype.hasOwnProperty.call(node, "~unsafe") && (node.type === "object" || node.type === "array")
  );
}

/** meta/v1 ObjectMeta (by its fields, so a copy of the schemas from another opkit counts too). */
function isObjectMeta(node: Json): boolean {
  const props = node.properties;
  return (
    isRecord(props) &&
    ["managedFields", "ownerReferences", "resourceVersion", "uid", "name", "labels"].every((k) => k in props)
  );
}

/**
 * An embedded ObjectMeta (the metadata of a Pod or Job template) restricted to what the server keeps for
 * embedded objects: name, namespace, labels, annotations and finalizers. Expanding the rest (managed
 * fields, owner references) would only make the CRD larger; the server would never store them.
 */
function embeddedObjectMeta(node: Json): Json {
  const props = node.properties as Json;
  const kept: Json = {};
  for (const k of EMBEDDED_META_FIELDS) if (props[k] !== undefined) kept[k] = props[k];
  const out: Json = { type: "object", properties: kept };
  if (node.description !== undefined) out.description = node.description;
  return out;
}

function fail(ctx: Ctx, path: string, problem: string): never {
  throw new SchemaError(ctx.kind, ctx.version, path, problem);
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** The single JSON type of enum values; integers and numbers mixed count as number. */
function enumType(ctx: Ctx, path: string, values: unknown[]): string {
  const types = new Set(values.filter((v) => v !== null).map(jsonType));
  if (types.has("integer") && types.has("number")) types.delete("integer");
  if (types.size !== 1)
    fail(
      ctx,
      path,
      `enum values ${JSON.stringify(values)} mix JSON types (${[...types].join(", ") || "none"}); the server needs one type per field — use literals of one type`,
    );
  return [...types][0] as string;
}

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function ordered(out: Json): JSONSchemaProps {
  const result: Json = {};
  for (const key of KEY_ORDER) if (out[key] !== undefined) result[key] = out[key];
  return result;
}

/**
 * Resolve a union: null branches become `nullable`, literal branches become `enum`, int-or-string
 * stays an anyOf, one remaining branch is merged into the node. Returns the node without `anyOf`.
 */
function flattenUnion(ctx: Ctx, path: string, node: Json): Json {
  const branches = node.anyOf;
  if (!Array.isArray(branches)) fail(ctx, path, "anyOf must be a list of schemas");
  const rest: Json = { ...node };
  delete rest.anyOf;
  const nonNull = (branches as unknown[]).filter((b) => !(isRecord(b) && b.type === "null"));
  if (nonNull.length < branches.length) rest.nullable = true;
  if (nonNull.length === 0) fail(ctx, path, "a field that can only be null has no type; give it a real type");
  if (nonNull.length === 1) return { ...(nonNull[0] as Json), ...rest };
  // Nested unions (Type.Union of unions) flatten first.
  const flat = nonNull.map((b) => (isRecord(b) && Array.isArray(b.anyOf) ? flattenUnion(ctx, path, b) : b));
  if (flat.every((b) => isRecord(b) && ("const" in b || Array.isArray(b.enum)))) {
    const values: unknown[] = [];
    for (const b of flat as Json[]) {
      for (const v of "const" in b ? [b.const] : (b.enum as unknown[])) {
        if (!values.some((x) => JSON.stringify(x) === JSON.stringify(v))) values.push(v);
      }
    }
    return { ...rest, type: enumType(ctx, path, values), enum: values };
  }
  const types = flat.map((b) => (isRecord(b) ? b.type : undefined));
  const hint =
    types.length === 2 && types.includes("integer") && types.includes("string")
      ? "use intOrString() (x-kubernetes-int-or-string) for a field that is an integer or a string"
      : "the server only accepts unions of literals (enums) and int-or-string; use one type with optional fields and a CEL rule (cel()) instead";
  return fail(ctx, path, `a union of ${JSON.stringify(types)} is not a structural schema: ${hint}`);
}

/**
 * The node as plain JSON Schema in the forms the rest of the conversion expects: TypeBox markers and
 * meaningless keywords dropped, an embedded ObjectMeta restricted, unions flattened, a type list reduced
 * to one type, `const` as an enum.
 */
function normalize(ctx: Ctx, path: string, input: Json): Json {
  const source = isBuiltinSchema(input) && isObjectMeta(input) ? embeddedObjectMeta(input) : input;
  // Enumerable own keys only: TypeBox keeps its markers (`~kind`, `~optional`) non-enumerable.
  let node: Json = {};
  for (const [k, v] of Object.entries(source)) if (!k.startsWith("~") && !IGNORED_KEYS.has(k)) node[k] = v;
  if (Array.isArray(node.anyOf) && node["x-kubernetes-int-or-string"] !== true)
    node = flattenUnion(ctx, path, node);
  // A list of types (draft-2020 `type: ["string", "null"]`).
  if (Array.isArray(node.type)) {
    const types = (node.type as unknown[]).filter((t) => t !== "null");
    if (types.length < (node.type as unknown[]).length) node.nullable = true;
    if (types.length !== 1)
      fail(ctx, path, `type ${JSON.stringify(node.type)} has several types; the server needs exactly one`);
    node.type = types[0];
  }
  if ("const" in node) {
    node.enum = [node.const];
    delete node.const;
  }
  if (Array.isArray(node.enum) && node.type === undefined) node.type = enumType(ctx, path, node.enum);
  return node;
}

/** Every keyword must be one the server knows; a node needs a type (or keeps unknown fields). */
function checkKeywordsAndType(ctx: Ctx, path: string, node: Json, out: Json): void {
  for (const key of Object.keys(node)) {
    const reason = UNSUPPORTED[key];
    if (reason) fail(ctx, path, `${key}: ${reason}`);
    if (
      !(KEY_ORDER as readonly string[]).includes(key) &&
      key !== "patternProperties" &&
      key !== "uniqueItems"
    )
      fail(ctx, path, `"${key}" is not a keyword the API server knows; remove it (or use a description)`);
  }
  if (node["x-kubernetes-int-or-string"] === true) {
    if (node.type !== undefined)
      fail(ctx, path, "an int-or-string field must not set type; use intOrString() alone");
    hoistIntOrString(ctx, path, node, out);
  } else if (node.type === "null") {
    fail(ctx, path, "a field that can only be null has no type; give it a real type");
  } else if (node.type === undefined && node["x-kubernetes-preserve-unknown-fields"] !== true) {
    fail(
      ctx,
      path,
      "has no type: every field of a structural schema needs one; for arbitrary JSON use preserveUnknownFields()",
    );
  }
  if (
    node.type !== undefined &&
    typeof node.type === "string" &&
    !["object", "array", ...SCALAR_TYPES].includes(node.type)
  )
    fail(ctx, path, `type "${node.type}" is not a JSON type the server knows`);
}

/** JSON Schema draft 2020 bounds are numbers; OpenAPI v3 (the server) wants a boolean next to min/max. */
function convertBounds(ctx: Ctx, path: string, node: Json, out: Json): void {
  for (const [ex, bound, stricter] of [
    ["exclusiveMinimum", "minimum", (a: number, b: number) => a >= b],
    ["exclusiveMaximum", "maximum", (a: number, b: number) => a <= b],
  ] as const) {
    const value = node[ex];
    if (typeof value === "number") {
      const current = node[bound];
      if (typeof current !== "number" || stricter(value, current)) {
        out[bound] = value;
        out[ex] = true;
      } else delete out[ex];
    } else if (value !== undefined && typeof value !== "boolean") {
      fail(ctx, path, `${ex} must be a number`);
    }
  }
}

/** The Kubernetes extensions apply to one type each; CEL rules keep only the fields the server knows. */
function checkExtensions(ctx: Ctx, path: string, node: Json, out: Json): void {
  if (node["x-kubernetes-embedded-resource"] === true && node.type !== "object")
    fail(ctx, path, "an embedded resource must have type object; use embeddedResource()");
  if (node["x-kubernetes-list-type"] !== undefined && node.type !== "array")
    fail(ctx, path, "x-kubernetes-list-type only applies to arrays");
  if (node["x-kubernetes-map-type"] !== undefined && node.type !== "object")
    fail(ctx, path, "x-kubernetes-map-type only applies to objects");
  const rules = node["x-kubernetes-validations"];
  if (rules !== undefined) {
    if (!Array.isArray(rules) || rules.some((r) => !isRecord(r) || typeof r.rule !== "string" || !r.rule))
      fail(ctx, path, "x-kubernetes-validations must be a list of { rule: string, ... }; use cel()");
    out["x-kubernetes-validations"] = (rules as Json[]).map((r) => {
      const rule: Json = {};
      for (const k of ["rule", "message", "messageExpression", "fieldPath", "reason", "optionalOldSelf"])
        if (r[k] !== undefined) rule[k] = r[k];
      return rule;
    });
  }
}

/** Convert one TypeBox node into a structural JSONSchemaProps node. */
function convert(ctx: Ctx, path: string, input: unknown): JSONSchemaProps {
  if (!isRecord(input)) fail(ctx, path, `expected a schema object, got ${JSON.stringify(input)}`);
  const node = normalize(ctx, path, input);
  // Below an embedded built-in schema every field is built-in too.
  const inner: Ctx = isBuiltinSchema(input) && !ctx.inBuiltin ? { ...ctx, inBuiltin: true } : ctx;
  const out: Json = { ...node };
  checkKeywordsAndType(ctx, path, node, out);
  convertBounds(ctx, path, node, out);
  if (node.type === "object" || node.properties || node.patternProperties || node.additionalProperties) {
    convertObject(inner, path, node, out);
  } else if (node.required !== undefined) {
    fail(ctx, path, "required only applies to objects");
  }
  if (node.type === "array") convertArray(inner, path, node, out);
  else if (node.items !== undefined)
    fail(ctx, path, `items only applies to arrays, but the type is ${String(node.type)}`);
  checkExtensions(ctx, path, node, out);
  if (node.default !== undefined) checkDefault(ctx, path, input, node.default);
  if (ctx.inBuiltin && !ctx.builtinDescriptions) delete out.description;
  return ordered(out);
}

/** Keep int-or-string's anyOf in the one shape the server allows, with string constraints on the node. */
function hoistIntOrString(ctx: Ctx, path: string, node: Json, out: Json): void {
  const branches = node.anyOf;
  if (branches !== undefined) {
    const list = Array.isArray(branches) ? (branches as unknown[]) : [];
    const types = list.map((b) => (isRecord(b) ? b.type : undefined)).sort();
    if (list.length !== 2 || types[0] !== "integer" || types[1] !== "string")
      fail(ctx, path, "an int-or-string field's anyOf must be [integer, string]; use intOrString()");
    for (const b of list as Json[]) {
      for (const [k, v] of Object.entries(b)) {
        if (k === "type" || k.startsWith("~")) continue;
        if (b.type !== "string" || !["pattern", "minLength", "maxLength", "format"].includes(k))
          fail(
            ctx,
            path,
            `int-or-string branch ${String(b.type)} sets "${k}"; put constraints on the field itself`,
          );
        if (out[k] !== undefined && out[k] !== v)
          fail(ctx, path, `"${k}" is set both on the field and on its string branch; set it once`);
        out[k] = v;
      }
    }
  }
  out.anyOf = [{ type: "integer" }, { type: "string" }];
}

function convertObject(ctx: Ctx, path: string, node: Json, out: Json): void {
  if (node.type === undefined && node["x-kubernetes-preserve-unknown-fields"] !== true) out.type = "object";
  const props = node.properties;
  const pattern = node.patternProperties;
  let additional = node.additionalProperties;
  if (pattern !== undefined) {
    // Type.Record(Type.String(), V) is a map with any key: additionalProperties in OpenAPI v3.
    const entries = isRecord(pattern) ? Object.entries(pattern) : [];
    const [key, value] = entries[0] ?? [];
    if (entries.length !== 1 || !["^.*$", "^(.*)$", "^.+$"].includes(key ?? ""))
      fail(
        ctx,
        path,
        `patternProperties ${JSON.stringify(Object.keys(pattern as Json))} are not supported; use Type.Record(Type.String(), V) (any key) and a CEL rule on the keys if needed`,
      );
    if (additional !== undefined && additional !== false)
      fail(ctx, path, "a map cannot have both patternProperties and additionalProperties");
    additional = value;
    delete out.patternProperties;
  }
  if (props !== undefined) {
    if (!isRecord(props)) fail(ctx, path, "properties must be an object");
    const converted: Record<string, JSONSchemaProps> = {};
    for (const [name, child] of Object.entries(props))
      converted[name] = convert(ctx, join(path, name), child);
    if (Object.keys(converted).length > 0) out.properties = converted;
    else delete out.properties;
  }
  if (additional === false) {
    // The server prunes undeclared fields anyway and rejects additionalProperties: false.
    delete out.additionalProperties;
  } else if (additional === true) {
    delete out.additionalProperties;
    out["x-kubernetes-preserve-unknown-fields"] = true;
  } else if (additional !== undefined) {
    if (props !== undefined && Object.keys(props).length > 0)
      fail(
        ctx,
        path,
        "an object cannot have both properties and a schema for additionalProperties; split it into a map field and a struct field",
      );
    out.additionalProperties = convert(ctx, `${path}[*]`, additional);
  }
  if (node.required !== undefined) {
    const required = node.required;
    if (!Array.isArray(required) || required.some((r) => typeof r !== "string"))
      fail(ctx, path, "required must be a list of field names");
    for (const r of required as string[])
      if (!isRecord(props) || !(r in props))
        fail(
          ctx,
          join(path, r),
          "is required but not declared in properties; declare it or drop it from required",
        );
    if ((required as string[]).length === 0) delete out.required;
    else out.required = [...(required as string[])];
  }
}

function convertArray(ctx: Ctx, path: string, node: Json, out: Json): void {
  if (!isRecord(node.items))
    fail(
      ctx,
      path,
      "an array needs one item schema (Type.Array(item)); tuples and item lists are not supported",
    );
  const items = convert(ctx, `${path}[]`, node.items);
  out.items = items;
  let listType = node["x-kubernetes-list-type"];
  if (node.uniqueItems === true) {
    // The server forbids uniqueItems (quadratic); a "set" list gives the same guarantee for scalars.
    delete out.uniqueItems;
    if (listType === undefined) listType = "set";
    else if (listType === "atomic")
      fail(ctx, path, 'uniqueItems with listType "atomic": drop uniqueItems or use listType "set"');
  } else {
    delete out.uniqueItems;
  }
  if (listType !== undefined) {
    out["x-kubernetes-list-type"] = listType;
    if (
      listType === "set" &&
      !(items.type && SCALAR_TYPES.has(items.type)) &&
      !items["x-kubernetes-int-or-string"]
    )
      fail(
        ctx,
        path,
        `a set list (listType "set" or uniqueItems) needs scalar items, but they are ${String(items.type)}; for objects use listType(array, "map", keys)`,
      );
    if (listType === "map") {
      const keys = node["x-kubernetes-list-map-keys"];
      if (!Array.isArray(keys) || keys.length === 0)
        fail(ctx, path, 'listType "map" needs x-kubernetes-list-map-keys; use listType(array, "map", keys)');
      if (items.type !== "object") fail(ctx, path, 'listType "map" needs object items');
      for (const key of keys as string[]) {
        const prop = items.properties?.[key];
        if (!prop)
          fail(ctx, `${path}[].${key}`, "is a list map key but not a field of the items; declare it");
        if (!items.required?.includes(key) && prop.default === undefined)
          fail(ctx, `${path}[].${key}`, "is a list map key, so it must be required or have a default");
      }
    } else if (node["x-kubernetes-list-map-keys"] !== undefined) {
      fail(ctx, path, 'x-kubernetes-list-map-keys only applies to listType "map"');
    }
  }
}

function join(path: string, name: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(name)
    ? path
      ? `${path}.${name}`
      : name
    : `${path}[${JSON.stringify(name)}]`;
}

function checkDefault(ctx: Ctx, path: string, schema: Json, value: unknown): void {
  let ok: boolean;
  let detail = "";
  try {
    ok = Value.Check(schema as TSchema, value);
    if (!ok) {
      const first = [...Value.Errors(schema as TSchema, value)][0];
      if (first) detail = `: ${first.instancePath || "value"} ${first.message}`;
    }
  } catch (err) {
    ok = false;
    detail = `: ${(err as Error).message}`;
  }
  if (!ok)
    fail(
      ctx,
      path,
      `default ${JSON.stringify(value)} does not satisfy the field's own schema${detail}; fix the default`,
    );
}

/** Walk a simple `.a.b` path through a converted schema. */
function schemaAt(root: JSONSchemaProps, jsonPath: string): JSONSchemaProps | undefined {
  let node: JSONSchemaProps | undefined = root;
  for (const part of jsonPath.split(".").slice(1)) node = node?.properties?.[part];
  return node;
}

const SIMPLE_PATH = /^(\.[A-Za-z0-9_-]+)+$/;

/** `schema` with `description` when it has none, so `kubectl explain` never shows an empty one. */
function describedOr(schema: JSONSchemaProps, description: string): JSONSchemaProps {
  return schema.description ? schema : ordered({ ...schema, description });
}

/** The openAPIV3Schema of one version. Exported for tests and for tools that want just the schema. */
export function schemaFor(def: KindDefinition, options: CrdOptions = {}): JSONSchemaProps {
  const ctx: Ctx = { kind: def.kind, version: def.version, builtinDescriptions: options.builtinDescriptions };
  const properties: Record<string, JSONSchemaProps> = {
    apiVersion: {
      description:
        "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
      type: "string",
    },
    kind: {
      description:
        "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. In CamelCase.",
      type: "string",
    },
    // Only name/generateName may be constrained; the server owns the rest of metadata.
    metadata: { type: "object" },
    spec: describedOr(convert(ctx, "spec", def.spec), `Spec is the desired state of the ${def.kind}.`),
  };
  if (properties.spec?.type !== "object") fail(ctx, "spec", "must be an object schema (Type.Object)");
  if (def.status) {
    properties.status = describedOr(
      convert(ctx, "status", def.status),
      `Status is the observed state of the ${def.kind}, written by its controller.`,
    );
    if (properties.status.type !== "object") fail(ctx, "status", "must be an object schema (Type.Object)");
  }
  const root: Json = { description: def.description, type: "object", properties, required: ["spec"] };
  if (def.validations.length > 0) {
    root["x-kubernetes-validations"] = def.validations;
    return convertRootRules(ctx, root);
  }
  return ordered(root);
}

function convertRootRules(ctx: Ctx, root: Json): JSONSchemaProps {
  const rules = root["x-kubernetes-validations"] as Json[];
  for (const r of rules)
    if (typeof r.rule !== "string" || !r.rule) fail(ctx, "", "every validation needs a non-empty rule");
  root["x-kubernetes-validations"] = rules.map((r) => {
    const rule: Json = {};
    for (const k of ["rule", "message", "messageExpression", "fieldPath", "reason", "optionalOldSelf"])
      if (r[k] !== undefined) rule[k] = r[k];
    return rule;
  });
  return ordered(root);
}

function versionFor(
  def: KindDefinition,
  storage: boolean,
  options: CrdOptions,
): CustomResourceDefinitionVersion {
  const ctx: Ctx = { kind: def.kind, version: def.version };
  const schema = schemaFor(def, options);
  const version: CustomResourceDefinitionVersion = { name: def.version, served: def.served, storage };
  if (def.deprecated) version.deprecated = true;
  if (def.deprecationWarning !== undefined) version.deprecationWarning = def.deprecationWarning;
  version.schema = { openAPIV3Schema: schema };
  if (def.status || def.scale) {
    version.subresources = {};
    if (def.status) version.subresources.status = {};
    if (def.scale) {
      const { specReplicasPath, statusReplicasPath, labelSelectorPath } = def.scale;
      for (const [name, p, prefix] of [
        ["specReplicasPath", specReplicasPath, ".spec."],
        ["statusReplicasPath", statusReplicasPath, ".status."],
      ] as const) {
        if (!p.startsWith(prefix) || !SIMPLE_PATH.test(p))
          fail(
            ctx,
            "scale",
            `${name} "${p}" must be a simple path under ${prefix.slice(0, -1)}, e.g. "${prefix}replicas"`,
          );
        if (schemaAt(schema, p)?.type !== "integer")
          fail(ctx, p.slice(1), `scale ${name} must point to an integer field; declare it as Type.Integer()`);
      }
      version.subresources.scale = { specReplicasPath, statusReplicasPath };
      if (labelSelectorPath !== undefined) {
        if (!labelSelectorPath.startsWith(".status.") && !labelSelectorPath.startsWith(".spec."))
          fail(ctx, "scale", `labelSelectorPath "${labelSelectorPath}" must be under .status or .spec`);
        version.subresources.scale.labelSelectorPath = labelSelectorPath;
      }
    }
  }
  if (def.printerColumns.length > 0) {
    const columns: CustomResourceColumnDefinition[] = [];
    for (const c of def.printerColumns) {
      if (
        SIMPLE_PATH.test(c.jsonPath) &&
        /^\.(spec|status)\./.test(c.jsonPath) &&
        !schemaAt(schema, c.jsonPath)
      )
        fail(
          ctx,
          c.jsonPath.slice(1),
          `printer column "${c.name}" points to a field the schema does not declare`,
        );
      const col: CustomResourceColumnDefinition = { name: c.name, type: c.type, jsonPath: c.jsonPath };
      if (c.description !== undefined) col.description = c.description;
      if (c.priority !== undefined) col.priority = c.priority;
      if (c.format !== undefined) col.format = c.format;
      columns.push(col);
    }
    // Custom columns replace the server's default Age column; keep it, as kubectl users expect it.
    if (!columns.some((c) => c.jsonPath === ".metadata.creationTimestamp"))
      columns.push({ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" });
    version.additionalPrinterColumns = columns;
  }
  return version;
}

function toVersions(source: CrdSource): readonly KindDefinition[] {
  if (Array.isArray(source)) return source as readonly KindDefinition[];
  const one = source as KindDefinition | KindVersions;
  return isKindVersions(one) ? one.versions : [one];
}

function crdFromVersions(
  defs: readonly KindDefinition[],
  options: CrdOptions = {},
): CustomResourceDefinition {
  const first = defs[0];
  if (!first) throw new KindDefinitionError("crdFor: no kind definitions given; pass at least one");
  for (const d of defs)
    for (const field of ["group", "kind", "plural", "scope"] as const)
      if (d[field] !== first[field])
        throw new KindDefinitionError(
          `crdFor(${first.kind}): version ${d.version} has ${field} "${d[field]}" but ${first.version} has "${first[field]}"; all versions of a kind must agree`,
        );
  const names = new Set(defs.map((d) => d.version));
  if (names.size !== defs.length)
    throw new KindDefinitionError(
      `crdFor(${first.kind}): a version is defined twice; give each its own version`,
    );
  const storage = defs.length === 1 ? [first] : defs.filter((d) => d.storage === true);
  if (storage.length !== 1 || (defs.length === 1 && first.storage === false))
    throw new KindDefinitionError(
      `crdFor(${first.kind}): exactly one version must set storage: true, found ${storage.length} (${defs.map((d) => `${d.version}: ${String(d.storage)}`).join(", ")})`,
    );
  // Names and printing settings belong to the whole CRD; take them from the storage version.
  const main = storage[0] as KindDefinition;
  const names2: CustomResourceDefinition["spec"]["names"] = {
    kind: main.kind,
    listKind: `${main.kind}List`,
    plural: main.plural,
    singular: main.singular,
  };
  if (main.shortNames.length > 0) names2.shortNames = [...main.shortNames];
  if (main.categories.length > 0) names2.categories = [...main.categories];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${main.plural}.${main.group}` },
    spec: {
      group: main.group,
      names: names2,
      scope: main.scope,
      versions: defs.map((d) => versionFor(d, d === main, options)),
      // Identical schemas need no conversion webhook; the server just relabels apiVersion.
      ...(defs.length > 1 ? { conversion: { strategy: "None" as const } } : {}),
    },
  };
}

/**
 * The CRD for one kind: one version, an array of versions of that kind, or `defineKindVersions(...)`.
 * Throws `SchemaError` (naming the field) for anything the API server would reject.
 */
export function crdFor(source: CrdSource, options: CrdOptions = {}): CustomResourceDefinition {
  return crdFromVersions(toVersions(source), options);
}

/**
 * CRDs for several kinds. Definitions of the same group and kind are collected into one CRD with
 * several versions; the order follows the first appearance of each kind.
 */
export function crdsFor(
  sources: readonly (KindDefinition | KindVersions)[],
  options: CrdOptions = {},
): CustomResourceDefinition[] {
  const byKind = new Map<string, KindDefinition[]>();
  for (const s of sources) {
    for (const d of toVersions(s)) {
      const key = `${d.group}/${d.kind}`;
      const list = byKind.get(key) ?? [];
      list.push(d);
      byKind.set(key, list);
    }
  }
  return [...byKind.values()].map((defs) => crdFromVersions(defs, options));
}

/**
 * The most bytes client-side `kubectl apply` can store of an object: it keeps the whole object in the
 * `kubectl.kubernetes.io/last-applied-configuration` annotation, and annotations hold 256 KiB.
 */
export const CLIENT_SIDE_APPLY_LIMIT = 262_144;

/** The size of `crd` as client-side `kubectl apply` stores it (compact JSON), in bytes. */
export function appliedSize(crd: CustomResourceDefinition): number {
  return Buffer.byteLength(JSON.stringify(crd));
}

/**
 * Deterministic YAML (one document per CRD, `---` between them): the same definitions always give the
 * same bytes, so regenerating leaves the file untouched.
 */
export function crdYaml(
  sources: KindDefinition | KindVersions | readonly (KindDefinition | KindVersions)[],
  options: CrdOptions = {},
): string {
  const list = Array.isArray(sources)
    ? (sources as readonly (KindDefinition | KindVersions)[])
    : [sources as KindDefinition | KindVersions];
  return crdsFor(list, options)
    .map((crd) => stringify(crd, { lineWidth: 0, aliasDuplicateObjects: false }))
    .join("---\n");
}
