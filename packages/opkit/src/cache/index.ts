/**
 * cache — informers and the shared cache: list + watch with client-go's guarantees (reflector.ts is the
 * state machine), an indexed store swapped atomically on relist, event handlers, and one shared informer
 * per kind and scope.
 *
 * It uses the client; it knows nothing about queues, controllers or the manager.
 */
export { Cache, type CacheOptions, type KindCacheOptions } from "./cache.ts";
export {
  Informer,
  SyncTimeoutError,
  diffRelist,
  type RelistChange,
  type EventHandler,
  type InformerHealth,
  type InformerOptions,
} from "./informer.ts";
export {
  Reflector,
  stripManagedFields,
  watchTimeoutSeconds,
  type ReflectorOptions,
  type ReflectorState,
} from "./reflector.ts";
export {
  Store,
  NAMESPACE_INDEX,
  OWNER_INDEX,
  UnknownIndexError,
  type IndexFunc,
  type StoreListOptions,
} from "./store.ts";
export { Backoff, type BackoffOptions } from "./backoff.ts";
