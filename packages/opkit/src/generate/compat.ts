/**
 * The CRD compatibility check: compares the CRDs a project generates now with the ones it last released
 * (the snapshot `opkit api freeze` writes under `config/crds/released/`) and names every change that breaks
 * existing clients or stored objects, with the version and the field path. Additive changes pass.
 *
 * The rules follow the Kubernetes API change guidelines: a field may be added but not removed, renamed or
 * retyped; validation may be loosened but not tightened (a tighter bound, a new enum, a changed pattern or
 * format, a new CEL rule that is not a transition rule); a served version may not disappear, and a version
 * objects may still be stored in may not be removed before every object was rewritten (`opkit migrate`).
 *
 * Pure: it reads two sets of CRD objects and returns findings; reading files and the cluster's
 * `status.storedVersions` is the caller's job. Knows nothing of the CLI.
 */
import { isDeepStrictEqual } from "node:util";
import type {
  CustomResourceDefinition,
  CustomResourceDefinitionVersion,
  JSONSchemaProps,
  ValidationRule,
} from "./crd-types.ts";

/** The kind of break a finding names; also what an allowed break matches on. */
export type CompatRule =
  | "crd-removed"
  | "scope-changed"
  | "version-removed"
  | "version-unserved"
  | "stored-version-removed"
  | "storage-changed-without-conversion"
  | "field-removed"
  | "type-changed"
  | "unknown-fields-pruned"
  | "required-added"
  | "enum-added"
  | "enum-value-removed"
  | "bound-tightened"
  | "pattern-changed"
  | "format-changed"
  | "nullable-removed"
  | "cel-rule-added"
  | "list-type-changed"
  | "composition-changed";

/** One change between the released CRDs and the current ones that breaks clients or stored objects. */
export interface CompatFinding {
  /** The CRD's name, `<plural>.<group>`. */
  crd: string;
  /** The API version the change is in ("" for a change to the whole CRD). */
  version: string;
  /** The field path inside the object, e.g. `.spec.size` ("" for a version or CRD change). */
  path: string;
  /** What kind of break it is. */
  rule: CompatRule;
  /** What changed and what to do instead, in a sentence. */
  message: string;
  /**
   * Set when validation ratcheting (Kubernetes ≥ 1.33) keeps objects already stored writable despite the
   * change: what that protects and what it does not.
   */
  ratcheting?: string;
  /** The recorded reason, when the project declared this break intended (it then does not fail the check). */
  allowedBecause?: string;
}

/** An intended break the project records with its reason, so the check passes it instead of failing. */
export interface AllowedBreak {
  /** The CRD's name, `<plural>.<group>`. */
  crd: string;
  /** The rule the finding has. */
  rule: CompatRule;
  /** The version of the finding; absent matches every version. */
  version?: string;
  /** The field path of the finding; absent matches every path. */
  path?: string;
  /** Why the break is intended and how users are told (required: the check refuses an empty reason). */
  reason: string;
}

/** What the check knows beyond the two sets of CRDs. */
export interface CompatOptions {
  /**
   * The oldest Kubernetes minor the operator supports, e.g. "1.33"; from 1.33 on the check notes where
   * validation ratcheting keeps stored objects writable.
   */
  minKubernetesVersion?: string;
  /**
   * The cluster's `status.storedVersions` per CRD name, when known. Without it every version that was the
   * storage version in the released snapshot may still hold objects.
   */
  storedVersions?: Readonly<Record<string, readonly string[]>>;
  /** Intended breaks, each with its reason. */
  allowed?: readonly AllowedBreak[];
}

/** The result of a check: every finding, and the ones not allowed, which fail it. */
export interface CompatReport {
  /** Every breaking change found, allowed ones included (with `allowedBecause`). */
  findings: CompatFinding[];
  /** The findings no allowed break covers; the check fails when there is any. */
  breaking: CompatFinding[];
}

/** Thrown for an allowed break without a reason or naming an unknown rule. */
export class CompatConfigError extends Error {
  /** Always "CompatConfigError". */
  override name = "CompatConfigError";
}

