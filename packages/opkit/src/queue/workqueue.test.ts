import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../clock/index.ts";
import { ExponentialFailureRateLimiter } from "./ratelimiter.ts";
import { PRIORITY_LOW, PRIORITY_NORMAL, WorkQueue } from "./workqueue.ts";
import type { QueueMetrics } from "./workqueue.ts";

// A broken queue tends to leave a get() waiting forever; fail instead of hanging the run.
const LIMIT = { timeout: 10_000 };

type Key = string;

function setup(metrics?: QueueMetrics<Key>): { clock: FakeClock; q: WorkQueue<Key> } {
  const clock = new FakeClock();
  return { clock, q: new WorkQueue<Key>({ clock, metrics }) };
}

/** Resolves to "pending" if the promise has not settled after the current microtasks. */
async function peek<T>(p: Promise<T>): Promise<T | "pending"> {
  return Promise.race([p, new Promise<"pending">((r) => setImmediate(() => r("pending")))]);
}

function drainKeys(q: WorkQueue<Key>): Key[] {
  const out: Key[] = [];
  for (let item = q.tryGet(); item !== undefined; item = q.tryGet()) {
    out.push(item.key);
    q.done(item.key);
  }
  return out;
}

test("adding a pending key again does not queue it twice", LIMIT, async () => {
  const { q } = setup();
  q.add("ns/a");
  q.add("ns/b");
  q.add("ns/a");
  assert.equal(q.len(), 2);
  assert.deepEqual(await q.get(), { key: "ns/a", priority: PRIORITY_NORMAL });
  assert.equal((await q.get())?.key, "ns/b");
  assert.equal(q.len(), 0);
  assert.equal(q.processingCount(), 2);
});

test("re-adding a key during processing requeues it once, and only after done", LIMIT, async () => {
  const { q } = setup();
  q.add("ns/a");
  const first = await q.get();
  assert.equal(first?.key, "ns/a");
  q.add("ns/a");
  q.add("ns/a");
  // Not handed to a second worker while the first still holds it.
  assert.equal(q.len(), 0);
  const second = q.get();
  assert.equal(await peek(second), "pending");
  q.done("ns/a");
  assert.equal((await second)?.key, "ns/a");
  q.done("ns/a");
  assert.equal(q.len(), 0);
  assert.equal(q.tryGet(), undefined);
});

test("done of a key that is not processing is ignored", LIMIT, () => {
  const { q } = setup();
  q.add("ns/a");
  q.done("ns/a");
  q.done("ns/zzz");
  assert.equal(q.len(), 1);
  assert.deepEqual(drainKeys(q), ["ns/a"]);
});

test("a waiting getter is woken by add, in getter order", LIMIT, async () => {
  const { q } = setup();
  const g1 = q.get();
  const g2 = q.get();
  assert.equal(await peek(g1), "pending");
  q.add("ns/a");
  // The key is marked processing at hand-off, before the getter's continuation runs.
  assert.equal(q.processingCount(), 1);
  q.add("ns/a");
  assert.equal(q.len(), 0);
  q.add("ns/b");
  assert.equal((await g1)?.key, "ns/a");
  assert.equal((await g2)?.key, "ns/b");
});

test("higher priority first, FIFO among equals, raised priority keeps its place", LIMIT, () => {
  const { q } = setup();
  q.add("low1", { priority: PRIORITY_LOW });
  q.add("n1");
  q.add("low2", { priority: PRIORITY_LOW });
  q.add("high", { priority: 10 });
  q.add("n2");
  q.add("low3", { priority: PRIORITY_LOW });
  // low2 raised to normal: it joins the normal keys, ahead of n2 which came later; lowering is ignored.
  q.add("low2", { priority: PRIORITY_NORMAL });
  q.add("n1", { priority: PRIORITY_LOW });
  assert.equal(q.len(), 6);
  assert.deepEqual(drainKeys(q), ["high", "n1", "low2", "n2", "low1", "low3"]);
});

test("priority raised while processing applies to the requeue", LIMIT, async () => {
  const { q } = setup();
  q.add("a", { priority: PRIORITY_LOW });
  const item = await q.get();
  assert.equal(item?.priority, PRIORITY_LOW);
  q.add("a", { priority: PRIORITY_LOW });
  q.add("a", { priority: 5 });
  q.add("b");
  q.done("a");
  assert.deepEqual(q.tryGet(), { key: "a", priority: 5 });
  assert.throws(() => q.add("c", { priority: Number.NaN }), RangeError);
});

test("addAfter waits for the delay, and the earliest ready time wins", LIMIT, () => {
  const { clock, q } = setup();
  q.addAfter("a", 100);
  q.addAfter("a", 50);
  q.addAfter("a", 500);
  q.addAfter("b", 70);
  assert.equal(q.waitingCount(), 2);
  clock.advance(49);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.deepEqual(drainKeys(q), ["a"]);
  clock.advance(19);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.deepEqual(drainKeys(q), ["b"]);
  // The later ready times were superseded, so nothing else arrives.
  clock.advance(1000);
  assert.equal(q.len(), 0);
  assert.equal(q.waitingCount(), 0);
  assert.equal(clock.pendingTimers(), 0);
});

