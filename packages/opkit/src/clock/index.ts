/**
 * clock — time as an injected dependency. The queue, rate limiters, informer backoff and leader election
 * read the time and arm timers only through a Clock, so tests drive them with a FakeClock instead of
 * sleeping. The small time mechanisms every layer needs live here once, on that clock: racing work
 * against a timer (`withTimeout`) and a token bucket. It depends on nothing.
 */
export { FakeClock, realClock, sleep } from "./clock.ts";
export type { Clock, TimerHandle } from "./clock.ts";
export { withTimeout } from "./timeout.ts";
export type { Timed, WithTimeoutOptions } from "./timeout.ts";
export { TokenBucket } from "./tokenbucket.ts";
export type { TokenBucketRate } from "./tokenbucket.ts";
