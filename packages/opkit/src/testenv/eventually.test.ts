import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as tick } from "node:timers/promises";
import { FakeClock } from "../clock/index.ts";
import { WaitTimeoutError, eventually, sleep } from "./eventually.ts";

describe("eventually and sleep (injected clock)", () => {
  it("sleep resolves only when the clock has moved on", async () => {
    const clock = new FakeClock();
    let done = false;
    void sleep(100, clock).then(() => (done = true));
    clock.advance(99);
    await tick();
    assert.equal(done, false);
    clock.advance(1);
    await tick();
    assert.equal(done, true);
  });

  it("returns the first truthy value and treats throws as not yet", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const result = eventually(
      "the third call",
      () => {
        calls++;
        if (calls === 1) throw new Error("not yet");
        return calls === 3 ? "ok" : false;
      },
      1_000,
      100,
      clock,
    );
    for (let i = 0; i < 5 && calls < 3; i++) {
      await tick();
      clock.advance(100);
    }
    assert.equal(await result, "ok");
    assert.equal(calls, 3);
  });

  it("gives up after the timeout with what it waited for and the last error", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const result = eventually(
      "a condition that never holds",
      () => {
        calls++;
        throw new Error("still broken");
      },
      1_000,
      250,
      clock,
    );
    const outcome = result.then(
      () => undefined,
      (err: unknown) => err,
    );
    for (let i = 0; i < 10; i++) {
      await tick();
      clock.advance(250);
    }
    const err = await outcome;
    assert.ok(err instanceof WaitTimeoutError);
    assert.match(
      err.message,
      /timed out after 1000 ms waiting for a condition that never holds: still broken/,
    );
    assert.equal(calls, 6, "polls at 0, 250, …, 1250 ms: once past the deadline, then gives up");
  });
});
