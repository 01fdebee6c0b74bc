/**
 * The HTTP layer: one keep-alive undici pool per cluster (direct, or through the cluster's proxy or
 * HTTPS_PROXY), credentials that follow rotation (credentials.ts), a User-Agent, the server's Warning
 * headers reported once each, typed errors, AbortSignals, bounded retries where a retry cannot do harm,
 * and incremental streaming for watches.
 *
 * Retries (attempts bounded by `maxRetries`, backoff with jitter or the server's Retry-After, waits
 * through the injectable `sleep` and cut short by the request's signal):
 * - 429 TooManyRequests: any request; the server did not process it.
 * - a connection that failed before the request was sent (refused, DNS, connect timeout): any request.
 * - a 5xx answer, or a connection lost after sending: only requests marked `idempotent` (GETs by
 *   default; the client marks the writes a repeat cannot harm). A later answer to such a write carries
 *   `ambiguous: true`, since the lost attempt may have been applied.
 * - a 401 once, without counting as an attempt, when the credentials could be refreshed (exec plugin,
 *   rotated token or certificate files).
 */
import { readFileSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { createRequire } from "node:module";
import type { Dispatcher, Pool as UndiciPool, ProxyAgent as UndiciProxyAgent } from "undici";
import type { Readable } from "node:stream";
import { realClock, TokenBucket, withTimeout, type Clock } from "../clock/index.ts";
import { createLogger, type Logger } from "../logging/index.ts";
import type { ClusterConfig } from "./config.ts";
import { Credentials, type CredentialsEvent, type TlsMaterial } from "./credentials.ts";
import {
  ConnectionError,
  RequestAbortedError,
  errorFromResponse,
  type KubeApiError,
  type RequestInfo,
} from "./errors.ts";
import type { WriteFence } from "./fence.ts";
import { proxyFor } from "./proxy.ts";
import { typedErrors } from "./watch.ts";
import { PROTOBUF, decodeProtobufStatus } from "./protobuf/list.ts";

const requireCjs = createRequire(import.meta.url);

/**
 * undici's Pool without undici's index: the index loads 109 modules (fetch, WebSocket, caches, mocks) for
 * ~0.15 s of CPU and ~13 MiB at start; the Pool and the request API 29. The index does one more thing,
 * adding the request API (request, stream, ...) to Dispatcher.prototype; that is repeated here when missing.
 * Should a release move a file, or the result lack `request`, the index is used: the same class either way.
 */
function loadPool(): typeof UndiciPool {
  try {
    const Pool = requireCjs("undici/lib/dispatcher/pool.js") as typeof UndiciPool;
    const Dispatcher = requireCjs("undici/lib/dispatcher/dispatcher.js") as { prototype: object };
    if (typeof (Dispatcher.prototype as { request?: unknown }).request !== "function") {
      Object.assign(Dispatcher.prototype, requireCjs("undici/lib/api/index.js"));
    }
    if (typeof (Pool.prototype as { request?: unknown }).request === "function") return Pool;
  } catch {
    // fall through to the index
  }
  return (requireCjs("undici") as { Pool: typeof UndiciPool }).Pool;
}

/** A query parameter's value; undefined and "" are left out. */
export type QueryValue = string | number | boolean | undefined;

/** One request as the client hands it to the transport. */
export interface RequestOptions {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  contentType?: string;
  /** Aborts the request and any retry wait; the call then throws RequestAbortedError. */
  signal?: AbortSignal;
  /**
   * Milliseconds without any bytes from the server before the request fails (default 50 s, the silence
   * after which a watch's connection is taken for dead; waiting for the headers is capped at 50 s too).
   */
  idleTimeoutMs?: number;
  /** Accept header (default application/json); used to ask for PartialObjectMetadata. */
  accept?: string;
  /**
   * A repeat cannot do harm, so 5xx answers and lost connections are retried too (default: GET only).
   * 429 and connections that never sent the request are retried for every request.
   */
  idempotent?: boolean;
  /**
   * Consulted before each attempt: when closed, the request fails with FencedWriteError without being
   * sent, and one in flight when it closes is cut (its connection destroyed). Set on writes only.
   */
  fence?: WriteFence;
}

/** One HTTP exchange, for metrics (`onRequest`). */
export interface RequestEvent {
  /** The HTTP method. */
  method: string;
  /** The request path (without the query). */
  path: string;
  /** True for watch requests (counted separately: a reconnect loop shows here). */
  watch: boolean;
  /** The HTTP status code, or 0 when no answer came. */
  code: number;
  /** How long the exchange took, in milliseconds. */
  durationMs: number;
}

/** A `Warning` header the API server sent (deprecated APIs, unknown fields, policy warnings). */
export interface ServerWarning {
  /** The warning's text, unquoted. */
  text: string;
  /** The request that drew it (the first one, since each text is reported once). */
  request: RequestInfo;
}

/** How the transport retries, waits, throttles, identifies itself and reports. */
export interface TransportOptions {
  /** Time source for the close grace period (tests inject a FakeClock; default the real clock). */
  clock?: Clock;
  /** Retries after the first attempt (default 5); see the module comment for which requests retry. */
  maxRetries?: number;
  /** Called after each HTTP exchange; the manager maps it to rest_client_requests_total. */
  onRequest?: (event: RequestEvent) => void;
  /** Client-side rate limit in requests per second (off by default, as in controller-runtime ≥ 0.21). */
  qps?: number;
  /** How many requests may go at once above `qps` before the limit applies (default: qps). */
  burst?: number;
  /**
   * Sleep used for retry delays and the rate limit; injectable for tests. The signal, when given, is
   * the request's: the transport stops waiting when it fires whether or not the sleep honours it.
   */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Monotonic milliseconds (default performance.now) for the rate limit and credential reloads. */
  now?: () => number;
  /** Random numbers in [0, 1) for backoff jitter (default Math.random); injectable for tests. */
  random?: () => number;
  /**
   * The User-Agent. Default: `opkit/<version> (<os>/<arch>) node/<version>`; a KubeClient puts its
   * field manager (the operator's name) in front.
   */
  userAgent?: string;
  /** Each distinct server warning, once. Default: logged at warn level through `logger`. */
  onWarning?: (warning: ServerWarning) => void;
  /** For server warnings and credential reloads (default: a `kube-client` logger from logging/). */
  logger?: Logger;
  /** How often certificate, key and token files are checked for rotation (default 60 s). */
  credentialReloadMs?: number;
}

const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  delay(ms, undefined, signal ? { signal } : undefined);

/** A warning is logged at most this long: the text comes from the server, and logs are not a dump. */
const MAX_WARNING_CHARS = 2000;
/** How long close() lets in-flight requests finish before it cuts them. */
const CLOSE_GRACE_MS = 5_000;

/** Distinct warning texts remembered for de-duplication; beyond this the oldest is forgotten. */
const MAX_REMEMBERED_WARNINGS = 1000;

/** TLS errors that a retry cannot fix (a wrong CA or host name stays wrong). */
const PERMANENT_TLS_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERR_SSL_WRONG_VERSION_NUMBER",
]);

