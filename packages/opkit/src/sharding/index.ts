/**
 * sharding — one operator's work split over replicas by a fixed number of shards: the FNV-1a key space
 * the API server's sharded list/watch (KEP-5866) uses (hash.ts), shard ownership through Leases with
 * fair share and drain-before-release handover (coordinator.ts), and the routing of informer filters
 * and reconcile keys to the shards held (router.ts).
 *
 * It uses the client, the cache, the clock and logging; it knows nothing of controllers or the manager,
 * which wires it in when `shards` is set.
 */

export { ShardSpace, fnv1a64, hex64, shardRanges, type ShardRange } from "./hash.ts";
export {
  SHARD_GROUP_LABEL,
  SHARD_ROLE_LABEL,
  ShardConfigError,
  ShardCoordinator,
  fairShare,
  type ShardCallbacks,
  type ShardCoordinatorOptions,
  type ShardLeaseClient,
  type ShardMetricsSink,
} from "./coordinator.ts";
export {
  ShardRouter,
  detectServerSharding,
  shardFieldValue,
  shardSelector,
  type ShardAdmission,
  type ShardKeyField,
  type ShardRouterOptions,
  type ShardedKind,
} from "./router.ts";
