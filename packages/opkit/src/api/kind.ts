/**
 * `defineKind`: one definition of a custom kind gives its TypeScript type, a `KindRef` for the client,
 * cache and controllers, runtime validation, and everything the CRD generator needs.
 */
import type { Static, TSchema } from "typebox";
import { createRequire } from "node:module";
import type * as TypeBoxSystem from "typebox/system";
import type * as TypeBoxValue from "typebox/value";
import type { KindRef, KubeObject, ObjectMeta } from "../client/types.ts";
import { registerKind, type KindScope } from "../client/scopes.ts";
import type { CelRule } from "./k8s.ts";

/** The value types `additionalPrinterColumns` accept; "date" shows as an age (e.g. "5m") in `kubectl get`. */
export type PrinterColumnType = "integer" | "string" | "boolean" | "number" | "date";

/** A column `kubectl get` shows (`additionalPrinterColumns`). */
export interface PrinterColumn {
  /** The column header `kubectl get` prints, e.g. "Ready". */
  name: string;
  /** How kubectl formats the value; pick "date" for timestamps so they show as an age. */
  type: PrinterColumnType;
  /** A simple JSONPath into the object, e.g. `.status.phase`. */
  jsonPath: string;
  /**
   * Shown by `kubectl explain`-style tooling; say what the column means when the header alone is ambiguous.
   */
  description?: string;
  /** 0 shows the column by default; higher only with `-o wide`. */
  priority?: number;
  /** An OpenAPI format hint for the value (e.g. "int32", "byte"); rarely needed. */
  format?: string;
}

/** The scale subresource, so `kubectl scale` and the HorizontalPodAutoscaler can drive the kind. */
export interface ScaleSubresource {
  /** JSONPath of the desired replica count in the spec, e.g. `.spec.replicas`; `kubectl scale` writes it. */
  specReplicasPath: string;
  /** JSONPath of the observed replica count in the status, e.g. `.status.replicas`; the HPA reads it. */
  statusReplicasPath: string;
  /**
   * JSONPath of a label selector string in the status; needed for the HorizontalPodAutoscaler to find the
   * pods.
   */
  labelSelectorPath?: string;
}

/**
 * What `defineKind` takes: the kind's identity (group, version, kind, names), its spec and status schemas,
 * and the CRD settings (printer columns, scale, CEL rules, versioning). Everything else about the kind is
 * derived from it.
 */
export interface KindOptions<Spec extends TSchema, Status extends TSchema | undefined> {
  /**
   * The API group, a DNS subdomain with a dot (e.g. "cache.example.com"); pick a domain you own so kinds
   * never collide.
   */
  group: string;
  /**
   * The API version, Kubernetes-style: `v1`, `v1beta1`, `v2alpha3`. A deprecated version may have any
   * DNS label as its name (the API server accepts one), so a misspelt version that old manifests use
   * (`v1alapha1`) can still be served, with a warning naming the right one.
   */
  version: string;
  /** The kind name in UpperCamelCase, e.g. "Memcached"; it is what `kind:` says in YAML. */
  kind: string;
  /** Lowercase plural used in URLs; defaults to the lowercased kind + "s" (or "es" after s/x/ch/sh). */
  plural?: string;
  /** The lowercase singular name kubectl accepts; defaults to the lowercased kind. */
  singular?: string;
  /** Abbreviations for kubectl, e.g. ["mc"] so `kubectl get mc` works. */
  shortNames?: string[];
  /** Groups the kind joins, e.g. ["all"] so `kubectl get all` lists it. */
  categories?: string[];
  /** "Namespaced" (default) or "Cluster" for kinds that describe cluster-wide things. */
  scope?: KindScope;
  /** The kind's description in the CRD's schema, shown by `kubectl explain`. */
  description?: string;
  /**
   * The TypeBox schema of `.spec`: it types the object, validates it and becomes the CRD's OpenAPI schema.
   */
  spec: Spec;
  /**
   * The TypeBox schema of `.status`; giving one also enables the status subresource, so only status writes
   * can change it.
   */
  status?: Status;
  /** Extra columns for `kubectl get` (the age column is always there). */
  printerColumns?: PrinterColumn[];
  /**
   * Enable the scale subresource so `kubectl scale` and autoscalers can drive the kind; needs a status
   * schema.
   */
  scale?: ScaleSubresource;
  /** CEL rules on the whole object (`self` is the object). */
  validations?: CelRule[];
  /** The version objects are stored in; exactly one version of a kind has it. */
  storage?: boolean;
  /** Whether the API server serves this version (default true). */
  served?: boolean;
  /** Mark the version deprecated; the server warns clients that use it. */
  deprecated?: boolean;
  /**
   * The warning clients get instead of the server's default (at most 256 characters; needs
   * `deprecated: true`), e.g. "use tenancy.acme.com/v1alpha1".
   */
  deprecationWarning?: string;
}

