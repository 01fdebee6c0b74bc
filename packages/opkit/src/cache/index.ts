/**
 * cache — informers and the shared cache: list + watch with client-go's guarantees (reflector.ts is the
 * state machine), an indexed store of frozen objects swapped atomically on relist, event handlers, and
 * one shared informer per kind and scope.
 *
 * It uses the client; it knows nothing about queues, controllers or the manager.
 */

export {
  Cache,
  CacheConfigError,
  NamespaceNotCachedError,
  NamespaceRequiredError,
  DEFAULT_RESYNC_PERIOD_MS,
  cacheKind,
  type CacheOptions,
  type KindCacheEntry,
  type KindCacheOptions,
} from "./cache.ts";
export {
  CacheNotSyncedError,
  SyncTimeoutError,
  type EventHandler,
  type InformerFilter,
  type InformerHealth,
  type SharedInformer,
} from "./informer.ts";
export { DEFAULT_PROGRESS_DEADLINE_MS, type ListWatcher, type ReflectorState } from "./reflector.ts";
export {
  NAMESPACE_INDEX,
  OWNER_INDEX,
  UnknownIndexError,
  type IndexFunc,
  type StoreListOptions,
} from "./store.ts";
