/**
 * The Manager runs one operator process: it owns the client, the shared cache, metrics, logging and the
 * ops server, and the controllers and runnables added to it. Start order: ops server (metrics,
 * /healthz, /readyz), controller watches and caches (wait for sync), runnables that need no
 * leadership, then — after winning leader election when it is on — the controllers' workers and the
 * runnables that need leadership.
 *
 * Stopping comes in two kinds. A graceful stop (SIGTERM) stops campaigning first, lets in-flight
 * reconciles finish within the grace period, releases the Lease and stops caches and servers. Losing
 * leadership is different: another replica may already lead, so every reconcile's signal is aborted,
 * the workers stop, and the process exits at once (as controller-runtime does); a custom
 * `onLeadershipLost` hook is told first but cannot keep anything running.
 */
import { Cache, type CacheOptions } from "../cache/cache.ts";
import { KubeClient, type ClientOptions } from "../client/client.ts";
import { errorMessage, TooManyRequestsError, UnknownKindError } from "../client/errors.ts";
import { WriteFence } from "../client/fence.ts";
import { realClock, withTimeout, type Clock } from "../clock/index.ts";
import { DEFAULT_GRACEFUL_SHUTDOWN_MS, type Controller } from "../controller/controller.ts";
import { createLogger, type Logger } from "../logging/index.ts";
import { Metrics } from "../metrics/index.ts";
import { storageMigrationRunnable, type StorageMigrationOptions } from "../migrate/index.ts";
import { WebhookServer, type WebhookServerOptions } from "../webhook/server.ts";
import {
  defaultIdentity,
  LeaderElector,
  LeadershipLostError,
  type LeaderElectorOptions,
} from "./leaderelection.ts";
import {
  CREATED,
  isLeading,
  lostOf,
  managerStep,
  stopRequested,
  type ManagerEvent,
  type ManagerPhase,
} from "./lifecycle.ts";
import { leaseNamespace } from "./namespace.ts";
import { setupSharding, type Sharding, type ShardingOptions } from "./sharded.ts";
import {
  DEFAULT_HEALTH_PORT,
  DEFAULT_METRICS_PORT,
  OpsServer,
  cacheSyncedCheck,
  type Check,
} from "./server.ts";

/** A host and port a server binds to. */
export interface ListenAddress {
  /** Interface to bind; default "0.0.0.0" so the kubelet and Prometheus can reach the pod. */
  host?: string;
  /** 0 picks a free port (logged, and readable from `manager.ports`). */
  port: number;
}

/**
 * Leader election of a Manager: the Lease and its timing. Enable it whenever more than one replica may run,
 * so only one reconciles.
 */
export interface LeaderElectionOptions {
  /** Lease name, unique per operator (e.g. "memcached-operator"). */
  name: string;
  /** Namespace of the Lease (default: the pod's namespace from POD_NAMESPACE, else "default"). */
  namespace?: string;
  /** How long the Lease is valid after a renewal (default 15 s). */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a failed renewal before it stops leading (default 10 s). */
  renewDeadlineMs?: number;
  /** Interval between acquire and renew attempts (default 2 s). */
  retryPeriodMs?: number;
  /** Give the Lease up on a clean stop so a successor starts at once (default true). */
  releaseOnCancel?: boolean;
  /** This replica's identity (default host name plus a random id). */
  identity?: string;
}

/**
 * Anything with a start and a stop that should live and die with the manager: a webhook server, a
 * poller of an external system, a custom informer. `start` gets a signal that aborts when it must
 * stop; the promise it returns (if any) should settle once it has.
 */
export interface Runnable {
  /** For logs and errors. */
  readonly name: string;
  /** Start only on the leader (default false: every replica runs it, e.g. a webhook server). */
  readonly needLeaderElection?: boolean;
  /**
   * Run until `signal` aborts; a returned promise should settle once stopped. A rejection stops the manager.
   */
  start(signal: AbortSignal): void | Promise<void>;
}

/**
 * What a Manager is built from: how to reach the cluster, its name, the cache scope, the ops servers, leader
 * election, webhooks and shutdown timing. Every option has a default; `runOperator` fills them from the
 * standard flags.
 */
