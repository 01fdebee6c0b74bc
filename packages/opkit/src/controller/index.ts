/**
 * controller — the builder (for / owns / watches / predicates), predicates, the reconcile contract
 * (results, TerminalError) and the worker loop over the workqueue.
 *
 * It uses the queue, the cache and the client; the manager starts it. It knows nothing about leader
 * election or HTTP servers.
 */
export {
  Controller,
  ControllerBuilder,
  ControllerConfigError,
  controller,
  type ControllerDeps,
  type ControllerOptions,
  type ForOptions,
} from "./controller.ts";
export * from "./predicates.ts";
export * from "./reconcile.ts";
