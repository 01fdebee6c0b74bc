/**
 * A controller: watches (for / owns / watches) feed keys into a workqueue, and up to `maxConcurrent`
 * workers reconcile them. The queue guarantees that one key is never reconciled by two workers at once
 * and that bursts of events collapse; reconcile results and errors drive requeues and backoff.
 *
 * A key stays "processing" until its reconcile function returns, whatever happens meanwhile: the
 * per-reconcile timeout and a stop only abort `ctx.signal` (and with it every request made through
 * `ctx.client`), they never hand the key to another worker while the first run may still write. Any
 * thrown value is caught, counted and logged with its stack; it never stops the controller or the
 * process.
 */
import { randomUUID } from "node:crypto";
import type { Cache } from "../cache/cache.ts";
import { CacheNotSyncedError } from "../cache/informer.ts";
import type { ControllerPermission } from "../client/builtins.ts";
import type { KubeClient } from "../client/client.ts";
import { objectKey, type DeepReadonly, type KindRef, type KubeObject } from "../client/types.ts";
import { realClock, type Clock, type TimerHandle } from "../clock/index.ts";
import { EventRecorder } from "../events/recorder.ts";
import type { Logger } from "../logging/index.ts";
import { reconcileLogger } from "../logging/index.ts";
import type { Metrics, ReconcileMetrics, ReconcileOutcome } from "../metrics/index.ts";
import { defaultControllerRateLimiter, type RateLimiter } from "../queue/ratelimiter.ts";
import { PRIORITY_LOW, PRIORITY_NORMAL, WorkQueue } from "../queue/workqueue.ts";
import type { MapContext, Watch } from "./handlers.ts";
import { allows, type EventKind } from "./predicates.ts";
import {
  ControllerConfigError,
  ReconcileTimeoutError,
  TerminalError,
  keyToRequest,
  requestKey,
  type Reconciler,
  type Result,
} from "./reconcile.ts";

/** How a controller runs its reconciles: parallel workers, a per-reconcile timeout, and the retry backoff. */
export interface ControllerOptions {
  /** Workers reconciling different keys in parallel (default 1, as controller-runtime). */
  maxConcurrent?: number;
  /**
   * Abort a reconcile's `ctx.signal` after this long (default: no timeout). The key stays processing
   * until the function returns; a run that ends by throwing after the deadline is retried with backoff.
   */
  reconcileTimeoutMs?: number;
  /** Per-key backoff for failures (default: 5 ms doubling to 1000 s). */
  rateLimiter?: RateLimiter<string>;
  /**
   * With a sharded manager: which field of the reconciled object decides its shard. "namespace" (the
   * default for namespaced kinds) keeps an object and its children in one shard and shards the owned
   * and watched namespaced kinds' caches too; "uid" (the default for cluster-scoped kinds) spreads
   * objects evenly, and only the reconciled kind's cache is sharded.
   */
  shardKey?: "namespace" | "uid";
}

/** A key admitted by a KeyGate: the reconcile runs under `signal` and calls `done` when it ended. */
export interface KeyAdmission {
  /** Aborted when the right to reconcile the key is lost (e.g. its shard's Lease): the run must stop. */
  signal?: AbortSignal;
  /** Called once the reconcile returned (or threw). */
  done(): void;
}

/**
 * Decides per key whether this replica may reconcile it now (sharded operators: only the keys of the
 * shards it holds). A key it refuses is dropped, not retried: whoever owns the key reconciles it.
 */
export interface KeyGate {
  /** An admission when `key` may be reconciled now, else undefined. */
  admit(key: string): KeyAdmission | undefined;
}

