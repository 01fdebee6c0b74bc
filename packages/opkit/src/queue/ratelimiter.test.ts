import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock } from "../clock/index.ts";
import {
  ExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  TokenBucketRateLimiter,
  defaultControllerRateLimiter,
} from "./ratelimiter.ts";
import type { RateLimiter } from "./ratelimiter.ts";

test("exponential backoff doubles per failure from 5 ms and caps at 1000 s", () => {
  const rl = new ExponentialFailureRateLimiter<string>();
  const delays = Array.from({ length: 20 }, () => rl.when("ns/a"));
  assert.deepEqual(delays.slice(0, 6), [5, 10, 20, 40, 80, 160]);
  // 5·2^17 = 655 360 ms is the last step below the cap.
  assert.equal(delays[17], 655_360);
  assert.equal(delays[18], 1_000_000);
  assert.equal(delays[19], 1_000_000);
  assert.equal(rl.retries("ns/a"), 20);
});

test("exponential backoff is per key, and forget resets only that key", () => {
  const rl = new ExponentialFailureRateLimiter<string>({ baseDelayMs: 1, maxDelayMs: 100 });
  rl.when("a");
  rl.when("a");
  assert.equal(rl.when("a"), 4);
  assert.equal(rl.when("b"), 1);
  rl.forget("a");
  assert.equal(rl.retries("a"), 0);
  assert.equal(rl.when("a"), 1);
  assert.equal(rl.when("b"), 2);
});

test("exponential backoff stays finite and capped after thousands of failures", () => {
  const rl = new ExponentialFailureRateLimiter<string>({ baseDelayMs: 7, maxDelayMs: 123 });
  let last = 0;
  for (let i = 0; i < 3000; i++) last = rl.when("k");
  assert.equal(last, 123);
  const zero = new ExponentialFailureRateLimiter<string>({ baseDelayMs: 0 });
  for (let i = 0; i < 2000; i++) assert.equal(zero.when("k"), 0);
  assert.throws(() => new ExponentialFailureRateLimiter({ baseDelayMs: -1 }), RangeError);
  assert.throws(() => new ExponentialFailureRateLimiter({ maxDelayMs: Number.NaN }), RangeError);
});

test("exponential backoff is monotone, bounded and never NaN (property)", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 1000 }),
      fc.integer({ min: 0, max: 10_000_000 }),
      fc.integer({ min: 1, max: 1200 }),
      (base, max, n) => {
        const rl = new ExponentialFailureRateLimiter<string>({ baseDelayMs: base, maxDelayMs: max });
        let prev = -1;
        for (let i = 0; i < n; i++) {
          const d = rl.when("k");
          assert.ok(Number.isFinite(d) && d >= 0 && d <= Math.max(max, 0));
          assert.ok(d >= prev);
          prev = d;
        }
      },
    ),
    { numRuns: 100 },
  );
});

test("token bucket allows a burst, then spaces calls 1/qps apart and refills with time", () => {
  const clock = new FakeClock();
  const rl = new TokenBucketRateLimiter<string>({ qps: 10, burst: 2, clock });
  assert.deepEqual(
    ["a", "b", "c", "d"].map((k) => rl.when(k)),
    [0, 0, 100, 200],
  );
  // Reservations so far reach t=200; one more at t=100 is due at t=300.
  clock.advance(100);
  assert.equal(rl.when("e"), 200);
  clock.advance(10_000);
  assert.deepEqual([rl.when("f"), rl.when("g"), rl.when("h")], [0, 0, 100]);
  assert.equal(rl.retries("f"), 0);
  assert.throws(() => new TokenBucketRateLimiter({ qps: 0, burst: 1 }), RangeError);
  assert.throws(() => new TokenBucketRateLimiter({ qps: 1, burst: 0 }), RangeError);
});

test("max-of takes the longest delay and lets every limiter record the failure", () => {
  const clock = new FakeClock();
  const backoff = new ExponentialFailureRateLimiter<string>({ baseDelayMs: 1 });
  const bucket = new TokenBucketRateLimiter<string>({ qps: 100, burst: 1, clock });
  const rl: RateLimiter<string> = new MaxOfRateLimiter(backoff, bucket);
  assert.equal(rl.when("a"), 1); // bucket 0, backoff 1
  assert.equal(rl.when("b"), 10); // bucket 10, backoff 1
  assert.equal(rl.when("a"), 20); // bucket 20, backoff 2
  assert.equal(rl.retries("a"), 2);
  rl.forget("a");
  assert.equal(backoff.retries("a"), 0);
  assert.equal(new MaxOfRateLimiter<string>().when("x"), 0);
});

test("the default controller limiter is exponential only unless a bucket is asked for", () => {
  const rl = defaultControllerRateLimiter<string>();
  // A bucket would throttle the 11th distinct key; plain backoff gives every first failure 5 ms.
  for (let i = 0; i < 200; i++) assert.equal(rl.when(`k${i}`), 5);
  const clock = new FakeClock();
  const withBucket = defaultControllerRateLimiter<string>({ bucket: { qps: 10, burst: 1 }, clock });
  assert.equal(withBucket.when("a"), 5);
  assert.equal(withBucket.when("b"), 100);
});
