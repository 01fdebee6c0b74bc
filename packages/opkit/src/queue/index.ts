/**
 * The workqueue: where controllers park the keys ("namespace/name") of objects that need a reconcile.
 * It coalesces repeated adds, never gives one key to two workers, delays and backs off retries, and
 * orders work by priority.
 *
 * It must not know about Kubernetes, HTTP or a metrics library: keys are opaque strings, time comes
 * from an injected Clock, and metrics leave through plain callbacks. That keeps it testable with a fake
 * clock and reusable by anything that needs per-key serialized work.
 */
export { FakeClock, realClock } from "../clock/index.ts";
export type { Clock, TimerHandle } from "../clock/index.ts";
export {
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_MAX_DELAY_MS,
  ExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
  defaultControllerRateLimiter,
} from "./ratelimiter.ts";
export type {
  DefaultRateLimiterOptions,
  ExponentialBackoffOptions,
  RateLimiter,
  TokenBucketOptions,
} from "./ratelimiter.ts";
export { PRIORITY_LOW, PRIORITY_NORMAL, WorkQueue } from "./workqueue.ts";
export type { AddOptions, QueueItem, QueueMetrics, WorkQueueOptions } from "./workqueue.ts";
