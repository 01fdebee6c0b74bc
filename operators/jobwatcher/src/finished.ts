/**
 * The finished Jobs the Job controller has seen, by namespace: what a watcher's change fans out to. A
 * new, changed or deleted watcher can move the expiry of every finished Job in its reach (a new TTL, a
 * hold released, a longer TTL gone), and each of those Jobs must be reconciled again to be deleted on
 * its new time. opkit's map functions get only the event's object, not the cache, so the Job
 * controller keeps this small index itself (a key per finished Job, dropped when the Job goes).
 */
import type { Request } from "opkit";

export class FinishedJobs {
  readonly #byNamespace = new Map<string, Set<string>>();

  add(namespace: string, name: string): void {
    let set = this.#byNamespace.get(namespace);
    if (!set) this.#byNamespace.set(namespace, (set = new Set()));
    set.add(name);
  }

  remove(namespace: string, name: string): void {
    const set = this.#byNamespace.get(namespace);
    if (!set) return;
    set.delete(name);
    if (set.size === 0) this.#byNamespace.delete(namespace);
  }

  /** Requests for the finished Jobs of one namespace, or of all when `namespace` is undefined. */
  requests(namespace?: string): Request[] {
    const out: Request[] = [];
    for (const [ns, names] of this.#byNamespace) {
      if (namespace !== undefined && ns !== namespace) continue;
      for (const name of names) out.push({ namespace: ns, name });
    }
    return out;
  }

  get size(): number {
    let n = 0;
    for (const s of this.#byNamespace.values()) n += s.size;
    return n;
  }
}
