/**
 * The operations endpoints: `/metrics` for Prometheus, `/healthz` (liveness) and `/readyz`
 * (readiness) for the kubelet. controller-runtime serves metrics on :8080 and probes on :8081; the
 * manager runs two OpsServers for that, and tests run both endpoint sets on one random port.
 */
import type * as http from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import type { InformerHealth } from "../cache/informer.ts";
import { realClock, withTimeout, type Clock } from "../clock/index.ts";
import { errorMessage } from "../client/errors.ts";

// node:http through require, not an ESM import: importing it as ESM builds a facade that reads every
// export, and its lazy WebSocket/EventSource getters then load Node's bundled undici (~70 ms of CPU at
// every operator's start-up, for classes no operator uses).
const { createServer } = createRequire(import.meta.url)("node:http") as typeof http;

/** The outcome of one health or readiness check; `detail` says why it failed. */
export interface CheckResult {
  /** Whether the check passed. */
  ok: boolean;
  /** Why it failed (shown in the /readyz and /healthz answers). */
  detail?: string;
}

/** A named check. Throwing counts as a failure with the error's message as the detail. */
export type Check = () => CheckResult | Promise<CheckResult>;

/**
 * The metrics port controller-runtime uses (8080), so existing ServiceMonitors and Prometheus configs fit.
 */
export const DEFAULT_METRICS_PORT = 8080;
/** The health-probe port controller-runtime uses (8081), so existing probes fit. */
export const DEFAULT_HEALTH_PORT = 8081;

export interface OpsServerOptions {
  /** Interface to bind; default "0.0.0.0" so the kubelet and Prometheus can reach the pod. */
  host?: string;
  /** 0 picks a free port. Default 8080 when serving metrics, else 8081 (controller-runtime's ports). */
  port?: number;
  /** Serve `/metrics` from this registry. */
  registry?: Registry;
  /** Serve `/healthz` and `/readyz` (default true). */
  probes?: boolean;
  /** A check that has not answered after this long fails (default 5000 ms): a probe must not hang. */
  checkTimeoutMs?: number;
  /** Time source for the check timeout (default the real clock; a FakeClock in tests). */
  clock?: Clock;
}

/** The server could not listen (port in use, no permission); names the address it tried. */
export class ServerListenError extends Error {
  /** The host the server tried to listen on. */
  readonly host: string;
  /** The port the server tried to listen on. */
  readonly port: number;
  constructor(host: string, port: number, cause: unknown) {
    super(`cannot listen on ${host}:${port}: ${errorMessage(cause)}`, {
      cause,
    });
    this.name = "ServerListenError";
    this.host = host;
    this.port = port;
  }
}

/** A check name that is already registered for the same endpoint. */
export class DuplicateCheckError extends Error {
  constructor(kind: "health" | "ready", name: string) {
    super(`a ${kind} check named "${name}" is already registered`);
    this.name = "DuplicateCheckError";
  }
}

interface CheckReport {
  name: string;
  ok: boolean;
  detail?: string;
}

export class OpsServer {
  private readonly host: string;
  private readonly port: number;
  private readonly registry: Registry | undefined;
  private readonly probes: boolean;
  private readonly checkTimeoutMs: number;
  private readonly clock: Clock;
  private readonly health = new Map<string, Check>();
  private readonly ready = new Map<string, Check>();
  private server: Server | undefined;

  constructor(options: OpsServerOptions = {}) {
    this.host = options.host ?? "0.0.0.0";
    this.registry = options.registry;
    this.port = options.port ?? (options.registry ? DEFAULT_METRICS_PORT : DEFAULT_HEALTH_PORT);
    this.probes = options.probes ?? true;
    this.checkTimeoutMs = options.checkTimeoutMs ?? 5000;
    this.clock = options.clock ?? realClock;
  }

  /** A liveness check: when it fails, `/healthz` fails and the kubelet restarts the container. */
  addHealthCheck(name: string, check: Check): void {
    addCheck(this.health, "health", name, check);
  }

  /** A readiness check: `/readyz` answers 200 only while every readiness check passes. */
  addReadyCheck(name: string, check: Check): void {
    addCheck(this.ready, "ready", name, check);
  }

