/**
 * The built-in API types as TypeBox schemas and TypeScript interfaces, generated from the API server's
 * own OpenAPI v3 documents (what `make schemas` runs; the output is committed under
 * `src/api/schemas/` and `src/client/models/`).
 *
 * What the generator does to the OpenAPI so that every schema is usable inside `defineKind` and passes
 * `crdFor` as a structural schema:
 * - `$ref`s are resolved into references between generated constants (a CRD cannot contain `$ref`);
 *   the one recursive type (apiextensions' JSONSchemaProps) is cut where it refers to itself: that
 *   field keeps unknown fields instead of describing them;
 * - IntOrString becomes `intOrString()` and Quantity `quantity()` (`x-kubernetes-int-or-string`);
 * - free-form objects (RawExtension, FieldsV1) and untyped values (apiextensions' JSON) keep their
 *   content (`x-kubernetes-preserve-unknown-fields`) instead of being pruned;
 * - list and map types (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`) are kept; strategic
 *   merge patch hints, unions and group-version-kind tags are dropped (no CRD may carry them);
 * - defaults that only restate Go's zero value (`""`, `0`, `false`, `{}`) are dropped: in a CRD they
 *   would fill every missing field and make required fields pass by default. Real defaults ("TCP") stay,
 *   and so do zero defaults of list-map keys, which the server needs to key items that omit them.
 *
 * It knows nothing about the files on disk beyond their paths: the caller writes them.
 */
import type { KubeClient } from "../client/client.ts";

/** The OpenAPI v3 documents (paths under `/openapi/v3/`) that hold the generated group-versions. */
export const BUILTIN_API_DOCUMENTS: readonly string[] = [
  "api/v1",
  "apis/admissionregistration.k8s.io/v1",
  "apis/apiextensions.k8s.io/v1",
  "apis/apps/v1",
  "apis/autoscaling/v2",
  "apis/batch/v1",
  "apis/coordination.k8s.io/v1",
  "apis/discovery.k8s.io/v1",
  "apis/events.k8s.io/v1",
  "apis/networking.k8s.io/v1",
  "apis/policy/v1",
  "apis/rbac.authorization.k8s.io/v1",
  "apis/scheduling.k8s.io/v1",
  "apis/storage.k8s.io/v1",
];

/** An OpenAPI v3 document as the API server serves it; only `components.schemas` is read. */
export interface OpenApiDocument {
  /**
   * The schema definitions by name (e.g. "io.k8s.api.core.v1.ServicePort"); the only part the generator
   * reads.
   */
  components?: {
    /** The schema definitions by name. */
    schemas?: Record<string, unknown>;
  };
  /** The rest of the document (paths, info), ignored. */
  [key: string]: unknown;
}

/** The OpenAPI was not what the generator understands; the message names the definition and field. */
export class BuiltinSchemaError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuiltinSchemaError";
  }
}

/** How the generated files describe their origin. */
export interface BuiltinSchemaOptions {
  /** The server's `gitVersion` (e.g. "v1.36.3"), written into each file's header. */
  kubernetesVersion: string;
}

/** Fetch the documents the generator reads (and the server version) from a live API server. */
export async function fetchBuiltinOpenApi(
  client: KubeClient,
  paths: readonly string[] = BUILTIN_API_DOCUMENTS,
): Promise<{
  /** The server's version, e.g. "v1.36.0", recorded in the generated files. */
  kubernetesVersion: string;
  /** The OpenAPI v3 documents by path, e.g. "api/v1". */
  documents: Record<string, OpenApiDocument>;
}> {
  const version = await client.raw<{ gitVersion?: string }>("GET", "/version");
  // The index lists what this server serves; a group it lacks is named here rather than as a 404.
  const index = await client.raw<{ paths?: Record<string, unknown> }>("GET", "/openapi/v3");
  const missing = paths.filter((p) => !(p in (index.paths ?? {})));
  if (missing.length > 0)
    throw new BuiltinSchemaError(
      `the API server does not serve ${missing.join(", ")} (GET /openapi/v3 lists what it does); drop them from the documents to generate`,
    );
  const documents: Record<string, OpenApiDocument> = {};
  for (const path of paths) documents[path] = await client.raw<OpenApiDocument>("GET", `/openapi/v3/${path}`);
  return { kubernetesVersion: version.gitVersion ?? "unknown", documents };
}