type StatusField<Status extends TSchema | undefined> = Status extends TSchema
  ? { status?: Static<Status> }
  : { status?: never };

/** The object type of a kind: every Kubernetes object field plus the typed spec and status. */
export type KindObject<Spec extends TSchema, Status extends TSchema | undefined> = KubeObject & {
  /** The desired state, typed by the kind's spec schema. */
  spec: Static<Spec>;
} & StatusField<Status>;

/** The object type of a kind definition: `type Memcached = ObjectOf<typeof Memcached>`. */
export type ObjectOf<K> = K extends KindRef<infer T> ? T : never;

/** One problem `validate` found; `path` is dotted from the object root (`spec.items[2].name`). */
export interface ValidationIssue {
  /** Where the problem is, dotted from the object root, e.g. `spec.items[2].name`. */
  path: string;
  /** What is wrong there, in words a user can act on. */
  message: string;
}

/**
 * Optional parts of an object that `KindDefinition.new` builds: where it lives, its labels and annotations,
 * and an initial status (for tests and fixtures).
 */
export interface NewObjectOptions<Status> {
  /** The namespace to create the object in; leave out for cluster-scoped kinds. */
  namespace?: string;
  /** Labels to set on the new object (copied). */
  labels?: Record<string, string>;
  /** Annotations to set on the new object (copied). */
  annotations?: Record<string, string>;
  /** A status to start with; normally only controllers write status, so this is for tests and fixtures. */
  status?: Status;
}

/**
 * A custom kind as `defineKind` returns it: a `KindRef` you pass to the client, cache and controller builder,
 * plus the resolved names, schemas and CRD settings the generator reads. Treat it as read-only; define a new
 * kind to change one.
 */
export interface KindDefinition<
  Spec extends TSchema = TSchema,
  Status extends TSchema | undefined = TSchema | undefined,
> extends KindRef<KindObject<Spec, Status>> {
  /** "group/version", as objects of the kind carry it. */
  readonly apiVersion: string;
  /** The kind name, as objects of the kind carry it. */
  readonly kind: string;
  /** The API group from the options. */
  readonly group: string;
  /** The version from the options. */
  readonly version: string;
  /** The resolved plural (given or guessed by `defaultPlural`), used in URLs and RBAC rules. */
  readonly plural: string;
  /** The resolved singular name. */
  readonly singular: string;
  /** kubectl short names, as given. */
  readonly shortNames: readonly string[];
  /** kubectl categories, as given. */
  readonly categories: readonly string[];
  /** Whether objects live in a namespace ("Namespaced", the default) or cluster-wide ("Cluster"). */
  readonly scope: KindScope;
  /** The CRD description, if given. */
  readonly description: string | undefined;
  /** The spec schema, for validation and CRD generation. */
  readonly spec: Spec;
  /** The status schema, or undefined when the kind has no status. */
  readonly status: Status;
  /** The `kubectl get` columns for the CRD. */
  readonly printerColumns: readonly PrinterColumn[];
  /** The scale subresource settings, if the kind can be scaled. */
  readonly scale: ScaleSubresource | undefined;
  /** CEL rules on the whole object that the CRD carries (only the API server evaluates them). */
  readonly validations: readonly CelRule[];
  /** Whether `storage` was set explicitly (a single version is the storage version either way). */
  readonly storage: boolean | undefined;
  /** Whether the API server serves this version. */
  readonly served: boolean;
  /** Whether this version is marked deprecated. */
  readonly deprecated: boolean;
  /** The warning sent to clients of a deprecated version. */
  readonly deprecationWarning: string | undefined;
  /**
   * Check spec and status against their schemas. CEL rules are not evaluated here (only the API server
   * runs CEL); an empty array means the object is valid as far as the schemas go.
   */
  validate(obj: unknown): ValidationIssue[];
  /** Build an object of this kind with apiVersion, kind and metadata filled in. */
  readonly new: (
    name: string,
    spec: Static<Spec>,
    opts?: NewObjectOptions<Status extends TSchema ? Static<Status> : never>,
  ) => KindObject<Spec, Status>;
}