  async start(): Promise<{ port: number }> {
    if (this.server) throw new Error("OpsServer is already started");
    const server = createServer((req, res) => {
      void this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 500, `internal error: ${String(err)}\n`);
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) => reject(new ServerListenError(this.host, this.port, err)));
      server.listen(this.port, this.host, () => resolve());
    });
    this.server = server;
    return { port: (server.address() as AddressInfo).port };
  }

  /** Stop listening and close every connection, including idle keep-alive ones (they would delay exit). */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      send(res, 405, "method not allowed\n", { allow: "GET, HEAD" });
      return;
    }
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname.replace(/\/+$/, "") || "/";
    if (path === "/metrics" && this.registry) {
      const text = await this.registry.metrics();
      send(res, 200, text, { "content-type": this.registry.contentType });
      return;
    }
    if (this.probes) {
      for (const [prefix, checks] of [
        ["/healthz", this.health],
        ["/readyz", this.ready],
      ] as const) {
        if (path === prefix) {
          await this.probe(res, prefix.slice(1), checks, url.searchParams.has("verbose"));
          return;
        }
        // /readyz/<name> runs one check, as in controller-runtime and the API server.
        if (path.startsWith(`${prefix}/`)) {
          const name = decodeURIComponent(path.slice(prefix.length + 1));
          const check = checks.get(name);
          if (!check) send(res, 404, `no check named "${name}"\n`);
          else await this.probe(res, prefix.slice(1), new Map([[name, check]]), false);
          return;
        }
      }
    }
    send(res, 404, "not found\n");
  }

  private async probe(
    res: ServerResponse,
    endpoint: string,
    checks: ReadonlyMap<string, Check>,
    verbose: boolean,
  ): Promise<void> {
    const reports = await Promise.all(
      [...checks].map(([name, check]) => runCheck(name, check, this.checkTimeoutMs, this.clock)),
    );
    const failed = reports.some((r) => !r.ok);
    if (!failed && !verbose) {
      send(res, 200, "ok");
      return;
    }
    // The kubelet only reads the status code; the body is for the human running curl or reading
    // events, so it names every failing check and why.
    const lines = reports.map((r) =>
      r.ok ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.detail ?? "no detail"}`,
    );
    lines.push(failed ? `${endpoint} check failed` : `${endpoint} check passed`);
    send(res, failed ? 503 : 200, `${lines.join("\n")}\n`);
  }
}

function addCheck(map: Map<string, Check>, kind: "health" | "ready", name: string, check: Check): void {
  if (map.has(name)) throw new DuplicateCheckError(kind, name);
  map.set(name, check);
}

async function runCheck(name: string, check: Check, timeoutMs: number, clock: Clock): Promise<CheckReport> {
  try {
    const result = await withTimeout(clock, timeoutMs, () => check());
    if (result.timedOut) return { name, ok: false, detail: `no answer within ${timeoutMs} ms` };
    return { name, ok: result.value.ok, detail: result.value.detail };
  } catch (err) {
    return { name, ok: false, detail: errorMessage(err) };
  }
}

function send(res: ServerResponse, code: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(code, {
    "content-type": "text/plain; charset=utf-8",
    "x-content-type-options": "nosniff",
    ...headers,
  });
  res.end(res.req.method === "HEAD" ? undefined : body);
}

/**
 * A readiness check over a cache's informers: fails until every informer has synced, and says which
 * kinds have not and why (a forbidden list names the verb, resource and identity, so a missing RBAC
 * rule is visible in the probe instead of hiding behind "not ready").
 */
export function cacheSyncedCheck(cache: { health(): InformerHealth[] }): Check {
  return () => {
    const pending = cache.health().filter((h) => !h.synced);
    if (pending.length === 0) return { ok: true };
    const why = pending.map((h) =>
      h.forbidden
        ? `${h.kind}: forbidden: ${h.forbidden}`
        : `${h.kind}: not synced (${h.lastError ?? h.state})`,
    );
    return { ok: false, detail: why.join("; ") };
  };
}
