/**
 * Admission handlers, typed by the kind they admit:
 *
 * - `validator(Kind, { create(obj), update(oldObj, newObj), delete(obj) })` — each function returns a
 *   `Verdict` (or nothing, which allows) or throws a `ValidationError` whose message is the denial. The
 *   same functions are callable outside a webhook (`v.validate(obj)`), so a controller can refuse an
 *   invalid object when the webhook is not installed.
 * - `defaulter(Kind, (obj) => void)` — mutates a copy of the object; the response is the JSON Patch
 *   (RFC 6902) from the object as received to the object after the function, computed by fast-json-patch.
 *
 * An exception in a handler never escapes: it becomes a denial with the exception's message. A handler
 * that does not finish within the webhook's timeout is denied too (the API server would give up anyway).
 * This file knows the review format but nothing of HTTP, TLS or the server.
 */
import jsonpatch from "fast-json-patch";
import type { ValidationIssue } from "../api/kind.ts";
import type { DeepReadonly, KindRef, KubeObject } from "../client/types.ts";
import { realClock, withTimeout, type Clock } from "../clock/index.ts";
import type { AdmissionRequest, AdmissionResponse, Operation, UserInfo } from "./review.ts";
import { errorMessage } from "../client/errors.ts";

/** What a webhook configuration needs to know of a kind: `defineKind` results have all of it. */
export interface WebhookKind<T extends KubeObject = KubeObject> extends KindRef<T> {
  /** The kind's API group. */
  readonly group: string;
  /** The kind's version. */
  readonly version: string;
  /** The resource (lowercase plural) the webhook's rules match. */
  readonly plural: string;
  /** Whether the kind is namespaced; decides the rule's scope in the configuration. */
  readonly scope?: "Namespaced" | "Cluster";
}

/** The outcome of a validation. `message` (or `issues`) is what the user sees when it is denied. */
export interface Verdict {
  /** Whether the request is admitted. */
  allowed: boolean;
  /** Why it was denied; composed from `issues` when absent. */
  message?: string;
  /** The fields that are wrong and why (dotted paths from the object root, e.g. `spec.pattern`). */
  issues?: ValidationIssue[];
  /** Shown by kubectl as `Warning: …` whether allowed or not. */
  warnings?: string[];
}

/** Allow, optionally with warnings for the user. */
export function allow(warnings?: string[]): Verdict {
  return warnings?.length ? { allowed: true, warnings } : { allowed: true };
}

/** Deny with a message; pass `field` (e.g. "spec.jobNamePattern") so the user learns which field is wrong. */
export function deny(message: string, opts: { field?: string; warnings?: string[] } = {}): Verdict {
  const v: Verdict = { allowed: false, message: opts.field ? `${opts.field}: ${message}` : message };
  if (opts.field) v.issues = [{ path: opts.field, message }];
  if (opts.warnings?.length) v.warnings = opts.warnings;
  return v;
}

/** Deny for every issue (e.g. the result of `Kind.validate(obj)`); allows when there are none. */
export function denyIssues(issues: readonly ValidationIssue[], warnings?: string[]): Verdict {
  if (issues.length === 0) return allow(warnings);
  const v: Verdict = { allowed: false, issues: [...issues], message: issuesMessage(issues) };
  if (warnings?.length) v.warnings = warnings;
  return v;
}

function issuesMessage(issues: readonly ValidationIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
}

/**
 * Throw from a validator (or a defaulter) to deny: the message is the denial, `field` names the field.
 * Any other exception denies too, but is logged as a handler failure.
 */
export class ValidationError extends Error {
  /** The fields that are wrong and why. */
  readonly issues: ValidationIssue[];
  /** Warnings to return with the denial. */
  readonly warnings: string[];
  constructor(
    message: string,
    opts: { field?: string; issues?: ValidationIssue[]; warnings?: string[] } = {},
  ) {
    const issues = opts.issues ?? (opts.field ? [{ path: opts.field, message }] : []);
    super(opts.field ? `${opts.field}: ${message}` : message);
    this.name = "ValidationError";
    this.issues = issues;
    this.warnings = opts.warnings ?? [];
  }

