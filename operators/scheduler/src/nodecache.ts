/**
 * The scheduler's picture of the nodes and of what is placed on them, kept up to date change by change
 * (kube-scheduler's scheduler cache) instead of rebuilt from every cached pod at every decision.
 *
 * It is fed the Node and Pod informers' events (`watch`), and the scheduler's own placements: a pod is
 * "assumed" on its node when the decision is made, before the binding is sent, so that decisions taken
 * while the binding is in flight see the node's room taken; a failed binding gives the room back
 * (`forget`). Until the watch event that sets `spec.nodeName`, the informer still shows the pod pending;
 * the assumption ends when it shows the pod bound (the bound object takes its place) or gone, or after
 * `ttlMs` as a safety net.
 *
 * Each node's entry has a generation: a change bumps it and drops the entry's NodeInfo, which the next
 * `snapshot` builds again. A decision so costs the nodes that changed since the last one, not every pod
 * in the cluster. NodeInfos handed out are never changed afterwards (a change builds a new one).
 *
 * Knows nothing of the plugins or of the API: pure bookkeeping, unit-tested with fakes.
 */
import {
  Nodes,
  Pods,
  realClock,
  type Cache,
  type Clock,
  type DeepReadonly,
  type Node,
  type Pod,
} from "opkit";
import { nodeInfo, type NodeInfo } from "./plugins/types.ts";

/** How long an assumption may wait for the cache by default (kube-scheduler has no TTL; a safety net). */
export const ASSUME_TTL_MS = 5 * 60_000;

interface NodeEntry {
  readonly name: string;
  /** Undefined while pods name a node the cache does not hold (yet, or any more). */
  node: DeepReadonly<Node> | undefined;
  /** Non-terminal pods on the node by key: bound in the cache, or assumed here. */
  readonly pods: Map<string, DeepReadonly<Pod>>;
  /** Bumped by every change of the node or of its pods. */
  generation: number;
  /** The NodeInfo of the current generation, built on demand. */
  info: NodeInfo | undefined;
}

/** A pod that has finished (Succeeded or Failed): it holds no room on its node and needs no placement. */
export function isTerminal(p: DeepReadonly<Pod>): boolean {
  return p.status?.phase === "Succeeded" || p.status?.phase === "Failed";
}

/** A pod's identity across its updates: the uid (a pod recreated under the same name is another pod). */
function podKey(p: DeepReadonly<Pod>): string {
  return p.metadata.uid ?? `${p.metadata.namespace ?? ""}/${p.metadata.name ?? ""}`;
}

/** The nodes with the pods on them, maintained from informer events and the scheduler's assumptions. */
export class NodeCache {
  readonly #nodes = new Map<string, NodeEntry>();
  /** Where each counted pod is counted, by pod key. */
  readonly #placedOn = new Map<string, string>();
  /** Pods placed here whose binding the cache has not shown yet: when they were assumed, by pod key. */
  readonly #assumed = new Map<string, number>();
  /** The entries of the known nodes sorted by name; undefined after a node came or went. */
  #order: NodeEntry[] | undefined;
  readonly #clock: Clock;
  readonly #ttlMs: number;

  constructor(opts: { clock?: Clock; ttlMs?: number } = {}) {
    this.#clock = opts.clock ?? realClock;
    this.#ttlMs = opts.ttlMs ?? ASSUME_TTL_MS;
  }

  /**
   * Keep this cache up to date from `cache`'s Node and Pod informers (the ones the controller reads):
   * the objects they hold now are delivered at once when they are synced, every change after that as it
   * is applied, so the picture matches what the informers hold.
   */
  watch(cache: Cache): void {
    cache.informer(Nodes).addEventHandler({
      onAdd: (n) => this.setNode(n),
      onUpdate: (_o, n) => this.setNode(n),
      onDelete: (n) => this.deleteNode(n.metadata.name ?? ""),
    });
    cache.informer(Pods).addEventHandler({
      onAdd: (p) => this.setPod(p),
      onUpdate: (o, p) => {
        // A relist diffs by name: a pod deleted and recreated under its name while the watch was down
        // comes as one update, from the old pod to the new one (kube-scheduler's updatePod does the same).
        if (podKey(o) !== podKey(p)) this.deletePod(o);
        this.setPod(p);
      },
      onDelete: (p) => this.deletePod(p),
    });
  }

