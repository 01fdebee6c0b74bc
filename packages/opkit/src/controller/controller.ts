/**
 * A controller: watches (for / owns / watches) feed keys into a workqueue, and up to `maxConcurrent`
 * workers reconcile them. The queue guarantees that one key is never reconciled by two workers at once
 * and that bursts of events collapse; reconcile results and errors drive requeues and backoff. An
 * exception in one reconcile is caught and counted: it never stops the controller or the process.
 */
import { randomUUID } from "node:crypto";
import type { Cache } from "../cache/cache.ts";
import type { KubeClient } from "../client/client.ts";
import { objectKey, type KindRef, type KubeObject } from "../client/types.ts";
import { realClock, type Clock } from "../clock/index.ts";
import { EventRecorder } from "../events/recorder.ts";
import type { Logger } from "../logging/index.ts";
import { reconcileLogger } from "../logging/index.ts";
import type { Metrics, ReconcileMetrics, ReconcileOutcome } from "../metrics/index.ts";
import { defaultControllerRateLimiter, type RateLimiter } from "../queue/ratelimiter.ts";
import { PRIORITY_LOW, PRIORITY_NORMAL, WorkQueue } from "../queue/workqueue.ts";
import { allows, type EventKind } from "./predicates.ts";
import type { Watch } from "./handlers.ts";
import {
  ControllerConfigError,
  ReconcileTimeoutError,
  TerminalError,
  keyToRequest,
  requestKey,
  type Reconciler,
  type Request,
  type Result,
} from "./reconcile.ts";

export interface ControllerOptions {
  /** Workers reconciling different keys in parallel (default 1, as controller-runtime). */
  maxConcurrent?: number;
  /** Abort and retry a reconcile that runs longer than this (default: no timeout). */
  reconcileTimeoutMs?: number;
  /** Per-key backoff for failures (default: 5 ms doubling to 1000 s). */
  rateLimiter?: RateLimiter<string>;
}

/** What the manager hands a controller when it starts. */
export interface ControllerDeps {
  client: KubeClient;
  cache: Cache;
  logger: Logger;
  metrics?: Metrics;
  clock?: Clock;
}

export class Controller<T extends KubeObject = KubeObject> {
  readonly name: string;
  readonly forKind: KindRef<T>;
  readonly ownedKinds: KindRef[];
  readonly watchedKinds: KindRef[];
  private readonly watches: Watch[];
  private readonly reconciler: Reconciler;
  private readonly options: Required<Omit<ControllerOptions, "reconcileTimeoutMs" | "rateLimiter">> &
    Pick<ControllerOptions, "reconcileTimeoutMs" | "rateLimiter">;
  private queue: WorkQueue<string> | undefined;
  private workers: Promise<void>[] = [];
  private stopping = new AbortController();
  private deps: ControllerDeps | undefined;
  private recorder: EventRecorder | undefined;
  private untrackQueue: (() => void) | undefined;
  private reconcileMetrics: ReconcileMetrics | undefined;

  constructor(init: {
    name: string;
    forKind: KindRef<T>;
    ownedKinds: KindRef[];
    watchedKinds: KindRef[];
    watches: Watch[];
    reconciler: Reconciler;
    options: ControllerOptions;
  }) {
    this.name = init.name;
    this.forKind = init.forKind;
    this.ownedKinds = init.ownedKinds;
    this.watchedKinds = init.watchedKinds;
    this.watches = init.watches;
    this.reconciler = init.reconciler;
    this.options = { maxConcurrent: 1, ...init.options };
  }

  /** Keys waiting in the queue (for tests and metrics). */
  get queueLength(): number {
    return this.queue?.len() ?? 0;
  }

  /**
   * Register the informers and event handlers. Called before the cache starts so that every kind this
   * controller needs is part of the cache sync; events are queued but not processed until `start`.
   */
  async setup(deps: ControllerDeps): Promise<void> {
    this.deps = deps;
    const clock = deps.clock ?? realClock;
    this.queue = new WorkQueue<string>({
      clock,
      rateLimiter: this.options.rateLimiter ?? defaultControllerRateLimiter<string>({ clock }),
      metrics: deps.metrics?.queueMetrics(this.name),
    });
    if (deps.metrics) this.untrackQueue = deps.metrics.trackQueue(this.name, this.queue);
    this.recorder = new EventRecorder(deps.client, {
      reportingController: `opkit.dev/${this.name}`,
      onError: (err) =>
        deps.logger.warn({ controller: this.name, err: String(err) }, "could not record event"),
    });
    // The reconciled kind's scope decides the key of an owned child's owner; look it up once, not per event.
    const forNamespaced = (await deps.client.mapping(this.forKind)).namespaced;
    for (const w of this.watches) {
      const informer = deps.cache.informer(w.kind);
      const enqueue = (kind: EventKind, obj: KubeObject, old: KubeObject | undefined, low: boolean): void => {
        if (!w.predicates.every((p) => allows(p, kind, obj, old))) return;
        let reqs: Request[];
        try {
          reqs = w.map(obj, forNamespaced);
        } catch (err) {
          deps.logger.error({ controller: this.name, err: String(err) }, "event mapping failed");
          return;
        }
        for (const r of reqs)
          this.queue?.add(requestKey(r), { priority: low ? PRIORITY_LOW : PRIORITY_NORMAL });
      };
      informer.addEventHandler({
        onAdd: (obj, initial) => enqueue("create", obj, undefined, initial),
        onUpdate: (old, obj, resync) => {
          enqueue("update", obj, old, resync);
          // An owned object that changed owner must also wake its previous owner.
          if (w.kind !== this.forKind && objectKey(old) === objectKey(obj))
            enqueue("update", old, old, resync);
        },
        onDelete: (obj) => enqueue("delete", obj, undefined, false),
      });
    }
  }

