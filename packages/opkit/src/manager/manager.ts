/**
 * The Manager runs one operator process: it owns the client, the shared cache, metrics, logging and the
 * ops server, and the controllers added to it. Start order: ops server (metrics, /healthz, /readyz),
 * controller watches and caches (wait for sync), then — after winning leader election when it is on —
 * the controllers' workers. Stop runs in reverse: no new reconciles, in-flight ones finish within the
 * grace period, leadership is released, caches and servers stop. SIGTERM/SIGINT trigger that stop.
 */
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { Cache, type CacheOptions } from "../cache/cache.ts";
import { KubeClient, type ClientOptions } from "../client/client.ts";
import type { Clock } from "../clock/index.ts";
import type { Controller } from "../controller/controller.ts";
import { createLogger, type Logger } from "../logging/index.ts";
import { Metrics } from "../metrics/index.ts";
import { LeaderElector, type LeaderElectorOptions } from "./leaderelection.ts";
import { OpsServer, cacheSyncedCheck, type Check } from "./server.ts";

export interface ListenAddress {
  host?: string;
  /** 0 picks a free port. */
  port: number;
}

export interface LeaderElectionOptions {
  /** Lease name, unique per operator (e.g. "memcached-operator"). */
  name: string;
  /** Namespace of the Lease (default: the pod's namespace from POD_NAMESPACE, else "default"). */
  namespace?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Give the Lease up on a clean stop so a successor starts at once (default true). */
  releaseOnCancel?: boolean;
  identity?: string;
}

export interface ManagerOptions {
  /** Kubeconfig path (default: standard loading rules) — or pass a ready `client`. */
  kubeconfig?: string;
  client?: KubeClient;
  clientOptions?: ClientOptions;
  /** Field manager for server-side apply and writes (default: the manager name). */
  name?: string;
  cache?: CacheOptions;
  /** Metrics endpoint (default 0.0.0.0:8080; false disables). */
  metrics?: ListenAddress | false;
  /** /healthz and /readyz (default 0.0.0.0:8081; the same address as metrics serves both). */
  health?: ListenAddress | false;
  leaderElection?: LeaderElectionOptions | false;
  /** How long in-flight reconciles may take to finish on shutdown (default 30 s). */
  gracefulShutdownMs?: number;
  /** How long caches may take to sync before start fails with the kinds that did not (default 2 min). */
  cacheSyncTimeoutMs?: number;
  logger?: Logger;
  clock?: Clock;
  /** Called when leadership is lost; the default stops the manager and exits the process with code 1. */
  onLeadershipLost?: () => void;
}

export class Manager {
  readonly name: string;
  readonly client: KubeClient;
  readonly cache: Cache;
  readonly logger: Logger;
  readonly metrics: Metrics;
  private readonly opts: ManagerOptions;
  private readonly controllers: Controller[] = [];
  private readonly servers: OpsServer[] = [];
  private readonly readyChecks: [string, Check][] = [];
  private elector: LeaderElector | undefined;
  private controllersStarted = false;
  private stopped: Promise<void> | undefined;
  private resolveDone: (() => void) | undefined;
  readonly done: Promise<void>;
  /** Ports the ops servers listen on, once started. */
  readonly ports: { metrics?: number; health?: number } = {};