/** Failures that happen before a byte of the request leaves: safe to retry for any method. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * A query key or value percent-encoded as UTF-8. A lone surrogate (what slicing a string in the middle of
 * an emoji leaves) becomes U+FFFD, as URLSearchParams does, so the server answers for the value instead
 * of encodeURIComponent throwing URIError, which the transport would take for a connection failure.
 */
function encodeQueryPart(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return encodeURIComponent(s.replace(/\p{Cs}/gu, "\ufffd"));
  }
}

/** HTTP to one cluster: pooling, credentials, retries and typed errors (see the module comment). */
export class Transport {
  readonly server: string;
  /** The proxy requests go through, if any (the cluster's proxy-url or HTTPS_PROXY). */
  readonly proxy: string | undefined;
  private readonly origin: string;
  private readonly basePath: string;
  private readonly options: TransportOptions;
  private readonly limiter: TokenBucket | undefined;
  private readonly credentials: Credentials;
  private readonly userAgent: string;
  private readonly warnings = new Set<string>();
  private logger: Logger | undefined;
  private dispatcher: Dispatcher | undefined;
  private generation = 0;
  /** Pools replaced after a credential rotation, draining their in-flight requests (watches). */
  private readonly retiring = new Set<Dispatcher>();
  private closed = false;

  private constructor(config: ClusterConfig, options: TransportOptions) {
    const url = new URL(config.server);
    this.server = config.server;
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/$/, "");
    this.proxy = proxyFor(url, config.proxyUrl);
    this.options = options;
    this.logger = options.logger;
    const now = options.now ?? (() => performance.now());
    this.limiter = options.qps
      ? new TokenBucket({ qps: options.qps }, options.burst ?? Math.ceil(options.qps), { now })
      : undefined;
    this.credentials = new Credentials(config, {
      now,
      reloadIntervalMs: options.credentialReloadMs,
      onEvent: (e) => this.credentialEvent(e),
    });
    this.userAgent = options.userAgent ?? defaultUserAgent();
  }

  /**
   * A transport for one cluster. Reads the TLS material at once, so an unreadable certificate fails
   * here rather than at the first request.
   */
  static async create(config: ClusterConfig, options: TransportOptions = {}): Promise<Transport> {
    const t = new Transport(config, options);
    await t.currentDispatcher();
    return t;
  }

  private log(): Logger {
    this.logger ??= createLogger({ name: "kube-client" });
    return this.logger;
  }

  private credentialEvent(e: CredentialsEvent): void {
    if (e.kind === "reloaded") this.log().info({ what: e.what }, "rotated credentials picked up");
    else
      this.log().warn(
        { what: e.what, err: e.error?.message },
        "rotated credentials not usable yet; keeping the previous ones",
      );
  }

  /** The pool for new requests; replaced (the old one drains) when the TLS material rotates. */
  private async currentDispatcher(): Promise<Dispatcher> {
    const tls = await this.credentials.tls();
    if (this.dispatcher && tls.generation === this.generation) return this.dispatcher;
    const old = this.dispatcher;
    this.dispatcher = this.build(tls);
    this.generation = tls.generation;
    if (old) this.retire(old);
    return this.dispatcher;
  }

  /** Let a replaced pool drain: its idle connections close at once, its requests and watches finish. */
  private retire(old: Dispatcher): void {
    this.retiring.add(old);
    void old
      .close()
      .catch(() => undefined)
      .finally(() => this.retiring.delete(old));
  }

  private build(tls: TlsMaterial): Dispatcher {
    const connect = {
      ca: tls.ca,
      cert: tls.cert,
      key: tls.key,
      rejectUnauthorized: tls.rejectUnauthorized,
      servername: tls.servername,
      // TCP keepalive notices a peer that vanished (host down, NAT entry dropped) at the kernel level.
      keepAlive: true,
      keepAliveInitialDelay: 30_000,
    };
    const pool = {
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      // Watches hold a connection each for minutes; never time out a body at the pool level:
      // each request sets its own idle timeout.
      bodyTimeout: 0,
      headersTimeout: SILENT_CONNECTION_MS,
      // HTTP/1.1, not the HTTP/2 undici 8 offers by default. In Node, a request over HTTP/2 costs 1.3–1.5×
      // the CPU of one over HTTP/1.1 (server-side applies against opkit env: ~330 against ~250 µs), which
      // made up most of the operator's CPU gap to controller-runtime in the converge bench; and a reset
      // HTTP/2 connection can stall instead of failing (scripts/probe-h2-reset-stall.ts). Each watch holds
      // a connection of its own, and a watch is noticed dead by its idle timeout, not by pings (see the
      // reflector's minWatchTimeoutSeconds).
      allowH2: false,
    };
    // ProxyAgent keeps one pool per origin behind the proxy; there is one origin, so one pool.
    if (this.proxy) {
      // Rare (a proxy in the kubeconfig or HTTPS_PROXY): the whole of undici then.
      const { ProxyAgent } = requireCjs("undici") as { ProxyAgent: typeof UndiciProxyAgent };
      return new ProxyAgent({ uri: this.proxy, requestTls: connect, ...pool });
    }
    const Pool = loadPool();
    return new Pool(this.origin, { connect, ...pool });
  }

  private buildPath(path: string, query?: Record<string, QueryValue>): string {
    // Joined by hand: a URLSearchParams per request was a visible share of a request's CPU.
    let qs = "";
    if (query)
      for (const k of Object.keys(query)) {
        const v = query[k];
        if (v === undefined || v === "") continue;
        qs += `${qs ? "&" : "?"}${encodeQueryPart(k)}=${encodeQueryPart(String(v))}`;
      }
    return this.basePath + path + qs;
  }

  /** Wait `ms` through the injectable sleep, stopping early with RequestAbortedError when `signal` fires. */
  async pause(ms: number, signal: AbortSignal | undefined, info: RequestInfo): Promise<void> {
    const sleep = this.options.sleep ?? defaultSleep;
    if (!signal) return sleep(ms);
    return raceAbort(sleep(ms, signal), signal, info);
  }

  /** Wait for a token of the client-side rate limit (through `pause`, so tests and aborts apply). */
  private async takeToken(
    limiter: TokenBucket,
    signal: AbortSignal | undefined,
    info: RequestInfo,
  ): Promise<void> {
    while (!limiter.tryTake()) await this.pause(limiter.waitMs(), signal, info);
  }

  /** One HTTP exchange; `authState` identifies the credential it carried (for `refresh` after a 401). */
  private async send(
    opts: RequestOptions,
    info: RequestInfo,
  ): Promise<{
    res: Dispatcher.ResponseData;
    authState: number;
    dispatcher: Dispatcher;
    signal: AbortSignal | undefined;
  }> {
    const { signal: callerSignal } = opts;
    if (this.closed) throw new ConnectionError(info, new Error("the client is closed"), true);
    if (callerSignal?.aborted) throw new RequestAbortedError(info, callerSignal.reason);
    if (this.limiter) await this.takeToken(this.limiter, callerSignal, info);
    const headers: Record<string, string | string[]> = {
      accept: opts.accept ?? "application/json",
      "user-agent": this.userAgent,
      // An exec plugin may take seconds; the caller need not wait for it once its signal fires.
      ...(await raceAbort(this.credentials.headers(), callerSignal, info)),
    };
    const authState = this.credentials.authState;
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["content-type"] = opts.contentType ?? "application/json";
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    }
    const dispatcher = await this.currentDispatcher();
    // Last, after every wait (rate limit, credentials, a new pool): no await between this check and the
    // request going to its connection. The fence's signal then cuts it if the fence closes before the answer.
    const fenced = opts.fence?.admit(info);
    const signal = fenced ? (opts.signal ? AbortSignal.any([opts.signal, fenced]) : fenced) : opts.signal;
    const watch = opts.query?.watch === true;
    const started = performance.now();
    const report = (code: number): void =>
      this.options.onRequest?.({
        method: opts.method,
        path: opts.path,
        watch,
        code,
        durationMs: performance.now() - started,
      });
    try {
      const res = await dispatcher.request({
        origin: this.origin,
        method: opts.method,
        path: this.buildPath(opts.path, opts.query),
        headers,
        body,
        signal,
        bodyTimeout: opts.idleTimeoutMs ?? SILENT_CONNECTION_MS,
        // A request sent on a frozen pooled connection never gets its headers: it must notice that as soon
        // as a watch notices a silent body. (The apiserver itself gives up on a request after its 60 s
        // --request-timeout; one slower than 50 s before its headers now fails here first.)
        headersTimeout: Math.min(opts.idleTimeoutMs ?? SILENT_CONNECTION_MS, SILENT_CONNECTION_MS),
      });
      report(res.statusCode);
      this.noteWarnings(res.headers.warning, info);
      return { res, authState, dispatcher, signal };
    } catch (err) {
      report(0);
      if (signal?.aborted)
        throw opts.fence?.cut(info, signal.reason) ?? new RequestAbortedError(info, signal.reason);
      if (isTimeout(err)) this.resetConnections(dispatcher);
      throw new ConnectionError(info, err, notSent(err));
    }
  }

  /** Reads a whole answer; a connection lost on the way is a ConnectionError (sent), an abort typed. */
  private async readBody(
    res: Dispatcher.ResponseData,
    signal: AbortSignal | undefined,
    info: RequestInfo,
    binary: false,
  ): Promise<string>;
  private async readBody(
    res: Dispatcher.ResponseData,
    signal: AbortSignal | undefined,
    info: RequestInfo,
    binary: true,
  ): Promise<Buffer>;
  private async readBody(
    res: Dispatcher.ResponseData,
    signal: AbortSignal | undefined,
    info: RequestInfo,
    binary: boolean,
  ): Promise<string | Buffer> {
    try {
      return binary ? Buffer.from(await res.body.arrayBuffer()) : await res.body.text();
    } catch (err) {
      if (signal?.aborted) throw new RequestAbortedError(info, signal.reason);
      throw new ConnectionError(info, err, false);
    }
  }

  /**
   * A request whose JSON answer is returned; failures throw typed errors. Retries as the module says.
   * With `consume`, a 2xx body is handed to it as chunks, with its content type, instead (its result is returned): a body that breaks
   * midway then throws ConnectionError without a retry, since the consumer has already seen part of it.
   */
  async request<T>(
    opts: RequestOptions,
    consume?: (chunks: AsyncIterable<unknown>, contentType: string) => Promise<T>,
  ): Promise<T> {
    const info: RequestInfo = { method: opts.method, path: opts.path };
    const maxRetries = this.options.maxRetries ?? 5;
    const idempotent = opts.idempotent ?? opts.method === "GET";
    const random = this.options.random ?? Math.random;
    let ambiguous = false;
    let reauthenticated = false;
    let consuming = false;
    for (let attempt = 0; ;) {
      let code: number;
      let text: string;
      /** A failure's Status when it came as protobuf. */
      let status: Record<string, unknown> | undefined;
      let retryAfterSeconds: number | undefined;
      let authState: number;
      let dispatcher: Dispatcher | undefined;
      try {
        const sent = await this.send(opts, info);
        // The pool that carried it, not the current one: a rotation may have replaced it meanwhile.
        dispatcher = sent.dispatcher;
        const res = sent.res;
        authState = sent.authState;
        code = res.statusCode;
        retryAfterSeconds = retryAfter(res.headers);
        const type = contentType(res.headers);
        if (consume && code >= 200 && code < 300) {
          consuming = true;
          return await consume(typedErrors(res.body, info, opts.signal), type);
        }
        // With the fence's signal: a fence that closes while the answer is read cuts it too.
        ({ text, status } = await this.readFailure(res, type, sent.signal, info));
      } catch (err) {
        // A write whose answer the fence cut: its outcome is unknown, and it must not be retried.
        if (err instanceof RequestAbortedError && opts.fence) throw opts.fence.cut(info, err.reason) ?? err;
        // An answer silent past its idle timeout is on a dead connection, as a watch's is (see `stream`):
        // stop reusing it, or the next request waits for undici's probe of it (the idle timeout again).
        if (err instanceof ConnectionError && isTimeout(err.cause) && dispatcher)
          this.resetConnections(dispatcher);
        if (
          consuming ||
          !(err instanceof ConnectionError) ||
          this.closed ||
          attempt >= maxRetries ||
          !retriable(err, idempotent)
        ) {
          throw err;
        }
        if (!err.beforeSending && opts.method !== "GET") ambiguous = true;
        await this.pause(retryDelayMs(attempt, undefined, random), opts.signal, info);
        attempt++;
        continue;
      }
      if (code >= 200 && code < 300) return (text ? JSON.parse(text) : undefined) as T;
      if (code === 401 && !reauthenticated && (await this.credentials.refresh(authState))) {
        reauthenticated = true;
        continue;
      }
      const error = errorFromResponse(code, status ?? parseJson(text), info, { ambiguous });
      if (attempt < maxRetries && shouldRetry(error, idempotent)) {
        if (code >= 500 && opts.method !== "GET") ambiguous = true;
        await this.pause(
          retryDelayMs(attempt, retryAfterSeconds ?? error.status.details?.retryAfterSeconds, random),
          opts.signal,
          info,
        );
        attempt++;
        continue;
      }
      throw error;
    }
  }

  /**
   * A streaming request (watch): resolves once headers arrive with the body as a stream; non-2xx
   * answers throw typed errors. Not retried (the reflector owns reconnects), except once after a 401
   * the credentials could cure.
   */
  async stream(opts: RequestOptions): Promise<Readable> {
    return (await this.streamResponse(opts)).body;
  }

  /** `stream`, with the answer's content type (a watch asked for protobuf may be answered in JSON). */
  async streamResponse(opts: RequestOptions): Promise<{ body: Readable; contentType: string }> {
    const info: RequestInfo = { method: opts.method, path: opts.path };
    for (let reauthenticated = false; ; reauthenticated = true) {
      const { res, authState, dispatcher } = await this.send(opts, info);
      const type = contentType(res.headers);
      if (res.statusCode >= 200 && res.statusCode < 300) {
        // A watch silent past its idle timeout is on a dead connection: stop reusing it.
        res.body.once("error", (err) => {
          if (isTimeout(err)) this.resetConnections(dispatcher);
        });
        return { body: res.body, contentType: type };
      }
      const { text, status } = await this.readFailure(res, type, opts.signal, info);
      if (res.statusCode === 401 && !reauthenticated && (await this.credentials.refresh(authState))) continue;
      throw errorFromResponse(res.statusCode, status ?? parseJson(text), info);
    }
  }

  /** A failure's body: its Status when it came as protobuf (the format the request asked for), else its text. */
  private async readFailure(
    res: Dispatcher.ResponseData,
    type: string,
    signal: AbortSignal | undefined,
    info: RequestInfo,
  ): Promise<{ text: string; status?: Record<string, unknown> }> {
    if (!type.startsWith(PROTOBUF)) return { text: await this.readBody(res, signal, info, false) };
    const bytes = await this.readBody(res, signal, info, true);
    const status = decodeProtobufStatus(bytes);
    return { text: status ? "" : `an undecodable protobuf answer of ${bytes.length} bytes`, status };
  }

  private noteWarnings(header: string | string[] | undefined, request: RequestInfo): void {
    if (!header) return;
    for (const text of parseWarnings(header)) {
      if (this.warnings.has(text)) continue;
      if (this.warnings.size >= MAX_REMEMBERED_WARNINGS) {
        const oldest = this.warnings.values().next().value;
        if (oldest !== undefined) this.warnings.delete(oldest);
      }
      this.warnings.add(text);
      if (this.options.onWarning) this.options.onWarning({ text, request });
      else
        this.log().warn({ warning: text, method: request.method, path: request.path }, "API server warning");
    }
  }

  /**
   * Ends idle connections and waits for in-flight requests (open watches included) up to `graceMs`,
   * then destroys the connections: a silent API server must not hold a shutdown for a request's whole
   * timeout.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pools = [this.dispatcher, ...this.retiring].filter((d): d is Dispatcher => d !== undefined);
    const clock = this.options.clock ?? realClock;
    const closed = await withTimeout(clock, graceMs, () => Promise.all(pools.map((d) => d.close())));
    if (closed.timedOut) await Promise.all(pools.map((d) => d.destroy().catch(() => undefined)));
  }

  /**
   * Replace the pool after a request or watch on it went silent past its timeout. undici has already
   * destroyed that connection; its siblings may be as dead (a hung proxy, a dead NAT entry), and a
   * kept-alive one would be handed the next request, which would wait out its own timeout. So new requests
   * go to a new pool, and the old one is retired: its idle connections close at once, while its requests
   * and watches in flight go on (each has its own idle timeout). Destroying it instead would also fail the
   * healthy watches and writes in flight, e.g. after one slow admission webhook.
   */
  resetConnections(dead: Dispatcher): void {
    if (this.dispatcher !== dead) return; // already replaced
    this.dispatcher = undefined;
    this.retire(dead);
  }

  /**
   * Ends every connection now, including open watches (used on shutdown and in fault tests). The
   * transport stays usable: the next request opens new connections.
   */
  async destroy(): Promise<void> {
    const all = [this.dispatcher, ...this.retiring].filter((d): d is Dispatcher => d !== undefined);
    this.dispatcher = undefined;
    this.retiring.clear();
    await Promise.all(all.map((d): Promise<void> => d.destroy()));
  }
}