  /** A node was added or changed. */
  setNode(node: DeepReadonly<Node>): void {
    const name = node.metadata.name ?? "";
    const e = this.#entry(name);
    if (e.node === node) return;
    if (!e.node) this.#order = undefined;
    e.node = node;
    this.#bump(e);
  }

  /** A node is gone; its pods stay counted (on no node) until they go too. */
  deleteNode(name: string): void {
    const e = this.#nodes.get(name);
    if (!e?.node) return;
    e.node = undefined;
    this.#order = undefined;
    this.#bump(e);
    if (e.pods.size === 0) this.#nodes.delete(name);
  }

  /** A pod was added or changed: counted on its node while bound and not finished. */
  setPod(pod: DeepReadonly<Pod>): void {
    const key = podKey(pod);
    const node = pod.spec?.nodeName;
    if (node && !isTerminal(pod)) {
      // Bound: the cache has caught up with an assumption, or another scheduler placed it.
      this.#assumed.delete(key);
      this.#place(key, pod, node);
      return;
    }
    // Still pending in the cache while its binding is in flight: the assumption stands.
    if (!isTerminal(pod) && this.#assumed.has(key)) return;
    this.#assumed.delete(key);
    this.#remove(key);
  }

  /** A pod is gone: its room is free, and an assumption about it ends. */
  deletePod(pod: DeepReadonly<Pod>): void {
    const key = podKey(pod);
    this.#assumed.delete(key);
    this.#remove(key);
  }

  /** Record that `pod` is being bound to `node`: counted there until the cache shows it. */
  assume(pod: DeepReadonly<Pod>, node: string): void {
    const key = podKey(pod);
    // Frozen like the cache's pods, so podRequests computes its requests once, not at each rebuild of the
    // node's NodeInfo (that was ~1% of the scheduler's CPU in the schedule bench).
    const bound = Object.freeze({
      ...pod,
      spec: Object.freeze({ containers: [], ...pod.spec, nodeName: node }),
    }) as DeepReadonly<Pod>;
    this.#assumed.set(key, this.#clock.now());
    this.#place(key, bound, node);
  }

  /** Drop the assumption about the pod with this uid (its binding failed): the node's room is given back. */
  forget(uid: string): void {
    if (!this.#assumed.delete(uid)) return;
    this.#remove(uid);
  }

  /** Whether the pod with this uid was placed here and the cache has not shown it bound yet. */
  isAssumed(uid: string): boolean {
    return this.#assumed.has(uid);
  }

  /** The number of pods assumed and not yet confirmed. */
  get assumedCount(): number {
    return this.#assumed.size;
  }

  /**
   * Every known node with the pods on it, sorted by name. Assumptions older than the TTL are dropped
   * first. NodeInfos of nodes unchanged since the last call are the same objects.
   */
  snapshot(): NodeInfo[] {
    this.#expire();
    this.#order ??= [...this.#nodes.values()]
      .filter((e) => e.node)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return this.#order.map((e) => (e.info ??= nodeInfo(e.node as DeepReadonly<Node>, [...e.pods.values()])));
  }

  /** The generation of a node's entry (for tests: it changes when, and only when, the node's picture does). */
  generation(name: string): number | undefined {
    return this.#nodes.get(name)?.generation;
  }

  #expire(): void {
    if (this.#assumed.size === 0) return;
    const now = this.#clock.now();
    for (const [key, at] of this.#assumed) {
      if (now - at > this.#ttlMs) {
        this.#assumed.delete(key);
        this.#remove(key);
      }
    }
  }

  #entry(name: string): NodeEntry {
    let e = this.#nodes.get(name);
    if (!e) {
      e = { name, node: undefined, pods: new Map(), generation: 0, info: undefined };
      this.#nodes.set(name, e);
    }
    return e;
  }

  #bump(e: NodeEntry): void {
    e.generation++;
    e.info = undefined;
  }

  #place(key: string, pod: DeepReadonly<Pod>, node: string): void {
    const was = this.#placedOn.get(key);
    if (was !== undefined && was !== node) this.#remove(key);
    const e = this.#entry(node);
    if (e.pods.get(key) === pod) return;
    e.pods.set(key, pod);
    this.#placedOn.set(key, node);
    this.#bump(e);
  }

  #remove(key: string): void {
    const was = this.#placedOn.get(key);
    if (was === undefined) return;
    this.#placedOn.delete(key);
    const e = this.#nodes.get(was);
    if (!e) return;
    e.pods.delete(key);
    this.#bump(e);
    if (!e.node && e.pods.size === 0) this.#nodes.delete(was);
  }
}