/** What the manager hands a controller when it starts. */
export interface ControllerDeps {
  /** The operator's client; reconciles get a view of it as `ctx.client`. */
  client: KubeClient;
  /** The shared cache the controller's watches and reads use. */
  cache: Cache;
  /** The logger each reconcile's logger derives from. */
  logger: Logger;
  /** Where reconcile and workqueue metrics go; without it nothing is measured. */
  metrics?: Metrics;
  /** Time source for delays and durations; a FakeClock in tests. */
  clock?: Clock;
  /** The operator's field manager, the default of writes made through `ctx.client`. */
  fieldManager?: string;
  /** Which keys this replica may reconcile (sharding); without it, every key. */
  gate?: KeyGate;
}

/** Errors that are bugs in the reconcile function rather than conditions of the world. */
function isProgrammingError(err: unknown): boolean {
  return (
    !(err instanceof Error) ||
    err instanceof TypeError ||
    err instanceof ReferenceError ||
    err instanceof RangeError ||
    err instanceof SyntaxError
  );
}

/** How long in-flight reconciles may run on after a stop before their signals abort (30 s). */
export const DEFAULT_GRACEFUL_SHUTDOWN_MS = 30_000;

/**
 * A controller: watches that turn events into keys, a work queue, and workers that run the reconcile function
 * for each key, with retries, timeouts and metrics. Build one with `controller(name)` and run it by adding it
 * to a Manager.
 */
export class Controller<T extends KubeObject = KubeObject> {
  /** The controller's name (logs, metrics, Events). */
  readonly name: string;
  /** The kind it reconciles. */
  readonly forKind: KindRef<T>;
  /** The kinds whose controller-owned objects wake their owner (from `owns`); RBAC generation reads it. */
  readonly ownedKinds: KindRef[];
  /** The other kinds it watches through map functions (from `watches`); RBAC generation reads it. */
  readonly watchedKinds: KindRef[];
  /** What its code writes beyond opkit's defaults (from `rbac`); RBAC generation reads it. */
  readonly rbac: readonly ControllerPermission[];
  private readonly watches: Watch[];
  private readonly reconciler: Reconciler;
  private readonly options: Required<
    Omit<ControllerOptions, "reconcileTimeoutMs" | "rateLimiter" | "shardKey">
  > &
    Pick<ControllerOptions, "reconcileTimeoutMs" | "rateLimiter" | "shardKey">;
  private queue: WorkQueue<string> | undefined;
  private workers: Promise<void>[] = [];
  private readonly stopping = new AbortController();
  // Aborted when in-flight reconciles are (leadership lost, or a graceful stop's period ended): the
  // signal of the Event writes they may still make.
  private readonly halted = new AbortController();
  private readonly inflight = new Set<AbortController>();
  private deps: ControllerDeps | undefined;
  private clock: Clock = realClock;
  private recorder: EventRecorder | undefined;
  private untrackQueue: (() => void) | undefined;
  // How long each key handed to a worker waited since its first add (event → reconcile start), for
  // the debug line of its reconcile; filled only when that line is written.
  private readonly queued = new Map<string, number>();
  private reconcileMetrics: ReconcileMetrics | undefined;
  private started = false;

  constructor(init: {
    name: string;
    forKind: KindRef<T>;
    ownedKinds: KindRef[];
    watchedKinds: KindRef[];
    rbac?: readonly ControllerPermission[];
    watches: Watch[];
    reconciler: Reconciler;
    options: ControllerOptions;
  }) {
    this.name = init.name;
    this.forKind = init.forKind;
    this.ownedKinds = init.ownedKinds;
    this.watchedKinds = init.watchedKinds;
    this.rbac = init.rbac ?? [];
    this.watches = init.watches;
    this.reconciler = init.reconciler;
    this.options = { maxConcurrent: 1, ...init.options };
  }

  /** The `shardKey` option as given (undefined: the default for the kind's scope). */
  get shardKey(): "namespace" | "uid" | undefined {
    return this.options.shardKey;
  }

  /** Keys waiting in the queue (for tests and metrics). */
  get queueLength(): number {
    return this.queue?.len() ?? 0;
  }

