import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { jsonEqual, mergePatchDiff, toJson, type JsonValue } from "./json.ts";

/** RFC 7386 application, as the API server does it. */
function applyMergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue | undefined {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, JsonValue> =
    typeof target === "object" && target !== null && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else {
      const next = applyMergePatch(out[k], v);
      if (next !== undefined) out[k] = next;
    }
  }
  return out;
}

// Objects without nulls: merge patch cannot express an explicit null (documented limitation).
const valueArb: fc.Arbitrary<JsonValue> = fc.letrec<{ v: JsonValue }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small" },
    fc.boolean(),
    fc.integer(),
    fc.constantFrom("a", "b", ""),
    fc.array(tie("v"), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom("x", "y", "z"), tie("v"), { maxKeys: 3 }),
  ),
})).v;
const objectArb = fc.dictionary(fc.constantFrom("a", "b", "c", "d"), valueArb, { maxKeys: 4 });

describe("mergePatchDiff", () => {
  it("property: applying the diff to `from` yields `to`; no diff when equal", () => {
    fc.assert(
      fc.property(objectArb, objectArb, (from, to) => {
        const patch = mergePatchDiff(from, to);
        if (jsonEqual(from, to)) assert.equal(patch, undefined);
        else {
          assert.ok(patch !== undefined);
          // Compared as JSON: fast-check builds null-prototype dictionaries.
          assert.deepEqual(toJson(applyMergePatch(from, patch)), toJson(to));
        }
      }),
    );
  });

  it("sends only what changed, and null for removed keys", () => {
    assert.deepEqual(mergePatchDiff({ a: 1, b: { c: 2, d: 3 } }, { a: 1, b: { c: 2 }, e: [1] }), {
      b: { d: null },
      e: [1],
    });
  });

  it("treats undefined properties as absent", () => {
    assert.equal(jsonEqual({ a: 1, b: undefined }, { a: 1 }), true);
    assert.equal(mergePatchDiff({ a: 1, b: undefined }, { a: 1 }), undefined);
  });
});