export interface ManagerOptions {
  /** Kubeconfig path (default: standard loading rules) — or pass a ready `client`. */
  kubeconfig?: string;
  /** A ready client to use instead of loading a kubeconfig (tests, embedding). */
  client?: KubeClient;
  /** Options for the client the manager loads (rate limits, retries, ...). */
  clientOptions?: ClientOptions;
  /** The operator's name: its field manager for writes and server-side apply, and its logger name. */
  name?: string;
  /** Cache options: namespace scope, per-kind selectors and transforms, resync period. */
  cache?: CacheOptions;
  /** Metrics endpoint (default 0.0.0.0:8080; false disables). */
  metrics?: ListenAddress | false;
  /** /healthz and /readyz (default 0.0.0.0:8081; the same address as metrics serves both). */
  health?: ListenAddress | false;
  /** Lease-based leader election (default off: every replica reconciles; enable it with more than one). */
  leaderElection?: LeaderElectionOptions | false;
  /**
   * Migrate these CRDs' stored objects to their storage version on the leader, beside the controllers, and
   * trim `status.storedVersions` (see `migrateStorage`), so the next release can drop an old version.
   */
  storageMigration?: StorageMigrationOptions;
  /**
   * Split the controllers' keys into `count` shards held through Leases, so several replicas reconcile
   * side by side, each only its shards (not together with `leaderElection`). See ShardingOptions.
   */
  shards?: ShardingOptions;
  /**
   * Serve these admission/conversion webhooks (HTTPS, default 0.0.0.0:9443, certificate from
   * `certDir`). Started after the ops servers and before the caches; /readyz reports it as "webhook".
   */
  webhook?: Omit<WebhookServerOptions, "metrics" | "logger" | "clock">;
  /** How long in-flight reconciles may take to finish on a graceful stop (default 30 s). */
  gracefulShutdownMs?: number;
  /** How long caches may take to sync before start fails with the kinds that did not (default 2 min). */
  cacheSyncTimeoutMs?: number;
  /** The root logger (default: JSON to stdout, named after the operator). */
  logger?: Logger;
  /** Time source for the queue, cache and leader election; a FakeClock in tests. */
  clock?: Clock;
  /**
   * Told when leadership is lost, after every reconcile was aborted and the workers stopped. Without a
   * hook the process exits with code 1 at once; with one, the manager shuts down its caches and
   * servers and `run()` rejects with the LeadershipLostError (for embedding and tests).
   */
  onLeadershipLost?: (err: LeadershipLostError) => void;
}

type Entry = { kind: "controller"; controller: Controller } | { kind: "runnable"; runnable: Runnable };

/** A manager was used wrongly (duplicate names, added after start). */
export class ManagerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ManagerConfigError";
  }
}

/**
 * A graceful stop ran out of its grace period: some reconcile or runnable had not finished and was
 * abandoned. `run()` rejects with it after the stop completed, so the process exits non-zero (as
 * controller-runtime's manager returns an error then) and an orchestrator sees the unclean stop.
 */
export class GracefulShutdownTimeoutError extends Error {
  /** The grace period that was exceeded, in milliseconds. */
  readonly graceMs: number;
  /** What did not finish in time: controller names, and "runnables". */
  readonly unfinished: readonly string[];
  constructor(graceMs: number, unfinished: readonly string[]) {
    super(
      `graceful shutdown exceeded its ${graceMs} ms grace period; still running: ${unfinished.join(", ")} (raise gracefulShutdownMs, or let reconciles honour ctx.signal)`,
    );
    this.name = "GracefulShutdownTimeoutError";
    this.graceMs = graceMs;
    this.unfinished = unfinished;
  }
}

/**
 * Runs an operator: one client, one shared cache, the controllers and runnables, metrics and health servers,
 * optional leader election and webhooks, started in order and stopped gracefully on SIGTERM. Create it with
 * `Manager.create`, add controllers, then `start()` (or `run()`).
 */