  /** Reconciles running now. */
  get running(): number {
    return this.inflight.size;
  }

  /**
   * Register the informers and event handlers. Called before the cache starts so that every kind this
   * controller needs is part of the cache sync; events are queued but not processed until `start`.
   */
  async setup(deps: ControllerDeps): Promise<void> {
    this.deps = deps;
    const clock = (this.clock = deps.clock ?? realClock);
    const queueMetrics = deps.metrics?.queueMetrics(this.name);
    this.queue = new WorkQueue<string>({
      clock,
      rateLimiter: this.options.rateLimiter ?? defaultControllerRateLimiter<string>({ clock }),
      // At debug level each reconcile's line carries its queue wait (the per-reconcile value behind
      // workqueue_queue_duration_seconds); otherwise the queue reads no clock for it.
      metrics: deps.logger.isLevelEnabled("debug")
        ? {
            ...queueMetrics,
            onGet: (key, queuedMs) => {
              queueMetrics?.onGet?.(key, queuedMs);
              this.queued.set(key, queuedMs);
            },
          }
        : queueMetrics,
    });
    if (deps.metrics) this.untrackQueue = deps.metrics.trackQueue(this.name, this.queue);
    // Events are writes too: a reconcile that outlives its abort must not record any either.
    this.recorder = new EventRecorder(deps.client.withDefaults({ signal: this.halted.signal }), {
      reportingController: `opkit.dev/${this.name}`,
      clock,
      onError: (err) =>
        deps.logger.warn({ controller: this.name, err: String(err) }, "could not record event"),
    });
    // The reconciled kind's scope decides the key of an owned child's owner; look it up once, not per event.
    const forNamespaced = (await deps.client.mapping(this.forKind)).namespaced;
    const mapCtx: MapContext = { cache: deps.cache };
    for (const w of this.watches) {
      const enqueue = (
        kind: EventKind,
        obj: DeepReadonly<KubeObject>,
        old: DeepReadonly<KubeObject> | undefined,
        low: boolean,
      ): void => {
        if (!w.predicates.every((p) => allows(p, kind, obj, old))) return;
        const keys = new Set<string>();
        try {
          for (const r of w.map(obj, forNamespaced, mapCtx)) keys.add(requestKey(r));
          // An object whose owner or mapped keys changed must also wake the keys of its old state
          // (controller-runtime maps both versions of an update); the predicates judged the event once.
          if (old && w.kind !== this.forKind && objectKey(old) === objectKey(obj))
            for (const r of w.map(old, forNamespaced, mapCtx)) keys.add(requestKey(r));
        } catch (err) {
          if (err instanceof CacheNotSyncedError) {
            // The map function read a kind still filling: map this event again once it has synced,
            // instead of dropping it.
            void err.whenSynced().then(() => enqueue(kind, obj, old, low));
            return;
          }
          deps.logger.error({ controller: this.name, err: errorText(err) }, "event mapping failed");
          return;
        }
        for (const key of keys) this.queue?.add(key, { priority: low ? PRIORITY_LOW : PRIORITY_NORMAL });
      };
      deps.cache.informer(w.kind).addEventHandler({
        onAdd: (obj, initial) => enqueue("create", obj, undefined, initial),
        onUpdate: (old, obj, resync) => enqueue("update", obj, old, resync),
        onDelete: (obj) => enqueue("delete", obj, undefined, false),
      });
    }
  }

  /**
   * Queue the key of every cached object of the reconciled kind that `filter` accepts, e.g. when this
   * replica took over a shard. No-op before `setup`.
   */
  enqueueCached(filter: (obj: DeepReadonly<T>) => boolean): void {
    if (!this.deps || !this.queue) return;
    for (const obj of this.deps.cache.informer(this.forKind).list()) {
      if (filter(obj)) this.queue.add(objectKey(obj), { priority: PRIORITY_LOW });
    }
  }