/** The first Kubernetes minor on which CRD validation ratcheting is on by default and GA. */
const RATCHETING_MINOR = 33;

/**
 * Compares the released CRDs with the current ones and returns every breaking change, each naming its
 * CRD, version and field path. A CRD that is new in `current` is additive and passes.
 */
export function checkCompatibility(
  released: readonly CustomResourceDefinition[],
  current: readonly CustomResourceDefinition[],
  options: CompatOptions = {},
): CompatReport {
  validateAllowed(options.allowed ?? []);
  const byName = new Map(current.map((crd) => [crdName(crd), crd]));
  const findings: CompatFinding[] = [];
  for (const old of released) {
    const name = crdName(old);
    const now = byName.get(name);
    if (!now) {
      findings.push(
        finding(name, "", "", "crd-removed", "the CRD is gone: every client and stored object of it breaks"),
      );
      continue;
    }
    findings.push(...compareCrd(old, now, options));
  }
  const ratchets = ratchetingApplies(options.minKubernetesVersion);
  for (const f of findings) {
    if (ratchets && RATCHETED.has(f.rule)) f.ratcheting = ratchetingNote(options.minKubernetesVersion ?? "");
    const allowed = (options.allowed ?? []).find((a) => matches(a, f));
    if (allowed) f.allowedBecause = allowed.reason;
  }
  return { findings, breaking: findings.filter((f) => f.allowedBecause === undefined) };
}

/** One line per finding, for a terminal: `webapps.example.com v1 .spec.size: field-removed: …`. */
export function formatFinding(f: CompatFinding): string {
  const where = [f.crd, f.version, f.path].filter(Boolean).join(" ");
  let line = `${where}: ${f.rule}: ${f.message}`;
  if (f.ratcheting) line += ` (${f.ratcheting})`;
  if (f.allowedBecause !== undefined) line += ` [allowed: ${f.allowedBecause}]`;
  return line;
}

/** The CRD's object name, `<plural>.<group>`, which is how snapshots and allowed breaks name it. */
export function crdName(crd: CustomResourceDefinition): string {
  return crd.metadata?.name ?? `${crd.spec.names.plural}.${crd.spec.group}`;
}

const RULES: ReadonlySet<string> = new Set<CompatRule>([
  "crd-removed",
  "scope-changed",
  "version-removed",
  "version-unserved",
  "stored-version-removed",
  "storage-changed-without-conversion",
  "field-removed",
  "type-changed",
  "unknown-fields-pruned",
  "required-added",
  "enum-added",
  "enum-value-removed",
  "bound-tightened",
  "pattern-changed",
  "format-changed",
  "nullable-removed",
  "cel-rule-added",
  "list-type-changed",
  "composition-changed",
]);

/** The checks the API server ratchets for unchanged values (KEP-4008); required fields and transition rules are not. */
const RATCHETED: ReadonlySet<CompatRule> = new Set<CompatRule>([
  "enum-added",
  "enum-value-removed",
  "bound-tightened",
  "pattern-changed",
  "format-changed",
  "cel-rule-added",
]);

function validateAllowed(allowed: readonly AllowedBreak[]): void {
  for (const [i, a] of allowed.entries()) {
    if (!a.reason?.trim())
      throw new CompatConfigError(
        `allowed break #${i + 1} (${a.crd} ${a.rule}): "reason" is empty; say why the break is intended`,
      );
    if (!RULES.has(a.rule))
      throw new CompatConfigError(
        `allowed break #${i + 1} (${a.crd}): unknown rule "${a.rule}"; one of ${[...RULES].join(", ")}`,
      );
  }
}

function matches(a: AllowedBreak, f: CompatFinding): boolean {
  return (
    a.crd === f.crd &&
    a.rule === f.rule &&
    (a.version === undefined || a.version === f.version) &&
    (a.path === undefined || a.path === f.path)
  );
}

function ratchetingApplies(min: string | undefined): boolean {
  const minor = min ? /^v?1\.(\d+)/.exec(min)?.[1] : undefined;
  return minor !== undefined && Number(minor) >= RATCHETING_MINOR;
}

