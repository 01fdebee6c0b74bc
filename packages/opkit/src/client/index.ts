/**
 * client — talking to the Kubernetes API: kubeconfig loading and authentication (delegated to
 * @kubernetes/client-node), one HTTP pool per cluster, discovery-based REST mapping, typed CRUD,
 * patch, server-side apply, subresources, watch streams and typed errors.
 *
 * It knows nothing about caches, queues or controllers.
 */
export * from "./errors.ts";
export * from "./types.ts";
export { KubeClient } from "./client.ts";
export type * from "./client.ts";
export { RestMapper, resourcePath, type ResourceMapping } from "./mapping.ts";
export { Transport, retryDelayMs, type TransportOptions, type RequestEvent } from "./transport.ts";
export * from "./labels.ts";
export * from "./builtins.ts";
export { kindScope, knownKind, registerKind, type KindScope, type KnownKind } from "./scopes.ts";