  /** One error for several issues (message "a: x; b: y"). */
  static of(issues: readonly ValidationIssue[]): ValidationError {
    return new ValidationError(issuesMessage(issues), { issues: [...issues] });
  }
}

/** A webhook configuration's failure policy: what the API server does when the webhook cannot answer. */
export type FailurePolicy = "Fail" | "Ignore";
/**
 * Whether the webhook changes anything outside the object: "None", or "NoneOnDryRun" when it does but skips
 * that on dry runs (required for `kubectl --dry-run=server`).
 */
export type SideEffects = "None" | "NoneOnDryRun";

/** A label selector as webhook configurations take it. */
export interface WebhookLabelSelector {
  /** Labels that must have exactly these values. */
  matchLabels?: Record<string, string>;
  /** Further requirements; all must hold. */
  matchExpressions?: {
    /** The label key. */
    key: string;
    /** How the label's value is compared with `values`. */
    operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
    /** The values for In and NotIn. */
    values?: string[];
  }[];
}

/** Settings of one admission webhook; everything has a default. */
export interface WebhookOptions {
  /** The webhook's name in its configuration (a DNS name with at least three labels). */
  name?: string;
  /** URL path it is served on (default `/validate-<group>-<version>-<kind>` or `/mutate-…`). */
  path?: string;
  /** Default "Fail": when the webhook is down, requests are refused rather than admitted unchecked. */
  failurePolicy?: FailurePolicy;
  /** 1–30, default 10. The server also stops the handler after this long. */
  timeoutSeconds?: number;
  /** Default "None". Webhooks with side effects must skip them for dry-run requests ("NoneOnDryRun"). */
  sideEffects?: SideEffects;
  /** Only requests in namespaces whose labels match reach the webhook, e.g. to exempt kube-system. */
  namespaceSelector?: WebhookLabelSelector;
  /** Only objects whose labels match reach the webhook. */
  objectSelector?: WebhookLabelSelector;
}

/** What every request's handler gets besides the objects. */
export interface AdmissionContext {
  /** CREATE, UPDATE, DELETE or CONNECT. */
  operation: Operation;
  /** Who made the request, e.g. to allow some changes only to administrators. */
  userInfo: UserInfo;
  /** True for a dry run: the handler must not cause side effects. */
  dryRun: boolean;
  /** The namespace of the object. */
  namespace?: string;
  /** The name of the object (may be empty on CREATE with generateName). */
  name?: string;
  /** Aborted when the request times out; pass it to calls that take a signal. */
  signal: AbortSignal;
  /** The raw request; absent when called from a controller. */
  request?: AdmissionRequest;
}

/** The parts of an admission webhook the server and the configuration generator use. */
export interface AdmissionWebhook {
  /** Validating (may deny) or mutating (may change the object). */
  readonly type: "validating" | "mutating";
  /** The webhook's name in its configuration. */
  readonly name: string;
  /** The URL path it is served on. */
  readonly path: string;
  /** The kind it admits. */
  readonly kind: WebhookKind;
  /** The operations it is called for. */
  readonly operations: readonly Operation[];
  /** What the API server does when the webhook cannot answer. */
  readonly failurePolicy: FailurePolicy;
  /** Whether it has side effects. */
  readonly sideEffects: SideEffects;
  /** How long the API server waits for an answer. */
  readonly timeoutSeconds: number;
  /** The namespace selector of the configuration entry. */
  readonly namespaceSelector?: WebhookLabelSelector;
  /** The object selector of the configuration entry. */
  readonly objectSelector?: WebhookLabelSelector;
  /** Answer one request. Never throws: handler failures and timeouts become denials. */
  admit(request: AdmissionRequest, opts?: AdmitOptions): Promise<AdmissionResponse>;
}

/** Options of one `admit` call. */
export interface AdmitOptions {
  /** Stop waiting for the handler after this long (default and maximum: timeoutSeconds). */
  timeoutMs?: number;
  /** Time source for the timeout; a FakeClock in tests. */
  clock?: Clock;
}

/** A badly declared webhook; the message names the option and what to do. */
export class WebhookDefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookDefinitionError";
  }
}

