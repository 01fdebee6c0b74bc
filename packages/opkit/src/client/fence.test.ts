/**
 * The write fence on a FakeClock: open only until its deadline, closed for good by `close`, and the
 * writes it let through cut the instant it closes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock, type Clock } from "../clock/index.ts";
import { FencedWriteError, WriteFence } from "./fence.ts";

const req = { method: "PATCH", path: "/api/v1/namespaces/ns/configmaps/c" };

test("a new fence refuses writes until it is first opened", () => {
  const fence = new WriteFence({ clock: new FakeClock(), name: "lease ns/l" });
  assert.equal(fence.isOpen(), false);
  assert.throws(
    () => fence.admit(req),
    (err: unknown) =>
      err instanceof FencedWriteError &&
      !err.inFlight &&
      err.request === req &&
      /not sent: writes are fenced: lease ns\/l was never renewed/.test(err.message),
  );
});

test("writes pass until the deadline on the clock and fail from that instant, before any timer runs", () => {
  const clock = new FakeClock(1_000);
  const fence = new WriteFence({ clock });
  fence.openUntil(11_000);
  assert.equal(fence.admit(req).aborted, false);
  // A process resumed after a pause: time moved, but the fence's timer has not run yet.
  let now = 1_000;
  const paused: Clock = { now: () => now, setTimeout: () => ({}), clearTimeout: () => undefined };
  const f2 = new WriteFence({ clock: paused });
  f2.openUntil(11_000);
  const inflight = f2.admit(req);
  now = 20_000;
  assert.throws(() => f2.admit(req), FencedWriteError);
  assert.equal(inflight.aborted, true, "the check that found it closed also cut what was in flight");

  clock.advance(9_999);
  assert.equal(fence.isOpen(), true);
  clock.advance(1);
  assert.equal(fence.isOpen(), false);
  assert.throws(() => fence.admit(req), /not renewed in time/);
});

test("the writes in flight are cut when the fence closes by time, and the cut names them in flight", () => {
  const clock = new FakeClock();
  const fence = new WriteFence({ clock });
  fence.openUntil(5_000);
  const signal = fence.admit(req);
  clock.advance(4_999);
  assert.equal(signal.aborted, false);
  clock.advance(1);
  assert.equal(signal.aborted, true);
  const cut = fence.cut(req, signal.reason);
  assert.ok(cut instanceof FencedWriteError && cut.inFlight, "a cut write is reported in flight");
  assert.equal(fence.cut(req, new Error("the caller's own abort")), undefined);
});

test("a renewal moves the deadline forward, never back, and in-flight writes live on", () => {
  const clock = new FakeClock();
  const fence = new WriteFence({ clock });
  fence.openUntil(5_000);
  const signal = fence.admit(req);
  clock.advance(3_000);
  fence.openUntil(8_000);
  fence.openUntil(4_000); // a late answer to an older renewal
  clock.advance(4_000);
  assert.equal(fence.isOpen(), true);
  assert.equal(signal.aborted, false);
  clock.advance(1_000);
  assert.equal(signal.aborted, true);
  assert.equal(clock.pendingTimers(), 0, "no timer left behind");
});

test("reopened after a gap, the fence cuts only what was sent in the new period when it closes again", () => {
  const clock = new FakeClock();
  const fence = new WriteFence({ clock });
  fence.openUntil(1_000);
  const first = fence.admit(req);
  clock.advance(2_000);
  assert.equal(first.aborted, true);
  fence.openUntil(5_000);
  const second = fence.admit(req);
  assert.equal(second.aborted, false, "a reopened fence hands out a fresh signal");
  clock.advance(3_000);
  assert.equal(second.aborted, true);
});

test("close shuts the fence for good: writes in flight are cut and a later renewal does not reopen it", () => {
  const clock = new FakeClock();
  const fence = new WriteFence({ clock });
  fence.openUntil(10_000);
  const signal = fence.admit(req);
  fence.close("leadership lost: lease is held by b");
  assert.equal(signal.aborted, true);
  assert.ok(fence.cut(req, signal.reason)?.message.includes("leadership lost: lease is held by b"));
  fence.openUntil(20_000);
  assert.equal(fence.isOpen(), false);
  assert.throws(() => fence.admit(req), /closed: leadership lost/);
  assert.equal(clock.pendingTimers(), 0);
});
