/**
 * WorkQueue: client-go's rate-limited, delaying work queue with controller-runtime's priorities.
 *
 * The guarantees a controller builds on:
 * - a key is pending at most once, however often it is added (events coalesce);
 * - a key is never handed to two workers at once: adding it while it is processed marks it dirty, and
 *   `done` puts it back, so the change is seen by exactly one later run;
 * - no add is lost: a key added after its last `get` is handed out again.
 */
import { realClock } from "../clock/index.ts";
import type { Clock, TimerHandle } from "../clock/index.ts";
import { BinaryHeap } from "./heap.ts";
import { ReadyQueue } from "./ready.ts";
import { defaultControllerRateLimiter } from "./ratelimiter.ts";
import type { RateLimiter } from "./ratelimiter.ts";

/** The default priority of an add: real changes. */
export const PRIORITY_NORMAL = 0;
/** For initial-list and resync events, so that real changes are reconciled first. */
export const PRIORITY_LOW = -100;

/** Options of `WorkQueue.add`. */
export interface AddOptions {
  /** Higher is handed out first; equal priorities are FIFO. Default PRIORITY_NORMAL. */
  priority?: number;
}

/** A key handed out by `get`, with the priority it was queued at. */
export interface QueueItem<K extends string> {
  /** The key to work on; call `done(key)` when finished. */
  key: K;
  /** The priority the key was queued with (the highest of the adds it coalesced). */
  priority: number;
}

/**
 * Callbacks the manager maps to controller-runtime's `workqueue_*` metrics; kept as plain hooks so
 * this folder needs no metrics library.
 */
export interface QueueMetrics<K extends string> {
  /** A key became pending (adds_total). Adds coalesced into an already pending key do not count. */
  onAdd?(key: K): void;
  /** The number of pending keys changed (depth). */
  onDepth?(depth: number): void;
  /** A key was handed out after waiting `queuedMs` since it was added (queue_duration_seconds). */
  onGet?(key: K, queuedMs: number): void;
  /** A worker finished a key after `workMs` (work_duration_seconds). */
  onDone?(key: K, workMs: number): void;
  /** A delayed or rate-limited add was accepted (retries_total; client-go counts every AddAfter). */
  onRetry?(key: K): void;
}

/** Options of a `WorkQueue`: its clock, its retry backoff and its metric hooks. */
export interface WorkQueueOptions<K extends string> {
  /** Time source for delayed adds and durations; a FakeClock in tests. */
  clock?: Clock;
  /** Backoff for `addRateLimited`; default per-key exponential 5 ms → 1000 s. */
  rateLimiter?: RateLimiter<K>;
  /** Hooks for the workqueue metrics (the controller connects them to its Metrics). */
  metrics?: QueueMetrics<K>;
}

interface WaitingEntry<K> {
  key: K;
  readyAt: number;
  priority: number;
  seq: number;
}

// A dirty key, and while it is pending also its entry in `ready` (one object per add on the hot path).
interface DirtyState<K> {
  key: K;
  priority: number;
  addedAt: number;
  // Its place in `ready` while the key is pending; -1 while it waits for `done`.
  seq: number;
}

interface DrainWaiter {
  finish(drained: boolean): void;
}

// Replaced heap entries linger until popped; rebuild once they outnumber the live ones, so a key whose
// priority or ready time is bumped over and over cannot grow the heap without bound.
const STALE_SLACK = 64;

function checkPriority(priority: number): number {
  if (!Number.isFinite(priority)) throw new RangeError(`priority must be a finite number, got ${priority}`);
  return priority;
}

/**
 * The work queue behind every controller: keys ("namespace/name") to reconcile, deduplicated, never handed to
 * two workers at once, with delays, per-key backoff and priorities (client-go semantics). Controllers create
 * their own; use one directly only to build a custom worker loop.
 */
export class WorkQueue<K extends string> {
  private readonly clock: Clock;
  private readonly limiter: RateLimiter<K>;
  private readonly metrics: QueueMetrics<K>;
  private seq = 0;

  // Keys that need a run, pending or not: a dirty key is either pending (seq >= 0) or in `processing`.
  // One map for both, as it is the hot path.
  private readonly dirty = new Map<K, DirtyState<K>>();
  // Pending keys (dirty keys with seq >= 0).
  private queued = 0;
  // Pending keys in hand-out order. It may hold replaced states; only the one in `dirty` is live.
  private readonly ready = new ReadyQueue<DirtyState<K>>();
  // Key → start time of the run.
  private readonly processing = new Map<K, number>();

  private readonly waiting = new Map<K, WaitingEntry<K>>();
  private readonly waitingHeap = new BinaryHeap<WaitingEntry<K>>((a, b) =>
    a.readyAt !== b.readyAt ? a.readyAt < b.readyAt : a.seq < b.seq,
  );
  private timer: TimerHandle | undefined;
  private timerAt = Infinity;

  private readonly getters: ((item: QueueItem<K> | undefined) => void)[] = [];
  private readonly drainWaiters = new Set<DrainWaiter>();
  private shuttingDown = false;