/** A definition that does not make sense; the message names the option and what to change. */
export class KindDefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "KindDefinitionError";
  }
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const VERSION = /^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/;
/** What the API server accepts as a CRD version name (a DNS-1035 label). */
const ANY_VERSION = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** The API server's limit on `deprecationWarning`. */
const MAX_DEPRECATION_WARNING = 256;

/** The plural Kubernetes tooling guesses (kubebuilder's rules), so most kinds need no `plural`. */
export function defaultPlural(kind: string): string {
  const lower = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(lower)) return `${lower}es`;
  if (/[^aeiou]y$/.test(lower)) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

/** Check the names and versions of a kind's options; returns its plural and singular. */
function checkNames(options: KindOptions<TSchema, TSchema | undefined>): {
  plural: string;
  singular: string;
} {
  const { group, version, kind } = options;
  if (!group || !DNS_SUBDOMAIN.test(group) || !group.includes("."))
    throw new KindDefinitionError(
      `defineKind: group "${group}" must be a lowercase DNS subdomain with a dot, e.g. "cache.example.com"`,
    );
  // A version name outside Kubernetes' pattern is almost always a typo, so only a deprecated version
  // (served for manifests that already use it) may have one.
  if (!VERSION.test(version) && !(options.deprecated === true && ANY_VERSION.test(version)))
    throw new KindDefinitionError(
      options.deprecated === true
        ? `defineKind(${kind}): version "${version}" must be a DNS label (lowercase letters, digits and '-', starting with a letter)`
        : `defineKind(${kind}): version "${version}" must look like v1, v1beta1 or v2alpha3 (only a deprecated version may have another name)`,
    );
  if (options.deprecationWarning !== undefined) {
    if (options.deprecated !== true)
      throw new KindDefinitionError(
        `defineKind(${kind}): deprecationWarning needs deprecated: true (the API server only warns for deprecated versions)`,
      );
    if (options.deprecationWarning.length > MAX_DEPRECATION_WARNING)
      throw new KindDefinitionError(
        `defineKind(${kind}): deprecationWarning has ${options.deprecationWarning.length} characters; the API server allows ${MAX_DEPRECATION_WARNING}`,
      );
  }
  if (!/^[A-Z][A-Za-z0-9]*$/.test(kind))
    throw new KindDefinitionError(`defineKind: kind "${kind}" must be UpperCamelCase, e.g. "Memcached"`);
  const plural = options.plural ?? defaultPlural(kind);
  const singular = options.singular ?? kind.toLowerCase();
  for (const [field, value] of [
    ["plural", plural],
    ["singular", singular],
    ...(options.shortNames ?? []).map((n) => ["shortNames", n]),
    ...(options.categories ?? []).map((n) => ["categories", n]),
  ] as [string, string][]) {
    if (!DNS_LABEL.test(value))
      throw new KindDefinitionError(
        `defineKind(${kind}): ${field} "${value}" must be lowercase letters, digits and dashes, starting with a letter`,
      );
  }
  return { plural, singular };
}

/** Check the subresource and printing options of a kind (they refer to its schemas). */
function checkPresentation(options: KindOptions<TSchema, TSchema | undefined>): void {
  const { kind } = options;
  if (options.scale && !options.status)
    throw new KindDefinitionError(
      `defineKind(${kind}): scale needs a status schema (statusReplicasPath points into .status); add one`,
    );
  for (const col of options.printerColumns ?? []) {
    if (!col.jsonPath.startsWith("."))
      throw new KindDefinitionError(
        `defineKind(${kind}): printer column "${col.name}" jsonPath "${col.jsonPath}" must start with "." (e.g. ".spec.size")`,
      );
  }
}

