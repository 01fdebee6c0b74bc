/**
 * Typed API errors. A caller branches on the class (`err instanceof NotFoundError`) instead of parsing
 * status codes; every error keeps the API's Status object and the request that failed.
 */

/** The `Status` object the API server returns with a failure. */
export interface ApiStatus {
  /** Always "Status" when present. */
  kind?: "Status";
  /** Usually "v1". */
  apiVersion?: string;
  /** "Failure" for errors. */
  status?: string;
  /** The server's human-readable explanation. */
  message?: string;
  /** A machine-readable reason (NotFound, AlreadyExists, Conflict, Invalid, Forbidden, ...) to branch on. */
  reason?: string;
  /** The HTTP status code. */
  code?: number;
  /** Which object the failure is about, the field-level causes and how long to wait before a retry. */
  details?: {
    /** The name of the object the failure is about. */
    name?: string;
    /** Its API group. */
    group?: string;
    /** Its kind (or resource). */
    kind?: string;
    /** Its uid. */
    uid?: string;
    /** Field-level reasons, e.g. for an Invalid answer. */
    causes?: StatusCause[];
    /** How long to wait before retrying (429 and some 5xx answers). */
    retryAfterSeconds?: number;
  };
}

/**
 * One reason a request failed, e.g. a field that did not validate; read it to tell the user which field to
 * fix.
 */
export interface StatusCause {
  /** A machine-readable cause, e.g. "FieldValueRequired". */
  reason?: string;
  /** What is wrong, in words. */
  message?: string;
  /** The field path the cause is about, e.g. "spec.replicas". */
  field?: string;
}

/** The request that failed, so an error message and log line say which call it was. */
export interface RequestInfo {
  /** The HTTP method, e.g. "PATCH". */
  method: string;
  /** The request path, e.g. "/apis/apps/v1/namespaces/default/deployments/web". */
  path: string;
}

/** Extra facts about a failed request that the status code alone does not tell. */
export interface KubeApiErrorOptions {
  /** Replaces the default message (`METHOD path: code reason message`). */
  message?: string;
  /** See `KubeApiError.ambiguous`. */
  ambiguous?: boolean;
}

/** A failure answer from the API server; subclasses name the common reasons. */
export class KubeApiError extends Error {
  /** The HTTP status code of the answer. */
  readonly code: number;
  /** The Status reason (e.g. "Conflict"), or "Unknown" when the server gave none. */
  readonly reason: string;
  /** The full Status object the server returned. */
  readonly status: ApiStatus;
  /** The request that failed. */
  readonly request: RequestInfo;
  /**
   * True when this answer came to a retry of a write whose earlier attempt may have been applied (its
   * response was lost, or was a 5xx): an AlreadyExistsError may then be the object that attempt
   * created, a ConflictError the resourceVersion it moved on. Always false for reads and first attempts.
   */
  readonly ambiguous: boolean;

  constructor(code: number, status: ApiStatus, request: RequestInfo, options: KubeApiErrorOptions = {}) {
    const note = options.ambiguous
      ? " (after a retry: an earlier attempt whose outcome is unknown may have been applied)"
      : "";
    super(
      options.message ??
        `${request.method} ${request.path}: ${code} ${status.reason ?? ""} ${status.message ?? ""}`.trim() +
          note,
    );
    this.name = new.target.name;
    this.code = code;
    this.reason = status.reason ?? "";
    this.status = status;
    this.request = request;
    this.ambiguous = options.ambiguous ?? false;
  }
}

/** 404: no such object (or no such path). */
export class NotFoundError extends KubeApiError {}
/** 409 AlreadyExists: a create for a name that is taken (see `ambiguous` after a retried create). */
export class AlreadyExistsError extends KubeApiError {}
/** Optimistic concurrency failure (stale resourceVersion) or a server-side apply field conflict. */
export class ConflictError extends KubeApiError {}
/** 400: a malformed request (bad selector, bad patch, unsupported parameter). */
export class BadRequestError extends KubeApiError {}
/** 401: the credentials were refused (after one refresh of rotating credentials). */
export class UnauthorizedError extends KubeApiError {}
/** 410 Gone/Expired: a resourceVersion older than the server keeps; relist. */
export class GoneError extends KubeApiError {}
/** 429: throttled (priority and fairness) or refused for now (an eviction blocked by a budget). */
export class TooManyRequestsError extends KubeApiError {
  /** Seconds the server asked us to wait, when it said. */
  get retryAfterSeconds(): number | undefined {
    return this.status.details?.retryAfterSeconds;
  }
}
/** 504 or reason Timeout: the server gave up; a write may still complete. */
export class TimeoutError extends KubeApiError {}
/** Any other 5xx. */
export class ServerError extends KubeApiError {}

