import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock, withTimeout } from "./index.ts";

test("withTimeout resolves with the work's value and clears its timer", async () => {
  const clock = new FakeClock();
  const result = await withTimeout(clock, 1_000, async () => 42);
  assert.deepEqual(result, { timedOut: false, value: 42 });
  assert.equal(clock.pendingTimers(), 0);
});

test("withTimeout times out on the clock and aborts the work's signal with the given reason", async () => {
  const clock = new FakeClock();
  let seen: AbortSignal | undefined;
  const p = withTimeout(clock, 500, (signal) => ((seen = signal), new Promise<never>(() => {})), {
    reason: () => new Error("deadline passed"),
  });
  await Promise.resolve();
  clock.advance(499);
  assert.equal(seen?.aborted, false);
  clock.advance(1);
  assert.deepEqual(await p, { timedOut: true });
  assert.equal((seen?.reason as Error).message, "deadline passed");
});

test("withTimeout's default abort reason names the duration", async () => {
  const clock = new FakeClock();
  let seen: AbortSignal | undefined;
  const p = withTimeout(clock, 250, (signal) => ((seen = signal), new Promise<never>(() => {})));
  await Promise.resolve();
  clock.advance(250);
  await p;
  assert.equal((seen?.reason as Error).message, "timed out after 250 ms");
});

test("withTimeout rejects with the work's error, thrown or rejected, and leaves no timer", async () => {
  const clock = new FakeClock();
  await assert.rejects(
    withTimeout(clock, 1_000, () => {
      throw new Error("sync boom");
    }),
    /sync boom/,
  );
  await assert.rejects(
    withTimeout(clock, 1_000, () => Promise.reject(new Error("async boom"))),
    /async boom/,
  );
  assert.equal(clock.pendingTimers(), 0);
});

test("withTimeout stops waiting when the caller's signal aborts, with its reason as an Error", async () => {
  const clock = new FakeClock();
  const ac = new AbortController();
  const p = withTimeout(clock, 1_000, () => new Promise<never>(() => {}), { signal: ac.signal });
  ac.abort("shutting down");
  await assert.rejects(p, (err: Error) => err instanceof Error && err.message === "shutting down");
  assert.equal(clock.pendingTimers(), 0);
});