  constructor(options: WorkQueueOptions<K> = {}) {
    this.clock = options.clock ?? realClock;
    this.limiter = options.rateLimiter ?? defaultControllerRateLimiter<K>();
    this.metrics = options.metrics ?? {};
  }

  /** Marks `key` as needing a run. Ignored after shutdown. */
  add(key: K, options?: AddOptions): void {
    if (this.shuttingDown) return;
    this.enqueue(key, checkPriority(options?.priority ?? PRIORITY_NORMAL));
  }

  /**
   * Adds `key` once `ms` have passed. While it waits, further delayed adds only move it earlier, never
   * later. A delayed add is independent of an immediate one: a key both pending and waiting runs now and
   * again when the wait ends, as in client-go.
   */
  addAfter(key: K, ms: number, options?: AddOptions): void {
    if (this.shuttingDown) return;
    const priority = checkPriority(options?.priority ?? PRIORITY_NORMAL);
    this.metrics.onRetry?.(key);
    // NaN lands here too: an unknowable delay is safest treated as none.
    if (!(ms > 0)) {
      this.enqueue(key, priority);
      return;
    }
    const readyAt = this.clock.now() + ms;
    const existing = this.waiting.get(key);
    if (existing !== undefined) {
      // Priority is not part of the waiting order, so it can be raised in place.
      if (priority > existing.priority) existing.priority = priority;
      if (readyAt >= existing.readyAt) return;
    }
    const entry: WaitingEntry<K> = {
      key,
      readyAt,
      priority: Math.max(priority, existing?.priority ?? priority),
      seq: this.seq++,
    };
    this.waiting.set(key, entry);
    this.waitingHeap.push(entry);
    if (this.waitingHeap.size > 2 * this.waiting.size + STALE_SLACK) {
      this.waitingHeap.rebuild(this.waiting.values());
    }
    this.armTimer();
  }

  /** Adds `key` after the rate limiter's delay, recording one more failure for it. */
  addRateLimited(key: K, options?: AddOptions): void {
    // Checked first so a shut-down queue does not inflate the failure count.
    if (this.shuttingDown) return;
    this.addAfter(key, this.limiter.when(key), options);
  }

  /** Resets the backoff of `key`; call it after a successful run. */
  forget(key: K): void {
    this.limiter.forget(key);
  }

  /**
   * Failures recorded for `key` by `addRateLimited` since the last `forget`; use it to give up after a number
   * of retries.
   */
  numRequeues(key: K): number {
    return this.limiter.retries(key);
  }

  /**
   * The next key, waiting while the queue is empty; `undefined` once the queue is shut down and no key
   * is pending or due back from a worker. The caller owns the key until it calls `done(key)`.
   */
  get(): Promise<QueueItem<K> | undefined> {
    const item = this.take();
    if (item !== undefined || this.finished()) return Promise.resolve(item);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** The next key if one is pending right now, without waiting. */
  tryGet(): QueueItem<K> | undefined {
    return this.take();
  }

  /** Ends the run of `key`; if it was added meanwhile it becomes pending again. Unknown keys are ignored. */
  done(key: K): void {
    const startedAt = this.processing.get(key);
    if (startedAt === undefined) return;
    this.processing.delete(key);
    if (this.metrics.onDone !== undefined) this.metrics.onDone(key, this.clock.now() - startedAt);
    const dirty = this.dirty.get(key);
    // Even during shutdown: the add was accepted before it, and draining workers will pick it up.
    if (dirty !== undefined) this.push(dirty);
    if (this.finished()) this.releaseGetters();
    this.checkDrained();
  }

  /**
   * Stops accepting adds and drops delayed ones. Pending keys are still handed out, and so are keys
   * re-added during a run that has not ended yet; once none are left, waiting and later `get` calls
   * return `undefined`.
   */
  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    this.waiting.clear();
    this.waitingHeap.clear();
    this.clearTimer();
    if (this.finished()) this.releaseGetters();
  }

  /**
   * `shutDown`, then waits until workers have finished every pending and processing key, or `graceMs`
   * pass. Resolves to whether the queue drained. Pending keys count as unfinished because workers only
   * stop once the queue is empty.
   */
  shutDownWithDrain(graceMs: number): Promise<boolean> {
    this.shutDown();
    if (this.isDrained()) return Promise.resolve(true);
    if (!(graceMs > 0)) return Promise.resolve(false);
    return new Promise((resolve) => {
      let timer: TimerHandle | undefined;
      const waiter: DrainWaiter = {
        finish: (drained) => {
          this.drainWaiters.delete(waiter);
          if (timer !== undefined) this.clock.clearTimeout(timer);
          resolve(drained);
        },
      };
      this.drainWaiters.add(waiter);
      if (Number.isFinite(graceMs)) timer = this.clock.setTimeout(() => waiter.finish(false), graceMs);
    });
  }

  /** Pending keys (not counting keys being processed or waiting for a delay). */
  len(): number {
    return this.queued;
  }

  /** Keys handed out and not yet `done`. */
  processingCount(): number {
    return this.processing.size;
  }

