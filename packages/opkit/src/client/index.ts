/**
 * client — talking to the Kubernetes API: kubeconfig and in-cluster configuration (parsed here; only
 * auth-provider plugins load @kubernetes/client-node, on demand), credentials that follow rotation,
 * one HTTP pool per cluster (direct or through a proxy), discovery-based REST mapping, typed CRUD,
 * lists read as protobuf for the built-in kinds (decoded to the JSON form),
 * patch, server-side apply, subresources, watch streams, AbortSignals, safe retries and typed errors.
 *
 * It knows nothing about caches, queues or controllers.
 */

export {
  KubeClient,
  type ApplyOptions,
  type CallOptions,
  type ClientDefaults,
  type ClientOptions,
  type GetOptions,
  type LoadOptions,
  type RawOptions,
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
export type { TransportOptions, RequestEvent, ServerWarning } from "./transport.ts";
export { FencedWriteError, WriteFence, type WriteFenceOptions } from "./fence.ts";
export { CrdNotReadyError, installCrds, type InstallCrdsOptions } from "./crds.ts";
export {
  loadClusterConfig,
  inClusterConfig,
  type AuthProviderConfig,
  type ClusterConfig,
  type ExecConfig,
  type ImpersonationConfig,
  type LoadClusterConfigOptions,
  type Material,
} from "./config.ts";
export type { ResourceMapping } from "./mapping.ts";
export { ProtobufDecodeError } from "./protobuf/decode.ts";
export {
  AlreadyExistsError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  CredentialsError,
  ForbiddenError,
  GoneError,
  InvalidError,
  KubeApiError,
  KubeconfigError,
  NotFoundError,
  RequestAbortedError,
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
  groupOf,
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
export { kindScope, knownKind, type KindScope, type KnownKind } from "./scopes.ts";
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
