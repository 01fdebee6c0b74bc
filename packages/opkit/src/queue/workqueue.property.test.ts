/**
 * Model-based property tests: random interleavings of adds, delayed adds, clock advances and 1–4
 * workers, checked against a plain model of what the queue promises.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock } from "../clock/index.ts";
import { PRIORITY_LOW, PRIORITY_NORMAL, WorkQueue } from "./workqueue.ts";

// A broken queue tends to leave a get() waiting forever; fail instead of hanging the run.
const LIMIT = { timeout: 10_000 };

const KEYS = ["ns/a", "ns/b", "ns/c", "ns/d"] as const;
type Key = (typeof KEYS)[number];

type Op =
  | { t: "add"; key: Key; priority: number }
  | { t: "addAfter"; key: Key; ms: number; priority: number }
  | { t: "advance"; ms: number }
  | { t: "get"; worker: number }
  | { t: "done"; worker: number }
  | { t: "addHeld"; worker: number; priority: number }
  | { t: "shutdown" };

const keyArb = fc.constantFrom(...KEYS);
const priorityArb = fc.constantFrom(PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_NORMAL, 5);
const workerArb = fc.integer({ min: 0, max: 3 });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant("add"), key: keyArb, priority: priorityArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant("addAfter"),
      key: keyArb,
      ms: fc.integer({ min: -2, max: 20 }),
      priority: priorityArb,
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("advance"), ms: fc.integer({ min: 0, max: 15 }) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("get"), worker: workerArb }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("done"), worker: workerArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant("addHeld"), worker: workerArb, priority: priorityArb }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("shutdown") }) },
);

type Worker =
  { state: "idle" } | { state: "waiting" } | { state: "holding"; key: Key } | { state: "stopped" };

interface Pending {
  priority: number;
  seq: number;
  /** Earliest time the key may be handed out (the add, or the delayed add's ready time). */
  eligibleAt: number;
}

/** What the queue should hold: kept deliberately naive (maps and linear scans). */
class Model {
  seq = 0;
  event = 0;
  shuttingDown = false;
  readonly pending = new Map<Key, Pending>();
  readonly processing = new Set<Key>();
  readonly dirtyWhileProcessing = new Map<Key, { priority: number; eligibleAt: number }>();
  readonly waiting = new Map<Key, { readyAt: number; priority: number; seq: number }>();
  readonly lastAdd = new Map<Key, number>();
  readonly lastHandout = new Map<Key, number>();

  /** An add from outside; the no-lost-update check applies from the moment it takes effect. */
  request(key: Key, ms: number, priority: number, now: number): void {
    if (this.shuttingDown) return;
    if (ms > 0) {
      this.addAfter(key, ms, priority, now);
      return;
    }
    this.lastAdd.set(key, this.event++);
    this.add(key, priority, now);
  }

  shutDown(): void {
    this.shuttingDown = true;
    this.waiting.clear();
  }

  add(key: Key, priority: number, now: number): void {
    const p = this.pending.get(key);
    if (p !== undefined) {
      p.priority = Math.max(p.priority, priority);
      return;
    }
    if (this.processing.has(key)) {
      const d = this.dirtyWhileProcessing.get(key);
      this.dirtyWhileProcessing.set(key, {
        priority: Math.max(priority, d?.priority ?? priority),
        eligibleAt: d?.eligibleAt ?? now,
      });
      return;
    }
    this.pending.set(key, { priority, seq: this.seq++, eligibleAt: now });
  }

  addAfter(key: Key, ms: number, priority: number, now: number): void {
    const w = this.waiting.get(key);
    const readyAt = now + ms;
    if (w === undefined || readyAt < w.readyAt) {
      this.waiting.set(key, {
        readyAt,
        priority: Math.max(priority, w?.priority ?? priority),
        seq: this.seq++,
      });
    } else {
      w.priority = Math.max(w.priority, priority);
    }
  }

  /** The keys due at exactly `at`, in the order the queue must fire them. */
  dueAt(at: number): Key[] {
    return [...this.waiting.entries()]
      .filter(([, w]) => w.readyAt === at)
      .sort((a, b) => a[1].seq - b[1].seq)
      .map(([k]) => k);
  }

  nextReadyAt(): number | undefined {
    let next: number | undefined;
    for (const w of this.waiting.values()) if (next === undefined || w.readyAt < next) next = w.readyAt;
    return next;
  }

  fire(key: Key): void {
    const w = this.waiting.get(key);
    assert.ok(w);
    this.waiting.delete(key);
    this.lastAdd.set(key, this.event++);
    this.add(key, w.priority, w.readyAt);
  }

