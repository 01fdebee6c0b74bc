/**
 * Webhooks for local development and tests, with the certificates made invisible: a self-signed CA and
 * a serving certificate for 127.0.0.1 in a private temporary directory, a free port, and webhook
 * configurations registered in the current cluster that point at `https://127.0.0.1:<port>/…` with the
 * CA as caBundle — so the real kube-apiserver calls the local server. `unregister` removes them again
 * (and sets the CRDs' conversion back to None), since a configuration left pointing at a stopped
 * server with failurePolicy Fail would refuse every write of its kinds.
 *
 * `opkit run --local-webhooks` uses `LocalWebhooks` around the operator process; tests use
 * `startLocalWebhooks`, which also runs the server in-process.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import { kindRef } from "../client/types.ts";
import type { Logger } from "../logging/index.ts";
import type { Metrics } from "../metrics/index.ts";
import { writeServingCertificate, type ServingCertificate } from "./certs.ts";
import { webhookConfigurations, type WebhookConfigurations } from "./configuration.ts";
import { WebhookServer, type WebhookHandler } from "./server.ts";

const Crds = kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition");
const Validating = kindRef("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
const Mutating = kindRef("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration");

/** Field manager of what LocalWebhooks applies. */
export const LOCAL_WEBHOOKS_FIELD_MANAGER = "opkit-local-webhooks";

const MANAGED_BY = "app.kubernetes.io/managed-by";
const HOST_LABEL = "opkit.dev/local-host";
const PID_LABEL = "opkit.dev/local-pid";

/** This machine's name as a label value (at most 63 characters of [A-Za-z0-9._-]). */
function hostLabel(): string {
  return (
    hostname()
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .slice(0, 63)
      .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "") || "localhost"
  );
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A free TCP port on `host` (bound and released; another process could take it in between, rarely). */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, host, () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A CRD named by a conversion handler is not installed. */
export class LocalWebhookError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LocalWebhookError";
  }
}

/**
 * Options of preparing locally served webhooks: the address the API server calls and where the certificate
 * goes.
 */
export interface LocalWebhooksOptions {
  /** Address the API server reaches the local server on (default 127.0.0.1). */
  host?: string;
  /** Default (or 0): a free port, chosen now. */
  port?: number;
  /** Directory for the certificate (default: a new private temporary directory, removed by `dispose`). */
  dir?: string;
}

/** The certificate, address and registrations of a locally served set of webhooks. */
export class LocalWebhooks {
  /** The address the API server reaches the local server on. */
  readonly host: string;
  /** The port the local server listens on. */
  readonly port: number;
  /** The serving certificate and its CA (registered as caBundle). */
  readonly certificate: ServingCertificate;
  private readonly ownDir: boolean;

  private constructor(host: string, port: number, certificate: ServingCertificate, ownDir: boolean) {
    this.host = host;
    this.port = port;
    this.certificate = certificate;
    this.ownDir = ownDir;
  }