/**
 * No byte for this long means a dead connection, for a request as for a watch (the reflector's progress
 * deadline: a healthy watch ends by its 40 s server timeout): a connection frozen under a write in flight is
 * then noticed within a minute of the freeze, as the watches on it are (faults/appservice.int.test.ts).
 */
const SILENT_CONNECTION_MS = 50_000;

/** undici's "no bytes for too long" errors: the connection may be dead, not just the request slow. */
function isTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT";
}

/** Settle with `p`, or reject with RequestAbortedError as soon as `signal` fires. */
export function raceAbort<T>(p: Promise<T>, signal: AbortSignal | undefined, info: RequestInfo): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.reject(new RequestAbortedError(info, signal.reason));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new RequestAbortedError(info, signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function retriable(err: ConnectionError, idempotent: boolean): boolean {
  const code = errorCode(err.cause);
  if (code && PERMANENT_TLS_CODES.has(code)) return false;
  return err.beforeSending || idempotent;
}

function shouldRetry(err: KubeApiError, idempotent: boolean): boolean {
  if (err.code === 429) return true;
  // 501 Not Implemented will not start working on the next attempt.
  return idempotent && err.code >= 500 && err.code !== 501;
}

function errorCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function notSent(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && NOT_SENT_CODES.has(code);
}

function contentType(headers: Dispatcher.ResponseData["headers"]): string {
  const type = headers["content-type"];
  return (Array.isArray(type) ? type[0] : type) ?? "application/json";
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function retryAfter(headers: Dispatcher.ResponseData["headers"]): number | undefined {
  const v = headers["retry-after"];
  const raw = Array.isArray(v) ? v[0] : v;
  if (raw === undefined || raw.trim() === "") return undefined;
  const n = Number(raw);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/**
 * The wait before retry `attempt` (0-based): the server's Retry-After when it gave one (capped at
 * 30 s), otherwise 200 ms doubling per attempt up to 5 s, with "equal jitter" (a random point in the
 * upper half) so that clients failing together do not retry together.
 */
export function retryDelayMs(
  attempt: number,
  retryAfterSeconds: number | undefined,
  random: () => number = Math.random,
): number {
  if (retryAfterSeconds !== undefined) return Math.min(retryAfterSeconds * 1000, 30_000);
  const ceiling = Math.min(200 * 2 ** attempt, 5_000);
  return ceiling / 2 + (ceiling / 2) * random();
}

/**
 * The texts of `Warning` headers (`299 - "text"`, several per header allowed); a value that does not
 * follow the format is taken whole.
 */
export function parseWarnings(header: string | string[]): string[] {
  const out: string[] = [];
  for (const value of Array.isArray(header) ? header : [header]) {
    const re = /\s*(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?\s*(?:,|$)/gy;
    let m: RegExpExecArray | null;
    let end = 0;
    while ((m = re.exec(value)) !== null && m[0] !== "") {
      out.push((m[3] ?? "").replace(/\\(.)/g, "$1").slice(0, MAX_WARNING_CHARS));
      end = re.lastIndex;
    }
    if (end < value.trim().length && end === 0) out.push(value.trim().slice(0, MAX_WARNING_CHARS));
  }
  return out;
}

let opkitVersion: string | undefined;

/** `<product> opkit/<version> (<os>/<arch>) node/<version>`; the product (operator name) when known. */
export function defaultUserAgent(product?: string): string {
  if (opkitVersion === undefined) {
    try {
      const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
        version?: string;
      };
      opkitVersion = pkg.version ?? "unknown";
    } catch {
      opkitVersion = "unknown";
    }
  }
  const base = `opkit/${opkitVersion} (${process.platform}/${process.arch}) node/${process.version}`;
  // Header values cannot carry control characters; a product with spaces would read as two tokens.
  const clean = product?.replace(/[^\x21-\x7e]/g, "-");
  return clean && clean !== "opkit" ? `${clean} ${base}` : base;
}
