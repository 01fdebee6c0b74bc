import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock, sleep } from "./index.ts";

test("sleep waits on the given clock: fake time decides, not real time", async () => {
  const clock = new FakeClock();
  let done = false;
  const p = sleep(clock, 1_000).then(() => (done = true));
  clock.advance(999);
  await Promise.resolve();
  assert.equal(done, false);
  clock.advance(1);
  await p;
  assert.equal(done, true);
  assert.equal(clock.pendingTimers(), 0);
});

test("sleep rejects with the signal's reason and leaves no timer behind", async () => {
  const clock = new FakeClock();
  const ac = new AbortController();
  const p = sleep(clock, 60_000, ac.signal);
  ac.abort(new Error("stopping"));
  await assert.rejects(p, /stopping/);
  assert.equal(clock.pendingTimers(), 0);
  await assert.rejects(sleep(clock, 1, ac.signal), /stopping/, "already aborted");
  assert.equal(clock.pendingTimers(), 0);
});