/** The `validate` of a kind: its spec and status against their schemas, issues with field paths. */
function validatorFor(
  kind: string,
  spec: TSchema,
  status: TSchema | undefined,
): (obj: unknown) => ValidationIssue[] {
  return (obj) => {
    if (typeof obj !== "object" || obj === null || Array.isArray(obj))
      return [{ path: "", message: "must be an object" }];
    const record = obj as Record<string, unknown>;
    const issues: ValidationIssue[] = [];
    if (record.spec === undefined) issues.push({ path: "spec", message: "is required" });
    else issues.push(...schemaIssues(spec, record.spec, "spec"));
    if (record.status !== undefined) {
      if (status) issues.push(...schemaIssues(status, record.status, "status"));
      else issues.push({ path: "status", message: `${kind} has no status; remove the field` });
    }
    return issues;
  };
}

/** Define a custom kind once; the result is a `KindRef` plus its schema, validation and CRD settings. */
export function defineKind<Spec extends TSchema, Status extends TSchema | undefined = undefined>(
  options: KindOptions<Spec, Status>,
): KindDefinition<Spec, Status> {
  const { group, version, kind } = options;
  const { plural, singular } = checkNames(options);
  checkPresentation(options);
  const spec = options.spec;
  const status = options.status as Status;
  const apiVersion = `${group}/${version}`;

  function build(
    name: string,
    specValue: Static<Spec>,
    opts: NewObjectOptions<Status extends TSchema ? Static<Status> : never> = {},
  ): KindObject<Spec, Status> {
    const metadata: ObjectMeta = { name };
    if (opts.namespace !== undefined) metadata.namespace = opts.namespace;
    if (opts.labels) metadata.labels = { ...opts.labels };
    if (opts.annotations) metadata.annotations = { ...opts.annotations };
    const obj: Record<string, unknown> = { apiVersion, kind, metadata, spec: specValue };
    if (opts.status !== undefined) obj.status = opts.status;
    return obj as KindObject<Spec, Status>;
  }

  const definition = {
    apiVersion,
    kind,
    group,
    version,
    plural,
    singular,
    shortNames: [...(options.shortNames ?? [])],
    categories: [...(options.categories ?? [])],
    scope: options.scope ?? "Namespaced",
    description: options.description,
    spec,
    status,
    printerColumns: [...(options.printerColumns ?? [])],
    scale: options.scale,
    validations: [...(options.validations ?? [])],
    storage: options.storage,
    served: options.served ?? true,
    deprecated: options.deprecated ?? false,
    deprecationWarning: options.deprecationWarning,
    validate: validatorFor(kind, spec, status),
    new: build,
  };
  registerKind(definition, { resource: definition.plural, scope: definition.scope });
  return Object.freeze(definition);
}

/** Several versions of one kind, exactly one of them the storage version. */
export interface KindVersions {
  /** The API group shared by all versions. */
  readonly group: string;
  /** The kind name shared by all versions. */
  readonly kind: string;
  /** The plural shared by all versions. */
  readonly plural: string;
  /** Every version, in the order given; the CRD lists them in this order. */
  readonly versions: readonly KindDefinition[];
  /** The one version objects are stored in (the one with `storage: true`, or the only one). */
  readonly storageVersion: KindDefinition;
}

/**
 * Group the versions of one kind. They must share group, kind, plural and scope, and exactly one must
 * say `storage: true` (a single version is the storage version without saying so).
 */
export function defineKindVersions(versions: readonly KindDefinition[]): KindVersions {
  const first = versions[0];
  if (!first) throw new KindDefinitionError("defineKindVersions: pass at least one kind definition");
  const seen = new Set<string>();
  for (const v of versions) {
    for (const field of ["group", "kind", "plural", "scope"] as const) {
      if (v[field] !== first[field])
        throw new KindDefinitionError(
          `defineKindVersions(${first.kind}): version ${v.version} has ${field} "${v[field]}" but ${first.version} has "${first[field]}"; all versions of a kind must agree`,
        );
    }
    if (seen.has(v.version))
      throw new KindDefinitionError(
        `defineKindVersions(${first.kind}): version ${v.version} is defined twice; give each definition its own version`,
      );
    seen.add(v.version);
  }
  let storageVersion: KindDefinition;
  if (versions.length === 1) {
    storageVersion = first;
  } else {
    const storage = versions.filter((v) => v.storage === true);
    if (storage.length !== 1)
      throw new KindDefinitionError(
        `defineKindVersions(${first.kind}): exactly one version must set storage: true, found ${storage.length} (${storage.map((v) => v.version).join(", ") || "none"}) among ${versions.map((v) => v.version).join(", ")}`,
      );
    storageVersion = storage[0] as KindDefinition;
  }
  if (!storageVersion.served)
    throw new KindDefinitionError(
      `defineKindVersions(${first.kind}): the storage version ${storageVersion.version} must be served; set served: true`,
    );
  return Object.freeze({
    group: first.group,
    kind: first.kind,
    plural: first.plural,
    versions: [...versions],
    storageVersion,
  });
}

