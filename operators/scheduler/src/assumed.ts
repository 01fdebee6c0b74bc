/**
 * Pods this process has placed whose binding the cache has not shown yet (kube-scheduler's "assume"):
 * recorded when the decision is made, before the binding is sent, so other workers deciding while it is
 * in flight see the node's room taken; dropped again if the binding fails. Until the watch event that
 * sets `spec.nodeName`, the cache still lists the pod as pending; without this, the next pod would be
 * placed as if the node were emptier than it is. An assumption
 * ends when the cache shows the pod bound (or gone), or after `ttlMs` as a safety net.
 */
import { realClock, type Clock, type DeepReadonly, type Pod } from "opkit";

export class AssumedPods {
  readonly #byUid = new Map<string, { pod: DeepReadonly<Pod>; at: number }>();
  readonly #clock: Clock;
  readonly #ttlMs: number;

  constructor(opts: { clock?: Clock; ttlMs?: number } = {}) {
    this.#clock = opts.clock ?? realClock;
    this.#ttlMs = opts.ttlMs ?? 5 * 60_000;
  }

  /** Record that `pod` was bound to `node`. */
  assume(pod: DeepReadonly<Pod>, node: string): void {
    const bound = { ...pod, spec: { containers: [], ...pod.spec, nodeName: node } } as DeepReadonly<Pod>;
    this.#byUid.set(pod.metadata.uid ?? "", { pod: bound, at: this.#clock.now() });
  }

  /** Drop an assumption whose binding failed: the node's room is given back at once. */
  forget(uid: string | undefined): void {
    this.#byUid.delete(uid ?? "");
  }

  /** Whether the pod with this uid was bound here and the cache has not caught up. */
  has(uid: string | undefined): boolean {
    return this.#byUid.has(uid ?? "");
  }

  /**
   * The assumed pods the cache does not show bound yet, given the cached pods by uid; assumptions the
   * cache has caught up with (bound, or pod gone) or that are older than the TTL are dropped.
   */
  pending(cached: ReadonlyMap<string, DeepReadonly<Pod>>): DeepReadonly<Pod>[] {
    const now = this.#clock.now();
    const out: DeepReadonly<Pod>[] = [];
    for (const [uid, a] of this.#byUid) {
      const c = cached.get(uid);
      if (!c || c.spec?.nodeName || now - a.at > this.#ttlMs) this.#byUid.delete(uid);
      else out.push(a.pod);
    }
    return out;
  }

  get size(): number {
    return this.#byUid.size;
  }
}