type MaybePromise<T> = T | Promise<T>;

/**
 * The validation functions of one kind; a missing one allows that operation without a call. Objects
 * are read-only: the same functions validate objects straight from the (frozen) cache in a reconcile.
 */
export interface ValidatorFunctions<T extends KubeObject> {
  /** Validate a new object; return a Verdict (or nothing to allow) or throw ValidationError to deny. */
  create?(obj: DeepReadonly<T>, ctx: AdmissionContext): MaybePromise<Verdict | void>;
  /** Validate a change; gets the old and the new object, e.g. to refuse changing an immutable field. */
  update?(
    oldObj: DeepReadonly<T>,
    newObj: DeepReadonly<T>,
    ctx: AdmissionContext,
  ): MaybePromise<Verdict | void>;
  /** Validate a deletion, e.g. to refuse deleting an object still in use. */
  delete?(obj: DeepReadonly<T>, ctx: AdmissionContext): MaybePromise<Verdict | void>;
}

/** A validating webhook for one kind, also callable directly (e.g. from a reconcile). */
export interface Validator<T extends KubeObject = KubeObject> extends AdmissionWebhook {
  /** Always "validating". */
  readonly type: "validating";
  /** Run the create validation directly (without an HTTP request), e.g. in tests. */
  validateCreate(obj: DeepReadonly<T>, ctx?: Partial<AdmissionContext>): Promise<Verdict>;
  /** Run the update validation directly. */
  validateUpdate(
    oldObj: DeepReadonly<T>,
    newObj: DeepReadonly<T>,
    ctx?: Partial<AdmissionContext>,
  ): Promise<Verdict>;
  /** Run the delete validation directly. */
  validateDelete(obj: DeepReadonly<T>, ctx?: Partial<AdmissionContext>): Promise<Verdict>;
  /**
   * The verdict on an object as it is: `update(oldObj, obj)` when `oldObj` is given, else `create(obj)`.
   * Use it in a reconcile to refuse invalid objects when the webhook may not be installed.
   */
  validate(obj: DeepReadonly<T>, oldObj?: DeepReadonly<T>): Promise<Verdict>;
}

/** A defaulting (mutating) webhook for one kind. */
export interface Defaulter<T extends KubeObject = KubeObject> extends AdmissionWebhook {
  /** Always "mutating". */
  readonly type: "mutating";
  /** A defaulted copy of `obj` (the input is not changed). */
  applyDefaults(obj: T, ctx?: Partial<AdmissionContext>): Promise<T>;
}

const NEVER_ABORTED = new AbortController().signal;

function kebab(s: string): string {
  return s.replace(/\./g, "-").toLowerCase();
}

function checkKind(kind: WebhookKind, fn: string): void {
  for (const f of ["apiVersion", "kind", "version", "plural"] as const) {
    if (typeof kind[f] !== "string" || kind[f] === "")
      throw new WebhookDefinitionError(
        `${fn}: the kind has no ${f}; pass a defineKind(...) result or an object with apiVersion, kind, group, version and plural`,
      );
  }
}

interface Resolved {
  name: string;
  path: string;
  failurePolicy: FailurePolicy;
  sideEffects: SideEffects;
  timeoutSeconds: number;
  namespaceSelector?: WebhookLabelSelector;
  objectSelector?: WebhookLabelSelector;
}

