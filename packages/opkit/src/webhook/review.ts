/**
 * The wire format the kube-apiserver speaks to webhooks — AdmissionReview v1 and ConversionReview v1 —
 * and the strict decoding of request bodies. Bodies come from the network: anything that is not exactly
 * the expected shape becomes a `MalformedReviewError` whose message says what is wrong, which the server
 * answers with a 400 instead of guessing.
 *
 * Pure: no I/O, no handlers. It knows nothing of the server or of the handlers that use it.
 */
import type { KubeObject } from "../client/types.ts";

export const ADMISSION_API_VERSION = "admission.k8s.io/v1";
export const CONVERSION_API_VERSION = "apiextensions.k8s.io/v1";

export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** Group, version and kind of the object under review. */
export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** Group, version and resource (plural) of the request. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** Who sent the request the API server is admitting. */
export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** `request` of an AdmissionReview v1. */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource?: string;
  requestKind?: GroupVersionKind;
  requestResource?: GroupVersionResource;
  requestSubResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  userInfo: UserInfo;
  /** The new object (absent for DELETE). */
  object?: KubeObject | null;
  /** The existing object (UPDATE and DELETE). */
  oldObject?: KubeObject | null;
  dryRun?: boolean;
  options?: Record<string, unknown> | null;
}

/** A `Status` cause: which field is wrong and why (`kubectl` prints these). */
export interface AdmissionStatusCause {
  type?: string;
  message?: string;
  field?: string;
}

/** The `status` of a denied AdmissionResponse; its message is what `kubectl` shows. */
export interface AdmissionStatus {
  code?: number;
  reason?: string;
  message?: string;
  details?: { causes?: AdmissionStatusCause[] };
}

/** `response` of an AdmissionReview v1. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  patchType?: "JSONPatch";
  /** Base64 of the JSON Patch (RFC 6902) document. */
  patch?: string;
  warnings?: string[];
  auditAnnotations?: Record<string, string>;
}

export interface AdmissionReview {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: "AdmissionReview";
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** `request` of a ConversionReview v1. */
export interface ConversionRequest {
  uid: string;
  /** e.g. "webhook-test.opkit.dev/v2". */
  desiredAPIVersion: string;
  objects: KubeObject[];
}

/** `response` of a ConversionReview v1. */
export interface ConversionResponse {
  uid: string;
  convertedObjects: KubeObject[];
  result: { status: "Success" | "Failure"; message?: string };
}

export interface ConversionReview {
  apiVersion: typeof CONVERSION_API_VERSION;
  kind: "ConversionReview";
  request?: ConversionRequest;
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
