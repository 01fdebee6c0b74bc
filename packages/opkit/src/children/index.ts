/**
 * children — declarative child objects: a reconcile states the children a parent should have, and
 * reconcileChildren applies them (owner reference, labels, field manager), prunes those no longer
 * wanted and reports readiness with built-in or per-kind rules.
 *
 * It uses the client, the cache (optionally, to find existing children) and the helpers' owner
 * reference rules. It must not know about controllers, the workqueue or the manager: it is one call
 * inside a reconcile.
 */

export {
  ChildrenSpecError,
  MANAGER_LABEL,
  OWNER_UID_LABEL,
  managerLabelValue,
  reconcileChildren,
  type ChildrenResult,
  type ReconcileChildrenOptions,
} from "./children.ts";
export { BUILTIN_READINESS, isChildReady, readinessRule, type ReadinessRule } from "./readiness.ts";
