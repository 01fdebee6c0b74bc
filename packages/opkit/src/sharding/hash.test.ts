import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { ShardSpace, fnv1a64, hex64, shardRanges } from "./hash.ts";

/** The textbook definition, in BigInt arithmetic, to check the two-halves implementation against. */
function reference(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return h;
}

describe("sharding hash", () => {
  it("is 64-bit FNV-1a: known vectors", () => {
    assert.equal(hex64(fnv1a64("")), "0xcbf29ce484222325");
    assert.equal(hex64(fnv1a64("a")), "0xaf63dc4c8601ec8c");
    assert.equal(hex64(fnv1a64("foobar")), "0x85944171f73967e8");
  });

  it("matches the BigInt definition for any string (UTF-8 bytes)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 80 }), (s) => fnv1a64(s) === reference(s)),
      {
        numRuns: 2000,
      },
    );
  });

  it("ranges cover [0, 2^64) without gaps or overlaps; every key falls in exactly its range", () => {
    for (const n of [1, 2, 3, 7, 16, 100]) {
      const ranges = shardRanges(n);
      assert.equal(ranges[0]?.start, 0n);
      assert.equal(ranges.at(-1)?.end, 1n << 64n);
      for (let i = 1; i < n; i++) assert.equal(ranges[i]?.start, ranges[i - 1]?.end);
      const space = new ShardSpace(n);
      fc.assert(
        fc.property(fc.uuid(), (uid) => {
          const i = space.shardOf(uid);
          const h = fnv1a64(uid);
          const r = ranges[i];
          return r !== undefined && r.start <= h && h < r.end;
        }),
        { numRuns: 300 },
      );
    }
  });

  it("spreads uids about evenly", () => {
    const space = new ShardSpace(16);
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[space.shardOf(crypto.randomUUID())]!++;
    assert.ok(Math.min(...counts) > 800 && Math.max(...counts) < 1200, counts.join(","));
  });

  it("refuses a nonsensical shard count", () => {
    assert.throws(() => shardRanges(0), RangeError);
    assert.throws(() => shardRanges(1.5), RangeError);
  });
});
