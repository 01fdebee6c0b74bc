/**
 * The reconcile contract: a reconciler gets a key (namespace/name), never the event, reads the state
 * it needs from the cache, and returns done, `requeueAfter(ms)` or `requeue()`, or throws. An ordinary
 * error is retried with per-key backoff; a TerminalError is not retried (the object must change first).
 */
import type { KubeClient } from "../client/client.ts";
import type { Cache } from "../cache/cache.ts";
import type { Logger } from "../logging/index.ts";
import type { EventRecorder } from "../events/recorder.ts";

/**
 * What a reconcile is asked to do: bring the object with this name (and namespace) to its desired state. It
 * names an object, not an event, so a reconcile reads the current state and never depends on what changed.
 */
export interface Request {
  /** The object's namespace; absent for cluster-scoped kinds. */
  namespace?: string;
  /** The object's name. */
  name: string;
}

/**
 * What a reconcile returns: nothing (`done()`) when the object is converged, `requeueAfter(ms)` to look again
 * later, `requeue()` to retry with backoff. Throwing is an error, retried with backoff.
 */
export type Result =
  | void
  | undefined
  | {
      /** Reconcile again after this many milliseconds. */
      requeueAfterMs: number;
    }
  | {
      /** Reconcile again soon, with the key's backoff. */
      requeue: true;
    };

/** The object is converged: no requeue until the next event (and the key's backoff is reset). */
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

/**
 * A reconcile ran longer than `reconcileTimeoutMs`; it is the reason `ctx.signal` is aborted with, so the run
 * can tell a timeout from shutdown.
 */
export class ReconcileTimeoutError extends Error {
  constructor(controller: string, key: string, ms: number) {
    super(`${controller}: reconcile of ${key} did not finish within ${ms} ms`);
    this.name = "ReconcileTimeoutError";
  }
}

/**
 * What a reconcile function gets besides the request: a logger, the abort signal, a client view, the cache
 * and the Event recorder of its controller.
 */
export interface ReconcileContext {
  /** Logger with controller, namespace, name and reconcileID bound. */
  log: Logger;
  /** A fresh id per reconcile run, also in every log line, to follow one run through the logs. */
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
  /** The shared cache: read objects here (synchronous, no API call) rather than with the client. */
  cache: Cache;
  /** Records Events about the reconciled object for users (`kubectl describe`). */
  recorder: EventRecorder;
}

/**
 * The reconcile function of a controller: make the world match the object named by the request, and say when
 * to look again. It must be idempotent: it may run any number of times for the same state.
 */
export type Reconciler = (req: Request, ctx: ReconcileContext) => Promise<Result> | Result;

/** The work queue key of a request: "namespace/name", or "name" for cluster-scoped objects. */
export function requestKey(req: Request): string {
  return req.namespace ? `${req.namespace}/${req.name}` : req.name;
}

/** The request a work queue key stands for (the inverse of `requestKey`). */
export function keyToRequest(key: string): Request {
  const i = key.indexOf("/");
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
