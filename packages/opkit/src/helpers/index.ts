/**
 * helpers — the small pieces every reconcile needs, done right once: status conditions, controller
 * owner references with the garbage collector's rules, finalizers, status writes that skip no-ops,
 * deduplicated and rate-limited Events, ManageError/ManageSuccess with growing retry delays, and
 * server-side apply of owned objects.
 *
 * It uses the client and the clock. It must not know about the cache, the workqueue, controllers or
 * the manager: every helper takes what it needs as arguments, so it works inside any reconcile.
 */
export * from "./conditions.ts";
export * from "./ownerrefs.ts";
export * from "./finalizers.ts";
export * from "./status.ts";
export * from "./errors.ts";
export * from "./apply.ts";
export { jsonEqual, mergePatchDiff, type JsonValue } from "./json.ts";
