/**
 * The wire format the kube-apiserver speaks to webhooks — AdmissionReview v1 and ConversionReview v1 —
 * and the strict decoding of request bodies. Bodies come from the network: anything that is not exactly
 * the expected shape becomes a `MalformedReviewError` whose message says what is wrong, which the server
 * answers with a 400 instead of guessing.
 *
 * Pure: no I/O, no handlers. It knows nothing of the server or of the handlers that use it.
 */
import type { KubeObject } from "../client/types.ts";

/** The AdmissionReview API version opkit speaks (v1; v1beta1 is gone from current clusters). */
export const ADMISSION_API_VERSION = "admission.k8s.io/v1";
/** The ConversionReview API version opkit speaks. */
export const CONVERSION_API_VERSION = "apiextensions.k8s.io/v1";

/** The operation an admission request is about. */
export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** Group, version and kind of the object under review. */
export interface GroupVersionKind {
  /** The API group ("" for core). */
  group: string;
  /** The version. */
  version: string;
  /** The kind. */
  kind: string;
}

/** Group, version and resource (plural) of the request. */
export interface GroupVersionResource {
  /** The API group ("" for core). */
  group: string;
  /** The version. */
  version: string;
  /** The resource (lowercase plural). */
  resource: string;
}

/** Who sent the request the API server is admitting. */
export interface UserInfo {
  /** The user's name, e.g. "system:serviceaccount:ns:name". */
  username?: string;
  /** The user's uid. */
  uid?: string;
  /** The user's groups, e.g. "system:masters". */
  groups?: string[];
  /** Extra attributes the authenticator added. */
  extra?: Record<string, string[]>;
}

/** `request` of an AdmissionReview v1. */
export interface AdmissionRequest {
  /** Identifies the request; the response must carry it back. */
  uid: string;
  /** The kind of the object as the webhook registered it. */
  kind: GroupVersionKind;
  /** The resource as the webhook registered it. */
  resource: GroupVersionResource;
  /** The subresource, e.g. "status". */
  subResource?: string;
  /** The kind as the user sent it (differs when the server converted between versions). */
  requestKind?: GroupVersionKind;
  /** The resource as the user sent it. */
  requestResource?: GroupVersionResource;
  /** The subresource as the user sent it. */
  requestSubResource?: string;
  /** The object's name (may be absent on CREATE with generateName). */
  name?: string;
  /** The object's namespace. */
  namespace?: string;
  /** What is being done. */
  operation: Operation;
  /** Who is doing it. */
  userInfo: UserInfo;
  /** The new object (absent for DELETE). */
  object?: KubeObject | null;
  /** The existing object (UPDATE and DELETE). */
  oldObject?: KubeObject | null;
  /** True for a dry run: the webhook must not cause side effects. */
  dryRun?: boolean;
  /** The operation's options (CreateOptions, UpdateOptions, DeleteOptions). */
  options?: Record<string, unknown> | null;
}

/** A `Status` cause: which field is wrong and why (`kubectl` prints these). */
export interface AdmissionStatusCause {
  /** A machine-readable cause, e.g. "FieldValueInvalid". */
  type?: string;
  /** What is wrong. */
  message?: string;
  /** The field path, e.g. "spec.replicas". */
  field?: string;
}

/** The `status` of a denied AdmissionResponse; its message is what `kubectl` shows. */
export interface AdmissionStatus {
  /** HTTP status code of the denial (e.g. 403). */
  code?: number;
  /** Machine-readable reason. */
  reason?: string;
  /** What the user sees. */
  message?: string;
  /** The field-level causes. */
  details?: {
    /** The fields that are wrong and why. */
    causes?: AdmissionStatusCause[];
  };
}

/** `response` of an AdmissionReview v1. */
export interface AdmissionResponse {
  /** The request's uid, echoed. */
  uid: string;
  /** Whether the request is admitted. */
  allowed: boolean;
  /** Why it was denied. */
  status?: AdmissionStatus;
  /** Set with `patch` by mutating webhooks. */
  patchType?: "JSONPatch";
  /** Base64 of the JSON Patch (RFC 6902) document. */
  patch?: string;
  /** Warnings kubectl shows to the user. */
  warnings?: string[];
  /** Annotations added to the audit log entry. */
  auditAnnotations?: Record<string, string>;
}

/** The AdmissionReview v1 envelope the API server posts to admission webhooks and expects back. */
export interface AdmissionReview {
  /** Always admission.k8s.io/v1. */
  apiVersion: typeof ADMISSION_API_VERSION;
  /** Always "AdmissionReview". */
  kind: "AdmissionReview";
  /** Set in what the server sends. */
  request?: AdmissionRequest;
  /** Set in what the webhook answers. */
  response?: AdmissionResponse;
}

/** `request` of a ConversionReview v1. */
export interface ConversionRequest {
  /** Identifies the request; the response must carry it back. */
  uid: string;
  /** e.g. "webhook-test.opkit.dev/v2". */
  desiredAPIVersion: string;
  /** The objects to convert (all of one kind). */
  objects: KubeObject[];
}

/** `response` of a ConversionReview v1. */
export interface ConversionResponse {
  /** The request's uid, echoed. */
  uid: string;
  /** The objects in the desired version, in the request's order. */
  convertedObjects: KubeObject[];
  /** Success, or Failure with a message the user sees. */
  result: {
    /** "Success", or "Failure" when any object could not be converted. */
    status: "Success" | "Failure";
    /** Why it failed, shown to the user. */
    message?: string;
  };
}

