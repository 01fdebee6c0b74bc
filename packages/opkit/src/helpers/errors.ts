/**
 * ManageError / ManageSuccess (the operator best practices of seed 002): a failed reconcile becomes
 * visible to users twice — a False condition on the object and a Warning Event — and is retried later
 * with a delay that grows per object up to a cap, so a permanent error neither hides in the logs nor
 * loops hot. The default cap is six hours: about how long an Event lives, so a failing object always
 * has a recent Event explaining why.
 */
import type { KubeClient } from "../client/client.ts";
import { errorMessage, NotFoundError } from "../client/errors.ts";
import { objectKey, type DeepReadonly, type KubeObject, type ReadonlyKubeObject } from "../client/types.ts";
import { realClock, type Clock } from "../clock/index.ts";
import { setCondition, type ConditionLike } from "./conditions.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { updateStatusIfChanged } from "./status.ts";

/**
 * Options of a `RetryTracker`: the base delay, growth factor, cap and reset time of the per-object backoff.
 */
export interface RetryTrackerOptions {
  /** First delay (default 1 s). */
  baseMs?: number;
  /** How much each consecutive failure multiplies the delay (default 2). */
  factor?: number;
  /** Cap (default 6 hours). */
  maxMs?: number;
  /**
   * An object that has not failed for this long starts again from `baseMs`, and its entry is dropped
   * (deleted objects must not stay in memory). Default twice `maxMs`, so capped retries never reset.
   */
  resetAfterMs?: number;
  /** Time source; a FakeClock in tests. */
  clock?: Clock;
}

/** Consecutive failures per object (by UID), and the delay each one earns. */
export class RetryTracker {
  /** The delay after the first failure, in milliseconds. */
  readonly baseMs: number;
  /** The growth factor per consecutive failure. */
  readonly factor: number;
  /** The cap on the delay, in milliseconds. */
  readonly maxMs: number;
  /** After this long without a failure an object starts again from `baseMs`. */
  readonly resetAfterMs: number;
  private readonly clock: Clock;
  private readonly entries = new Map<string, { attempts: number; at: number }>();
  private lastSweep: number;

  constructor(opts: RetryTrackerOptions = {}) {
    this.baseMs = opts.baseMs ?? 1_000;
    this.factor = opts.factor ?? 2;
    this.maxMs = opts.maxMs ?? 6 * 60 * 60_000;
    this.resetAfterMs = opts.resetAfterMs ?? 2 * this.maxMs;
    this.clock = opts.clock ?? realClock;
    this.lastSweep = this.clock.now();
  }

  /** Count a failure of `id` and return how long to wait before retrying it. */
  next(id: string): number {
    const now = this.clock.now();
    this.sweep(now);
    const prev = this.entries.get(id);
    const attempts = prev && now - prev.at <= this.resetAfterMs ? prev.attempts + 1 : 1;
    this.entries.set(id, { attempts, at: now });
    // Exponent clamped so huge attempt counts cannot overflow to Infinity/NaN before the cap applies.
    return Math.min(this.maxMs, this.baseMs * this.factor ** Math.min(attempts - 1, 1024));
  }

  /** Failures of `id` since the last success (0 when unknown or reset). */
  attempts(id: string): number {
    const e = this.entries.get(id);
    return e && this.clock.now() - e.at <= this.resetAfterMs ? e.attempts : 0;
  }

  /** A success: the next failure starts from `baseMs` again. */
  forget(id: string): void {
    this.entries.delete(id);
  }

  /** The number of objects tracked now (for tests and memory checks). */
  get size(): number {
    return this.entries.size;
  }

  // At most one full scan per resetAfterMs keeps next() O(1) amortized.
  private sweep(now: number): void {
    if (now - this.lastSweep < this.resetAfterMs) return;
    this.lastSweep = now;
    for (const [id, e] of this.entries) if (now - e.at > this.resetAfterMs) this.entries.delete(id);
  }
}

/**
 * What `manageError` and `manageSuccess` need: a client to write status, a recorder for Events, and the retry
 * tracker whose delays grow per object.
 */
