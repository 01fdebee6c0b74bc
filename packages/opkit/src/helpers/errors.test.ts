import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ConflictError } from "../client/errors.ts";
import { FakeClock } from "../clock/index.ts";
import { RetryTracker, reasonForError } from "./errors.ts";

const HOUR = 60 * 60_000;

describe("RetryTracker", () => {
  it("doubles from 1 s per object and caps at 6 hours", () => {
    const r = new RetryTracker({ clock: new FakeClock() });
    const delays = Array.from({ length: 18 }, () => r.next("a"));
    assert.deepEqual(delays.slice(0, 5), [1000, 2000, 4000, 8000, 16000]);
    assert.equal(delays[14], 16_384_000);
    assert.equal(delays[15], 6 * HOUR);
    assert.equal(delays[17], 6 * HOUR);
    assert.equal(r.attempts("a"), 18);
    assert.equal(r.next("b"), 1000, "objects are tracked separately");
  });

  it("starts over after forget (a success)", () => {
    const r = new RetryTracker({ clock: new FakeClock() });
    r.next("a");
    r.next("a");
    r.forget("a");
    assert.equal(r.attempts("a"), 0);
    assert.equal(r.next("a"), 1000);
  });

  it("keeps growing while failures follow the schedule, resets after a long quiet time, and drops stale entries", () => {
    const clock = new FakeClock();
    const r = new RetryTracker({ clock });
    let delay = 0;
    for (let i = 0; i < 20; i++) {
      delay = r.next("a");
      clock.advance(delay);
    }
    assert.equal(delay, 6 * HOUR, "capped retries 6 h apart never reset");
    r.next("stale");
    clock.advance(12 * HOUR + 1);
    assert.equal(r.attempts("a"), 0);
    assert.equal(r.next("a"), 1000);
    assert.equal(r.size, 1, "the stale entry was swept");
  });

  it("property: delays never decrease between resets and stay within [base, cap]", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 10 * HOUR }), { maxLength: 60 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 5000, max: 24 * HOUR }),
        (gaps, baseMs, maxMs) => {
          const clock = new FakeClock();
          const r = new RetryTracker({ clock, baseMs, maxMs, resetAfterMs: 2 * maxMs });
          let last = 0;
          for (const gap of gaps) {
            clock.advance(gap);
            const d = r.next("x");
            assert.ok(d >= Math.min(baseMs, maxMs) && d <= maxMs, `delay ${d}`);
            if (gap <= 2 * maxMs) assert.ok(d >= last, `delay shrank from ${last} to ${d}`);
            else assert.equal(d, baseMs);
            last = d;
          }
        },
      ),
    );
  });
});

describe("reasonForError", () => {
  class ValidationError extends Error {}
  it("uses the error class name when it is a valid condition reason", () => {
    assert.equal(reasonForError(new ConflictError(409, {}, { method: "PUT", path: "/x" })), "ConflictError");
    assert.equal(reasonForError(new ValidationError("bad")), "ValidationError");
    assert.equal(reasonForError(new TypeError("x")), "TypeError");
  });
  it("falls back to ReconcileError", () => {
    assert.equal(reasonForError(new Error("plain")), "ReconcileError");
    assert.equal(reasonForError("a string"), "ReconcileError");
    const odd = new Error("x");
    odd.name = "not a reason!";
    assert.equal(reasonForError(odd), "ReconcileError");
  });
});