export function isKindVersions(value: KindDefinition | KindVersions): value is KindVersions {
  return "versions" in value && Array.isArray(value.versions);
}

// ---- validation issues ----

interface TypeBoxError {
  keyword: string;
  schemaPath: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

/** Turn a JSON pointer ("/items/0/name") into a dotted path ("items[0].name") under `root`. */
export function pointerToPath(root: string, pointer: string): string {
  let path = root;
  for (const raw of pointer.split("/").slice(1)) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(token)) path += `[${token}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(token)) path += path ? `.${token}` : token;
    else path += `[${JSON.stringify(token)}]`;
  }
  return path;
}

function resolvePointer(schema: unknown, pointer: string): unknown {
  let node = schema;
  for (const raw of pointer.replace(/^#/, "").split("/").slice(1)) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[raw.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return node;
}

const MAX_ERRORS = 100;

let validator: { Value: typeof TypeBoxValue.Value; Settings: typeof TypeBoxSystem.Settings } | undefined;

/**
 * TypeBox's validator (typebox/value: ~300 modules, ~0.2 s of CPU to import) is loaded on the first
 * validation, not at start: most operators never validate in process. `require` of an ES module is
 * synchronous (Node >= 22.12), so `validate` stays synchronous, and it shares the loader's module cache.
 */
function typeboxValidator(): NonNullable<typeof validator> {
  if (!validator) {
    const require = createRequire(import.meta.url);
    validator = {
      Value: (require("typebox/value") as typeof TypeBoxValue).Value,
      Settings: (require("typebox/system") as typeof TypeBoxSystem).Settings,
    };
  }
  return validator;
}

function schemaIssues(schema: TSchema, value: unknown, root: string): ValidationIssue[] {
  // TypeBox buffers only 8 errors by default (a DoS guard for untrusted input); a user fixing an object
  // wants them all, within reason. Errors() is synchronous, so the raised limit cannot leak elsewhere.
  const { Value, Settings } = typeboxValidator();
  const previous = Settings.Get().maxErrors;
  let errors: TypeBoxError[];
  try {
    Settings.Set({ maxErrors: Math.max(previous, MAX_ERRORS) });
    errors = [...Value.Errors(schema, value)];
  } finally {
    Settings.Set({ maxErrors: previous });
  }
  // A failed anyOf also reports why each branch failed; the anyOf itself says it better.
  const unions = errors
    .filter((e) => e.keyword === "anyOf" || e.keyword === "oneOf")
    .map((e) => e.schemaPath);
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    if (unions.some((u) => e.schemaPath.startsWith(`${u}/anyOf/`) || e.schemaPath.startsWith(`${u}/oneOf/`)))
      continue;
    const base = pointerToPath(root, e.instancePath);
    let out: ValidationIssue[];
    if (e.keyword === "required" && Array.isArray(e.params.requiredProperties)) {
      out = (e.params.requiredProperties as string[]).map((p) => ({
        path: pointerToPath(base, `/${p}`),
        message: "is required",
      }));
    } else if (e.keyword === "anyOf" || e.keyword === "oneOf") {
      const node = resolvePointer(schema, e.schemaPath) as Record<string, unknown> | undefined;
      const branches = (node?.[e.keyword] ?? []) as Record<string, unknown>[];
      const consts = branches.filter((b) => "const" in b).map((b) => JSON.stringify(b.const));
      const allowNull = branches.some((b) => b.type === "null");
      out = [
        {
          path: base,
          message:
            consts.length > 0 && consts.length + (allowNull ? 1 : 0) === branches.length
              ? `must be one of ${consts.join(", ")}${allowNull ? " or null" : ""}`
              : e.message,
        },
      ];
    } else if (e.keyword === "enum" && Array.isArray(e.params.allowedValues)) {
      out = [
        {
          path: base,
          message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`,
        },
      ];
    } else {
      out = [{ path: base, message: e.message }];
    }
    for (const issue of out) {
      const key = `${issue.path}\u0000${issue.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      issues.push(issue);
    }
  }
  return issues;
}