export interface ManageContext {
  /** The client that writes the status condition (use `ctx.client`). */
  client: KubeClient;
  /** Without one, no Event is recorded. */
  recorder?: EventRecorder;
  /** Shared across reconciles of a controller so delays grow. */
  retries: RetryTracker;
}

/** Objects whose status carries conditions (`metav1.Condition`s, or Deployment-style ones). */
export type ConditionedObject = DeepReadonly<
  KubeObject & {
    /** The object's status. */
    status?: {
      /** Its conditions, keyed by type. */
      conditions?: ConditionLike[];
    };
  }
>;

/** Options of `manageError`: the condition type and reason to set and the Event's action. */
export interface ManageErrorOptions {
  /** Default "Ready". */
  conditionType?: string;
  /** Default: the error's class name when it is a valid reason, else "ReconcileError". */
  reason?: string;
  /** The Event's action; default "Reconcile". */
  action?: string;
  /** The time written into the condition; default now (tests pass a fixed one). */
  now?: Date;
}

/** Options of `manageSuccess`: the condition type, reason and message to set. */
export interface ManageSuccessOptions {
  /** Default "Ready". */
  conditionType?: string;
  /** Default "ReconcileSucceeded". */
  reason?: string;
  /** The condition's message; default empty. */
  message?: string;
  /** The time written into the condition; default now (tests pass a fixed one). */
  now?: Date;
}

// metav1.Condition's reason pattern; a reason outside it makes the status write Invalid.
const REASON_PATTERN = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MAX_REASON = 1024;
const MAX_MESSAGE = 32_768;

/** The condition reason for an error: its class name ("ConflictError", "ValidationError"...). */
export function reasonForError(err: unknown): string {
  if (err instanceof Error) {
    for (const name of [err.name, err.constructor.name]) {
      if (name && name !== "Error" && name.length <= MAX_REASON && REASON_PATTERN.test(name)) return name;
    }
  }
  return "ReconcileError";
}

function retryId(obj: ReadonlyKubeObject): string {
  return obj.metadata.uid ?? `${obj.kind ?? ""}/${objectKey(obj)}`;
}

/**
 * Report a failed reconcile: a Warning Event, the condition (default "Ready") set to False with the
 * error as message, and the delay to requeue this object after (1 s doubling to 6 h by default).
 * A NotFound on the status write (the object was deleted meanwhile) is ignored; other write errors
 * reject, so the controller's own error backoff takes over.
 */
export async function manageError(
  ctx: ManageContext,
  obj: ConditionedObject,
  err: unknown,
  opts: ManageErrorOptions = {},
): Promise<number> {
  const delay = ctx.retries.next(retryId(obj));
  const reason = opts.reason ?? reasonForError(err);
  const message = errorMessage(err).slice(0, MAX_MESSAGE);
  await ctx.recorder?.record(obj, {
    type: "Warning",
    reason,
    action: opts.action ?? "Reconcile",
    note: message,
  });
  await writeCondition(ctx.client, obj, {
    type: opts.conditionType ?? "Ready",
    status: "False",
    reason,
    message,
    now: opts.now,
  });
  return delay;
}

/** Report a successful reconcile: reset the object's retry delay and set the condition True. */
export async function manageSuccess(
  ctx: ManageContext,
  obj: ConditionedObject,
  opts: ManageSuccessOptions = {},
): Promise<void> {
  ctx.retries.forget(retryId(obj));
  await writeCondition(ctx.client, obj, {
    type: opts.conditionType ?? "Ready",
    status: "True",
    reason: opts.reason ?? "ReconcileSucceeded",
    message: opts.message ?? "",
    now: opts.now,
  });
}

async function writeCondition(
  client: KubeClient,
  obj: ConditionedObject,
  c: { type: string; status: "True" | "False"; reason: string; message: string; now: Date | undefined },
): Promise<void> {
  const { conditions, changed } = setCondition(
    obj.status?.conditions,
    {
      type: c.type,
      status: c.status,
      reason: c.reason,
      message: c.message,
      observedGeneration: obj.metadata.generation,
    },
    c.now,
  );
  if (!changed) return;
  try {
    await updateStatusIfChanged(client, obj, { ...obj.status, conditions });
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
}
