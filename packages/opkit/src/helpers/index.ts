/**
 * helpers — the small pieces every reconcile needs, done right once: status conditions, controller
 * owner references with the garbage collector's rules, finalizers, status writes that skip no-ops,
 * deduplicated and rate-limited Events, ManageError/ManageSuccess with growing retry delays, and
 * server-side apply of owned objects.
 *
 * It uses the client and the clock. It must not know about the cache, the workqueue, controllers or
 * the manager: every helper takes what it needs as arguments, so it works inside any reconcile.
 */

export {
  formatConditionTime,
  getCondition,
  isConditionTrue,
  removeCondition,
  setCondition,
  type Condition,
  type ConditionLike,
  type ConditionStatus,
  type ConditionsResult,
  type NewCondition,
} from "./conditions.ts";
export {
  AlreadyOwnedError,
  OwnerReferenceError,
  controllerReferenceTo,
  getControllerOf,
  isControlledBy,
  setControllerReference,
  setControllerReferenceAsync,
  type ControllerReferenceOptions,
  type OwnerScopes,
} from "./ownerrefs.ts";
export {
  ensureFinalizer,
  handleFinalizer,
  hasFinalizer,
  isBeingDeleted,
  removeFinalizer,
  type FinalizerOutcome,
} from "./finalizers.ts";
export { updateStatusIfChanged, type StatusOf, type StatusWriteOptions } from "./status.ts";
export {
  RetryTracker,
  manageError,
  manageSuccess,
  reasonForError,
  type ConditionedObject,
  type ManageContext,
  type ManageErrorOptions,
  type ManageSuccessOptions,
  type RetryTrackerOptions,
} from "./errors.ts";
export {
  MutationIdentityError,
  applyOwned,
  createOrUpdate,
  type ApplyOwnedOptions,
  type OperationResult,
} from "./apply.ts";
export { jsonEqual, mergePatchDiff, type JsonValue } from "./json.ts";