function resolveOptions(
  fn: string,
  prefix: "validate" | "mutate",
  kind: WebhookKind,
  opts: WebhookOptions,
): Resolved {
  checkKind(kind, fn);
  const group = kind.group || "core";
  const path = opts.path ?? `/${prefix}-${kebab(group)}-${kind.version}-${kind.kind.toLowerCase()}`;
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(path))
    throw new WebhookDefinitionError(
      `${fn}(${kind.kind}): path "${path}" must start with "/" and be URL-safe`,
    );
  // The API server requires a fully qualified name with at least three labels.
  const domain = group.split(".").length >= 2 ? group : `${group}.opkit.dev`;
  const name =
    opts.name ?? `${prefix === "validate" ? "v" : "m"}${kind.kind.toLowerCase()}-${kind.version}.${domain}`;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$/.test(name) || name.length > 253)
    throw new WebhookDefinitionError(
      `${fn}(${kind.kind}): name "${name}" must be a lowercase DNS name with at least three labels, e.g. vmykind.example.com`,
    );
  const timeoutSeconds = opts.timeoutSeconds ?? 10;
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 30)
    throw new WebhookDefinitionError(
      `${fn}(${kind.kind}): timeoutSeconds ${timeoutSeconds} must be a whole number from 1 to 30 (the API server's limits)`,
    );
  const failurePolicy = opts.failurePolicy ?? "Fail";
  if (failurePolicy !== "Fail" && failurePolicy !== "Ignore")
    throw new WebhookDefinitionError(`${fn}(${kind.kind}): failurePolicy must be "Fail" or "Ignore"`);
  const sideEffects = opts.sideEffects ?? "None";
  if (sideEffects !== "None" && sideEffects !== "NoneOnDryRun")
    throw new WebhookDefinitionError(`${fn}(${kind.kind}): sideEffects must be "None" or "NoneOnDryRun"`);
  const r: Resolved = { name, path, failurePolicy, sideEffects, timeoutSeconds };
  if (opts.namespaceSelector) r.namespaceSelector = opts.namespaceSelector;
  if (opts.objectSelector) r.objectSelector = opts.objectSelector;
  return r;
}

function context(operation: Operation, partial: Partial<AdmissionContext> = {}): AdmissionContext {
  return { userInfo: {}, dryRun: false, signal: NEVER_ABORTED, ...partial, operation };
}

function contextOf(req: AdmissionRequest, signal: AbortSignal): AdmissionContext {
  const ctx: AdmissionContext = {
    operation: req.operation,
    userInfo: req.userInfo ?? {},
    dryRun: req.dryRun === true,
    signal,
    request: req,
  };
  if (req.namespace) ctx.namespace = req.namespace;
  if (req.name) ctx.name = req.name;
  return ctx;
}

/** The verdict of a thrown value: ValidationError denies with its message; anything else says it failed. */
export function verdictOfError(err: unknown): Verdict {
  if (err instanceof ValidationError) {
    const v: Verdict = { allowed: false, message: err.message };
    if (err.issues.length) v.issues = err.issues;
    if (err.warnings.length) v.warnings = err.warnings;
    return v;
  }
  const message = errorMessage(err);
  return { allowed: false, message: `webhook handler failed: ${message}` };
}

function normalize(v: Verdict | void | undefined): Verdict {
  if (v === undefined || v === null) return { allowed: true };
  if (typeof v !== "object" || typeof v.allowed !== "boolean")
    return {
      allowed: false,
      message: "webhook handler returned something that is not a verdict ({ allowed })",
    };
  if (!v.allowed && !v.message)
    return { ...v, message: v.issues?.length ? issuesMessage(v.issues) : "denied" };
  return v;
}

async function runGuarded<R>(
  fn: () => MaybePromise<R>,
): Promise<{ ok: true; value: R } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

function statusOf(v: Verdict, failed: boolean): AdmissionResponse["status"] {
  // 403 for every denial, even a field error: kubectl then prints "admission webhook <name> denied the
  // request: <field>: <why>", naming the webhook. (With 422 Invalid it prints only the causes.)
  const status: NonNullable<AdmissionResponse["status"]> = {
    code: failed ? 500 : 403,
    reason: failed ? "InternalError" : "Forbidden",
    message: v.message ?? "denied",
  };
  if (v.issues?.length)
    status.details = {
      causes: v.issues.map((i) => ({ type: "FieldValueInvalid", field: i.path, message: i.message })),
    };
  return status;
}

/** Warnings the API server accepts: single-line, printable, not empty. */
function cleanWarnings(warnings: readonly unknown[] | undefined): string[] | undefined {
  if (!warnings?.length) return undefined;
  const out = warnings
    // Control characters would break the Warning header the API server turns these into.
    .map((w) =>
      [...String(w)]
        .map((ch) => (ch < " " || ch === "\u007f" ? " " : ch))
        .join("")
        .trim(),
    )
    .filter((w) => w !== "")
    .map((w) => (w.length > 512 ? `${w.slice(0, 509)}...` : w));
  return out.length ? out : undefined;
}

