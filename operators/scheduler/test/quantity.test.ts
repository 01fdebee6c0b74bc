/** Quantities as the scheduler adds them: millicores for cpu, whole units otherwise, rounded up. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { parseQuantity, resourceAmount } from "../src/quantity.ts";

describe("quantities", () => {
  it("reads decimal and binary suffixes and exponents", () => {
    assert.equal(resourceAmount("cpu", "500m"), 500);
    assert.equal(resourceAmount("cpu", "2"), 2000);
    assert.equal(resourceAmount("cpu", "0.1"), 100);
    assert.equal(resourceAmount("cpu", 1.5), 1500);
    assert.equal(resourceAmount("cpu", "100u"), 1, "a fraction of a millicore rounds up");
    assert.equal(resourceAmount("memory", "1Gi"), 2 ** 30);
    assert.equal(resourceAmount("memory", "1G"), 1e9);
    assert.equal(resourceAmount("memory", "2e3"), 2000);
    assert.equal(resourceAmount("memory", "128974848"), 128974848);
    assert.equal(resourceAmount("pods", "110"), 110);
    assert.equal(resourceAmount("cpu", undefined), 0);
    assert.ok(Number.isNaN(parseQuantity("lots")));
    assert.equal(resourceAmount("cpu", "lots"), 0, "an unparsable quantity counts as nothing");
  });

  it("millicores and cores agree for any whole number of millicores", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (m) => {
        assert.equal(resourceAmount("cpu", `${m}m`), m);
        assert.equal(resourceAmount("cpu", String(m / 1000)), m);
      }),
    );
  });

  it("Ki, Mi and Gi are powers of two of each other", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 << 20 }), (v) => {
        assert.equal(resourceAmount("memory", `${v}Mi`), resourceAmount("memory", `${v * 1024}Ki`));
      }),
    );
  });
});
