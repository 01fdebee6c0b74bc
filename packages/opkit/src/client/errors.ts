/**
 * Typed API errors. A caller branches on the class (`err instanceof NotFoundError`) instead of parsing
 * status codes; every error keeps the API's Status object and the request that failed.
 */

/** The `Status` object the API server returns with a failure. */
export interface ApiStatus {
  kind?: "Status";
  apiVersion?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
}

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface RequestInfo {
  method: string;
  path: string;
}

export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly status: ApiStatus;
  readonly request: RequestInfo;

  constructor(code: number, status: ApiStatus, request: RequestInfo, message?: string) {
    super(
      message ??
        `${request.method} ${request.path}: ${code} ${status.reason ?? ""} ${status.message ?? ""}`.trim(),
    );
    this.name = new.target.name;
    this.code = code;
    this.reason = status.reason ?? "";
    this.status = status;
    this.request = request;
  }
}

export class NotFoundError extends KubeApiError {}
export class AlreadyExistsError extends KubeApiError {}
/** Optimistic concurrency failure (stale resourceVersion) or a server-side apply field conflict. */
export class ConflictError extends KubeApiError {}
export class BadRequestError extends KubeApiError {}
export class UnauthorizedError extends KubeApiError {}
export class GoneError extends KubeApiError {}
export class TooManyRequestsError extends KubeApiError {
  /** Seconds the server asked us to wait, when it said. */
  get retryAfterSeconds(): number | undefined {
    return this.status.details?.retryAfterSeconds;
  }
}
export class TimeoutError extends KubeApiError {}
export class ServerError extends KubeApiError {}

/** A request the API server refused because the object is invalid; `causes` name the fields. */
export class InvalidError extends KubeApiError {
  get causes(): StatusCause[] {
    return this.status.details?.causes ?? [];
  }
}

/** RBAC said no. The message names the verb, resource and identity as the server reported them. */
export class ForbiddenError extends KubeApiError {}

/** The client could not reach the server at all (connection refused, reset, TLS failure). */
export class ConnectionError extends Error {
  readonly request: RequestInfo;
  constructor(request: RequestInfo, cause: unknown) {
    super(`${request.method} ${request.path}: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = "ConnectionError";
    this.request = request;
  }
}

/** A kind the server does not serve (yet): no such apiVersion, or no such kind in it. */
export class UnknownKindError extends Error {
  readonly apiVersion: string;
  readonly kind: string;
  constructor(apiVersion: string, kind: string, detail: string) {
    super(`the server does not serve kind ${kind} in ${apiVersion}: ${detail}`);
    this.name = "UnknownKindError";
    this.apiVersion = apiVersion;
    this.kind = kind;
  }
}

/** Build the right error class for a failed response. */
export function errorFromResponse(code: number, body: unknown, request: RequestInfo): KubeApiError {
  const status: ApiStatus = isStatus(body)
    ? body
    : { message: typeof body === "string" ? body.slice(0, 500) : "" };
  const reason = status.reason ?? "";
  switch (true) {
    case code === 404 || reason === "NotFound":
      return new NotFoundError(code, status, request);
    case code === 409 && reason === "AlreadyExists":
      return new AlreadyExistsError(code, status, request);
    case code === 409:
      return new ConflictError(code, status, request);
    case code === 422 || reason === "Invalid":
      return new InvalidError(code, status, request);
    case code === 403:
      return new ForbiddenError(code, status, request);
    case code === 401:
      return new UnauthorizedError(code, status, request);
    case code === 410 || reason === "Expired" || reason === "Gone":
      return new GoneError(code, status, request);
    case code === 429:
      return new TooManyRequestsError(code, status, request);
    case code === 504 || reason === "Timeout":
      return new TimeoutError(code, status, request);
    case code >= 500:
      return new ServerError(code, status, request);
    case code === 400:
      return new BadRequestError(code, status, request);
    default:
      return new KubeApiError(code, status, request);
  }
}

export function isStatus(body: unknown): body is ApiStatus {
  return typeof body === "object" && body !== null && (body as { kind?: unknown }).kind === "Status";
}