  /** Start the workers (after caches synced and, if enabled, leadership was acquired). */
  start(): void {
    if (!this.deps || !this.queue)
      throw new ControllerConfigError(`controller ${this.name}: setup() must run before start()`);
    if (this.started || this.stopping.signal.aborted) return;
    this.started = true;
    this.reconcileMetrics = this.deps.metrics?.reconcile(this.name, {
      maxConcurrentReconciles: this.options.maxConcurrent,
    });
    for (let i = 0; i < this.options.maxConcurrent; i++) this.workers.push(this.work());
  }

  /**
   * Graceful stop: take no new work and let in-flight reconciles finish within `graceMs`; those still
   * running then get their signals aborted. A controller that never started (a standby replica) stops
   * at once. Returns whether everything finished in time.
   */
  async stop(graceMs = DEFAULT_GRACEFUL_SHUTDOWN_MS): Promise<boolean> {
    if (!this.queue) return true;
    if (!this.stopping.signal.aborted) this.stopping.abort(new Error(`controller ${this.name} stopped`));
    let drained = true;
    if (this.started) drained = await this.queue.shutDownWithDrain(graceMs);
    else this.queue.shutDown();
    if (!drained) this.abortAll(new Error(`controller ${this.name}: graceful shutdown period ended`));
    this.untrackQueue?.();
    if (drained) await Promise.all(this.workers);
    await this.recorder?.flush();
    return drained;
  }

  /**
   * Immediate stop (leadership lost): abort every reconcile's signal, hand out no further key, and
   * return without waiting for anything, since another replica may be leading already.
   */
  abort(reason: unknown): void {
    this.abortAll(reason);
    this.queue?.shutDown();
  }

  private abortAll(reason: unknown): void {
    if (!this.stopping.signal.aborted) this.stopping.abort(reason);
    if (!this.halted.signal.aborted) this.halted.abort(reason);
    for (const a of this.inflight) a.abort(reason);
  }

  private async work(): Promise<void> {
    const queue = this.queue as WorkQueue<string>;
    const deps = this.deps as ControllerDeps;
    for (;;) {
      const item = await queue.get();
      if (!item) return;
      // Once stopping, keys still queued are dropped: in-flight work finishes, nothing new starts.
      if (this.stopping.signal.aborted) {
        this.queued.delete(item.key);
        queue.done(item.key);
        continue;
      }
      // Checked at dispatch, not at enqueue: ownership may change while a key waits.
      const admission = deps.gate ? deps.gate.admit(item.key) : undefined;
      if (deps.gate && !admission) {
        this.queued.delete(item.key);
        queue.forget(item.key);
        queue.done(item.key);
        continue;
      }
      try {
        await this.reconcileOne(item.key, deps, queue, admission?.signal);
      } finally {
        queue.done(item.key);
        admission?.done();
      }
    }
  }

