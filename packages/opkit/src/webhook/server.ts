/**
 * The webhook server: HTTPS only (TLS 1.2 or newer) on port 9443 by default, serving admission and
 * conversion handlers by path. Hostile input is expected: a body that is not a well-formed
 * AdmissionReview/ConversionReview v1, or larger than the limit, gets a 400 that says why; a handler
 * that throws or hangs is denied, never crashes the server.
 *
 * The certificate and key are read from files and re-read when they change: before each new TLS
 * connection the server stats both files (cheap) and swaps in a new secure context, so a rotated
 * Secret is picked up without a restart. A half-rotated pair (new certificate, old key) is skipped
 * until both files agree.
 *
 * Metrics use controller-runtime's names (controller_runtime_webhook_requests_total{webhook,code},
 * _latency_seconds, _requests_in_flight); every request is logged once, without the objects.
 */
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { connect, createSecureContext } from "node:tls";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";
import { realClock, type Clock } from "../clock/index.ts";
import type { Logger } from "../logging/index.ts";
import type { Metrics, WebhookMetrics } from "../metrics/index.ts";
import type { AdmissionWebhook } from "./admission.ts";
import {
  CERT_FILE,
  CertificateError,
  CertificateFiles,
  DEFAULT_CERT_DIR,
  KEY_FILE,
  type KeyPair,
} from "./certs.ts";
import type { ConversionWebhook } from "./conversion.ts";
import {
  MalformedReviewError,
  admissionReviewResponse,
  conversionReviewResponse,
  decodeAdmissionReview,
  decodeConversionReview,
} from "./review.ts";
import { errorMessage } from "../client/errors.ts";

/** Any handler the server can serve. */
export type WebhookHandler = AdmissionWebhook | ConversionWebhook;

/** The webhook port controller-runtime uses (9443), so manifests written for Go operators fit. */
export const DEFAULT_WEBHOOK_PORT = 9443;
/**
 * 7 MiB: an UPDATE review carries the object twice, and the API server accepts objects up to 3 MiB.
 * Conversion reviews carry whole lists and get a larger limit (`maxConversionBytes`).
 */
export const DEFAULT_MAX_REQUEST_BYTES = 7 * 1024 * 1024;
/** Largest conversion request body accepted by default (64 MiB): conversion reviews carry whole lists. */
export const DEFAULT_MAX_CONVERSION_BYTES = 64 * 1024 * 1024;
/** Default time limit of an admission handler (10 s, the API server's default webhook timeout). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** Options of a `WebhookServer`: the handlers, the address, the certificate and the limits. */
export interface WebhookServerOptions {
  /** The admission and conversion webhooks to serve, each on its own path. */
  handlers: readonly WebhookHandler[];
  /** Interface to bind (default "0.0.0.0"). */
  host?: string;
  /** Default 9443; 0 picks a free port. */
  port?: number;
  /** Directory with tls.crt and tls.key (default controller-runtime's /tmp/k8s-webhook-server/serving-certs). */
  certDir?: string;
  /** Path of the certificate (default `<certDir>/tls.crt`). */
  certFile?: string;
  /** Path of the private key (default `<certDir>/tls.key`). */
  keyFile?: string;
  /** Largest admission request body accepted (default 7 MiB); larger ones get a 400. */
  maxRequestBytes?: number;
  /** Largest conversion request body accepted (default 64 MiB). */
  maxConversionBytes?: number;
  /** Per-request limit for an admission handler (default 10 s, never more than its timeoutSeconds). */
  requestTimeoutMs?: number;
  /** Where request counts and latencies go (controller-runtime's webhook metric names). */
  metrics?: Metrics;
  /** Where handler failures are logged. */
  logger?: Logger;
  /** Time source for timeouts; a FakeClock in tests. */
  clock?: Clock;
}

/** The outcome of the readiness check (the manager's /readyz shape). */
export interface WebhookCheckResult {
  /** Whether the server is ready to answer. */
  ok: boolean;
  /** Why it is not, e.g. a missing certificate. */
  detail?: string;
}

/** Two handlers on one path, or none at all. */
export class WebhookServerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookServerConfigError";
  }
}

class RequestError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