  private constructor(client: KubeClient, opts: ManagerOptions) {
    this.opts = opts;
    this.name = opts.name ?? "opkit-manager";
    this.client = client;
    this.logger = opts.logger ?? createLogger({ name: this.name });
    this.metrics = new Metrics({ clock: opts.clock });
    this.cache = new Cache(client, {
      ...opts.cache,
      clock: opts.clock,
      onError: (err, kind) =>
        this.logger.error(
          { kind, err: err instanceof Error ? err.message : String(err) },
          "list/watch failed",
        ),
    });
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  static async create(opts: ManagerOptions = {}): Promise<Manager> {
    let client = opts.client;
    if (!client) {
      // The client exists before the manager's metrics do; the hook is filled in right after.
      const hook: { onRequest?: ClientOptions["onRequest"] } = {};
      client = await KubeClient.load({
        kubeconfig: opts.kubeconfig,
        fieldManager: opts.name,
        ...opts.clientOptions,
        onRequest: (e) => {
          hook.onRequest?.(e);
          opts.clientOptions?.onRequest?.(e);
        },
      });
      const m = new Manager(client, opts);
      hook.onRequest = m.metrics.onRequest(new URL(client.transport.server).host);
      return m;
    }
    return new Manager(client, opts);
  }

  add(c: Controller): this {
    if (this.controllers.some((x) => x.name === c.name))
      throw new Error(`a controller named "${c.name}" is already added`);
    this.controllers.push(c);
    return this;
  }

  addReadyCheck(name: string, check: Check): this {
    this.readyChecks.push([name, check]);
    return this;
  }

  /** True once controllers run (after sync, and leadership when enabled). */
  get leading(): boolean {
    return this.controllersStarted;
  }

  async start(): Promise<void> {
    await this.startServers();
    for (const c of this.controllers) {
      await c.setup({
        client: this.client,
        cache: this.cache,
        logger: this.logger,
        metrics: this.metrics,
        clock: this.opts.clock,
      });
    }
    this.cache.start();
    await this.cache.waitForSync(this.opts.cacheSyncTimeoutMs ?? 120_000);
    this.logger.info({ kinds: this.cache.health().map((h) => h.kind) }, "caches synced");
    const le = this.opts.leaderElection;
    if (!le) {
      this.startControllers();
      return;
    }
    this.elector = new LeaderElector({
      client: this.client,
      name: le.name,
      namespace: le.namespace ?? process.env.POD_NAMESPACE ?? "default",
      identity: le.identity ?? `${hostname()}_${randomUUID()}`,
      leaseDurationMs: le.leaseDurationMs,
      renewDeadlineMs: le.renewDeadlineMs,
      retryPeriodMs: le.retryPeriodMs,
      clock: this.opts.clock,
      logger: this.logger,
      onLeaderStatus: this.metrics.leaderStatus(le.name),
    } satisfies LeaderElectorOptions);
    this.logger.info(
      { lease: `${le.namespace ?? "default"}/${le.name}`, identity: this.elector.identity },
      "waiting for leadership",
    );
    void this.elector.run({
      onStartedLeading: () => {
        this.logger.info({ identity: this.elector?.identity }, "became leader; starting controllers");
        this.startControllers();
      },
      onStoppedLeading: (info) => {
        if (!info.lost) return;
        this.logger.error({ reason: info.reason }, "leadership lost; stopping");
        if (this.opts.onLeadershipLost) this.opts.onLeadershipLost();
        else void this.stop().finally(() => process.exit(1));
      },
    });
  }

  private startControllers(): void {
    if (this.controllersStarted) return;
    this.controllersStarted = true;
    for (const c of this.controllers) c.start();
  }

  private async startServers(): Promise<void> {
    const metrics = this.opts.metrics === undefined ? { host: "0.0.0.0", port: 8080 } : this.opts.metrics;
    const health = this.opts.health === undefined ? { host: "0.0.0.0", port: 8081 } : this.opts.health;
    const same =
      metrics && health && metrics.port !== 0 && metrics.port === health.port && metrics.host === health.host;
    if (metrics) {
      const s = new OpsServer({
        host: metrics.host,
        port: metrics.port,
        registry: this.metrics.registry,
        probes: Boolean(same),
      });
      if (same) this.addProbes(s);
      this.servers.push(s);
      this.ports.metrics = (await s.start()).port;
      if (same) this.ports.health = this.ports.metrics;
    }
    if (health && !same) {
      const s = new OpsServer({ host: health.host, port: health.port, probes: true });
      this.addProbes(s);
      this.servers.push(s);
      this.ports.health = (await s.start()).port;
    }
  }

  private addProbes(s: OpsServer): void {
    s.addHealthCheck("ping", () => ({ ok: true }));
    s.addReadyCheck("informers", cacheSyncedCheck(this.cache));
    for (const [name, check] of this.readyChecks) s.addReadyCheck(name, check);
  }

  /** Graceful stop: controllers drain, leadership is released, caches and servers stop. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      const grace = this.opts.gracefulShutdownMs ?? 30_000;
      const drained = await Promise.all(this.controllers.map((c) => c.stop(grace)));
      if (drained.some((d) => !d))
        this.logger.warn({ graceMs: grace }, "some reconciles did not finish within the grace period");
      const le = this.opts.leaderElection;
      await this.elector?.stop({ release: le ? (le.releaseOnCancel ?? true) : false });
      await this.cache.stop();
      await Promise.all(this.servers.map((s) => s.stop()));
      await this.client.close();
      this.logger.info("manager stopped");
      this.resolveDone?.();
    })();
    return this.stopped;
  }

  /**
   * Start, then run until SIGTERM or SIGINT; a second signal exits at once. Resolves when stopped.
   * The process exits 0 after a clean stop.
   */
  async run(): Promise<void> {
    let signals = 0;
    const onSignal = (sig: NodeJS.Signals): void => {
      signals++;
      if (signals > 1) {
        this.logger.warn({ signal: sig }, "second signal: exiting now");
        process.exit(1);
      }
      this.logger.info({ signal: sig }, "shutting down");
      void this.stop();
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
    try {
      await this.start();
    } catch (err) {
      await this.stop();
      throw err;
    }
    await this.done;
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  }
}