export class Manager {
  /** The operator's name: field manager, logger name and default Lease name. */
  readonly name: string;
  /**
   * The client every controller's `ctx.client` is a view of. With leader election its writes are fenced:
   * they fail with FencedWriteError unless this replica renewed its Lease within the renew deadline (reads
   * are not fenced), so a replica that must write while it is not leading needs a client of its own.
   */
  readonly client: KubeClient;
  /** The client as given or loaded: Lease requests, reads of the cache, and `close`. */
  private readonly base: KubeClient;
  /** Open while this replica's last Lease renewal is younger than the renew deadline (leader election only). */
  private readonly fence: WriteFence | undefined;
  /** The shared informer cache every controller reads from. */
  readonly cache: Cache;
  /** The root logger. */
  readonly logger: Logger;
  /** The operator's metrics registry, served at /metrics. */
  readonly metrics: Metrics;
  private readonly opts: ManagerOptions;
  private readonly entries: Entry[] = [];
  private readonly servers: OpsServer[] = [];
  private readonly readyChecks: [string, Check][] = [];
  private readonly runnableStops = new Map<Runnable, { abort: AbortController; done: Promise<void> }>();
  private elector: LeaderElector | undefined;
  private sharding: Sharding | undefined;
  private readonly webhookServer: WebhookServer | undefined;
  /** Where the manager is in its life (lifecycle.ts); changed only through `step`. */
  private phase: ManagerPhase<LeadershipLostError, GracefulShutdownTimeoutError> = CREATED;
  private readonly stopRequested: (() => void)[] = [];
  private resolveDone: (() => void) | undefined;
  /** Resolves once the manager has stopped (gracefully or after losing leadership). */
  readonly done: Promise<void>;
  /** Ports the ops servers listen on, once started. */
  readonly ports: {
    /** The /metrics port. */
    metrics?: number;
    /** The /healthz and /readyz port. */
    health?: number;
    /** The webhook server's port. */
    webhook?: number;
  } = {};

  private constructor(client: KubeClient, opts: ManagerOptions) {
    this.opts = opts;
    this.name = opts.name ?? "opkit-manager";
    this.base = client;
    if (opts.leaderElection) {
      this.fence = new WriteFence({ clock: opts.clock, name: "leader election" });
      this.client = client.withDefaults({ fence: this.fence });
    } else this.client = client;
    this.logger = opts.logger ?? createLogger({ name: this.name });
    this.metrics = new Metrics({ clock: opts.clock });
    this.cache = new Cache(client, {
      ...opts.cache,
      clock: opts.cache?.clock ?? opts.clock,
      // A kind installed a moment ago answers 429 or 404 until the API server serves it; the reflector
      // retries with backoff, so that is worth a debug line, not an error.
      onError: (err, kind) =>
        this.logger[isTransient(err) ? "debug" : "error"](
          { kind, err: errorMessage(err) },
          isTransient(err) ? "list/watch not ready yet; retrying" : "list/watch failed",
        ),
    });
    this.metrics.trackInformers(() => this.cache.health());
    this.done = new Promise((r) => (this.resolveDone = r));
    if (opts.storageMigration)
      this.add(
        storageMigrationRunnable(this.client, { clock: opts.clock, ...opts.storageMigration }, this.logger),
      );
    if (opts.webhook) {
      const server = new WebhookServer({
        ...opts.webhook,
        metrics: this.metrics,
        logger: this.logger,
        clock: opts.clock,
      });
      this.webhookServer = server;
      this.readyChecks.push(["webhook", () => server.readyCheck()]);
    }
  }