interface Route {
  handler: WebhookHandler;
  metrics: WebhookMetrics | undefined;
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new RequestError(400, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const fail = (err: Error): void => {
      if (done) return;
      done = true;
      reject(err);
    };
    req.on("data", (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        fail(new RequestError(400, `request body exceeds the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (done) return;
      done = true;
      resolve(Buffer.concat(chunks).toString("utf8"));
    });
    req.on("aborted", () => fail(new RequestError(400, "request body ended early (connection closed)")));
    req.on("error", (err) => fail(new RequestError(400, `request body could not be read: ${err.message}`)));
  });
}

/**
 * The HTTPS server that answers the API server's admission and conversion requests, reloading its certificate
 * when the files change (rotations need no restart). The Manager runs one when `webhook` is set; use it
 * directly in tests or to serve webhooks without a manager.
 */
export class WebhookServer {
  private readonly routes = new Map<string, Route>();
  private readonly host: string;
  private readonly requestedPort: number;
  private readonly files: CertificateFiles;
  private readonly maxRequestBytes: number;
  private readonly maxConversionBytes: number;
  private readonly timeoutMs: number;
  private readonly logger: Logger | undefined;
  private readonly clock: Clock;
  private server: Server | undefined;
  private boundPort = 0;
  private reloads = 0;

  constructor(options: WebhookServerOptions) {
    if (!options.handlers?.length)
      throw new WebhookServerConfigError(
        "WebhookServer: no handlers; pass validator/defaulter/conversion handlers",
      );
    for (const handler of options.handlers) {
      const other = this.routes.get(handler.path);
      if (other)
        throw new WebhookServerConfigError(
          `WebhookServer: two handlers on path ${handler.path} (${describeHandler(other.handler)} and ${describeHandler(handler)}); give one a different path`,
        );
      this.routes.set(handler.path, { handler, metrics: options.metrics?.webhook(handler.path) });
    }
    this.host = options.host ?? "0.0.0.0";
    this.requestedPort = options.port ?? DEFAULT_WEBHOOK_PORT;
    const dir = options.certDir ?? DEFAULT_CERT_DIR;
    this.files = new CertificateFiles(
      options.certFile ?? join(dir, CERT_FILE),
      options.keyFile ?? join(dir, KEY_FILE),
    );
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
    this.maxConversionBytes = options.maxConversionBytes ?? DEFAULT_MAX_CONVERSION_BYTES;
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.logger = options.logger;
    this.clock = options.clock ?? realClock;
  }

  /** The port it listens on (after `start`). */
  get port(): number {
    return this.boundPort;
  }

  /** How many times a changed certificate was loaded since start. */
  get certificateReloads(): number {
    return this.reloads;
  }

  /** The paths served. */
  get paths(): string[] {
    return [...this.routes.keys()];
  }

  /** Read the certificate and listen. Throws CertificateError when the files are missing or invalid. */
  async start(): Promise<{
    /** The port it listens on (the chosen one when 0 was asked for). */
    port: number;
  }> {
    if (this.server) return { port: this.boundPort };
    const pair = this.files.read();
    try {
      createSecureContext(tlsOptions(pair));
    } catch (err) {
      throw new CertificateError(
        `${this.files.certFile} and ${this.files.keyFile}`,
        `do not hold a usable PEM certificate and matching key (${errorMessage(err)})`,
        { cause: err },
      );
    }
    const server = createServer({ ...tlsOptions(pair) }, (req, res) => void this.handle(req, res));
    // Before the TLS handshake of each new connection: pick up a rotated certificate. Prepended so it
    // runs before the TLS server's own listener creates the socket with the current context.
    server.prependListener("connection", () => this.reloadIfChanged(server));
    server.on("tlsClientError", (err: Error, socket: Socket) => {
      this.logger?.debug({ err: err.message, remote: socket.remoteAddress }, "webhook TLS handshake failed");
    });
    server.headersTimeout = 10_000;
    server.requestTimeout = 60_000;
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", (err) =>
        reject(
          new Error(`webhook server cannot listen on ${this.host}:${this.requestedPort}: ${err.message}`, {
            cause: err,
          }),
        ),
      );
      server.listen(this.requestedPort, this.host, () => resolve());
    });
    server.on("error", (err) => this.logger?.error({ err: err.message }, "webhook server error"));
    this.server = server;
    this.boundPort = (server.address() as AddressInfo).port;
    this.logger?.info(
      { host: this.host, port: this.boundPort, paths: this.paths, certFile: this.files.certFile },
      "webhook server listening",
    );
    return { port: this.boundPort };
  }

  private reloadIfChanged(server: Server): void {
    if (!this.files.changed()) return;
    try {
      const pair = this.files.read();
      server.setSecureContext(tlsOptions(pair));
      this.reloads++;
      this.logger?.info({ certFile: this.files.certFile }, "webhook certificate reloaded");
    } catch (err) {
      // Usually a rotation in progress (the new certificate beside the old key): keep serving the old
      // pair and try again on the next connection.
      this.logger?.warn(
        { certFile: this.files.certFile, err: errorMessage(err) },
        "webhook certificate changed but cannot be loaded yet; still serving the previous one",
      );
    }
  }

  /**
   * Readiness: a TLS handshake with the server itself succeeds (it listens and has a certificate). The
   * certificate is not verified here; the API server does that with the configured caBundle.
   */
  readyCheck(): Promise<WebhookCheckResult> {
    if (!this.server) return Promise.resolve({ ok: false, detail: "webhook server not started" });
    const host = this.host === "0.0.0.0" || this.host === "::" ? "127.0.0.1" : this.host;
    return new Promise((resolve) => {
      const socket = connect({
        host,
        port: this.boundPort,
        rejectUnauthorized: false,
        servername: "localhost",
      });
      const timer = this.clock.setTimeout(() => {
        socket.destroy();
        resolve({ ok: false, detail: `no TLS handshake with ${host}:${this.boundPort} within 2s` });
      }, 2000);
      socket.once("secureConnect", () => {
        this.clock.clearTimeout(timer);
        socket.end();
        resolve({ ok: true });
      });
      socket.once("error", (err: Error) => {
        this.clock.clearTimeout(timer);
        resolve({ ok: false, detail: `TLS handshake with ${host}:${this.boundPort} failed: ${err.message}` });
      });
    });
  }

  /** Stop accepting; in-flight requests get `graceMs` (default 5 s) to finish, then connections close. */
  async stop(graceMs = 5000): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const timer = this.clock.setTimeout(() => server.closeAllConnections(), graceMs);
    await closed;
    this.clock.clearTimeout(timer);
    this.logger?.info({ port: this.boundPort }, "webhook server stopped");
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = this.clock.now();
    const path = new URL(req.url ?? "/", "https://webhook").pathname;
    const route = this.routes.get(path);
    const timer = route?.metrics?.start();
    let code = 200;
    const log: Record<string, unknown> = { webhook: path };
    try {
      if (!route)
        throw new RequestError(404, `no webhook is served at ${path}; paths: ${this.paths.join(", ")}`);
      if (req.method !== "POST")
        throw new RequestError(405, `method ${req.method} not allowed: webhooks take POST`);
      const type = String(req.headers["content-type"] ?? "");
      if (!/^application\/json\b/i.test(type))
        throw new RequestError(400, `Content-Type is "${type}": webhook requests must be application/json`);
      const handler = route.handler;
      const limit = handler.type === "conversion" ? this.maxConversionBytes : this.maxRequestBytes;
      const body = await readBody(req, limit);
      let reply: unknown;
      if (handler.type === "conversion") {
        const request = decodeConversionReview(body);
        Object.assign(log, {
          uid: request.uid,
          desiredAPIVersion: request.desiredAPIVersion,
          objects: request.objects.length,
        });
        const response = handler.review(request);
        log.result = response.result.status;
        if (response.result.message) log.message = response.result.message;
        reply = conversionReviewResponse(response);
      } else {
        const request = decodeAdmissionReview(body);
        Object.assign(log, {
          uid: request.uid,
          kind: request.kind.kind,
          operation: request.operation,
          namespace: request.namespace,
          name: request.name,
          dryRun: request.dryRun === true,
        });
        const response = await handler.admit(request, {
          timeoutMs: this.timeoutMs,
          clock: this.clock,
        });
        log.allowed = response.allowed;
        if (response.status?.message) log.message = response.status.message;
        if (response.status?.code === 500) log.failed = true;
        if (response.patch) log.patched = true;
        reply = admissionReviewResponse(response);
      }
      const out = JSON.stringify(reply);
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
      res.end(out);
    } catch (err) {
      const known = err instanceof RequestError || err instanceof MalformedReviewError;
      code = err instanceof RequestError ? err.code : known ? 400 : 500;
      const message = known ? err.message : `internal error: ${errorMessage(err)}`;
      log.error = message;
      if (!res.headersSent) {
        // An oversized or broken body may still be arriving: answer, then close the connection instead
        // of reading the rest.
        res.writeHead(code, { "content-type": "text/plain; charset=utf-8", connection: "close" });
        res.end(`${message}\n`);
      } else res.destroy();
    } finally {
      timer?.end(code);
      log.code = code;
      log.latencyMs = this.clock.now() - started;
      const level =
        code !== 200 || log.failed
          ? "warn"
          : log.allowed === false || log.result === "Failure"
            ? "info"
            : "debug";
      this.logger?.[level](log, "webhook request");
    }
  }
}

function tlsOptions(pair: KeyPair): { cert: Buffer; key: Buffer; minVersion: "TLSv1.2" } {
  return { cert: pair.cert, key: pair.key, minVersion: "TLSv1.2" };
}

function describeHandler(h: WebhookHandler): string {
  return h.type === "conversion" ? `conversion of ${h.kind}` : `${h.type} ${h.kind.kind}`;
}