  private async reconcileOne(
    key: string,
    deps: ControllerDeps,
    queue: WorkQueue<string>,
    revoked: AbortSignal | undefined,
  ): Promise<void> {
    const req = keyToRequest(key);
    const queuedMs = this.queued.get(key);
    if (queuedMs !== undefined) this.queued.delete(key);
    const reconcileID = randomUUID();
    const log = reconcileLogger(deps.logger, {
      controller: this.name,
      namespace: req.namespace,
      name: req.name,
      reconcileID,
    });
    const metric = this.reconcileMetrics?.start();
    // Wall time, for the debug line only: comparable across replicas (sharding tests check that no key
    // is reconciled by two at once); durations and timers use the injected clock.
    const startedAt = Date.now();
    const abort = new AbortController();
    this.inflight.add(abort);
    const onRevoked = (): void => abort.abort(revoked?.reason);
    if (revoked?.aborted) onRevoked();
    else revoked?.addEventListener("abort", onRevoked, { once: true });
    const ms = this.options.reconcileTimeoutMs;
    const fieldManager = deps.fieldManager ?? deps.client.fieldManager;
    let timer: TimerHandle | undefined;
    if (ms)
      timer = this.clock.setTimeout(() => abort.abort(new ReconcileTimeoutError(this.name, key, ms)), ms);
    let outcome: ReconcileOutcome;
    try {
      // Awaited to the end even after an abort: the key is processing until the function returns.
      const result: Result = await this.reconciler(req, {
        log,
        reconcileID,
        signal: abort.signal,
        // Every call through ctx.client carries this reconcile's signal and the operator's field
        // manager: a timeout or a lost Lease aborts its requests, and helpers write as the operator.
        client: deps.client.withDefaults({ signal: abort.signal, fieldManager }),
        cache: deps.cache,
        // A reconcile whose shard was lost records no Event either: the new holder may be at this key.
        recorder: revoked
          ? (this.recorder as EventRecorder).until(revoked)
          : (this.recorder as EventRecorder),
        fieldManager,
      });
      outcome = timedOut(abort.signal)
        ? this.applyError(key, abort.signal.reason, queue, log)
        : this.applyResult(key, result, queue);
    } catch (err) {
      // A run that overran its deadline failed by the timeout, whatever it threw on the way out.
      outcome = this.applyError(key, timedOut(abort.signal) ? abort.signal.reason : err, queue, log);
    } finally {
      if (timer !== undefined) this.clock.clearTimeout(timer);
      revoked?.removeEventListener("abort", onRevoked);
      this.inflight.delete(abort);
    }
    metric?.end(outcome);
    // Checked on the parent, so a reconcile that logged nothing never makes its child logger.
    if (deps.logger.isLevelEnabled("debug"))
      log.debug({ outcome, startedAt, endedAt: Date.now(), queuedMs }, "reconcile done");
  }

  private applyResult(key: string, result: Result, queue: WorkQueue<string>): ReconcileOutcome {
    // A delay that is not positive (0, negative, NaN: often a computed deadline already past) would
    // requeue at once, forever, with no backoff: it is retried as `requeue()` instead.
    if (result && "requeueAfterMs" in result && result.requeueAfterMs > 0) {
      queue.forget(key);
      queue.addAfter(key, result.requeueAfterMs);
      return "requeue_after";
    }
    if (result && ("requeue" in result || "requeueAfterMs" in result)) {
      queue.addRateLimited(key);
      return "requeue";
    }
    queue.forget(key);
    return "success";
  }

  private applyError(key: string, err: unknown, queue: WorkQueue<string>, log: Logger): ReconcileOutcome {
    if (err instanceof CacheNotSyncedError) {
      // Not a failure: the reconcile read a kind whose cache is still filling. Run it again once it
      // has synced, instead of letting it act on a "not found" that may be false.
      log.debug({ kind: err.kind }, "cache not synced yet; requeued for when it is");
      void err.whenSynced().then(() => queue.add(key));
      return "requeue";
    }
    if (this.stopping.signal.aborted) {
      // Aborted by a stop: the next leader or process reconciles it; nothing to retry here.
      log.info({ err: errorText(err) }, "reconcile ended by stop");
      return "error";
    }
    if (err instanceof TerminalError) {
      queue.forget(key);
      log.error({ err: errorText(err) }, "reconcile failed with a terminal error; not retrying");
      return "terminal";
    }
    queue.addRateLimited(key);
    log.error(
      { err: errorText(err), retries: queue.numRequeues(key) },
      "reconcile failed; retrying with backoff",
    );
    return isProgrammingError(err) ? "panic" : "error";
  }
}

function timedOut(signal: AbortSignal): boolean {
  return signal.aborted && signal.reason instanceof ReconcileTimeoutError;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.stack ?? `${err.name}: ${err.message}`;
  try {
    return `non-Error value thrown: ${JSON.stringify(err)}`;
  } catch {
    return `non-Error value thrown: ${String(err)}`;
  }
}