  /** Start the workers (after caches synced and, if enabled, leadership was acquired). */
  start(): void {
    if (!this.deps || !this.queue)
      throw new ControllerConfigError(`controller ${this.name}: setup() must run before start()`);
    this.reconcileMetrics = this.deps.metrics?.reconcile(this.name, {
      maxConcurrentReconciles: this.options.maxConcurrent,
    });
    for (let i = 0; i < this.options.maxConcurrent; i++) this.workers.push(this.work());
  }

  /** Stop taking new work; wait up to `graceMs` for in-flight reconciles. Returns whether all finished. */
  async stop(graceMs = 30_000): Promise<boolean> {
    if (!this.queue) return true;
    this.stopping.abort();
    const drained = await this.queue.shutDownWithDrain(graceMs);
    this.untrackQueue?.();
    if (drained) await Promise.all(this.workers);
    await this.recorder?.flush();
    return drained;
  }

  private async work(): Promise<void> {
    const queue = this.queue as WorkQueue<string>;
    const deps = this.deps as ControllerDeps;
    for (;;) {
      const item = await queue.get();
      if (!item) return;
      // Once stopping, keys still queued are dropped: in-flight work finishes, nothing new starts.
      if (this.stopping.signal.aborted) {
        queue.done(item.key);
        continue;
      }
      await this.reconcileOne(item.key, deps, queue);
      queue.done(item.key);
    }
  }

  private async reconcileOne(
    key: string,
    deps: ControllerDeps,
    queue: WorkQueue<string>,
  ): Promise<ReconcileOutcome> {
    const req = keyToRequest(key);
    const reconcileID = randomUUID();
    const log = reconcileLogger(deps.logger, {
      controller: this.name,
      namespace: req.namespace,
      name: req.name,
      reconcileID,
    });
    const metric = this.reconcileMetrics?.start();
    const abort = new AbortController();
    const onStop = (): void => abort.abort(this.stopping.signal.reason);
    this.stopping.signal.addEventListener("abort", onStop, { once: true });
    let timeout: NodeJS.Timeout | undefined;
    let outcome: ReconcileOutcome;
    try {
      const run = Promise.resolve().then(() =>
        this.reconciler(req, {
          log,
          reconcileID,
          signal: abort.signal,
          client: deps.client,
          cache: deps.cache,
          recorder: this.recorder as EventRecorder,
        }),
      );
      const ms = this.options.reconcileTimeoutMs;
      const result: Result = ms
        ? await Promise.race([
            run,
            new Promise<never>((_, reject) => {
              timeout = setTimeout(() => {
                const err = new ReconcileTimeoutError(this.name, key, ms);
                abort.abort(err);
                reject(err);
              }, ms);
            }),
          ])
        : await run;
      if (result && "requeueAfterMs" in result) {
        queue.forget(key);
        queue.addAfter(key, result.requeueAfterMs);
        outcome = "requeue_after";
      } else if (result && "requeue" in result) {
        queue.addRateLimited(key);
        outcome = "requeue";
      } else {
        queue.forget(key);
        outcome = "success";
      }
    } catch (err) {
      if (err instanceof TerminalError) {
        queue.forget(key);
        log.error({ err: errorText(err) }, "reconcile failed with a terminal error; not retrying");
        outcome = "terminal";
      } else {
        queue.addRateLimited(key);
        const retry = queue.numRequeues(key);
        log.error({ err: errorText(err), retries: retry }, "reconcile failed; retrying with backoff");
        outcome = err instanceof Error ? "error" : "panic";
      }
    } finally {
      clearTimeout(timeout);
      this.stopping.signal.removeEventListener("abort", onStop);
    }
    metric?.end(outcome);
    return outcome;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
