/**
 * controller — the builder (for / owns / watches / predicates), the event handlers that turn events into
 * keys, predicates, the reconcile contract (results, TerminalError) and the worker loop over the
 * workqueue.
 *
 * It uses the queue, the cache, the client and the event recorder; the manager starts it. It knows
 * nothing about leader election or HTTP servers.
 */

export {
  Controller,
  type ControllerDeps,
  type ControllerOptions,
  type KeyAdmission,
  type KeyGate,
} from "./controller.ts";
export { ControllerBuilder, controller, type ForOptions } from "./builder.ts";
export { enqueueForObject, enqueueForOwner, enqueueMapped, type MapContext, type MapFn } from "./handlers.ts";
export {
  and,
  annotationsChanged,
  generationChanged,
  labelSelectorPredicate,
  labelsChanged,
  not,
  or,
  resourceVersionChanged,
  type EventKind,
  type Predicate,
} from "./predicates.ts";
export {
  ControllerConfigError,
  ReconcileTimeoutError,
  TerminalError,
  done,
  keyToRequest,
  requestKey,
  requeue,
  requeueAfter,
  type ReconcileContext,
  type Reconciler,
  type Request,
  type Result,
} from "./reconcile.ts";
