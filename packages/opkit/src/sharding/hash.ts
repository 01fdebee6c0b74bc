/**
 * The shard key space, as the API server's sharded list/watch (KEP-5866) defines it: a field of the
 * object (its uid, or its namespace) hashed with 64-bit FNV-1a over its UTF-8 bytes, and each shard a
 * half-open range [start, end) of that 64-bit space. opkit filters on the client with the same hash
 * when the server does not shard, so an object lands in the same shard either way.
 */

const TWO32 = 4294967296;
// FNV-1a 64: offset basis 0xcbf29ce484222325, prime 0x00000100000001b3, as two 32-bit halves so the hot
// path (every watch event when filtering on the client) needs no BigInt arithmetic.
const OFFSET_HI = 0xcbf29ce4;
const OFFSET_LO = 0x84222325;
const PRIME_HI = 0x100;
const PRIME_LO = 0x1b3;

const encoder = new TextEncoder();

/** 64-bit FNV-1a of a string's UTF-8 bytes, as an unsigned bigint. */
export function fnv1a64(text: string): bigint {
  const [hi, lo] = fnv1a64Halves(text);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** The same hash as [high 32 bits, low 32 bits], both unsigned. */
export function fnv1a64Halves(text: string): [number, number] {
  let hi = OFFSET_HI;
  let lo = OFFSET_LO;
  for (const byte of encoder.encode(text)) {
    lo = (lo ^ byte) >>> 0;
    // (hi·2^32 + lo) · (PRIME_HI·2^32 + PRIME_LO) mod 2^64; every partial product stays below 2^53.
    const low = lo * PRIME_LO;
    const carry = Math.floor(low / TWO32);
    const high = hi * PRIME_LO + lo * PRIME_HI + carry;
    lo = low % TWO32;
    hi = high % TWO32;
  }
  return [hi >>> 0, lo >>> 0];
}

/** One shard's part of the key space: [start, end), with end = 2^64 for the last shard. */
export interface ShardRange {
  /** The shard's number, from 0. */
  index: number;
  /** The first hash in the shard. */
  start: bigint;
  /** The first hash after the shard (2^64 for the last). */
  end: bigint;
}

const SPACE = 1n << 64n;

/** Split the 64-bit key space into `count` contiguous ranges of (nearly) equal size. */
export function shardRanges(count: number): ShardRange[] {
  if (!Number.isInteger(count) || count < 1 || count > 4096)
    throw new RangeError(`shard count must be a whole number from 1 to 4096, got ${count}`);
  const ranges: ShardRange[] = [];
  for (let i = 0; i < count; i++) {
    ranges.push({
      index: i,
      start: (SPACE * BigInt(i)) / BigInt(count),
      end: (SPACE * BigInt(i + 1)) / BigInt(count),
    });
  }
  return ranges;
}

/** The shards of a fixed count: which one a key falls into, precomputed once. */
export class ShardSpace {
  /** The number of shards. */
  readonly count: number;
  /** Each shard's range, by index. */
  readonly ranges: readonly ShardRange[];
  private readonly starts: bigint[];

  /** Split the key space into `count` shards (1 to 4096; a RangeError otherwise). */
  constructor(count: number) {
    this.count = count;
    this.ranges = shardRanges(count);
    this.starts = this.ranges.map((r) => r.start);
  }

  /** The index of the shard `key` hashes into. */
  shardOf(key: string): number {
    const h = fnv1a64(key);
    // floor(h·count / 2^64) is the shard or its neighbour below (the range bounds are floored).
    let i = Number((h * BigInt(this.count)) >> 64n);
    if (i < this.count - 1 && (this.starts[i + 1] ?? SPACE) <= h) i++;
    while (i > 0 && (this.starts[i] ?? 0n) > h) i--;
    return i;
  }
}

/** A 64-bit bound as the server's selector writes it: 0x and 16 hex digits. */
export function hex64(value: bigint): string {
  return `0x${value.toString(16).padStart(16, "0")}`;
}