/** A request the API server refused because the object is invalid; `causes` name the fields. */
export class InvalidError extends KubeApiError {
  /** The field-level reasons the object was rejected; empty when the server named none. */
  get causes(): StatusCause[] {
    return this.status.details?.causes ?? [];
  }
}

/** RBAC said no. The message names the verb, resource and identity as the server reported them. */
export class ForbiddenError extends KubeApiError {}

/** No answer from the server: connection refused, reset or lost, TLS failure, proxy failure, timeout. */
export class ConnectionError extends Error {
  /** The request that got no answer. */
  readonly request: RequestInfo;
  /**
   * True when the connection failed before any of the request was sent (refused, DNS, connect
   * timeout): the server cannot have acted on it. False means it may have.
   */
  readonly beforeSending: boolean;
  constructor(request: RequestInfo, cause: unknown, beforeSending = false) {
    super(`${request.method} ${request.path}: ${describe(cause)}`, { cause });
    this.name = "ConnectionError";
    this.request = request;
    this.beforeSending = beforeSending;
  }
}

/** undici wraps socket errors; the innermost message (with its code) says what happened. */
function describe(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  const code = (cause as { code?: unknown }).code;
  const inner = cause.cause instanceof Error ? ` (${cause.cause.message})` : "";
  return `${cause.message}${inner}${typeof code === "string" && !cause.message.includes(code) ? ` [${code}]` : ""}`;
}

/**
 * The caller's AbortSignal fired before the request (or its retries) finished. `reason` is the signal's
 * reason (also the `cause`), so a controller can tell its own shutdown or reconcile timeout apart.
 * Its `name` is "AbortError", like the DOMException `fetch` throws, so `err.name === "AbortError"`
 * checks keep working.
 */
export class RequestAbortedError extends Error {
  /** The request that was aborted. */
  readonly request: RequestInfo;
  /** The AbortSignal's reason, e.g. the manager's shutdown or a reconcile timeout error. */
  readonly reason: unknown;
  constructor(request: RequestInfo, reason: unknown) {
    const why =
      reason instanceof Error
        ? reason.message
        : typeof reason === "string" || typeof reason === "number"
          ? String(reason)
          : "";
    super(`${request.method} ${request.path}: aborted${why ? `: ${why}` : ""}`, { cause: reason });
    this.name = "AbortError";
    this.request = request;
    this.reason = reason;
  }
}

/** The kubeconfig (or in-cluster configuration) cannot be used; the message names the file and field. */
export class KubeconfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "KubeconfigError";
  }
}

/**
 * Credentials could not be obtained: a token or certificate file cannot be read, an exec plugin failed
 * or printed something that is not an ExecCredential, an auth-provider refused.
 */
export class CredentialsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CredentialsError";
  }
}

/** A kind the server does not serve (yet): no such apiVersion, or no such kind in it. */
export class UnknownKindError extends Error {
  /** The apiVersion that was asked for. */
  readonly apiVersion: string;
  /** The kind that was asked for. */
  readonly kind: string;
  constructor(apiVersion: string, kind: string, detail: string) {
    super(`the server does not serve kind ${kind} in ${apiVersion}: ${detail}`);
    this.name = "UnknownKindError";
    this.apiVersion = apiVersion;
    this.kind = kind;
  }
}

/** Build the right error class for a failed response. */
export function errorFromResponse(
  code: number,
  body: unknown,
  request: RequestInfo,
  options: KubeApiErrorOptions = {},
): KubeApiError {
  const status: ApiStatus = isStatus(body)
    ? body
    : { message: typeof body === "string" ? body.slice(0, 500) : "" };
  const reason = status.reason ?? "";
  switch (true) {
    case code === 404 || reason === "NotFound":
      return new NotFoundError(code, status, request, options);
    case code === 409 && reason === "AlreadyExists":
      return new AlreadyExistsError(code, status, request, options);
    case code === 409:
      return new ConflictError(code, status, request, options);
    case code === 422 || reason === "Invalid":
      return new InvalidError(code, status, request, options);
    case code === 403:
      return new ForbiddenError(code, status, request, options);
    case code === 401:
      return new UnauthorizedError(code, status, request, options);
    case code === 410 || reason === "Expired" || reason === "Gone":
      return new GoneError(code, status, request, options);
    case code === 429:
      return new TooManyRequestsError(code, status, request, options);
    case code === 504 || reason === "Timeout":
      return new TimeoutError(code, status, request, options);
    case code >= 500:
      return new ServerError(code, status, request, options);
    case code === 400:
      return new BadRequestError(code, status, request, options);
    default:
      return new KubeApiError(code, status, request, options);
  }
}

/** True for a `Status` object (what the API server sends with failures). */
export function isStatus(body: unknown): body is ApiStatus {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "Status";
}

/** The message of a thrown value: an Error's `message`, anything else as a string (for logs and details). */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
