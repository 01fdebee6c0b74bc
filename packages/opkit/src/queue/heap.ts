/**
 * A binary min-heap ordered by a caller-supplied `less`. The queue uses it with lazy deletion: an entry
 * that is replaced stays in the array until popped and is then skipped, which keeps every update
 * O(log n) without a position index.
 */
export class BinaryHeap<T> {
  private readonly less: (a: T, b: T) => boolean;
  private items: T[] = [];

  constructor(less: (a: T, b: T) => boolean) {
    this.less = less;
  }

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    this.items.push(item);
    this.up(this.items.length - 1);
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      this.down(0);
    }
    return top;
  }

  clear(): void {
    this.items = [];
  }

  /** Replaces the contents in O(n); used to shed stale entries. */
  rebuild(items: Iterable<T>): void {
    this.items = [...items];
    for (let i = (this.items.length >> 1) - 1; i >= 0; i--) this.down(i);
  }

  private up(index: number): void {
    const items = this.items;
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const child = items[i] as T;
      const up = items[parent] as T;
      if (!this.less(child, up)) break;
      items[i] = up;
      items[parent] = child;
      i = parent;
    }
  }

  private down(index: number): void {
    const items = this.items;
    const n = items.length;
    let i = index;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < n && this.less(items[left] as T, items[smallest] as T)) smallest = left;
      if (right < n && this.less(items[right] as T, items[smallest] as T)) smallest = right;
      if (smallest === i) return;
      const tmp = items[i] as T;
      items[i] = items[smallest] as T;
      items[smallest] = tmp;
      i = smallest;
    }
  }
}