  best(): Key | undefined {
    let best: [Key, Pending] | undefined;
    for (const e of this.pending) {
      if (
        best === undefined ||
        e[1].priority > best[1].priority ||
        (e[1].priority === best[1].priority && e[1].seq < best[1].seq)
      ) {
        best = e;
      }
    }
    return best?.[0];
  }

  done(key: Key): void {
    this.processing.delete(key);
    const d = this.dirtyWhileProcessing.get(key);
    if (d === undefined) return;
    this.dirtyWhileProcessing.delete(key);
    this.pending.set(key, { priority: d.priority, seq: this.seq++, eligibleAt: d.eligibleAt });
  }
}

async function runScenario(ops: Op[], workerCount: number, quiesceFirst: boolean): Promise<void> {
  const clock = new FakeClock();
  const model = new Model();
  let expectBest = false;

  const q = new WorkQueue<Key>({
    clock,
    metrics: {
      // Called synchronously at hand-off, so the model sees the exact moment and order.
      onGet: (key) => {
        const now = clock.now();
        assert.ok(!model.processing.has(key), `invariant 1: ${key} handed out while processing`);
        const p = model.pending.get(key);
        assert.ok(p !== undefined, `invariant 3: ${key} handed out but not pending (duplicate or spurious)`);
        assert.ok(now >= p.eligibleAt, `invariant 4: ${key} handed out at ${now}, ready at ${p.eligibleAt}`);
        if (expectBest) assert.equal(key, model.best(), "priority/FIFO order");
        model.pending.delete(key);
        model.processing.add(key);
        model.lastHandout.set(key, model.event++);
      },
    },
  });

  // Assertions in a worker's continuation run outside the property's call stack; collect them and
  // rethrow after each flush so they fail the run instead of surfacing as stray async errors.
  const asyncFailures: unknown[] = [];
  const flush = async (): Promise<void> => {
    await new Promise((resolve) => setImmediate(resolve));
    if (asyncFailures.length > 0) throw asyncFailures[0];
  };

  const workers: Worker[] = Array.from({ length: workerCount }, () => ({ state: "idle" }));

  const startGet = (w: number): void => {
    if (workers[w]?.state !== "idle") return;
    expectBest = q.len() > 0;
    const p = q.get();
    expectBest = false;
    workers[w] = { state: "waiting" };
    p.then((item) => {
      if (item === undefined) {
        assert.ok(model.shuttingDown, "get resolved undefined before shutdown");
        assert.equal(model.pending.size, 0, "invariant 2: a worker stopped while keys were pending");
        assert.equal(
          model.dirtyWhileProcessing.size,
          0,
          "invariant 2: a worker stopped while a key was due back",
        );
        workers[w] = { state: "stopped" };
        return;
      }
      for (const other of workers) {
        assert.ok(
          !(other.state === "holding" && other.key === item.key),
          `invariant 1: ${item.key} held by two workers`,
        );
      }
      workers[w] = { state: "holding", key: item.key };
    }).catch((err: unknown) => asyncFailures.push(err));
  };

  const finish = (w: number): void => {
    const worker = workers[w];
    if (worker?.state !== "holding") return;
    workers[w] = { state: "idle" };
    model.done(worker.key);
    q.done(worker.key);
  };

  const advance = (ms: number): void => {
    const target = clock.now() + ms;
    // Step to each ready time so the model applies a batch exactly when the queue fires it.
    for (let next = model.nextReadyAt(); next !== undefined && next <= target; next = model.nextReadyAt()) {
      for (const key of model.dueAt(next)) model.fire(key);
      clock.advance(next - clock.now());
    }
    clock.advance(target - clock.now());
  };

  const checkCounts = (): void => {
    assert.equal(q.len(), model.pending.size, "invariant 3: pending count");
    assert.equal(q.processingCount(), model.processing.size, "processing count");
    assert.equal(q.waitingCount(), model.waiting.size, "waiting count");
  };

  for (const op of ops) {
    switch (op.t) {
      case "add":
        model.request(op.key, 0, op.priority, clock.now());
        q.add(op.key, { priority: op.priority });
        break;
      case "addAfter":
        model.request(op.key, op.ms, op.priority, clock.now());
        q.addAfter(op.key, op.ms, { priority: op.priority });
        break;
      case "addHeld": {
        const worker = workers[op.worker % workerCount];
        if (worker?.state !== "holding") break;
        model.request(worker.key, 0, op.priority, clock.now());
        q.add(worker.key, { priority: op.priority });
        break;
      }
      case "advance":
        advance(op.ms);
        break;
      case "get":
        startGet(op.worker % workerCount);
        break;
      case "done":
        finish(op.worker % workerCount);
        break;
      case "shutdown":
        model.shutDown();
        q.shutDown();
        break;
    }
    await flush();
    checkCounts();
  }

  // Quiesce (if asked): no more adds; run every worker until nothing is pending, processing or waiting,
  // so the delayed adds fire instead of being dropped by the shutdown below. Without it, the shutdown
  // lands on work in flight.
  for (let round = 0; quiesceFirst && !model.shuttingDown; round++) {
    assert.ok(round < 100, "queue did not drain");
    const next = model.nextReadyAt();
    if (next !== undefined) advance(next - clock.now());
    for (let w = 0; w < workerCount; w++) finish(w);
    for (let w = 0; w < workerCount; w++) startGet(w);
    await flush();
    checkCounts();
    const busy = workers.some((w) => w.state === "holding");
    if (!busy && q.len() === 0 && q.waitingCount() === 0) break;
  }

  // Shut down (again, if an op already did) and run the workers until every one is told to stop. Idle
  // workers ask first, while others still hold keys: the moment a worker could wrongly be told to stop.
  model.shutDown();
  q.shutDown();
  for (let round = 0; ; round++) {
    assert.ok(round < 100, "workers did not stop after shutdown");
    for (let w = 0; w < workerCount; w++) startGet(w);
    await flush();
    for (let w = 0; w < workerCount; w++) finish(w);
    await flush();
    checkCounts();
    if (workers.every((w) => w.state === "stopped")) break;
  }

  assert.equal(q.len(), 0);
  assert.equal(q.processingCount(), 0);
  for (const [key, addedAt] of model.lastAdd) {
    const handedAt = model.lastHandout.get(key) ?? -1;
    assert.ok(
      handedAt > addedAt,
      `invariant 2: ${key} added at event ${addedAt}, last handed out at ${handedAt}`,
    );
  }
  assert.equal(clock.pendingTimers(), 0, "shutdown leaves no timers");
}