test("addAfter with a zero or negative delay adds now; due keys keep ready-time order", LIMIT, () => {
  const { clock, q } = setup();
  q.addAfter("now", 0);
  q.addAfter("neg", -5);
  assert.equal(q.len(), 2);
  drainKeys(q);
  q.addAfter("c", 30);
  q.addAfter("a", 10);
  q.addAfter("b", 20);
  q.addAfter("hi", 25, { priority: 1 });
  clock.advance(100);
  // All became ready during one advance; the high-priority one still jumps the line.
  assert.deepEqual(drainKeys(q), ["hi", "a", "b", "c"]);
});

test("a delayed add of a pending key runs it now and again when due (client-go semantics)", LIMIT, () => {
  const { clock, q } = setup();
  q.add("a");
  q.addAfter("a", 10);
  assert.deepEqual(drainKeys(q), ["a"]);
  clock.advance(10);
  assert.deepEqual(drainKeys(q), ["a"]);
});

test("addRateLimited backs off per key; forget resets the backoff", LIMIT, () => {
  const clock = new FakeClock();
  const q = new WorkQueue<Key>({ clock, rateLimiter: new ExponentialFailureRateLimiter() });
  const readyTimes: number[] = [];
  for (let i = 0; i < 4; i++) {
    q.addRateLimited("a");
    const start = clock.now();
    while (q.len() === 0) clock.advance(1);
    readyTimes.push(clock.now() - start);
    drainKeys(q);
  }
  assert.deepEqual(readyTimes, [5, 10, 20, 40]);
  assert.equal(q.numRequeues("a"), 4);
  q.forget("a");
  assert.equal(q.numRequeues("a"), 0);
  q.addRateLimited("a");
  clock.advance(4);
  assert.equal(q.len(), 0);
  clock.advance(1);
  assert.equal(q.len(), 1);
});

test(
  "shutDown ignores adds, drops delayed adds, hands out what is pending, then ends getters",
  LIMIT,
  async () => {
    const { clock, q } = setup();
    q.add("a");
    q.addAfter("later", 10);
    q.shutDown();
    assert.equal(q.isShuttingDown(), true);
    assert.equal(clock.pendingTimers(), 0);
    q.add("b");
    q.addAfter("c", 1);
    q.addRateLimited("d");
    assert.equal(q.numRequeues("d"), 0);
    assert.equal(q.len(), 1);
    assert.equal((await q.get())?.key, "a");
    assert.equal(await q.get(), undefined);
    clock.advance(100);
    assert.equal(q.len(), 0);
  },
);

test("shutDown wakes idle getters with undefined", LIMIT, async () => {
  const { q } = setup();
  const getters = [q.get(), q.get()];
  q.shutDown();
  assert.deepEqual(await Promise.all(getters), [undefined, undefined]);
});

test("a key re-added before shutdown is still processed after it", LIMIT, async () => {
  const { q } = setup();
  q.add("a");
  q.add("b");
  await q.get();
  await q.get();
  q.add("a");
  q.shutDown();
  // The other worker must not exit while "a" is due back from its run.
  const idle = q.get();
  q.done("b");
  assert.equal(await peek(idle), "pending");
  q.done("a");
  assert.equal((await idle)?.key, "a");
  // Nothing is due back any more ("a" is running but was not re-added), so getters end at once.
  assert.equal(await q.get(), undefined);
  q.done("a");
  assert.equal(q.len(), 0);
});

test("shutDownWithDrain resolves true once processing keys are done", LIMIT, async () => {
  const { clock, q } = setup();
  q.add("a");
  q.add("b");
  await q.get();
  const drained = q.shutDownWithDrain(1000);
  assert.equal(await peek(drained), "pending");
  q.done("a");
  // b is still pending, so the queue is not drained yet.
  assert.equal(await peek(drained), "pending");
  assert.equal((await q.get())?.key, "b");
  clock.advance(500);
  q.done("b");
  assert.equal(await drained, true);
  assert.equal(clock.pendingTimers(), 0);
});

test("shutDownWithDrain gives up after the grace period", LIMIT, async () => {
  const { clock, q } = setup();
  q.add("a");
  await q.get();
  const drained = q.shutDownWithDrain(1000);
  clock.advance(999);
  assert.equal(await peek(drained), "pending");
  clock.advance(1);
  assert.equal(await drained, false);
  assert.equal(await q.shutDownWithDrain(0), false);
  q.done("a");
  assert.equal(await q.shutDownWithDrain(0), true);
});

test(
  "metrics hooks report adds, depth, queue and work durations, retries and running work",
  LIMIT,
  async () => {
    const events: string[] = [];
    const { clock, q } = setup({
      onAdd: (k) => events.push(`add ${k}`),
      onDepth: (d) => events.push(`depth ${d}`),
      onGet: (k, ms) => events.push(`get ${k} ${ms}`),
      onDone: (k, ms) => events.push(`done ${k} ${ms}`),
      onRetry: (k) => events.push(`retry ${k}`),
    });
    q.add("a");
    q.add("a");
    clock.advance(7);
    await q.get();
    clock.advance(3);
    q.add("b");
    await q.get();
    clock.advance(10);
    assert.equal(q.unfinishedWorkMs(), 13 + 10);
    assert.equal(q.longestRunningMs(), 13);
    q.done("a");
    q.addAfter("b", 5);
    q.done("b");
    assert.equal(q.longestRunningMs(), 0);
    assert.equal(q.unfinishedWorkMs(), 0);
    assert.deepEqual(events, [
      "add a",
      "depth 1",
      "depth 0",
      "get a 7",
      "add b",
      "depth 1",
      "depth 0",
      "get b 0",
      "done a 13",
      "retry b",
      "done b 10",
    ]);
  },
);
