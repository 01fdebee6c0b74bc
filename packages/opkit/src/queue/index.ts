/**
 * The workqueue: where controllers park the keys ("namespace/name") of objects that need a reconcile.
 * It coalesces repeated adds, never gives one key to two workers, delays and backs off retries, and
 * orders work by priority.
 *
 * It must not know about Kubernetes, HTTP or a metrics library: keys are opaque strings, time comes
 * from an injected Clock, and metrics leave through plain callbacks. That keeps it testable with a fake
 * clock and reusable by anything that needs per-key serialized work.
 */

export {
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_MAX_DELAY_MS,
  ExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
  defaultControllerRateLimiter,
  type DefaultRateLimiterOptions,
  type ExponentialBackoffOptions,
  type RateLimiter,
  type TokenBucketOptions,
} from "./ratelimiter.ts";
export {
  PRIORITY_LOW,
  PRIORITY_NORMAL,
  WorkQueue,
  type AddOptions,
  type QueueItem,
  type QueueMetrics,
  type WorkQueueOptions,
} from "./workqueue.ts";