/** The AdmissionResponse for a verdict. */
export function responseOf(uid: string, v: Verdict, failed = false): AdmissionResponse {
  const r: AdmissionResponse = { uid, allowed: v.allowed };
  if (!v.allowed) r.status = statusOf(v, failed);
  const warnings = cleanWarnings(v.warnings);
  if (warnings) r.warnings = warnings;
  return r;
}

function kindMismatch(webhook: AdmissionWebhook, req: AdmissionRequest): string | undefined {
  const k = webhook.kind;
  const got = req.kind;
  if (got.group === k.group && got.version === k.version && got.kind === k.kind) return undefined;
  const g = got.group ? `${got.group}/${got.version}` : got.version;
  return `webhook ${webhook.name} serves ${k.apiVersion} ${k.kind} but was sent ${g} ${got.kind}; check the rules of its configuration`;
}

function effectiveTimeout(webhook: AdmissionWebhook, opts: AdmitOptions): number {
  const max = webhook.timeoutSeconds * 1000;
  return Math.min(opts.timeoutMs ?? max, max);
}

/**
 * A validating webhook for `kind`. Operations without a function are allowed without a call and are
 * left out of the webhook's rules, so the API server does not even call it for them.
 */
export function validator<T extends KubeObject>(
  kind: WebhookKind<T>,
  functions: ValidatorFunctions<T>,
  options: WebhookOptions = {},
): Validator<T> {
  // Long on purpose: the returned object's methods share the resolved options and the one `run` they call.
  const r = resolveOptions("validator", "validate", kind, options);
  const operations: Operation[] = [];
  if (functions.create) operations.push("CREATE");
  if (functions.update) operations.push("UPDATE");
  if (functions.delete) operations.push("DELETE");
  if (operations.length === 0)
    throw new WebhookDefinitionError(`validator(${kind.kind}): give at least one of create, update, delete`);

  async function run(
    call: (ctx: AdmissionContext) => MaybePromise<Verdict | void>,
    ctx: AdmissionContext,
  ): Promise<{ verdict: Verdict; failed: boolean }> {
    const out = await runGuarded(() => call(ctx));
    if (out.ok) return { verdict: normalize(out.value), failed: false };
    return { verdict: verdictOfError(out.error), failed: !(out.error instanceof ValidationError) };
  }

  type Obj = DeepReadonly<T>;
  function callFor(
    op: Operation,
    oldObj: Obj | undefined,
    obj: Obj | undefined,
  ): ((ctx: AdmissionContext) => MaybePromise<Verdict | void>) | undefined {
    switch (op) {
      case "CREATE":
        return functions.create && ((ctx) => functions.create?.(obj as Obj, ctx));
      case "UPDATE":
        return functions.update && ((ctx) => functions.update?.(oldObj as Obj, obj as Obj, ctx));
      case "DELETE":
        return functions.delete && ((ctx) => functions.delete?.(oldObj as Obj, ctx));
      default:
        return undefined;
    }
  }

  const self: Validator<T> = {
    type: "validating",
    kind,
    operations,
    ...r,
    async admit(req, opts = {}) {
      const mismatch = kindMismatch(self, req);
      if (mismatch) return responseOf(req.uid, { allowed: false, message: mismatch }, true);
      const obj = (req.object ?? undefined) as Obj | undefined;
      const oldObj = (req.oldObject ?? (req.operation === "DELETE" ? req.object : undefined) ?? undefined) as
        Obj | undefined;
      const call = callFor(req.operation, oldObj, obj);
      if (!call) return responseOf(req.uid, { allowed: true });
      const timeoutMs = effectiveTimeout(self, opts);
      const result = await withTimeout(opts.clock ?? realClock, timeoutMs, (signal) =>
        run(call, contextOf(req, signal)),
      );
      if (result.timedOut)
        return responseOf(
          req.uid,
          { allowed: false, message: `webhook handler did not answer within ${timeoutMs / 1000}s` },
          true,
        );
      return responseOf(req.uid, result.value.verdict, result.value.failed);
    },
    async validateCreate(obj, ctx) {
      const call = callFor("CREATE", undefined, obj);
      return call ? (await run(call, context("CREATE", ctx))).verdict : { allowed: true };
    },
    async validateUpdate(oldObj, newObj, ctx) {
      const call = callFor("UPDATE", oldObj, newObj);
      return call ? (await run(call, context("UPDATE", ctx))).verdict : { allowed: true };
    },
    async validateDelete(obj, ctx) {
      const call = callFor("DELETE", obj, undefined);
      return call ? (await run(call, context("DELETE", ctx))).verdict : { allowed: true };
    },
    validate(obj, oldObj) {
      return oldObj === undefined ? self.validateCreate(obj) : self.validateUpdate(oldObj, obj);
    },
  };
  return Object.freeze(self);
}

