/**
 * The order in which pending keys are handed out: highest priority first, FIFO (by sequence number)
 * within a priority. The same order as a binary heap on (priority desc, seq asc), but nearly every key
 * shares one of a few priorities and arrives with the next sequence number, so each priority keeps a
 * FIFO array: a push is an append and a pop a read at the head, instead of O(log n) closure compares.
 * An entry pushed out of order (a key raised to a higher priority keeps its old sequence number) is
 * placed by binary search. Like the heap, it does lazy deletion: the caller skips replaced entries.
 */

/** What the ready queue orders: a priority (higher first) and a sequence number (lower first). */
export interface Ordered {
  /** Higher is handed out first. */
  priority: number;
  /** Within a priority, lower is handed out first. */
  seq: number;
}

interface Bucket<T> {
  items: T[];
  // Index of the first live slot; slots before it were popped.
  head: number;
}

// Popped slots are dropped once they are this many and at least half the array.
const COMPACT_AT = 1024;

/** Pending entries in hand-out order (internal to the work queue). */
export class ReadyQueue<T extends Ordered> {
  private readonly buckets = new Map<number, Bucket<T>>();
  // The priorities with a non-empty bucket, highest first.
  private priorities: number[] = [];
  private count = 0;

  /** Entries held, replaced ones included. */
  get size(): number {
    return this.count;
  }

  /** Adds an entry: an append unless its sequence number is older than the tail of its priority's run. */
  push(entry: T): void {
    let bucket = this.buckets.get(entry.priority);
    if (bucket === undefined) {
      bucket = { items: [], head: 0 };
      this.buckets.set(entry.priority, bucket);
      this.insertPriority(entry.priority);
    }
    const items = bucket.items;
    const n = items.length;
    if (n === bucket.head || (items[n - 1] as T).seq < entry.seq) {
      items.push(entry);
    } else {
      // Binary search for the first live slot with a larger sequence number.
      let lo = bucket.head;
      let hi = n;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if ((items[mid] as T).seq < entry.seq) lo = mid + 1;
        else hi = mid;
      }
      items.splice(lo, 0, entry);
    }
    this.count++;
  }

  /** Removes and returns the first entry in order, or undefined when empty. */
  pop(): T | undefined {
    if (this.count === 0) return undefined;
    const priority = this.priorities[0] as number;
    const bucket = this.buckets.get(priority) as Bucket<T>;
    const entry = bucket.items[bucket.head] as T;
    bucket.items[bucket.head] = undefined as unknown as T; // let the entry be collected
    bucket.head++;
    this.count--;
    if (bucket.head === bucket.items.length) {
      this.buckets.delete(priority);
      this.priorities.shift();
    } else if (bucket.head >= COMPACT_AT && bucket.head * 2 >= bucket.items.length) {
      bucket.items.splice(0, bucket.head);
      bucket.head = 0;
    }
    return entry;
  }

  /** Drops every entry. */
  clear(): void {
    this.buckets.clear();
    this.priorities = [];
    this.count = 0;
  }

  /** Replaces the contents; used to shed replaced entries. */
  rebuild(entries: Iterable<T>): void {
    this.clear();
    const sorted = [...entries].sort((a, b) => b.priority - a.priority || a.seq - b.seq);
    for (const entry of sorted) this.push(entry);
  }

  private insertPriority(priority: number): void {
    const ps = this.priorities;
    let i = 0;
    while (i < ps.length && (ps[i] as number) > priority) i++;
    ps.splice(i, 0, priority);
  }
}
