import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  formatConditionTime,
  getCondition,
  isConditionTrue,
  removeCondition,
  setCondition,
  type Condition,
  type NewCondition,
} from "./conditions.ts";

const T0 = new Date("2026-01-01T00:00:00.000Z");
const T1 = new Date("2026-01-01T01:02:03.456Z");

const statusArb = fc.constantFrom("True" as const, "False" as const, "Unknown" as const);
const typeArb = fc.constantFrom("Ready", "Available", "Progressing", "Degraded");
const newConditionArb: fc.Arbitrary<NewCondition> = fc.record(
  {
    type: typeArb,
    status: statusArb,
    reason: fc.constantFrom("A", "B", "C"),
    message: fc.constantFrom("", "m1", "m2"),
    observedGeneration: fc.integer({ min: 1, max: 5 }),
  },
  { requiredKeys: ["type", "status", "reason"] },
);
const dateArb = fc.date({
  min: new Date("2020-01-01T00:00:00Z"),
  max: new Date("2030-01-01T00:00:00Z"),
  noInvalidDate: true,
});
/** A valid list: built by setting conditions one after another, so types are unique. */
const listArb = fc
  .array(fc.tuple(newConditionArb, dateArb), { maxLength: 8 })
  .map((steps) => steps.reduce<Condition[]>((acc, [c, d]) => setCondition(acc, c, d).conditions, []));

describe("setCondition", () => {
  it("adds a new condition with lastTransitionTime = now (whole seconds)", () => {
    const { conditions, changed } = setCondition([], { type: "Ready", status: "True", reason: "Ok" }, T1);
    assert.equal(changed, true);
    assert.deepEqual(conditions, [
      {
        type: "Ready",
        status: "True",
        reason: "Ok",
        message: "",
        lastTransitionTime: "2026-01-01T01:02:03Z",
      },
    ]);
  });

  it("keeps lastTransitionTime when only reason, message or observedGeneration change", () => {
    const first = setCondition(
      [],
      { type: "Ready", status: "False", reason: "A", message: "x" },
      T0,
    ).conditions;
    const { conditions, changed } = setCondition(
      first,
      { type: "Ready", status: "False", reason: "B", message: "y", observedGeneration: 3 },
      T1,
    );
    assert.equal(changed, true);
    assert.deepEqual(getCondition(conditions, "Ready"), {
      type: "Ready",
      status: "False",
      reason: "B",
      message: "y",
      observedGeneration: 3,
      lastTransitionTime: formatConditionTime(T0),
    });
  });

  it("moves lastTransitionTime when the status flips", () => {
    const first = setCondition([], { type: "Ready", status: "False", reason: "A" }, T0).conditions;
    const { conditions } = setCondition(first, { type: "Ready", status: "True", reason: "A" }, T1);
    assert.equal(getCondition(conditions, "Ready")?.lastTransitionTime, formatConditionTime(T1));
  });

  it("property: the set condition is present once, others untouched, input not mutated", () => {
    fc.assert(
      fc.property(listArb, newConditionArb, dateArb, (list, c, now) => {
        const before = structuredClone(list);
        const { conditions } = setCondition(list, c, now);
        assert.deepEqual(list, before, "input mutated");
        assert.equal(conditions.filter((x) => x.type === c.type).length, 1);
        const got = getCondition(conditions, c.type);
        assert.equal(got?.status, c.status);
        assert.equal(got?.reason, c.reason);
        assert.equal(got?.message, c.message ?? "");
        assert.equal(got?.observedGeneration, c.observedGeneration);
        assert.deepEqual(
          conditions.filter((x) => x.type !== c.type),
          list.filter((x) => x.type !== c.type),
        );
        // Order is stable: an existing condition keeps its position, a new one is appended.
        const oldIndex = list.findIndex((x) => x.type === c.type);
        assert.equal(
          conditions.findIndex((x) => x.type === c.type),
          oldIndex >= 0 ? oldIndex : list.length,
        );
      }),
    );
  });

  it("property: lastTransitionTime changes exactly when the status flips or the condition is new", () => {
    fc.assert(
      fc.property(listArb, newConditionArb, dateArb, (list, c, now) => {
        const old = getCondition(list, c.type);
        const got = getCondition(setCondition(list, c, now).conditions, c.type);
        if (old === undefined || old.status !== c.status) {
          assert.equal(got?.lastTransitionTime, formatConditionTime(now));
        } else {
          assert.equal(got?.lastTransitionTime, old.lastTransitionTime);
        }
      }),
    );
  });

  it("property: changed is false exactly when the result equals the input, and setting twice is idempotent", () => {
    fc.assert(
      fc.property(listArb, newConditionArb, dateArb, dateArb, (list, c, now, later) => {
        const first = setCondition(list, c, now);
        assert.equal(first.changed, !isDeepEqual(first.conditions, list));
        const second = setCondition(first.conditions, c, later);
        assert.equal(second.changed, false);
        assert.deepEqual(second.conditions, first.conditions);
      }),
    );
  });

  it("uses an explicit lastTransitionTime only for a transition", () => {
    const first = setCondition([], { type: "Ready", status: "False", reason: "A" }, T0).conditions;
    const same = setCondition(first, {
      type: "Ready",
      status: "False",
      reason: "A",
      lastTransitionTime: "2000-01-01T00:00:00Z",
    });
    assert.equal(same.changed, false);
    const flip = setCondition(first, {
      type: "Ready",
      status: "True",
      reason: "A",
      lastTransitionTime: "2000-01-01T00:00:00Z",
    });
    assert.equal(getCondition(flip.conditions, "Ready")?.lastTransitionTime, "2000-01-01T00:00:00Z");
  });
});

describe("getCondition / isConditionTrue / removeCondition", () => {
  const list = setCondition(
    setCondition([], { type: "Ready", status: "True", reason: "Ok" }, T0).conditions,
    { type: "Degraded", status: "Unknown", reason: "Pending" },
    T0,
  ).conditions;

  it("reads conditions and treats missing or undefined lists as not true", () => {
    assert.equal(isConditionTrue(list, "Ready"), true);
    assert.equal(isConditionTrue(list, "Degraded"), false);
    assert.equal(isConditionTrue(list, "Missing"), false);
    assert.equal(isConditionTrue(undefined, "Ready"), false);
    assert.equal(getCondition(undefined, "Ready"), undefined);
  });

  it("property: remove drops exactly that type and reports whether it was there", () => {
    fc.assert(
      fc.property(listArb, typeArb, (l, type) => {
        const had = getCondition(l, type) !== undefined;
        const { conditions, changed } = removeCondition(l, type);
        assert.equal(changed, had);
        assert.equal(getCondition(conditions, type), undefined);
        assert.deepEqual(
          conditions,
          l.filter((c) => c.type !== type),
        );
      }),
    );
  });
});

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepEqual(a, b);
    return true;
  } catch {
    return false;
  }
}