/** A JSON value round-tripped through JSON: what the API server sent, without `undefined` holes. */
function jsonCopy<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** A JSON Patch operation (RFC 6902). */
export type PatchOperation = jsonpatch.Operation;

/**
 * The JSON Patch that turns `before` into `after` (fast-json-patch's diff). Both are taken as JSON,
 * so fields set to `undefined` count as removed.
 */
export function jsonPatch(before: unknown, after: unknown): PatchOperation[] {
  return jsonpatch.compare(jsonCopy(before) as object, jsonCopy(after) as object);
}

/** Settings of a defaulting webhook: create and update by default. */
export interface DefaulterOptions extends WebhookOptions {
  /** The operations it defaults on (default CREATE and UPDATE). */
  operations?: readonly ("CREATE" | "UPDATE")[];
}

/**
 * A defaulting (mutating) webhook for `kind`: `fn` changes a copy of the object in place (or returns a
 * new object); the response patches the stored object to match. Throwing denies the request.
 */
export function defaulter<T extends KubeObject>(
  kind: WebhookKind<T>,
  fn: (obj: T, ctx: AdmissionContext) => MaybePromise<T | void>,
  options: DefaulterOptions = {},
): Defaulter<T> {
  const r = resolveOptions("defaulter", "mutate", kind, options);
  const operations: Operation[] = [...(options.operations ?? ["CREATE", "UPDATE"])];
  if (operations.length === 0 || operations.some((o) => o !== "CREATE" && o !== "UPDATE"))
    throw new WebhookDefinitionError(`defaulter(${kind.kind}): operations must be CREATE and/or UPDATE`);

  async function apply(obj: T, ctx: AdmissionContext): Promise<T> {
    const copy = jsonCopy(obj);
    const returned = await fn(copy, ctx);
    return returned ?? copy;
  }

  const self: Defaulter<T> = {
    type: "mutating",
    kind,
    operations,
    ...r,
    async admit(req, opts = {}) {
      const mismatch = kindMismatch(self, req);
      if (mismatch) return responseOf(req.uid, { allowed: false, message: mismatch }, true);
      if (!operations.includes(req.operation) || !req.object) return responseOf(req.uid, { allowed: true });
      const original = req.object as T;
      const timeoutMs = effectiveTimeout(self, opts);
      const result = await withTimeout(opts.clock ?? realClock, timeoutMs, (signal) =>
        runGuarded(() => apply(original, contextOf(req, signal))),
      );
      if (result.timedOut)
        return responseOf(
          req.uid,
          { allowed: false, message: `webhook handler did not answer within ${timeoutMs / 1000}s` },
          true,
        );
      const out = result.value;
      if (!out.ok)
        return responseOf(req.uid, verdictOfError(out.error), !(out.error instanceof ValidationError));
      let ops: PatchOperation[];
      try {
        ops = jsonPatch(original, out.value);
      } catch (err) {
        return responseOf(req.uid, verdictOfError(err), true);
      }
      const response = responseOf(req.uid, { allowed: true });
      if (ops.length > 0) {
        response.patchType = "JSONPatch";
        response.patch = Buffer.from(JSON.stringify(ops)).toString("base64");
      }
      return response;
    },
    applyDefaults(obj, ctx) {
      return apply(obj, context("CREATE", ctx));
    },
  };
  return Object.freeze(self);
}