type Json = Record<string, unknown>;

/** A Go package the generator writes: `core/v1` is k8s.io/api/core/v1. */
interface Package {
  group: string;
  version: string;
  /** The Go import path, for doc comments. */
  goPackage: string;
  /** The identifier other files import it as (`corev1`, like Go code does). */
  alias: string;
}

interface Definition {
  key: string;
  name: string;
  pkg: Package;
  schema: Json;
}

/** Where the schemas go, relative to packages/opkit/src; everything in it is generated. */
export const SCHEMAS_DIR = "api/schemas";
/** Where the interfaces go, relative to packages/opkit/src; everything in it is generated. */
export const MODELS_DIR = "client/models";

const INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/** The package a definition key belongs to; apimachinery's few scalar types go with meta/v1. */
function packageOf(key: string): { pkg: Package; name: string } | undefined {
  const name = key.slice(key.lastIndexOf(".") + 1);
  const api = /^io\.k8s\.api\.([a-z0-9]+)\.(v[0-9]+(?:(?:alpha|beta)[0-9]+)?)\.[A-Za-z0-9]+$/.exec(key);
  if (api) {
    const [, group, version] = api as unknown as [string, string, string];
    return { pkg: pkg(group, version, `k8s.io/api/${group}/${version}`), name };
  }
  if (key.startsWith("io.k8s.apimachinery.pkg.apis.meta.v1."))
    return { pkg: pkg("meta", "v1", "k8s.io/apimachinery/pkg/apis/meta/v1"), name };
  if (key.startsWith("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."))
    return {
      pkg: pkg("apiextensions", "v1", "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"),
      name,
    };
  if (key === INT_OR_STRING || key === QUANTITY || key === "io.k8s.apimachinery.pkg.runtime.RawExtension")
    return { pkg: pkg("meta", "v1", "k8s.io/apimachinery/pkg/apis/meta/v1"), name };
  return undefined;
}

function pkg(group: string, version: string, goPackage: string): Package {
  return { group, version, goPackage, alias: `${group}${version}` };
}

/** The package an OpenAPI document path serves: `apis/rbac.authorization.k8s.io/v1` is rbac/v1. */
function packageOfDocument(path: string): string {
  const m = /^(?:api\/(v1)|apis\/([a-z0-9.-]+)\/(v[0-9a-z]+))$/.exec(path);
  if (!m) throw new BuiltinSchemaError(`document path "${path}" is not api/v1 or apis/<group>/<version>`);
  if (m[1]) return "core/v1";
  const group = (m[2] as string).split(".")[0] as string;
  return `${group}/${m[3] as string}`;
}

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Without the keys that differ between documents and carry nothing for schemas. */
function normalized(schema: unknown): string {
  return JSON.stringify(schema, (k, v: unknown) => (k === "x-kubernetes-group-version-kind" ? undefined : v));
}

function refKey(node: Json): string | undefined {
  const ref =
    node.$ref ??
    (Array.isArray(node.allOf) && node.allOf.length === 1 ? (node.allOf[0] as Json)?.$ref : undefined);
  if (typeof ref !== "string") return undefined;
  const prefix = "#/components/schemas/";
  if (!ref.startsWith(prefix))
    throw new BuiltinSchemaError(`$ref "${ref}" does not point into components.schemas`);
  return ref.slice(prefix.length);
}