  /** Write a CA and a serving certificate for `host` and choose the port. */
  static async prepare(options: LocalWebhooksOptions = {}): Promise<LocalWebhooks> {
    const host = options.host ?? "127.0.0.1";
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "opkit-webhook-certs-")));
    const hosts = [...new Set([host, "127.0.0.1", "localhost"])];
    const certificate = await writeServingCertificate(dir, { hosts });
    const port = options.port || (await freePort(host));
    return new LocalWebhooks(host, port, certificate, options.dir === undefined);
  }

  /** The same certificate on another port (e.g. the one a server bound to port 0 got). */
  withPort(port: number): LocalWebhooks {
    return new LocalWebhooks(this.host, port, this.certificate, this.ownDir);
  }

  /** Where the certificate files are (the server's `certDir`). */
  get certDir(): string {
    return this.certificate.dir;
  }

  /** The base URL configurations point at. */
  get url(): string {
    const h = this.host.includes(":") ? `[${this.host}]` : this.host;
    return `https://${h}:${this.port}`;
  }

  /** The configuration objects for `handlers` (named `name`), pointing at this server. */
  configurations(name: string, handlers: readonly WebhookHandler[]): WebhookConfigurations {
    return webhookConfigurations(handlers, {
      name,
      target: { url: this.url, caBundle: this.certificate.caPem },
      // Who registered it: a later registration on this machine removes those whose process is gone
      // (a test or `opkit run` killed with SIGKILL could not remove its own).
      labels: { [MANAGED_BY]: "opkit-local", [HOST_LABEL]: hostLabel(), [PID_LABEL]: String(process.pid) },
    });
  }

  /**
   * Register the configurations in the cluster (server-side apply, replacing a stale set of the same
   * name) and point the CRDs of conversion handlers at this server. The CRDs must be installed.
   */
  async register(client: KubeClient, name: string, handlers: readonly WebhookHandler[]): Promise<void> {
    await removeOrphans(client);
    const c = this.configurations(name, handlers);
    for (const { crdName, conversion } of c.conversions) {
      try {
        await client.patch(Crds, crdName, { spec: { conversion } }, { type: "merge" });
      } catch (err) {
        if (err instanceof NotFoundError)
          throw new LocalWebhookError(
            `CRD ${crdName} is not installed, so its conversion webhook cannot be registered: install the CRDs first (opkit run --install-crds)`,
            { cause: err },
          );
        throw err;
      }
    }
    for (const obj of [c.validating, c.mutating]) {
      if (obj) await client.apply(obj, { force: true, fieldManager: LOCAL_WEBHOOKS_FIELD_MANAGER });
    }
    // A kind of configuration with no handlers left must not keep an old registration alive.
    if (!c.validating) await deleteIfPresent(client, Validating, name);
    if (!c.mutating) await deleteIfPresent(client, Mutating, name);
  }

  /** Remove the configurations named `name` and set the conversion of the handlers' CRDs back to None. */
  async unregister(
    client: KubeClient,
    name: string,
    handlers: readonly WebhookHandler[] = [],
  ): Promise<void> {
    await deleteIfPresent(client, Validating, name);
    await deleteIfPresent(client, Mutating, name);
    for (const h of handlers) {
      if (h.type !== "conversion") continue;
      try {
        await client.patch(
          Crds,
          h.crdName,
          { spec: { conversion: { strategy: "None", webhook: null } } },
          { type: "merge" },
        );
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
  }

  /** Delete the certificate directory when `prepare` created it. */
  async dispose(): Promise<void> {
    if (this.ownDir) await rm(this.certificate.dir, { recursive: true, force: true });
  }
}

/**
 * Delete local registrations made on this machine by processes that no longer run: with failurePolicy
 * Fail, a configuration pointing at a dead server refuses every write of its kinds. Best effort.
 */
async function removeOrphans(client: KubeClient): Promise<void> {
  for (const kind of [Validating, Mutating]) {
    try {
      const list = await client.list(kind, {
        labelSelector: `${MANAGED_BY}=opkit-local,${HOST_LABEL}=${hostLabel()}`,
      });
      for (const item of list.items) {
        const pid = Number(item.metadata.labels?.[PID_LABEL]);
        if (Number.isInteger(pid) && pid > 0 && !processAlive(pid))
          await deleteIfPresent(client, kind, item.metadata.name ?? "");
      }
    } catch {
      // No permission to list: stale registrations stay until `unregister` or a re-run of the same name.
    }
  }
}

async function deleteIfPresent(
  client: KubeClient,
  kind: ReturnType<typeof kindRef>,
  name: string,
): Promise<void> {
  try {
    await client.delete(kind, name);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
}

/**
 * Options of `startLocalWebhooks`: serve the handlers on this machine and register them with the cluster, for
 * `opkit run --local-webhooks` and tests.
 */
export interface StartLocalWebhooksOptions {
  /**
   * The client that registers the configurations (needs create/delete on webhook configurations and patch on
   * CRDs).
   */
  client: KubeClient;
  /** Name of the configuration objects (e.g. the operator's name, or a test's unique name). */
  name: string;
  /** The webhooks to serve. */
  handlers: readonly WebhookHandler[];
  /** Address the API server reaches this machine on (default 127.0.0.1). */
  host?: string;
  /** Port to listen on (default: a free one). */
  port?: number;
  /** Where request failures are logged. */
  logger?: Logger;
  /** Where webhook request metrics go. */
  metrics?: Metrics;
  /** Per-request handler time limit in milliseconds. */
  requestTimeoutMs?: number;
}

/** A running local webhook server and its registrations; `stop` undoes everything. */
export interface RunningLocalWebhooks {
  /** The HTTPS server answering the webhooks. */
  readonly server: WebhookServer;
  /** Its certificate and address. */
  readonly local: LocalWebhooks;
  /** The configuration objects as registered. */
  readonly configurations: WebhookConfigurations;
  /** Unregister, stop the server, remove the certificates. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Start a webhook server for `handlers` on 127.0.0.1 with a fresh certificate and register it in the
 * cluster of `client` — what a test needs to have the real API server call its webhooks.
 */
export async function startLocalWebhooks(options: StartLocalWebhooksOptions): Promise<RunningLocalWebhooks> {
  const prepared = await LocalWebhooks.prepare({ host: options.host, port: options.port });
  // Bind first (port 0 unless one is asked for), then register the port the server really got: no race
  // with another process for a port chosen in advance.
  const server = new WebhookServer({
    handlers: options.handlers,
    host: prepared.host,
    port: options.port ?? 0,
    certDir: prepared.certDir,
    logger: options.logger,
    metrics: options.metrics,
    requestTimeoutMs: options.requestTimeoutMs,
  });
  let local = prepared;
  try {
    local = prepared.withPort((await server.start()).port);
    await local.register(options.client, options.name, options.handlers);
  } catch (err) {
    await server.stop(0);
    await local.unregister(options.client, options.name, options.handlers).catch(() => undefined);
    await local.dispose();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  return {
    server,
    local,
    configurations: local.configurations(options.name, options.handlers),
    stop() {
      stopped ??= (async () => {
        try {
          await local.unregister(options.client, options.name, options.handlers);
        } finally {
          await server.stop();
          await local.dispose();
        }
      })();
      return stopped;
    },
  };
}