function ratchetingNote(min: string): string {
  return (
    `on Kubernetes ${min} and later the API server ratchets this check: objects already stored stay ` +
    `writable while this field keeps its value, but clients that write the old values are refused`
  );
}

function finding(
  crd: string,
  version: string,
  path: string,
  rule: CompatRule,
  message: string,
): CompatFinding {
  return { crd, version, path, rule, message };
}

function compareCrd(
  old: CustomResourceDefinition,
  now: CustomResourceDefinition,
  options: CompatOptions,
): CompatFinding[] {
  const name = crdName(old);
  const out: CompatFinding[] = [];
  if (old.spec.scope !== now.spec.scope)
    out.push(
      finding(
        name,
        "",
        "",
        "scope-changed",
        `scope changed from ${old.spec.scope} to ${now.spec.scope}: the API server refuses it, and every client's URLs change`,
      ),
    );
  out.push(...compareVersions(name, old, now, options));
  for (const oldVersion of old.spec.versions) {
    const nowVersion = now.spec.versions.find((v) => v.name === oldVersion.name);
    if (!oldVersion.served || !nowVersion?.served) continue;
    const oldSchema = oldVersion.schema?.openAPIV3Schema;
    const nowSchema = nowVersion.schema?.openAPIV3Schema;
    if (oldSchema && nowSchema)
      compareSchema(oldSchema, nowSchema, "", (rule, path, message) =>
        out.push(finding(name, oldVersion.name, path, rule, message)),
      );
  }
  return out;
}

/** Versions dropped or no longer served, stored versions removed, and a storage change without conversion. */
function compareVersions(
  name: string,
  old: CustomResourceDefinition,
  now: CustomResourceDefinition,
  options: CompatOptions,
): CompatFinding[] {
  const out: CompatFinding[] = [];
  const stored =
    options.storedVersions?.[name] ?? old.spec.versions.filter((v) => v.storage).map((v) => v.name);
  for (const v of old.spec.versions) {
    const current = now.spec.versions.find((n) => n.name === v.name);
    if (!current && stored.includes(v.name)) {
      out.push(
        finding(
          name,
          v.name,
          "",
          "stored-version-removed",
          `${v.name} is removed while objects may still be stored in it (status.storedVersions): the API server can no longer read them; run \`opkit migrate\`, which rewrites every object in the storage version and trims storedVersions, and release that first`,
        ),
      );
    } else if (!current && v.served) {
      out.push(
        finding(
          name,
          v.name,
          "",
          "version-removed",
          `${v.name} is no longer in the CRD: clients that use it break; keep serving it deprecated (deprecated: true) for a release first`,
        ),
      );
    } else if (current && v.served && !current.served) {
      out.push(
        finding(
          name,
          v.name,
          "",
          "version-unserved",
          `${v.name} is no longer served: clients that use it break; mark it deprecated for a release first`,
        ),
      );
    }
  }
  const oldStorage = storageOf(old.spec.versions);
  const nowStorage = storageOf(now.spec.versions);
  if (
    oldStorage &&
    nowStorage &&
    oldStorage.name !== nowStorage.name &&
    now.spec.conversion?.strategy !== "Webhook"
  ) {
    const before = now.spec.versions.find((v) => v.name === oldStorage.name) ?? oldStorage;
    if (
      !isDeepStrictEqual(
        stripDescriptions(before.schema?.openAPIV3Schema),
        stripDescriptions(nowStorage.schema?.openAPIV3Schema),
      )
    )
      out.push(
        finding(
          name,
          nowStorage.name,
          "",
          "storage-changed-without-conversion",
          `the storage version moved from ${oldStorage.name} to ${nowStorage.name}, whose schemas differ, without a conversion webhook: objects are served in the other version unconverted; add a conversion (create webhook --conversion)`,
        ),
      );
  }
  return out;
}

function storageOf(
  versions: readonly CustomResourceDefinitionVersion[],
): CustomResourceDefinitionVersion | undefined {
  return versions.find((v) => v.storage);
}

type Report = (rule: CompatRule, path: string, message: string) => void;