/** Sub-schemas of a node (the places a `$ref` may hide). */
function children(node: Json): Json[] {
  const out: Json[] = [];
  for (const k of ["items", "additionalProperties", "not"]) if (isRecord(node[k])) out.push(node[k]);
  for (const k of ["allOf", "oneOf", "anyOf"])
    if (Array.isArray(node[k])) for (const s of node[k] as unknown[]) if (isRecord(s)) out.push(s);
  if (isRecord(node.properties)) for (const s of Object.values(node.properties)) if (isRecord(s)) out.push(s);
  return out;
}

function refsOf(node: Json, out: Set<string>): Set<string> {
  const key = refKey(node);
  if (key !== undefined) out.add(key);
  for (const c of children(node)) refsOf(c, out);
  return out;
}

/** A list kind (PodList): never embedded, so not generated. */
function isListKind(schema: Json): boolean {
  const gvk = schema["x-kubernetes-group-version-kind"];
  return (
    Array.isArray(gvk) &&
    gvk.some((g) => isRecord(g) && typeof g.kind === "string" && g.kind.endsWith("List")) &&
    isRecord(schema.properties) &&
    "items" in schema.properties
  );
}

/** A definition whose uses are written inline (a scalar or free-form value) instead of referenced. */
function isInline(def: Definition): boolean {
  return !isRecord(def.schema.properties);
}

const ZERO_DEFAULTS = new Set(['""', "0", "false", "{}"]);

/** Keywords of the OpenAPI that are kept, dropped, or understood; anything else fails the generator. */
const DROPPED = new Set([
  "x-kubernetes-patch-strategy",
  "x-kubernetes-patch-merge-key",
  "x-kubernetes-unions",
  "x-kubernetes-group-version-kind",
]);
const KNOWN = new Set([
  "description",
  "type",
  "format",
  "default",
  "enum",
  "items",
  "properties",
  "additionalProperties",
  "required",
  "allOf",
  "$ref",
  "oneOf",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-map-type",
]);

class Generator {
  readonly defs = new Map<string, Definition>();
  /** `defKey.property` of every list-map key, whose zero default the server needs. */
  readonly mapKeys = new Set<string>();
  /** Edges (from → to) cut to break recursion. */
  readonly cut = new Set<string>();
  readonly packages = new Map<string, Package>();
  readonly order: Definition[] = [];

  constructor(documents: Record<string, OpenApiDocument>) {
    const all = new Map<string, Json>();
    const wanted = new Set<string>(["meta/v1"]);
    for (const [path, doc] of Object.entries(documents)) {
      wanted.add(packageOfDocument(path));
      const schemas = doc.components?.schemas;
      if (!isRecord(schemas)) throw new BuiltinSchemaError(`document ${path} has no components.schemas`);
      for (const [key, schema] of Object.entries(schemas)) {
        if (!isRecord(schema)) throw new BuiltinSchemaError(`${key} in ${path} is not a schema object`);
        const prior = all.get(key);
        if (prior !== undefined && normalized(prior) !== normalized(schema))
          throw new BuiltinSchemaError(`${key} differs between documents (seen again in ${path})`);
        all.set(key, schema);
      }
    }
    for (const [key, schema] of all) {
      const where = packageOf(key);
      if (!where) continue;
      const id = `${where.pkg.group}/${where.pkg.version}`;
      if (!wanted.has(id) || isListKind(schema)) continue;
      this.packages.set(id, where.pkg);
      this.defs.set(key, { key, name: where.name, pkg: where.pkg, schema });
    }
    // Names the generated files use for their own imports; a type of the same name would shadow them.
    const reserved = new Set([
      "Type",
      "T",
      "intOrString",
      "quantity",
      ...[...this.packages.values()].map((p) => p.alias),
    ]);
    for (const def of this.defs.values()) {
      if (reserved.has(def.name))
        throw new BuiltinSchemaError(
          `${def.key}: the name ${def.name} is taken by the generated files' imports; rename the import`,
        );
      for (const ref of refsOf(def.schema, new Set())) {
        if (!this.defs.has(ref))
          throw new BuiltinSchemaError(
            `${def.key} refers to ${ref}, which is not among the generated packages (${[...wanted].join(", ")}); add its document`,
          );
      }
      this.collectMapKeys(def.schema);
    }
    this.sort();
  }