test("random interleavings keep the queue's invariants (1–4 workers)", LIMIT, async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(opArb, { maxLength: 40 }),
      fc.integer({ min: 1, max: 4 }),
      fc.boolean(),
      runScenario,
    ),
    { numRuns: 200 },
  );
});

// Hundreds of keys and thousands of adds, raises and runs: enough replaced entries to make the queue
// rebuild its ready lists, and long FIFO runs to make them compact, which 4 keys never reach.
test(
  "many keys: raised priorities, rebuilds and compaction keep priority/FIFO order and counts",
  LIMIT,
  () => {
    const keyCount = 300;
    const manyOp = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          t: fc.constant("add" as const),
          key: fc.nat(keyCount - 1),
          // Many levels: a pending key can be raised again and again, each raise leaving a replaced entry.
          priority: fc.oneof(
            fc.constantFrom(PRIORITY_LOW, PRIORITY_NORMAL),
            fc.integer({ min: -50, max: 50 }),
          ),
        }),
      },
      { weight: 3, arbitrary: fc.record({ t: fc.constant("get" as const) }) },
      { weight: 3, arbitrary: fc.record({ t: fc.constant("done" as const), pick: fc.nat() }) },
    );
    fc.assert(
      fc.property(fc.array(manyOp, { minLength: 1_000, maxLength: 4_000 }), (ops) => {
        const q = new WorkQueue<string>({ clock: new FakeClock() });
        let seq = 0;
        const pending = new Map<string, { priority: number; seq: number }>();
        const processing: string[] = [];
        const dirtyWhileProcessing = new Map<string, number>();
        for (const op of ops) {
          if (op.t === "add") {
            const key = `ns/k${op.key}`;
            q.add(key, { priority: op.priority });
            const p = pending.get(key);
            if (p) p.priority = Math.max(p.priority, op.priority);
            else if (processing.includes(key))
              dirtyWhileProcessing.set(
                key,
                Math.max(op.priority, dirtyWhileProcessing.get(key) ?? op.priority),
              );
            else pending.set(key, { priority: op.priority, seq: seq++ });
          } else if (op.t === "get") {
            let best: [string, { priority: number; seq: number }] | undefined;
            for (const e of pending)
              if (
                !best ||
                e[1].priority > best[1].priority ||
                (e[1].priority === best[1].priority && e[1].seq < best[1].seq)
              )
                best = e;
            const item = q.tryGet();
            assert.equal(item?.key, best?.[0]);
            if (best) {
              assert.equal(item?.priority, best[1].priority);
              pending.delete(best[0]);
              processing.push(best[0]);
            }
          } else if (processing.length > 0) {
            const [key] = processing.splice(op.pick % processing.length, 1) as [string];
            q.done(key);
            const d = dirtyWhileProcessing.get(key);
            if (d !== undefined) {
              dirtyWhileProcessing.delete(key);
              pending.set(key, { priority: d, seq: seq++ });
            }
          }
          assert.equal(q.len(), pending.size);
          assert.equal(q.processingCount(), processing.length);
        }
      }),
      { numRuns: 30 },
    );
  },
);