/** Walks two schemas of one field side by side; recursion stops where the type changed. */
function compareSchema(old: JSONSchemaProps, now: JSONSchemaProps, path: string, report: Report): void {
  if (typeChanged(old, now, path, report)) return;
  compareProperties(old, now, path, report);
  compareConstraints(old, now, path, report);
  compareRules(old["x-kubernetes-validations"] ?? [], now["x-kubernetes-validations"] ?? [], path, report);
  if (old.items && now.items) compareSchema(old.items, now.items, `${path}[]`, report);
  const oldValues = old.additionalProperties;
  const nowValues = now.additionalProperties;
  if (typeof oldValues === "object" && typeof nowValues === "object")
    compareSchema(oldValues, nowValues, `${path}[*]`, report);
  else if (
    oldValues !== undefined &&
    oldValues !== false &&
    (nowValues === undefined || nowValues === false) &&
    !now["x-kubernetes-preserve-unknown-fields"]
  )
    report(
      "unknown-fields-pruned",
      path || ".",
      "the map no longer allows its keys: the API server prunes every entry of objects written from now on",
    );
}

function typeChanged(old: JSONSchemaProps, now: JSONSchemaProps, path: string, report: Report): boolean {
  const at = path || ".";
  if (old.type !== now.type) {
    report(
      "type-changed",
      at,
      `type changed from ${describeType(old)} to ${describeType(now)}: stored values and clients no longer fit; add a new field instead`,
    );
    return true;
  }
  if (!!old["x-kubernetes-int-or-string"] !== !!now["x-kubernetes-int-or-string"]) {
    report(
      "type-changed",
      at,
      `type changed from ${describeType(old)} to ${describeType(now)}: add a new field instead`,
    );
    return true;
  }
  if (!!old["x-kubernetes-embedded-resource"] !== !!now["x-kubernetes-embedded-resource"]) {
    report(
      "type-changed",
      at,
      "changed between an embedded Kubernetes object and a plain object: add a new field instead",
    );
    return true;
  }
  if (old["x-kubernetes-preserve-unknown-fields"] && !now["x-kubernetes-preserve-unknown-fields"])
    report(
      "unknown-fields-pruned",
      at,
      "no longer keeps undeclared fields: the API server prunes them from objects written from now on; declare the fields users set, or keep x-kubernetes-preserve-unknown-fields",
    );
  return false;
}

function describeType(s: JSONSchemaProps): string {
  if (s["x-kubernetes-int-or-string"]) return "int-or-string";
  return s.type ?? (s["x-kubernetes-preserve-unknown-fields"] ? "any" : "untyped");
}

function compareProperties(old: JSONSchemaProps, now: JSONSchemaProps, path: string, report: Report): void {
  const oldProps = old.properties ?? {};
  const nowProps = now.properties ?? {};
  for (const [key, schema] of Object.entries(oldProps)) {
    const next = nowProps[key];
    if (next) {
      compareSchema(schema, next, `${path}.${key}`, report);
      continue;
    }
    const renamed = Object.entries(nowProps).find(
      ([k, s]) => !(k in oldProps) && isDeepStrictEqual(stripDescriptions(s), stripDescriptions(schema)),
    );
    const hint = renamed ? `renamed to "${renamed[0]}"? ` : "";
    report(
      "field-removed",
      `${path}.${key}`,
      `${hint}the field is removed: clients that set it fail and the API server prunes it from stored objects on their next write; keep it (deprecated in its description) and add the new field beside it`,
    );
  }
  const oldRequired = new Set(old.required ?? []);
  for (const key of now.required ?? []) {
    if (oldRequired.has(key) || nowProps[key]?.default !== undefined) continue;
    report(
      "required-added",
      `${path}.${key}`,
      "the field became required without a default: existing objects that lack it can no longer be written; give it a default or keep it optional",
    );
  }
}

