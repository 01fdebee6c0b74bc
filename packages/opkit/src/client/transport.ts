/**
 * The HTTP layer: one keep-alive undici Pool per cluster, authentication through
 * @kubernetes/client-node's KubeConfig (client certificates, tokens, exec plugins, OIDC, in-cluster),
 * typed errors, bounded retries of safe requests, and incremental streaming for watches.
 */
import { Pool } from "undici";
import type { Dispatcher } from "undici";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Readable } from "node:stream";
import {
  ConnectionError,
  ServerError,
  TooManyRequestsError,
  errorFromResponse,
  type KubeApiError,
  type RequestInfo,
} from "./errors.ts";

export type QueryValue = string | number | boolean | undefined;

export interface RequestOptions {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Milliseconds without any bytes from the server before the request fails (default 60 s). */
  idleTimeoutMs?: number;
  /** Accept header (default application/json); used to ask for PartialObjectMetadata. */
  accept?: string;
}

export interface RequestEvent {
  method: string;
  path: string;
  /** True for watch requests (counted separately: a reconnect loop shows here). */
  watch: boolean;
  code: number;
  durationMs: number;
}

export interface TransportOptions {
  /** Retries of GETs answered 429 or 5xx (default 5), honouring Retry-After. */
  maxRetries?: number;
  /** Called after each HTTP exchange; the manager maps it to rest_client_requests_total. */
  onRequest?: (event: RequestEvent) => void;
  /** Client-side rate limit in requests per second (off by default, as in controller-runtime ≥ 0.21). */
  qps?: number;
  burst?: number;
  /** Sleep used for retry delays and the rate limit; injectable for tests. */
  sleep?: (ms: number) => Promise<void>;
  /** Monotonic milliseconds for the rate limit (default performance.now); injectable for tests. */
  now?: () => number;
}

const defaultSleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class Transport {
  readonly server: string;
  private readonly kubeConfig: KubeConfig;
  private pool: Pool;
  private readonly newPool: () => Pool;
  private readonly basePath: string;
  private readonly options: TransportOptions;
  private readonly limiter: TokenBucket | undefined;

  private constructor(
    kubeConfig: KubeConfig,
    newPool: () => Pool,
    server: string,
    options: TransportOptions,
  ) {
    this.kubeConfig = kubeConfig;
    this.newPool = newPool;
    this.pool = newPool();
    this.server = server;
    this.basePath = new URL(server).pathname.replace(/\/$/, "");
    this.options = options;
    this.limiter = options.qps
      ? new TokenBucket(
          options.qps,
          options.burst ?? Math.ceil(options.qps),
          options.now ?? (() => performance.now()),
        )
      : undefined;
  }

  static async create(kubeConfig: KubeConfig, options: TransportOptions = {}): Promise<Transport> {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster: set current-context or pass a context");
    const tls: {
      ca?: Buffer;
      cert?: Buffer;
      key?: Buffer;
      rejectUnauthorized?: boolean;
      servername?: string;
    } = {};
    await kubeConfig.applyToHTTPSOptions(tls);
    const url = new URL(cluster.server);
    const newPool = (): Pool =>
      new Pool(url.origin, {
        connect: {
          ca: tls.ca,
          cert: tls.cert,
          key: tls.key,
          rejectUnauthorized: tls.rejectUnauthorized ?? true,
          servername: tls.servername,
          // TCP keepalive notices a peer that vanished (host down, NAT entry dropped) at the kernel level.
          keepAlive: true,
          keepAliveInitialDelay: 30_000,
        },
        keepAliveTimeout: 30_000,
        keepAliveMaxTimeout: 600_000,
        // Watches hold a connection each for minutes; never time out a body at the pool level:
        // each request sets its own idle timeout.
        bodyTimeout: 0,
        headersTimeout: 60_000,
      });
    return new Transport(kubeConfig, newPool, cluster.server, options);
  }

  /** Headers that authenticate a request; asked each time because tokens (exec, OIDC, in-cluster) rotate. */
  private async authHeaders(): Promise<Record<string, string>> {
    const opts: { headers?: Record<string, string | string[] | number> } = { headers: {} };
    await this.kubeConfig.applyToHTTPSOptions(opts);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {}))
      out[k] = Array.isArray(v) ? v.join(",") : String(v);
    return out;
  }

  private buildPath(path: string, query?: Record<string, QueryValue>): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {}))
      if (v !== undefined && v !== "") params.set(k, String(v));
    const qs = params.toString();
    return this.basePath + path + (qs ? `?${qs}` : "");
  }

  private async send(opts: RequestOptions): Promise<Dispatcher.ResponseData> {
    if (this.limiter) await this.limiter.take(this.options.sleep ?? defaultSleep);
    const headers: Record<string, string> = {
      accept: opts.accept ?? "application/json",
      ...(await this.authHeaders()),
    };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["content-type"] = opts.contentType ?? "application/json";
      body = typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body);
    }
    const info: RequestInfo = { method: opts.method, path: opts.path };
    const watch = opts.query?.watch === true;
    const started = performance.now();
    try {
      const res = await this.pool.request({
        method: opts.method,
        path: this.buildPath(opts.path, opts.query),
        headers,
        body,
        signal: opts.signal,
        bodyTimeout: opts.idleTimeoutMs ?? 60_000,
      });
      this.options.onRequest?.({
        method: opts.method,
        path: opts.path,
        watch,
        code: res.statusCode,
        durationMs: performance.now() - started,
      });
      return res;
    } catch (err) {
      this.options.onRequest?.({
        method: opts.method,
        path: opts.path,
        watch,
        code: 0,
        durationMs: performance.now() - started,
      });
      if (opts.signal?.aborted) throw err;
      if (isTimeout(err)) this.resetConnections();
      throw new ConnectionError(info, err);
    }
  }

  /**
   * Replace the pool after a request or watch went silent past its timeout. The apiserver speaks
   * HTTP/2, so one connection carries every request: a connection that stopped carrying bytes (a hung
   * proxy, a dead NAT entry) would otherwise be handed the next request too, and each would wait out
   * its own timeout. Requests still on the old pool fail and are retried by their callers.
   */
  resetConnections(): void {
    const old = this.pool;
    this.pool = this.newPool();
    void old.destroy().catch(() => undefined);
  }

  /** A request whose JSON answer is returned; failures throw typed errors. GETs are retried on 429/5xx. */
  async request<T>(opts: RequestOptions): Promise<T> {
    const info: RequestInfo = { method: opts.method, path: opts.path };
    const maxRetries = opts.method === "GET" ? (this.options.maxRetries ?? 5) : 0;
    for (let attempt = 0; ; attempt++) {
      let res: Dispatcher.ResponseData;
      try {
        res = await this.send(opts);
      } catch (err) {
        if (err instanceof ConnectionError && attempt < maxRetries) {
          await (this.options.sleep ?? defaultSleep)(retryDelayMs(attempt, undefined));
          continue;
        }
        throw err;
      }
      const text = await res.body.text();
      if (res.statusCode >= 200 && res.statusCode < 300) return (text ? JSON.parse(text) : undefined) as T;
      const error = errorFromResponse(res.statusCode, parseJson(text), info);
      if (attempt < maxRetries && isRetryable(error)) {
        await (this.options.sleep ?? defaultSleep)(retryDelayMs(attempt, retryAfter(res.headers)));
        continue;
      }
      throw error;
    }
  }

  /**
   * A streaming request (watch): resolves once headers arrive with the body as a stream;
   * non-2xx answers throw typed errors.
   */
  async stream(opts: RequestOptions): Promise<Readable> {
    const res = await this.send(opts);
    if (res.statusCode >= 200 && res.statusCode < 300) {
      const pool = this.pool;
      // A watch that stays silent past its idle timeout is on a dead connection: stop reusing it.
      res.body.once("error", (err) => {
        if (isTimeout(err) && this.pool === pool) this.resetConnections();
      });
      return res.body;
    }
    const text = await res.body.text();
    throw errorFromResponse(res.statusCode, parseJson(text), { method: opts.method, path: opts.path });
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  /** Ends every connection now, including open watches (used on shutdown and in fault tests). */
  async destroy(): Promise<void> {
    await this.pool.destroy();
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** undici's "no bytes for too long" errors: the connection may be dead, not just the request slow. */
function isTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT";
}

function isRetryable(err: KubeApiError): boolean {
  return err instanceof TooManyRequestsError || err instanceof ServerError;
}

function retryAfter(headers: Dispatcher.ResponseData["headers"]): number | undefined {
  const v = headers["retry-after"];
  const n = Number(Array.isArray(v) ? v[0] : v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** Retry-After when the server says so (capped at 30 s), otherwise 200 ms doubling per attempt. */
export function retryDelayMs(attempt: number, retryAfterSeconds: number | undefined): number {
  if (retryAfterSeconds !== undefined) return Math.min(retryAfterSeconds * 1000, 30_000);
  return Math.min(200 * 2 ** attempt, 5_000);
}

/** A plain token bucket for the optional client-side rate limit. */
class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly qps: number;
  private readonly burst: number;
  private readonly now: () => number;
  constructor(qps: number, burst: number, now: () => number) {
    this.qps = qps;
    this.burst = burst;
    this.tokens = burst;
    this.now = now;
    this.last = now();
  }
  async take(sleep: (ms: number) => Promise<void>): Promise<void> {
    for (;;) {
      const now = this.now();
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await sleep(((1 - this.tokens) / this.qps) * 1000);
    }
  }
}
