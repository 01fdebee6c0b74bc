import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock, realClock } from "../clock/index.ts";
import { BinaryHeap } from "./heap.ts";

test("FakeClock fires due timers in time order and shows each its due time", () => {
  const clock = new FakeClock(1000);
  const fired: string[] = [];
  clock.setTimeout(() => fired.push(`b@${clock.now()}`), 20);
  clock.setTimeout(() => fired.push(`a@${clock.now()}`), 10);
  clock.setTimeout(() => fired.push(`c@${clock.now()}`), 20);
  clock.setTimeout(() => fired.push("late"), 31);
  clock.advance(30);
  assert.deepEqual(fired, ["a@1010", "b@1020", "c@1020"]);
  assert.equal(clock.now(), 1030);
  assert.equal(clock.pendingTimers(), 1);
  clock.advance(1);
  assert.deepEqual(fired.at(-1), "late");
});

test("FakeClock fires timers armed by callbacks when they fall due within the same advance", () => {
  const clock = new FakeClock();
  const fired: number[] = [];
  const chain = (): void => {
    fired.push(clock.now());
    if (fired.length < 10) clock.setTimeout(chain, 5);
  };
  clock.setTimeout(chain, 5);
  clock.advance(22);
  assert.deepEqual(fired, [5, 10, 15, 20]);
  clock.advance(0);
  assert.deepEqual(fired, [5, 10, 15, 20]);
  clock.advance(3);
  assert.deepEqual(fired, [5, 10, 15, 20, 25]);
});

test("FakeClock clearTimeout cancels, and advance(0) fires zero-delay timers", () => {
  const clock = new FakeClock();
  let n = 0;
  const h = clock.setTimeout(() => n++, 5);
  clock.setTimeout(() => (n += 10), 0);
  clock.clearTimeout(h);
  clock.advance(0);
  assert.equal(n, 10);
  clock.advance(100);
  assert.equal(n, 10);
  assert.equal(clock.pendingTimers(), 0);
  assert.throws(() => clock.advance(-1), RangeError);
});

test("realClock arms and clears real timers", async () => {
  const start = realClock.now();
  await new Promise<void>((resolve) => realClock.setTimeout(resolve, 5));
  assert.ok(realClock.now() - start >= 4);
  let fired = false;
  const h = realClock.setTimeout(() => (fired = true), 1);
  realClock.clearTimeout(h);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(fired, false);
});

test("BinaryHeap pops in sorted order, also after rebuild", () => {
  fc.assert(
    fc.property(fc.array(fc.integer({ min: -50, max: 50 })), fc.array(fc.integer()), (xs, ys) => {
      const heap = new BinaryHeap<number>((a, b) => a < b);
      for (const x of xs) heap.push(x);
      const out: number[] = [];
      for (let i = 0; i < xs.length >> 1; i++) out.push(heap.pop() as number);
      heap.rebuild([...drain(heap), ...ys]);
      const rest = drain(heap);
      assert.deepEqual(out, [...xs].sort((a, b) => a - b).slice(0, xs.length >> 1));
      assert.deepEqual(
        rest,
        [...[...xs].sort((a, b) => a - b).slice(xs.length >> 1), ...ys].sort((a, b) => a - b),
      );
      assert.equal(heap.pop(), undefined);
    }),
    { numRuns: 200 },
  );
});

function drain(heap: BinaryHeap<number>): number[] {
  const out: number[] = [];
  for (let x = heap.pop(); x !== undefined; x = heap.pop()) out.push(x);
  return out;
}