/** Bounds, enums, patterns, formats and nullability: each may loosen, none may tighten. */
function compareConstraints(old: JSONSchemaProps, now: JSONSchemaProps, path: string, report: Report): void {
  const at = path || ".";
  compareEnum(old, now, at, report);
  for (const key of ["minimum", "minLength", "minItems", "minProperties"] as const) {
    const was = old[key];
    const is = now[key];
    if (is !== undefined && (was === undefined || is > was))
      report(
        "bound-tightened",
        at,
        `${key} went from ${was ?? "none"} to ${is}: values that were valid are refused`,
      );
  }
  for (const key of ["maximum", "maxLength", "maxItems", "maxProperties"] as const) {
    const was = old[key];
    const is = now[key];
    if (is !== undefined && (was === undefined || is < was))
      report(
        "bound-tightened",
        at,
        `${key} went from ${was ?? "none"} to ${is}: values that were valid are refused`,
      );
  }
  for (const key of ["exclusiveMinimum", "exclusiveMaximum"] as const)
    if (now[key] && !old[key])
      report("bound-tightened", at, `${key} turned on: the bound itself is refused now`);
  if (now.multipleOf !== undefined && now.multipleOf !== old.multipleOf)
    report("bound-tightened", at, `multipleOf went from ${old.multipleOf ?? "none"} to ${now.multipleOf}`);
  if (now.pattern !== undefined && now.pattern !== old.pattern)
    report(
      "pattern-changed",
      at,
      `pattern changed from ${old.pattern === undefined ? "none" : JSON.stringify(old.pattern)} to ${JSON.stringify(now.pattern)}: values that matched may not`,
    );
  if (now.format !== old.format)
    report(
      "format-changed",
      at,
      `format changed from ${old.format ?? "none"} to ${now.format ?? "none"}: clients and stored values rely on it`,
    );
  if (old.nullable && !now.nullable)
    report(
      "nullable-removed",
      at,
      "null is no longer accepted: objects that hold null are refused or lose the field",
    );
  for (const key of [
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
  ] as const)
    if (!isDeepStrictEqual(old[key], now[key]))
      report(
        "list-type-changed",
        at,
        `${key} changed from ${JSON.stringify(old[key] ?? null)} to ${JSON.stringify(now[key] ?? null)}: server-side apply merges the field differently and field managers conflict`,
      );
  for (const key of ["allOf", "anyOf", "oneOf", "not"] as const)
    if (
      now[key] !== undefined &&
      !isDeepStrictEqual(stripDescriptions(old[key]), stripDescriptions(now[key]))
    )
      report("composition-changed", at, `${key} changed: it may refuse values that were valid`);
}

function compareEnum(old: JSONSchemaProps, now: JSONSchemaProps, at: string, report: Report): void {
  if (!now.enum) return;
  if (!old.enum) {
    report(
      "enum-added",
      at,
      `the field is limited to ${JSON.stringify(now.enum)} now: other values that were valid are refused`,
    );
    return;
  }
  const removed = old.enum.filter((v) => !now.enum?.some((n) => isDeepStrictEqual(n, v)));
  if (removed.length)
    report(
      "enum-value-removed",
      at,
      `enum values ${JSON.stringify(removed)} were removed: objects holding them can no longer be written`,
    );
}

/**
 * A new rule fails existing data unless it is a transition rule (it reads `oldSelf`, so it judges only
 * changes) or opts into `optionalOldSelf`; a rule whose text changed counts as new.
 */
function compareRules(
  old: readonly ValidationRule[],
  now: readonly ValidationRule[],
  path: string,
  report: Report,
): void {
  const known = new Set(old.map((r) => r.rule));
  for (const rule of now) {
    if (known.has(rule.rule) || rule.optionalOldSelf || /\boldSelf\b/.test(rule.rule)) continue;
    report(
      "cel-rule-added",
      path || ".",
      `a new CEL rule ${JSON.stringify(rule.rule)} applies to objects already stored; make it a transition rule (compare with oldSelf, or set optionalOldSelf) so it judges only changes`,
    );
  }
}

/**
 * A copy without descriptions (they change freely and do not affect what is valid). Only string-valued
 * `description` keys go: a property named "description" is a schema object and stays.
 */
function stripDescriptions(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripDescriptions);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value))
    if (!(k === "description" && typeof v === "string")) out[k] = stripDescriptions(v);
  return out;
}
