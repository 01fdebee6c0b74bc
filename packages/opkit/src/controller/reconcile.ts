/**
 * The reconcile contract: a reconciler gets a key (namespace/name), never the event, reads the state
 * it needs from the cache, and returns done, `requeueAfter(ms)` or `requeue()`, or throws. An ordinary
 * error is retried with per-key backoff; a TerminalError is not retried (the object must change first).
 */
import type { KubeClient } from "../client/client.ts";
import type { Cache } from "../cache/cache.ts";
import type { Logger } from "../logging/index.ts";
import type { EventRecorder } from "../events/recorder.ts";

export interface Request {
  namespace?: string;
  name: string;
}

export type Result = void | undefined | { requeueAfterMs: number } | { requeue: true };

export const done = (): Result => undefined;
/**
 * Reconcile again after `ms` (e.g. to poll an external system); resets the error backoff. A delay that
 * is not positive (0, negative, NaN) is taken as `requeue()`, with backoff, so it cannot spin.
 */
export const requeueAfter = (ms: number): Result => ({ requeueAfterMs: ms });
/** Reconcile again soon, with the per-key backoff (as if it had failed, but logged as a requeue). */
export const requeue = (): Result => ({ requeue: true });

/** An error that retrying cannot fix (e.g. an invalid spec): counted, logged, not requeued. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TerminalError";
  }
}

/** A controller was declared or started wrongly (bad name, missing for(), start before setup). */
export class ControllerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ControllerConfigError";
  }
}

export class ReconcileTimeoutError extends Error {
  constructor(controller: string, key: string, ms: number) {
    super(`${controller}: reconcile of ${key} did not finish within ${ms} ms`);
    this.name = "ReconcileTimeoutError";
  }
}

export interface ReconcileContext {
  /** Logger with controller, namespace, name and reconcileID bound. */
  log: Logger;
  reconcileID: string;
  /**
   * Aborted when the per-reconcile timeout passes, when leadership is lost, or when a graceful stop's
   * period ends. The key stays reserved until the function returns, so honour it to free the key early.
   */
  signal: AbortSignal;
  /** The operator's field manager (the Manager's name), the default of the helpers' writes. */
  fieldManager: string;
  /**
   * The client for this reconcile: every call carries `signal` and writes as `fieldManager` by default
   * (a view sharing the operator's connections).
   */
  client: KubeClient;
  cache: Cache;
  recorder: EventRecorder;
}

export type Reconciler = (req: Request, ctx: ReconcileContext) => Promise<Result> | Result;

export function requestKey(req: Request): string {
  return req.namespace ? `${req.namespace}/${req.name}` : req.name;
}

export function keyToRequest(key: string): Request {
  const i = key.indexOf("/");
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
