/**
 * client — talking to the Kubernetes API: kubeconfig loading and authentication (delegated to
 * @kubernetes/client-node), one HTTP pool per cluster, discovery-based REST mapping, typed CRUD,
 * patch, server-side apply, subresources, watch streams and typed errors.
 *
 * It knows nothing about caches, queues or controllers.
 */

export {
  KubeClient,
  type ApplyOptions,
  type ClientOptions,
  type DeleteAllOfOptions,
  type DeleteOptions,
  type ListOptions,
  type NamespaceOption,
  type PatchOptions,
  type PatchType,
  type UpdateOptions,
  type WatchOptions,
  type WriteOptions,
} from "./client.ts";
export type { TransportOptions, RequestEvent } from "./transport.ts";
export type { ResourceMapping } from "./mapping.ts";
export {
  AlreadyExistsError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  ForbiddenError,
  GoneError,
  InvalidError,
  KubeApiError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnauthorizedError,
  UnknownKindError,
  type ApiStatus,
  type RequestInfo,
  type StatusCause,
} from "./errors.ts";
export {
  deepCopy,
  kindRef,
  objectKey,
  type DeepMutable,
  type DeepReadonly,
  type KindRef,
  type KubeList,
  type KubeObject,
  type ListMeta,
  type ManagedFieldsEntry,
  type ObjectMeta,
  type OwnerReference,
  type ReadonlyKubeObject,
  type WatchEvent,
  type WatchEventType,
} from "./types.ts";
export { groupOf, kindScope, knownKind, registerKind, type KindScope, type KnownKind } from "./scopes.ts";
export {
  LabelSelectorError,
  formatLabelSelector,
  labelMatcher,
  parseLabelSelector,
  type LabelMatcher,
  type LabelSelector,
  type LabelSelectorRequirement,
} from "./labels.ts";
export * from "./builtins.ts";