/** The ConversionReview v1 envelope the API server posts to conversion webhooks and expects back. */
export interface ConversionReview {
  /** Always apiextensions.k8s.io/v1. */
  apiVersion: typeof CONVERSION_API_VERSION;
  /** Always "ConversionReview". */
  kind: "ConversionReview";
  /** Set in what the server sends. */
  request?: ConversionRequest;
  /** Set in what the webhook answers. */
  response?: ConversionResponse;
}

/**
 * A request body the server cannot act on (not JSON, wrong kind or version, missing fields, too big).
 * The server answers 400 with this message; the API server logs it with the webhook's name.
 */
export class MalformedReviewError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MalformedReviewError";
  }
}

const OPERATIONS: readonly string[] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function parseJson(body: string): unknown {
  if (body.trim() === "") throw new MalformedReviewError("request body is empty: expected a JSON review");
  try {
    return JSON.parse(body) as unknown;
  } catch (err) {
    throw new MalformedReviewError(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

function expectEnvelope(value: unknown, apiVersion: string, kind: string): Record<string, unknown> {
  if (!isRecord(value)) throw new MalformedReviewError(`request body must be a JSON object (a ${kind})`);
  if (value.kind !== kind)
    throw new MalformedReviewError(`kind is ${JSON.stringify(value.kind)}: this endpoint accepts a ${kind}`);
  if (value.apiVersion !== apiVersion)
    throw new MalformedReviewError(
      `apiVersion is ${JSON.stringify(value.apiVersion)}: this server speaks ${kind} ${apiVersion} only; set admissionReviewVersions/conversionReviewVersions to ["v1"]`,
    );
  if (!isRecord(value.request)) throw new MalformedReviewError(`${kind}.request is missing or not an object`);
  return value.request;
}

function expectString(obj: Record<string, unknown>, field: string, where: string): string {
  const v = obj[field];
  if (typeof v !== "string" || v === "")
    throw new MalformedReviewError(`${where}.${field} must be a non-empty string`);
  return v;
}

function expectObjectOrNull(obj: Record<string, unknown>, field: string, where: string): void {
  const v = obj[field];
  if (v === undefined || v === null) return;
  if (!isRecord(v)) throw new MalformedReviewError(`${where}.${field} must be an object or null`);
  if (!isRecord(v.metadata)) v.metadata = {};
}

/** Decode an AdmissionReview v1 request body; throws MalformedReviewError naming what is wrong. */
export function decodeAdmissionReview(body: string): AdmissionRequest {
  const req = expectEnvelope(parseJson(body), ADMISSION_API_VERSION, "AdmissionReview");
  const where = "AdmissionReview.request";
  expectString(req, "uid", where);
  const op = expectString(req, "operation", where);
  if (!OPERATIONS.includes(op))
    throw new MalformedReviewError(
      `${where}.operation ${JSON.stringify(op)} is not one of ${OPERATIONS.join(", ")}`,
    );
  for (const field of ["kind", "resource"] as const) {
    if (!isRecord(req[field])) throw new MalformedReviewError(`${where}.${field} must be an object`);
  }
  const kind = req.kind as Record<string, unknown>;
  for (const f of ["version", "kind"]) expectString(kind, f, `${where}.kind`);
  if (typeof kind.group !== "string") throw new MalformedReviewError(`${where}.kind.group must be a string`);
  if (req.userInfo !== undefined && !isRecord(req.userInfo))
    throw new MalformedReviewError(`${where}.userInfo must be an object`);
  req.userInfo ??= {};
  expectObjectOrNull(req, "object", where);
  expectObjectOrNull(req, "oldObject", where);
  if ((op === "CREATE" || op === "UPDATE") && !isRecord(req.object))
    throw new MalformedReviewError(`${where}.object is required for ${op}`);
  if (op === "UPDATE" && !isRecord(req.oldObject))
    throw new MalformedReviewError(`${where}.oldObject is required for UPDATE`);
  if (op === "DELETE" && !isRecord(req.oldObject) && !isRecord(req.object))
    throw new MalformedReviewError(`${where}.oldObject is required for DELETE`);
  return req as unknown as AdmissionRequest;
}

/** Decode a ConversionReview v1 request body; throws MalformedReviewError naming what is wrong. */
export function decodeConversionReview(body: string): ConversionRequest {
  const req = expectEnvelope(parseJson(body), CONVERSION_API_VERSION, "ConversionReview");
  const where = "ConversionReview.request";
  expectString(req, "uid", where);
  const desired = expectString(req, "desiredAPIVersion", where);
  if (!/^[^/]+\/[^/]+$/.test(desired))
    throw new MalformedReviewError(`${where}.desiredAPIVersion "${desired}" must be group/version`);
  if (!Array.isArray(req.objects)) throw new MalformedReviewError(`${where}.objects must be a list`);
  req.objects.forEach((o, i) => {
    if (!isRecord(o)) throw new MalformedReviewError(`${where}.objects[${i}] must be an object`);
    if (typeof o.apiVersion !== "string" || typeof o.kind !== "string")
      throw new MalformedReviewError(`${where}.objects[${i}] needs apiVersion and kind`);
    if (!isRecord(o.metadata)) o.metadata = {};
  });
  return req as unknown as ConversionRequest;
}

/** The AdmissionReview the server sends back. */
export function admissionReviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: ADMISSION_API_VERSION, kind: "AdmissionReview", response };
}

/** The ConversionReview the server sends back. */
export function conversionReviewResponse(response: ConversionResponse): ConversionReview {
  return { apiVersion: CONVERSION_API_VERSION, kind: "ConversionReview", response };
}