  private collectMapKeys(node: Json): void {
    if (node["x-kubernetes-list-type"] === "map" && isRecord(node.items)) {
      const item = refKey(node.items);
      const keys = node["x-kubernetes-list-map-keys"];
      if (item !== undefined && Array.isArray(keys))
        for (const k of keys) this.mapKeys.add(`${item}.${String(k)}`);
    }
    for (const c of children(node)) this.collectMapKeys(c);
  }

  /** Dependencies first (constants must exist before use); back edges of the DFS are the cut ones. */
  private sort(): void {
    const state = new Map<string, "visiting" | "done">();
    const visit = (key: string): void => {
      state.set(key, "visiting");
      const def = this.defs.get(key) as Definition;
      for (const ref of [...refsOf(def.schema, new Set())].sort()) {
        const s = state.get(ref);
        if (s === "visiting") this.cut.add(`${key}->${ref}`);
        else if (s === undefined) visit(ref);
      }
      state.set(key, "done");
      this.order.push(def);
    };
    for (const key of [...this.defs.keys()].sort()) if (!state.has(key)) visit(key);
    // Files import each other; an import cycle would leave constants undefined at load time.
    const deps = new Map<string, Set<string>>();
    for (const def of this.defs.values()) {
      const from = `${def.pkg.group}/${def.pkg.version}`;
      const set = deps.get(from) ?? new Set<string>();
      for (const ref of refsOf(def.schema, new Set())) {
        const to = this.defs.get(ref) as Definition;
        const id = `${to.pkg.group}/${to.pkg.version}`;
        if (id !== from && !this.cut.has(`${def.key}->${ref}`)) set.add(id);
      }
      deps.set(from, set);
    }
    const seen = new Map<string, "visiting" | "done">();
    const walk = (id: string, path: string[]): void => {
      if (seen.get(id) === "done") return;
      if (seen.get(id) === "visiting")
        throw new BuiltinSchemaError(
          `the packages import each other in a cycle: ${[...path, id].join(" -> ")}`,
        );
      seen.set(id, "visiting");
      for (const d of [...(deps.get(id) ?? [])].sort()) walk(d, [...path, id]);
      seen.set(id, "done");
    };
    for (const id of [...deps.keys()].sort()) walk(id, []);
  }

  /** Every file, keyed by its path relative to packages/opkit/src. */
  files(options: BuiltinSchemaOptions): Map<string, string> {
    const out = new Map<string, string>();
    const ids = [...this.packages.keys()].sort();
    for (const id of ids) {
      const p = this.packages.get(id) as Package;
      const defs = this.order.filter((d) => d.pkg.group === p.group && d.pkg.version === p.version);
      out.set(`${MODELS_DIR}/${id}.ts`, new ModelFile(this, p, defs, options).render());
      out.set(`${SCHEMAS_DIR}/${id}.ts`, new SchemaFile(this, p, defs, options).render());
    }
    const groups = new Map<string, string[]>();
    for (const id of ids) {
      const [group, version] = id.split("/") as [string, string];
      groups.set(group, [...(groups.get(group) ?? []), version]);
    }
    for (const [group, versions] of groups) {
      const lines = [
        header(options, `The ${group} API group's versions as namespaces: \`${group}.${versions[0]}.X\`.`),
        ...versions.map((v) => `export * as ${v} from "./${group}/${v}.ts";`),
      ];
      out.set(`${SCHEMAS_DIR}/${group}.ts`, `${lines.join("\n")}\n`);
    }
    const index = [
      header(
        options,
        [
          "TypeBox schemas of the Kubernetes built-in API types, for `defineKind`: `core.v1.ServicePort`,",
          "`apps.v1.DeploymentStatus`, `meta.v1.Condition`. Importing this entry loads every group-version;",
          'import one (`import * as corev1 from "opkit/schemas/core/v1"`) to load only that one and what it uses.',
          "@module opkit/schemas",
        ].join("\n * "),
      ),
      ...[...groups.keys()].map((g) => `export * as ${g} from "./${g}.ts";`),
    ];
    out.set(`${SCHEMAS_DIR}/index.ts`, `${index.join("\n")}\n`);
    return out;
  }
}

