/**
 * client — talking to the Kubernetes API: kubeconfig and in-cluster configuration (parsed here; only
 * auth-provider plugins load @kubernetes/client-node, on demand), credentials that follow rotation,
 * one HTTP pool per cluster (direct or through a proxy), discovery-based REST mapping, typed CRUD,
 * patch, server-side apply, subresources, watch streams, AbortSignals, safe retries and typed errors.
 *
 * It knows nothing about caches, queues or controllers.
 */
export * from "./errors.ts";
export * from "./types.ts";
export { KubeClient } from "./client.ts";
export type * from "./client.ts";
export {
  loadClusterConfig,
  inClusterConfig,
  type ClusterConfig,
  type LoadClusterConfigOptions,
  type Material,
  type ExecConfig,
  type AuthProviderConfig,
  type ImpersonationConfig,
} from "./config.ts";
export { RestMapper, resourcePath, type ResourceMapping } from "./mapping.ts";
export {
  Transport,
  retryDelayMs,
  type TransportOptions,
  type RequestEvent,
  type ServerWarning,
} from "./transport.ts";
export * from "./labels.ts";
export * from "./builtins.ts";