  /**
   * Create a manager; loads the kubeconfig (unless `client` is given) with the operator's name as field
   * manager. Async because loading credentials may run a plugin.
   */
  static async create(opts: ManagerOptions = {}): Promise<Manager> {
    if (opts.shards && opts.leaderElection)
      throw new ManagerConfigError(
        "shards and leaderElection exclude each other: with shards every replica works, on its own shards",
      );
    let client = opts.client;
    if (!client) {
      // The client exists before the manager's metrics do; the hook is filled in right after.
      const hook: { onRequest?: ClientOptions["onRequest"] } = {};
      client = await KubeClient.load({
        kubeconfig: opts.kubeconfig,
        fieldManager: opts.name,
        // Server warnings and credential rotations go to the operator's log, not a logger of their own.
        logger: opts.logger?.child({ logger: "kube-client" }),
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

  /** Add a controller, or any runnable that should start and stop with the manager. */
  add(item: Controller | Runnable): this {
    if (this.started) throw new ManagerConfigError(`cannot add "${item.name}" after the manager started`);
    if (
      this.entries.some((e) => (e.kind === "controller" ? e.controller.name : e.runnable.name) === item.name)
    )
      throw new ManagerConfigError(`a controller or runnable named "${item.name}" is already added`);
    if (isController(item)) this.entries.push({ kind: "controller", controller: item });
    else this.entries.push({ kind: "runnable", runnable: item });
    return this;
  }

  /**
   * Add a check to /readyz, e.g. that an external dependency answers; a failing check takes the pod out of
   * its Service.
   */
  addReadyCheck(name: string, check: Check): this {
    this.readyChecks.push([name, check]);
    return this;
  }

  /** True once leader work runs (after sync, and leadership when enabled). */
  get leading(): boolean {
    return isLeading(this.phase);
  }

  private step(event: ManagerEvent<LeadershipLostError, GracefulShutdownTimeoutError>): void {
    this.phase = managerStep(this.phase, event);
  }

  /** A stop was asked for: nothing new may open or start. */
  private get stopping(): boolean {
    return stopRequested(this.phase);
  }

  /** `start` was called, also after a stop. */
  private get started(): boolean {
    const p = this.phase;
    return p.name === "stopping" || p.name === "stopped" ? p.started : p.name !== "created";
  }

  private get controllers(): Controller[] {
    return this.entries.flatMap((e) => (e.kind === "controller" ? [e.controller] : []));
  }

  private runnables(leader: boolean): Runnable[] {
    return this.entries.flatMap((e) =>
      e.kind === "runnable" && Boolean(e.runnable.needLeaderElection) === leader ? [e.runnable] : [],
    );
  }

  /**
   * Start servers, caches and (on the leader) controllers; resolves once caches synced and work started,
   * rejects with a SyncTimeoutError naming the kinds that did not sync. Use `run()` to also handle signals.
   */
  async start(): Promise<void> {
    // Stopped before it started (a signal handler ran first): open nothing that nobody would close.
    if (this.stopping) {
      this.step({ type: "start", opening: Promise.resolve() });
      return;
    }
    // stop() waits for this phase before tearing down, so nothing it opens (a server, an informer)
    // can appear after the stop and outlive it.
    const opening = this.open();
    this.step({ type: "start", opening });
    await opening;
    if (this.stopping) return;
    // A stop (SIGTERM) during the sync ends start quietly instead of as a sync timeout, and clears
    // the sync's timer: left armed, it would keep the process alive until the timeout.
    const stopping = new AbortController();
    this.stopRequested.push(() => stopping.abort());
    try {
      await this.cache.waitForSync(this.opts.cacheSyncTimeoutMs, { signal: stopping.signal });
    } catch (err) {
      if (stopping.signal.aborted) return;
      throw err;
    }
    if (this.stopping) return;
    this.logger.info({ kinds: [...new Set(this.cache.health().map((h) => h.kind))] }, "caches synced");
    for (const r of this.runnables(false)) this.startRunnable(r);
    const le = this.opts.leaderElection;
    if (this.sharding) {
      // Every replica runs its workers; the gates admit only the keys of the shards it holds.
      this.startLeaderWork();
      this.sharding.coordinator.start(this.sharding.router.callbacks());
      return;
    }
    if (!le) {
      this.startLeaderWork();
      return;
    }
    const namespace = leaseNamespace(le.namespace);
    this.elector = new LeaderElector({
      client: this.base,
      fence: this.fence,
      name: le.name,
      namespace,
      identity: le.identity ?? defaultIdentity(),
      leaseDurationMs: le.leaseDurationMs,
      renewDeadlineMs: le.renewDeadlineMs,
      retryPeriodMs: le.retryPeriodMs,
      clock: this.opts.clock,
      logger: this.logger,
      onLeaderStatus: this.metrics.leaderStatus(le.name),
    } satisfies LeaderElectorOptions);
    this.logger.info(
      { lease: `${namespace}/${le.name}`, identity: this.elector.identity },
      "waiting for leadership",
    );
    void this.elector.run({
      onStartedLeading: () => {
        if (this.stopping) return;
        this.logger.info({ identity: this.elector?.identity }, "became leader; starting controllers");
        this.startLeaderWork();
      },
      onStoppedLeading: (info) => {
        if (!info.lost) return;
        this.onLeadershipLost(
          new LeadershipLostError(`${namespace}/${le.name}`, this.elector?.identity ?? "", info.reason),
        );
      },
    });
  }

  /** Servers, webhooks, controller wiring and informers: everything start opens before the sync. */
  private async open(): Promise<void> {
    await this.startServers();
    if (this.stopping) return;
    // Webhooks serve on every replica, leader or not, before the caches: admission must not wait for them.
    if (this.webhookServer) this.ports.webhook = (await this.webhookServer.start()).port;
    if (this.opts.shards) {
      this.sharding = await setupSharding({
        options: this.opts.shards,
        group: this.name,
        identity: defaultIdentity(),
        client: this.base,
        cache: this.cache,
        controllers: this.controllers,
        metrics: this.metrics,
        logger: this.logger,
        clock: this.opts.clock,
      });
    }
    for (const c of this.controllers) {
      if (this.stopping) return;
      await c.setup({
        gate: this.sharding?.gates.get(c),
        client: this.client,
        cache: this.cache,
        logger: this.logger,
        metrics: this.metrics,
        clock: this.opts.clock,
        fieldManager: this.name,
      });
    }
    if (!this.stopping) this.cache.start();
  }

  private startLeaderWork(): void {
    if (this.phase.name !== "starting") return;
    this.step({ type: "leaderWork" });
    for (const c of this.controllers) c.start();
    for (const r of this.runnables(true)) this.startRunnable(r);
  }

  private startRunnable(r: Runnable): void {
    const abort = new AbortController();
    const done = Promise.resolve()
      .then(() => r.start(abort.signal))
      .catch((err: unknown) => {
        if (abort.signal.aborted) return;
        this.logger.error(
          { runnable: r.name, err: err instanceof Error ? err.stack : String(err) },
          "runnable failed",
        );
      });
    this.runnableStops.set(r, { abort, done });
  }

  /**
   * Leadership is gone: stop every reconcile now (abort their signals, hand out no more keys) so no
   * write follows a successor's; then tell the hook, or exit the process at once.
   */
  private onLeadershipLost(err: LeadershipLostError): void {
    if (lostOf(this.phase)) return;
    this.step({ type: "lost", error: err });
    for (const c of this.controllers) c.abort(err);
    for (const r of this.runnables(true)) this.runnableStops.get(r)?.abort.abort(err);
    this.logger.error({ reason: err.message }, "leadership lost; every reconcile aborted");
    const hook = this.opts.onLeadershipLost;
    if (!hook) {
      // Synchronous logs are already written; nothing else may run on this process's behalf.
      process.exit(1);
    }
    try {
      hook(err);
    } catch (hookErr) {
      this.logger.error({ err: String(hookErr) }, "onLeadershipLost hook failed");
    }
    void this.stop();
  }

  private async startServers(): Promise<void> {
    const metrics =
      this.opts.metrics === undefined ? { host: "0.0.0.0", port: DEFAULT_METRICS_PORT } : this.opts.metrics;
    const health =
      this.opts.health === undefined ? { host: "0.0.0.0", port: DEFAULT_HEALTH_PORT } : this.opts.health;
    const same =
      metrics && health && metrics.port !== 0 && metrics.port === health.port && metrics.host === health.host;
    if (metrics) {
      const s = new OpsServer({
        host: metrics.host,
        port: metrics.port,
        registry: this.metrics.registry,
        probes: Boolean(same),
        clock: this.opts.clock,
      });
      if (same) this.addProbes(s);
      this.servers.push(s);
      this.ports.metrics = (await s.start()).port;
      if (same) this.ports.health = this.ports.metrics;
    }
    if (health && !same) {
      const s = new OpsServer({ host: health.host, port: health.port, probes: true, clock: this.opts.clock });
      this.addProbes(s);
      this.servers.push(s);
      this.ports.health = (await s.start()).port;
    }
    if (this.servers.length > 0) this.logger.info({ ...this.ports }, "serving metrics and probes");
  }

  private addProbes(s: OpsServer): void {
    s.addHealthCheck("ping", () => ({ ok: true }));
    s.addReadyCheck("informers", cacheSyncedCheck(this.cache));
    if (this.opts.shards)
      s.addReadyCheck("shards", () =>
        !this.sharding || this.sharding.router.ready()
          ? { ok: true }
          : {
              ok: false,
              detail: this.sharding.router.filterError()
                ? `applying the held shards' filters failed (retrying): ${this.sharding.router.filterError()}`
                : "held shards' caches are still listing",
            },
      );
    for (const [name, check] of this.readyChecks) s.addReadyCheck(name, check);
  }

  /**
   * Graceful stop: a standby stops campaigning at once; a leader lets in-flight reconciles finish within
   * the grace period, then releases the Lease; caches and servers stop last. Idempotent.
   */
  stop(): Promise<void> {
    for (const r of this.stopRequested.splice(0)) r();
    if (this.phase.name === "stopping" || this.phase.name === "stopped") return this.phase.done;
    const done = this.shutDown(this.phase.name === "created" ? undefined : this.phase.opening);
    this.step({ type: "stop", done });
    return done;
  }

  /** The steps of a stop (see `stop`), once what `start` opens is open. */
  private async shutDown(opening: Promise<void> | undefined): Promise<void> {
    await opening?.catch(() => undefined);
    // stop() moved to "stopping" before this line runs; leader work cannot start once it did.
    const leaderWorkStarted = this.phase.name === "stopping" && this.phase.leaderWorkStarted;
    const grace = this.opts.gracefulShutdownMs ?? DEFAULT_GRACEFUL_SHUTDOWN_MS;
    const le = this.opts.leaderElection;
    // A standby must not win the Lease while it is shutting down.
    if (this.elector && !leaderWorkStarted) await this.elector.stop({ release: false });
    // Hand every shard back once its in-flight reconciles finished, while the workers still run;
    // within the grace period, after which the shards are abandoned (their reconciles' signals abort,
    // their Leases expire instead of being released while that work may still run).
    const clock = this.opts.clock ?? realClock;
    const stopAt = clock.now();
    let shardsLeft = false;
    if (this.sharding) {
      const coordinator = this.sharding.coordinator;
      const released = await withTimeout(clock, grace, () => coordinator.stop());
      if (released.timedOut) {
        shardsLeft = true;
        await coordinator.abandon("the graceful shutdown period ended");
      }
    }
    // No more filter-swap retries once the shards are gone.
    this.sharding?.router.stop();
    const left = Math.max(0, grace - (clock.now() - stopAt));
    const drained = await Promise.all(this.controllers.map((c) => c.stop(left)));
    const unfinished = this.controllers.filter((_, i) => !drained[i]).map((c) => c.name);
    if (shardsLeft) unfinished.push("shards");
    if (!(await this.stopRunnables(grace))) unfinished.push("runnables");
    let unclean: GracefulShutdownTimeoutError | undefined;
    if (unfinished.length) {
      unclean = new GracefulShutdownTimeoutError(grace, unfinished);
      this.logger.warn({ graceMs: grace, unfinished }, "some work did not finish within the grace period");
    }
    await this.elector?.stop({ release: le && !lostOf(this.phase) ? (le.releaseOnCancel ?? true) : false });
    await this.cache.stop();
    await this.webhookServer?.stop();
    await Promise.all(this.servers.map((s) => s.stop()));
    await this.base.close();
    this.step({ type: "stopped", unclean });
    this.logger.info("manager stopped");
    this.resolveDone?.();
  }

  /** Abort the runnables and wait for them within the grace period; false when some did not end. */
  private async stopRunnables(graceMs: number): Promise<boolean> {
    const all = [...this.runnableStops.values()];
    if (!all.length) return true;
    for (const r of all) r.abort.abort(new Error("manager stopping"));
    const clock = this.opts.clock ?? realClock;
    const ended = await withTimeout(clock, graceMs, () => Promise.all(all.map((r) => r.done)));
    return !ended.timedOut;
  }

  /**
   * Start, then run until SIGTERM or SIGINT; a second signal exits at once. Resolves after a clean
   * stop; rejects with the LeadershipLostError when leadership was lost and a hook kept the process,
   * and with a GracefulShutdownTimeoutError when work was abandoned at the end of the grace period.
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
      try {
        await this.start();
      } catch (err) {
        await this.stop();
        throw err;
      }
      await this.done;
      const lost = lostOf(this.phase);
      if (lost) throw lost;
      if (this.phase.name === "stopped" && this.phase.unclean) throw this.phase.unclean;
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
  }
}

function isTransient(err: unknown): boolean {
  return err instanceof TooManyRequestsError || err instanceof UnknownKindError;
}

function isController(item: Controller | Runnable): item is Controller {
  return "forKind" in item && typeof item.setup === "function";
}