function header(options: BuiltinSchemaOptions, doc: string): string {
  return [
    `// Code generated by \`make schemas\` (scripts/gen-schemas.ts) from the OpenAPI v3 of kube-apiserver ${options.kubernetesVersion}. DO NOT EDIT.`,
    "",
    "/**",
    ` * ${doc}`,
    " */",
  ].join("\n");
}

/** A JSDoc block; `*\/` inside descriptions would end the comment early. */
function jsDoc(text: unknown, indent: string): string {
  if (typeof text !== "string" || text.trim() === "") return "";
  const lines = text.replace(/\*\//g, "*\\/").split("\n");
  if (lines.length === 1) return `${indent}/** ${lines[0] as string} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} *${l ? ` ${l}` : ""}`).join("\n")}\n${indent} */\n`;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function propertyName(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

abstract class GvFile {
  /** Other packages this file uses, by alias. */
  protected readonly imports = new Map<string, Package>();

  protected readonly gen: Generator;
  protected readonly pkg: Package;
  protected readonly defs: Definition[];
  protected readonly options: BuiltinSchemaOptions;

  constructor(gen: Generator, p: Package, defs: Definition[], options: BuiltinSchemaOptions) {
    this.gen = gen;
    this.pkg = p;
    this.defs = defs;
    this.options = options;
  }

  protected refName(def: Definition): string {
    if (def.pkg.group === this.pkg.group && def.pkg.version === this.pkg.version) return def.name;
    this.imports.set(def.pkg.alias, def.pkg);
    return `${def.pkg.alias}.${def.name}`;
  }

  /** The definition and the field inside it, for messages: `io.k8s.api.core.v1.ServicePort.name`. */
  protected where(def: Definition, path: string): string {
    return `${def.key}${path}`;
  }
}

/** The TypeScript interfaces of one group-version (client/models/<group>/<version>.ts). */
class ModelFile extends GvFile {
  render(): string {
    const body: string[] = [];
    for (const def of this.defs) body.push(this.declaration(def));
    const imports = [...this.imports.values()]
      .sort((a, b) => a.alias.localeCompare(b.alias))
      .map((p) => `import type * as ${p.alias} from "../${p.group}/${p.version}.ts";`);
    return `${[
      header(
        this.options,
        `The ${this.pkg.group}/${this.pkg.version} API types (${this.pkg.goPackage}) as they travel in JSON.`,
      ),
      ...imports,
      "",
      body.join("\n"),
    ].join("\n")}`;
  }

  private declaration(def: Definition): string {
    const doc = jsDoc(def.schema.description, "");
    if (def.key === INT_OR_STRING) return `${doc}export type ${def.name} = number | string;\n`;
    if (def.key === QUANTITY) return `${doc}export type ${def.name} = string | number;\n`;
    if (isRecord(def.schema.properties))
      return `${doc}export interface ${def.name} ${this.objectType(def, def.schema, "", "")}\n`;
    return `${doc}export type ${def.name} = ${this.type(def, def.schema, "", "")};\n`;
  }

  private objectType(def: Definition, node: Json, path: string, indent: string): string {
    const props = node.properties as Json;
    const required = new Set(Array.isArray(node.required) ? (node.required as string[]) : []);
    const lines: string[] = [];
    for (const [name, child] of Object.entries(props)) {
      if (!isRecord(child))
        throw new BuiltinSchemaError(`${this.where(def, `${path}.${name}`)} is not a schema`);
      const desc = child.description ?? this.referenced(child)?.schema.description;
      lines.push(
        `${jsDoc(desc, `${indent}  `)}${indent}  ${propertyName(name)}${required.has(name) ? "" : "?"}: ${this.type(def, child, `${path}.${name}`, `${indent}  `)};`,
      );
    }
    return `{\n${lines.join("\n")}\n${indent}}`;
  }

  private referenced(node: Json): Definition | undefined {
    const key = refKey(node);
    return key === undefined ? undefined : this.gen.defs.get(key);
  }

  private type(def: Definition, node: Json, path: string, indent: string): string {
    const ref = this.referenced(node);
    if (ref) return this.refName(ref);
    if (Array.isArray(node.enum) && node.type === "string")
      return (node.enum as unknown[]).map((v) => JSON.stringify(v)).join(" | ");
    switch (node.type) {
      case "string":
        return "string";
      case "integer":
      case "number":
        return "number";
      case "boolean":
        return "boolean";
      case "array": {
        if (!isRecord(node.items))
          throw new BuiltinSchemaError(`${this.where(def, path)} is an array without items`);
        const item = this.type(def, node.items, `${path}[]`, indent);
        return /[|{]/.test(item) ? `(${item})[]` : `${item}[]`;
      }
      case "object":
        if (isRecord(node.properties)) return this.objectType(def, node, path, indent);
        if (isRecord(node.additionalProperties))
          return `Record<string, ${this.type(def, node.additionalProperties, `${path}[*]`, indent)}>`;
        return "Record<string, unknown>";
      case undefined:
        return "unknown";
      default:
        throw new BuiltinSchemaError(`${this.where(def, path)} has type ${JSON.stringify(node.type)}`);
    }
  }
}

/** Marks a call whose result may be dropped when unused (esbuild, Rollup and terser read it). */
const PURE = "/* @__PURE__ */ ";

/** The TypeBox schemas of one group-version (api/schemas/<group>/<version>.ts). */
class SchemaFile extends GvFile {
  private usesIntOrString = false;
  private usesQuantity = false;
  private usesDescribed = false;

  render(): string {
    const body: string[] = [];
    for (const def of this.defs) {
      const expr = this.definition(def);
      body.push(
        `${jsDoc(def.schema.description, "")}export const ${def.name} = ${expr};\n` +
          // The alias needs its own comment: the API reference lists it apart from the constant.
          `/** The value the \`${def.name}\` schema validates: ${def.name} of ${def.pkg.goPackage}. */\n` +
          `export type ${def.name} = T.${def.name};\n`,
      );
    }
    const helpers = [
      ...(this.usesIntOrString ? ["intOrString"] : []),
      ...(this.usesQuantity ? ["quantity"] : []),
      ...(this.usesDescribed ? ["described"] : []),
    ];
    const imports = [
      'import * as Type from "typebox/type";',
      ...(helpers.length > 0 ? [`import { ${helpers.join(", ")} } from "../../k8s.ts";`] : []),
      `import type * as T from "../../../${MODELS_DIR}/${this.pkg.group}/${this.pkg.version}.ts";`,
      ...[...this.imports.values()]
        .sort((a, b) => a.alias.localeCompare(b.alias))
        .map((p) => `import * as ${p.alias} from "../${p.group}/${p.version}.ts";`),
    ];
    return `${[
      header(
        this.options,
        [
          `TypeBox schemas of the ${this.pkg.group}/${this.pkg.version} API types (${this.pkg.goPackage}), for use inside`,
          "`defineKind`. Each constant's static type is the interface of the same name.",
        ].join("\n * "),
      ),
      ...imports,
      "",
      body.join("\n"),
    ].join("\n")}`;
  }

  /**
   * Each top-level schema is a call marked pure, so a bundler (`opkit build`) drops the ones an operator
   * does not use: core/v1 alone is ~350 kB, and an operator that embeds one ServicePort would otherwise
   * parse and build every core type at start-up.
   */
  private definition(def: Definition): string {
    const ts = `T.${def.name}`;
    if (def.key === INT_OR_STRING) {
      this.usesIntOrString = true;
      return `${PURE}intOrString(${this.options_({ description: def.schema.description })})`;
    }
    if (def.key === QUANTITY) {
      this.usesQuantity = true;
      return `${PURE}quantity(${this.options_({ description: def.schema.description })})`;
    }
    return `${PURE}Type.Unsafe<${ts}>(${this.node(def, def.schema, "", "", undefined)})`;
  }

  private options_(o: Json): string {
    return typeof o.description === "string" ? `{ description: ${JSON.stringify(o.description)} }` : "";
  }

  /**
   * One schema node as a JavaScript expression. `description` (the field's own) wins over the
   * referenced type's; `mapKey` names an optional property so a list-map key keeps its zero default.
   */
  private node(
    def: Definition,
    node: Json,
    path: string,
    indent: string,
    mapKey: string | undefined,
  ): string {
    // Long on purpose: one switch over the OpenAPI node kinds, a few lines each.
    for (const key of Object.keys(node))
      if (!KNOWN.has(key) && !DROPPED.has(key))
        throw new BuiltinSchemaError(
          `${this.where(def, path)}: keyword "${key}" is not understood; teach the generator`,
        );
    const key = refKey(node);
    if (key !== undefined) {
      const ref = this.gen.defs.get(key) as Definition;
      const description = node.description;
      if (node.default !== undefined && !ZERO_DEFAULTS.has(JSON.stringify(node.default)))
        throw new BuiltinSchemaError(`${this.where(def, path)}: a default next to a $ref is not understood`);
      if (this.gen.cut.has(`${def.key}->${key}`))
        return this.literal(
          {
            description,
            type: "object",
            "x-kubernetes-preserve-unknown-fields": true,
          },
          indent,
        );
      if (ref.key === INT_OR_STRING || ref.key === QUANTITY) {
        if (ref.key === INT_OR_STRING) this.usesIntOrString = true;
        else this.usesQuantity = true;
        const fn = ref.key === INT_OR_STRING ? "intOrString" : "quantity";
        return `${PURE}${fn}(${this.options_({ description })})`;
      }
      if (isInline(ref)) {
        // Written out at each use with the field's own description only: the type's (Quantity's is 2 kB)
        // would repeat at every map value and list item.
        const merged: Json = { ...ref.schema };
        delete merged["x-kubernetes-group-version-kind"];
        delete merged.description;
        if (description !== undefined) merged.description = description;
        return this.node(ref, merged, "", indent, undefined);
      }
      const name = this.refName(ref);
      if (description === undefined) return name;
      this.usesDescribed = true;
      return `${PURE}described(${name}, ${JSON.stringify(description)})`;
    }
    if (Array.isArray(node.oneOf) || Array.isArray(node.allOf))
      throw new BuiltinSchemaError(
        `${this.where(def, path)}: oneOf/allOf other than a single $ref is not understood`,
      );

    const out: Json = {};
    const parts: [string, string][] = [];
    if (node.description !== undefined) out.description = node.description;
    if (node.type !== undefined) out.type = node.type;
    if (node.format !== undefined && node.format !== "int-or-string") out.format = node.format;
    if (node.default !== undefined) {
      const zero = ZERO_DEFAULTS.has(JSON.stringify(node.default));
      if (!zero || (mapKey !== undefined && this.gen.mapKeys.has(mapKey))) out.default = node.default;
    }
    if (node.enum !== undefined) out.enum = node.enum;
    for (const [k, v] of Object.entries(out)) parts.push([k, JSON.stringify(v)]);

    let listType = node["x-kubernetes-list-type"];
    let mapKeys = node["x-kubernetes-list-map-keys"];
    if (node.type === "array") {
      if (!isRecord(node.items))
        throw new BuiltinSchemaError(`${this.where(def, path)} is an array without items`);
      const items = { ...node.items };
      delete items.default; // a default for items is never applied
      if (listType === "map" && !this.keysUsable(node.items, mapKeys)) {
        // The server's own schema keys this list by a field that is neither required nor defaulted
        // (ServiceAccount.secrets); a CRD cannot, so it is replaced whole instead of merged by key.
        listType = "atomic";
        mapKeys = undefined;
      }
      parts.push(["items", this.node(def, items, `${path}[]`, `${indent}  `, undefined)]);
    }
    if (isRecord(node.properties)) {
      const props: string[] = [];
      const required = Array.isArray(node.required) ? (node.required as unknown[]) : [];
      for (const [name, child] of Object.entries(node.properties)) {
        if (!isRecord(child))
          throw new BuiltinSchemaError(`${this.where(def, `${path}.${name}`)} is not a schema`);
        // A required key needs no default; an optional one keeps the zero default the server keys by.
        const keyId = path === "" && !required.includes(name) ? `${def.key}.${name}` : undefined;
        props.push(
          `${indent}    ${propertyName(name)}: ${this.node(def, child, `${path}.${name}`, `${indent}    `, keyId)},`,
        );
      }
      parts.push(["properties", props.length > 0 ? `{\n${props.join("\n")}\n${indent}  }` : "{}"]);
    }
    if (isRecord(node.additionalProperties))
      parts.push([
        "additionalProperties",
        this.node(def, node.additionalProperties, `${path}[*]`, `${indent}  `, undefined),
      ]);
    else if (node.additionalProperties !== undefined)
      throw new BuiltinSchemaError(`${this.where(def, path)}: additionalProperties must be a schema`);
    if (Array.isArray(node.required) && node.required.length > 0)
      parts.push(["required", JSON.stringify(node.required)]);
    const free =
      (node.type === "object" && !isRecord(node.properties) && !isRecord(node.additionalProperties)) ||
      (node.type === undefined && node.items === undefined && node.properties === undefined);
    if (free) parts.push(['"x-kubernetes-preserve-unknown-fields"', "true"]);
    if (listType !== undefined) parts.push(['"x-kubernetes-list-type"', JSON.stringify(listType)]);
    if (mapKeys !== undefined) parts.push(['"x-kubernetes-list-map-keys"', JSON.stringify(mapKeys)]);
    if (node["x-kubernetes-map-type"] !== undefined)
      parts.push(['"x-kubernetes-map-type"', JSON.stringify(node["x-kubernetes-map-type"])]);
    return `{\n${parts.map(([k, v]) => `${indent}  ${k}: ${v},`).join("\n")}\n${indent}}`;
  }

  /** Whether every list-map key of the items is required or defaulted (the CRD rule). */
  private keysUsable(items: Json, keys: unknown): boolean {
    const key = refKey(items);
    const def = key === undefined ? undefined : this.gen.defs.get(key);
    const schema = def?.schema ?? items;
    const props = isRecord(schema.properties) ? schema.properties : {};
    const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
    return (
      Array.isArray(keys) &&
      keys.every((k) => {
        const p = props[String(k)];
        return required.includes(String(k)) || (isRecord(p) && p.default !== undefined);
      })
    );
  }

  private literal(value: Json, indent: string): string {
    const lines = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${indent}  ${propertyName(k)}: ${JSON.stringify(v)},`);
    return `{\n${lines.join("\n")}\n${indent}}`;
  }
}

/**
 * Generate the schema and interface files from OpenAPI v3 documents keyed by their path under
 * `/openapi/v3/` (`api/v1`, `apis/apps/v1`, ...). Returns file contents keyed by their path relative to
 * `packages/opkit/src`. Deterministic: the same documents always give the same bytes.
 */
export function builtinSchemaFiles(
  documents: Record<string, OpenApiDocument>,
  options: BuiltinSchemaOptions,
): Map<string, string> {
  return new Generator(documents).files(options);
}
