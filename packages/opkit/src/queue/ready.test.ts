import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { ReadyQueue, type Ordered } from "./ready.ts";

// Plain tuples: fast-check may hand out null-prototype records, and equal entries may come out either way.
const t = (e: Ordered | undefined): [number, number] | undefined => e && [e.priority, e.seq];
const byOrder = (a: Ordered, b: Ordered): number => b.priority - a.priority || a.seq - b.seq;

test("ReadyQueue pops in priority-then-sequence order, whatever the push order, across pops", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.record({ priority: fc.constantFrom(-100, 0, 0, 5), seq: fc.nat(50) }),
          fc.constant("pop" as const),
        ),
        { maxLength: 200 },
      ),
      (ops) => {
        const q = new ReadyQueue<Ordered>();
        const model: Ordered[] = [];
        for (const op of ops) {
          if (op === "pop") {
            model.sort(byOrder);
            assert.deepEqual(t(q.pop()), t(model.shift()));
          } else {
            q.push(op);
            model.push(op);
          }
          assert.equal(q.size, model.length);
        }
        model.sort(byOrder);
        const rest: Ordered[] = [];
        for (let e = q.pop(); e !== undefined; e = q.pop()) rest.push(e);
        assert.deepEqual(rest.map(t), model.map(t));
      },
    ),
  );
});

test("ReadyQueue compacts popped slots of a long FIFO run and rebuild keeps the order", () => {
  const q = new ReadyQueue<Ordered>();
  for (let i = 0; i < 5000; i++) q.push({ priority: 0, seq: i });
  for (let i = 0; i < 3000; i++) assert.equal(q.pop()?.seq, i);
  q.rebuild([
    { priority: 0, seq: 9 },
    { priority: 1, seq: 10 },
    { priority: 0, seq: 3 },
  ]);
  assert.deepEqual(
    [q.pop(), q.pop(), q.pop(), q.pop()],
    [{ priority: 1, seq: 10 }, { priority: 0, seq: 3 }, { priority: 0, seq: 9 }, undefined],
  );
});
