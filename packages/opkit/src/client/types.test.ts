import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { deepCopy } from "./types.ts";

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
    Object.freeze(v);
  }
  return v;
}

describe("deepCopy", () => {
  it("copies any JSON value: equal, unfrozen, sharing nothing with the original (property)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const original: unknown = deepFreeze(structuredClone(value));
        const copy = deepCopy(original);
        assert.deepEqual(copy, original);
        const walk = (a: unknown, b: unknown): void => {
          if (typeof a !== "object" || a === null) return;
          assert.notEqual(a, b, "a nested object is shared");
          assert.ok(!Object.isFrozen(a), "a copied object is still frozen");
          for (const k of Object.keys(a))
            walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
        };
        walk(copy, original);
      }),
      { numRuns: 1000 },
    );
  });

  it('keeps an own "__proto__" key as a key, not as the prototype', () => {
    const original = JSON.parse('{"data":{"__proto__":{"polluted":true}}}') as {
      data: Record<string, unknown>;
    };
    const copy = deepCopy(original);
    assert.deepEqual(copy, original);
    assert.equal(Object.getPrototypeOf(copy.data), Object.prototype);
    assert.ok(Object.hasOwn(copy.data, "__proto__"));
  });

  it("keeps what is not plain data as structuredClone does (a Date stays a Date)", () => {
    const when = new Date("2026-11-26T00:00:00Z");
    const copy = deepCopy({ at: when, list: [when], missing: undefined });
    assert.ok(copy.at instanceof Date && copy.at !== when);
    assert.equal(copy.at.getTime(), when.getTime());
    assert.ok(copy.list[0] instanceof Date);
    assert.ok("missing" in copy);
  });
});
