import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock, TokenBucket } from "./index.ts";

test("tryTake allows the burst, then one token per interval, and never goes into debt", () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ intervalMs: 1_000 }, 2, clock);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  assert.equal(bucket.waitMs(), 1_000);
  clock.advance(999);
  assert.equal(bucket.tryTake(), false);
  clock.advance(1);
  assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
});

test("the bucket refills to its burst and no further", () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 10 }, 3, clock);
  for (let i = 0; i < 3; i++) assert.equal(bucket.tryTake(), true);
  clock.advance(60_000);
  for (let i = 0; i < 3; i++) assert.equal(bucket.tryTake(), true);
  assert.equal(bucket.tryTake(), false);
  assert.equal(bucket.waitMs(), 100);
});

test("reserve goes into debt and spaces successive calls 1/qps apart", () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket({ qps: 10 }, 1, clock);
  assert.equal(bucket.reserve(), 0);
  assert.equal(bucket.reserve(), 100);
  assert.equal(bucket.reserve(), 200);
  clock.advance(200);
  assert.equal(bucket.reserve(), 100);
});
