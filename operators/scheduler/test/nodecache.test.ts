/**
 * The incremental node picture: after any sequence of informer events and assumptions it equals the
 * picture rebuilt from scratch (every node with its bound, unfinished pods and the assumed ones);
 * only the nodes that changed get a new NodeInfo; assumptions end when the cache shows the pod bound
 * or gone, when the binding fails, or after the TTL.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { FakeClock, type Cache, type DeepReadonly, type Node, type Pod } from "opkit";
import { NodeCache } from "../src/nodecache.ts";
import { nodeInfo, type NodeInfo } from "../src/plugins/types.ts";
import { node, pod } from "./helpers.ts";

const frozen = <T>(x: T): DeepReadonly<T> => structuredClone(x) as DeepReadonly<T>;
const uids = (i: NodeInfo) => i.pods.map((p) => p.metadata.uid).sort();

/** What a picture says, without object identities. */
function view(infos: readonly NodeInfo[]) {
  return infos.map((i) => ({
    node: i.node.metadata.name,
    cpu: i.node.status?.allocatable?.cpu,
    pods: uids(i),
    requested: i.requested,
    nonZeroRequested: i.nonZeroRequested,
  }));
}

describe("NodeCache", () => {
  it("counts bound pods on their nodes and gives a new NodeInfo only to the nodes that changed", () => {
    const c = new NodeCache();
    c.setNode(frozen(node("b")));
    c.setNode(frozen(node("a")));
    c.setPod(frozen(pod({ uid: "p1", cpu: "1", nodeName: "a" })));
    c.setPod(frozen(pod({ uid: "pending", cpu: "1" })));
    const [a1, b1] = c.snapshot();
    assert.equal(a1?.node.metadata.name, "a", "sorted by name");
    assert.deepEqual(uids(a1), ["p1"]);
    assert.equal(a1?.requested.cpu, 1000);
    assert.deepEqual(uids(b1!), [], "an unbound pod counts nowhere");
    const genB = c.generation("b");
    c.setPod(frozen(pod({ uid: "p2", cpu: "500m", nodeName: "a" })));
    const [a2, b2] = c.snapshot();
    assert.notEqual(a2, a1);
    assert.equal(a2?.requested.cpu, 1500);
    assert.equal(b2, b1, "node b unchanged: the same NodeInfo");
    assert.equal(c.generation("b"), genB);
    assert.deepEqual(uids(a1), ["p1"], "a NodeInfo handed out never changes");
    c.setPod(frozen({ ...pod({ uid: "p2", cpu: "500m", nodeName: "a" }), status: { phase: "Succeeded" } }));
    assert.equal(c.snapshot()[0]?.requested.cpu, 1000, "a finished pod frees its room");
    c.deleteNode("a");
    assert.deepEqual(
      c.snapshot().map((i) => i.node.metadata.name),
      ["b"],
    );
    c.setNode(frozen(node("a")));
    assert.deepEqual(uids(c.snapshot()[0]!), ["p1"], "pods on a node that went stay counted if it returns");
  });

  it("keeps an assumed pod until the cache shows it bound or gone, the binding fails, or the TTL passes", () => {
    const clock = new FakeClock();
    const c = new NodeCache({ clock, ttlMs: 1000 });
    c.setNode(frozen(node("n1")));
    c.setNode(frozen(node("n2")));
    const p = frozen(pod({ uid: "u1", cpu: "1" }));
    c.setPod(p);
    c.assume(p, "n1");
    assert.ok(c.isAssumed("u1"));
    assert.equal(c.snapshot()[0]?.requested.cpu, 1000, "counted on its node while the cache lags");
    c.setPod(frozen({ ...pod({ uid: "u1", cpu: "1" }), status: { conditions: [] } }));
    assert.ok(c.isAssumed("u1"), "a pending update of the pod keeps the assumption");
    assert.equal(c.snapshot()[0]?.requested.cpu, 1000);
    // The cache shows it bound (elsewhere: another scheduler won): counted there, once.
    c.setPod(frozen(pod({ uid: "u1", cpu: "1", nodeName: "n2" })));
    assert.equal(c.isAssumed("u1"), false);
    assert.deepEqual(
      view(c.snapshot()).map((v) => v.pods),
      [[], ["u1"]],
    );

    const q = frozen(pod({ uid: "u2", cpu: "1" }));
    c.setPod(q);
    c.assume(q, "n1");
    c.forget("u2");
    assert.equal(c.snapshot()[0]?.requested.cpu ?? 0, 0, "a failed binding gives the room back");
    c.assume(q, "n1");
    c.deletePod(q);
    assert.equal(c.isAssumed("u2"), false, "deleted pod");
    assert.equal(c.snapshot()[0]?.requested.cpu ?? 0, 0);
    const r = frozen(pod({ uid: "u3", cpu: "1" }));
    c.setPod(r);
    c.assume(r, "n1");
    clock.advance(1001);
    assert.equal(c.snapshot()[0]?.requested.cpu ?? 0, 0, "expired");
    assert.equal(c.isAssumed("u3"), false);
  });

  it("equals the picture rebuilt from scratch after any sequence of events (property)", () => {
    const NODES = ["n0", "n1", "n2"];
    const PODS = ["p0", "p1", "p2"];
    const op = fc.oneof(
      fc.record({
        t: fc.constant("node" as const),
        n: fc.constantFrom(...NODES),
        cpu: fc.constantFrom("4", "8"),
      }),
      fc.record({ t: fc.constant("nodeGone" as const), n: fc.constantFrom(...NODES) }),
      fc.record({
        t: fc.constant("pod" as const),
        p: fc.constantFrom(...PODS),
        // Unbound half the time, so that assumptions have pods to stand for.
        n: fc.option(fc.constantFrom(...NODES), { nil: undefined, freq: 2 }),
        cpu: fc.constantFrom("100m", "1", undefined),
        done: fc.boolean(),
      }),
      fc.record({ t: fc.constant("podGone" as const), p: fc.constantFrom(...PODS) }),
      fc.record({
        t: fc.constant("assume" as const),
        p: fc.constantFrom(...PODS),
        n: fc.constantFrom(...NODES),
      }),
      fc.record({ t: fc.constant("forget" as const), p: fc.constantFrom(...PODS) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const c = new NodeCache();
        // The model: what the informers hold, and the assumptions, from which the picture is rebuilt.
        const nodes = new Map<string, DeepReadonly<Node>>();
        const pods = new Map<string, DeepReadonly<Pod>>();
        const assumed = new Map<string, DeepReadonly<Pod>>();
        const bound = (p: DeepReadonly<Pod>) => Boolean(p.spec?.nodeName) && !p.status?.phase;
        for (const o of ops) {
          switch (o.t) {
            case "node": {
              const n = frozen(node(o.n, { cpu: o.cpu }));
              nodes.set(o.n, n);
              c.setNode(n);
              break;
            }
            case "nodeGone":
              nodes.delete(o.n);
              c.deleteNode(o.n);
              break;
            case "pod": {
              const base = pod({ uid: o.p, cpu: o.cpu, nodeName: o.n });
              const p = frozen(o.done ? { ...base, status: { phase: "Failed" as const } } : base);
              pods.set(o.p, p);
              if (bound(p) || p.status?.phase) assumed.delete(o.p);
              c.setPod(p);
              break;
            }
            case "podGone": {
              const p = pods.get(o.p);
              if (!p) break;
              pods.delete(o.p);
              assumed.delete(o.p);
              c.deletePod(p);
              break;
            }
            case "assume": {
              // The scheduler assumes only pods it sees pending and has not assumed yet.
              const p = pods.get(o.p);
              if (!p || bound(p) || p.status?.phase || assumed.has(o.p)) break;
              assumed.set(o.p, frozen({ ...p, spec: { ...p.spec!, nodeName: o.n } }));
              c.assume(p, o.n);
              break;
            }
            case "forget":
              assumed.delete(o.p);
              c.forget(o.p);
              break;
          }
          const counted = [...[...pods.values()].filter(bound), ...assumed.values()];
          const want = [...nodes.keys()].sort().map((n) =>
            nodeInfo(
              nodes.get(n)!,
              counted.filter((p) => p.spec?.nodeName === n),
            ),
          );
          assert.deepEqual(view(c.snapshot()), view(want));
          for (const k of PODS) assert.equal(c.isAssumed(k), assumed.has(k));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("an informer update that replaces a pod by another with the same name (a relist) uncounts the old one", () => {
    // A relist diffs by namespace/name: a pod deleted and recreated under its name while the watch was
    // down comes as one update from the old object to the new one, as in client-go (kube-scheduler's
    // updatePod handles a changed uid as a delete and an add).
    type Handlers<T> = {
      onAdd?: (o: DeepReadonly<T>) => void;
      onUpdate?: (o: DeepReadonly<T>, n: DeepReadonly<T>) => void;
      onDelete?: (o: DeepReadonly<T>) => void;
    };
    const handlers = new Map<string, Handlers<unknown>>();
    const cache = {
      informer: (kind: { kind: string }) => ({
        addEventHandler: (h: Handlers<unknown>) => void handlers.set(kind.kind, h),
      }),
    } as unknown as Cache;
    const c = new NodeCache();
    c.watch(cache);
    const nodes = handlers.get("Node") as Handlers<Node>;
    const pods = handlers.get("Pod") as Handlers<Pod>;
    nodes.onAdd?.(frozen(node("a")));
    nodes.onAdd?.(frozen(node("b")));
    const old = pod({ uid: "old", cpu: "1", nodeName: "a" });
    pods.onAdd?.(frozen(old));
    const recreated: Pod = { ...pod({ uid: "new", cpu: "1" }), metadata: { ...old.metadata, uid: "new" } };
    pods.onUpdate?.(frozen(old), frozen(recreated));
    assert.deepEqual(
      view(c.snapshot()).map((i) => [i.node, i.pods]),
      [
        ["a", []],
        ["b", []],
      ],
      "the old pod is gone and the new one is pending",
    );
    const bound: Pod = structuredClone(recreated);
    if (bound.spec) bound.spec.nodeName = "b";
    pods.onUpdate?.(frozen(recreated), frozen(bound));
    assert.deepEqual(
      view(c.snapshot()).map((i) => [i.node, i.pods]),
      [
        ["a", []],
        ["b", ["new"]],
      ],
    );
  });
});