  /** Keys waiting for a delayed add to become due. */
  waitingCount(): number {
    return this.waiting.size;
  }

  /** True after `shutDown`: adds are ignored and `get` returns undefined once drained. */
  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Total time the runs in progress have taken so far (unfinished_work_seconds). */
  unfinishedWorkMs(): number {
    const now = this.clock.now();
    let total = 0;
    for (const startedAt of this.processing.values()) total += now - startedAt;
    return total;
  }

  /** Age of the oldest run in progress, 0 when idle (longest_running_processor_seconds). */
  longestRunningMs(): number {
    const now = this.clock.now();
    let longest = 0;
    for (const startedAt of this.processing.values()) longest = Math.max(longest, now - startedAt);
    return longest;
  }

  private enqueue(key: K, priority: number): void {
    const dirty = this.dirty.get(key);
    if (dirty !== undefined) {
      if (priority > dirty.priority) {
        if (dirty.seq < 0) {
          dirty.priority = priority;
        } else {
          // A pending key moves to its new priority as a new state (the old one in `ready` goes
          // stale) that keeps the original sequence number: its place among its new peers.
          const raised: DirtyState<K> = { key, priority, addedAt: dirty.addedAt, seq: dirty.seq };
          this.dirty.set(key, raised);
          this.pushEntry(raised);
        }
      }
      return;
    }
    // The clock is read only for the metric that uses it: adds are the hot path.
    const state: DirtyState<K> = {
      key,
      priority,
      addedAt: this.metrics.onGet !== undefined ? this.clock.now() : 0,
      seq: -1,
    };
    this.dirty.set(key, state);
    this.metrics.onAdd?.(key);
    // A processing key waits for `done`, so no second worker can get it.
    if (this.processing.has(key)) return;
    this.push(state);
  }

  private push(state: DirtyState<K>): void {
    this.queued++;
    state.seq = this.seq++;
    this.pushEntry(state);
    this.metrics.onDepth?.(this.queued);
    this.dispatch();
  }

  private pushEntry(state: DirtyState<K>): void {
    this.ready.push(state);
    if (this.ready.size > 2 * this.queued + STALE_SLACK) this.ready.rebuild(this.pendingStates());
  }

  private *pendingStates(): Generator<DirtyState<K>> {
    for (const state of this.dirty.values()) if (state.seq >= 0) yield state;
  }

  // Hands keys to waiting getters synchronously, so the key is marked processing before any other add
  // or done can run.
  private dispatch(): void {
    while (this.getters.length > 0 && this.queued > 0) {
      const item = this.take();
      if (item === undefined) return;
      (this.getters.shift() as (item: QueueItem<K>) => void)(item);
    }
  }

  private take(): QueueItem<K> | undefined {
    for (;;) {
      const entry = this.ready.pop();
      if (entry === undefined) return undefined;
      if (this.dirty.get(entry.key) !== entry) continue;
      this.queued--;
      const now = this.clock.now();
      const addedAt = entry.addedAt;
      this.dirty.delete(entry.key);
      this.processing.set(entry.key, now);
      this.metrics.onDepth?.(this.queued);
      if (this.metrics.onGet !== undefined) this.metrics.onGet(entry.key, now - addedAt);
      return { key: entry.key, priority: entry.priority };
    }
  }

  private peekWaiting(): WaitingEntry<K> | undefined {
    for (;;) {
      const head = this.waitingHeap.peek();
      if (head === undefined || this.waiting.get(head.key) === head) return head;
      this.waitingHeap.pop();
    }
  }

  // One timer for the earliest ready time; later entries are found when it fires.
  private armTimer(): void {
    const head = this.peekWaiting();
    if (head === undefined) {
      this.clearTimer();
      return;
    }
    if (this.timer !== undefined && this.timerAt <= head.readyAt) return;
    this.clearTimer();
    this.timerAt = head.readyAt;
    this.timer = this.clock.setTimeout(() => this.onTimer(), head.readyAt - this.clock.now());
  }

  private onTimer(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    for (let head = this.peekWaiting(); head !== undefined && head.readyAt <= now;) {
      this.waitingHeap.pop();
      this.waiting.delete(head.key);
      this.enqueue(head.key, head.priority);
      head = this.peekWaiting();
    }
    // Also covers a timer that fired early (clamped real delays): the head is simply re-armed.
    this.armTimer();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  // client-go ends getters as soon as the queue is empty, so a key re-added during a run that ends
  // after shutdown finds no worker left. Waiting for such keys keeps the no-lost-update promise.
  private finished(): boolean {
    if (!this.shuttingDown || this.queued > 0) return false;
    for (const key of this.processing.keys()) if (this.dirty.has(key)) return false;
    return true;
  }

  private releaseGetters(): void {
    for (const resolve of this.getters.splice(0)) resolve(undefined);
  }

  private isDrained(): boolean {
    return this.queued === 0 && this.processing.size === 0;
  }

  private checkDrained(): void {
    if (this.drainWaiters.size === 0 || !this.isDrained()) return;
    for (const waiter of [...this.drainWaiters]) waiter.finish(true);
  }
}
