/**
 * The scheduler controller: reconciles the pending pods whose `spec.schedulerName` one of its profiles
 * serves. Each reconcile takes the nodes' picture (Nodes, and the non-terminal pods bound to them, plus
 * the pods this process bound and the cache has not shown yet: see nodecache.ts, kept up to date from
 * the informers' events rather than rebuilt per decision), lets the profile decide, and either binds the pod through `pods/binding` or marks it `PodScheduled=False`
 * (Unschedulable, with the per-node reasons) with a Warning Event and retries it: at once when a node
 * or a bound pod changes in a way that could make room, else after a backoff (1 s doubling to 30 s).
 */
import {
  AlreadyExistsError,
  ConflictError,
  NotFoundError,
  Nodes,
  Pods,
  RetryTracker,
  controller,
  requeueAfter,
  type Cache,
  type DeepReadonly,
  type KubeObject,
  type Node,
  type Pod,
  type Predicate,
  type Request,
} from "opkit";
import type { Profile } from "../config.ts";
import { schedule } from "../framework.ts";
import { isTerminal, NodeCache } from "../nodecache.ts";

/** core/v1 Binding: what `pods/binding` takes. */
interface Binding extends KubeObject {
  target: { apiVersion: "v1"; kind: "Node"; name: string };
}

/**
 * Reconciles (so bindings) in flight at once. A binding is a round trip of ~50-300 ms and a decision well
 * under a millisecond, so the rate is this many over the binding's latency: on an idle 2-core env, 16 bound
 * ~95 pods/s, 64 ~104-142 and 128 ~145-179 (kube-scheduler, which binds without a limit, ~130-230 in the
 * same runs). On a saturated apiserver more in flight only lengthens each binding.
 */
export const BINDING_WORKERS = 128;

/** kube-scheduler's Event reasons. */
const FAILED_SCHEDULING = "FailedScheduling";
const SCHEDULED = "Scheduled";

/** A pod one of `names` must place: unbound, not being deleted, not finished. */
export function isPendingFor(names: ReadonlySet<string>, p: DeepReadonly<Pod>): boolean {
  return (
    names.has(p.spec?.schedulerName ?? "default-scheduler") &&
    !p.spec?.nodeName &&
    !p.metadata.deletionTimestamp &&
    !isTerminal(p)
  );
}

/** Only node changes that can change a decision: labels, taints, cordon, size, readiness, images. */
export const nodeSchedulingChanged: Predicate<Node> = {
  update(o, n) {
    const view = (x: DeepReadonly<Node>): string =>
      JSON.stringify([
        x.metadata.labels,
        x.spec?.taints,
        x.spec?.unschedulable,
        x.status?.allocatable,
        x.status?.conditions?.find((c) => c.type === "Ready")?.status,
        x.status?.images,
      ]);
    return view(o) !== view(n);
  },
  delete: () => false,
};

/**
 * Bound pods that free room: a bound pod deleted or finished (a finished pod leaves the cache, whose
 * field selector keeps only non-terminal pods, as a delete).
 */
export const boundPodFreed: Predicate<Pod> = {
  create: () => false,
  update: (o, n) => Boolean(o.spec?.nodeName) && !isTerminal(o) && isTerminal(n),
  delete: (p) => Boolean(p.spec?.nodeName),
};

/** Every cached pending pod `names` serve, as keys. */
function pendingKeys(cache: Cache, names: ReadonlySet<string>): Request[] {
  return cache
    .list(Pods)
    .filter((p) => isPendingFor(names, p))
    .map((p) => ({ namespace: p.metadata.namespace, name: p.metadata.name ?? "" }));
}

/**
 * `fn`, computed once per turn of the event loop for the same argument: an informer delivers a whole
 * list or watch chunk in one turn (the 100 Nodes of a start-up, each of which would walk every cached
 * pod), and they all get the first call's answer. Safe for `pendingKeys`: a pod that turns up later in
 * the same turn is queued by its own event. `defer` schedules the reset (tests pass their own).
 */
export function oncePerTurn<A, R>(
  fn: (arg: A) => R,
  defer: (reset: () => void) => void = (reset) => setImmediate(reset),
): (arg: A) => R {
  let memo: { arg: A; result: R } | undefined;
  return (arg) => {
    if (memo && memo.arg === arg) return memo.result;
    const result = fn(arg);
    if (!memo) defer(() => (memo = undefined));
    memo = { arg, result };
    return result;
  };
}

/**
 * The node picture fed by `cache`'s informers, one per cache (so per manager), registered on the first
 * decision: the controller's informers have synced by then, and their objects are delivered at once.
 */
function nodeCacheFor(caches: WeakMap<Cache, NodeCache>, cache: Cache): NodeCache {
  let nodes = caches.get(cache);
  if (!nodes) {
    nodes = new NodeCache();
    nodes.watch(cache);
    caches.set(cache, nodes);
  }
  return nodes;
}

/** How many of the best candidates' scores a decision's log line names. */
const LOGGED_SCORES = 3;

/**
 * The `n` best scores, best first (ties by node name): enough to see why a node won, without writing
 * every feasible node's score per pod (on 100 nodes that was most of a log line's cost).
 */
export function topScores(scores: Readonly<Record<string, number>>, n: number): Record<string, number> {
  const best = Object.entries(scores)
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, n);
  return Object.fromEntries(best);
}

/** A reference the event recorder can name (cached objects may lack apiVersion and kind). */
function podRef(p: DeepReadonly<Pod>): Pod {
  return { apiVersion: "v1", kind: "Pod", metadata: { ...p.metadata } } as Pod;
}

/** The scheduler's controller for `profiles` (one per scheduler name it serves). */
export function schedulerController(profiles: readonly Profile[]) {
  const byName = new Map(profiles.map((p) => [p.schedulerName, p]));
  const names = new Set(byName.keys());
  const nodeCaches = new WeakMap<Cache, NodeCache>();
  const pending = oncePerTurn((cache: Cache) => pendingKeys(cache, names));
  const retries = new RetryTracker({ baseMs: 1_000, maxMs: 30_000 });
  const mine: Predicate<Pod> = {
    create: (p) => isPendingFor(names, p),
    // Not on status-only writes (its own Unschedulable condition among them): those change no decision.
    update: (o, n) =>
      isPendingFor(names, n) &&
      (!isPendingFor(names, o) || JSON.stringify(o.spec) !== JSON.stringify(n.spec)),
    delete: (p) => names.has(p.spec?.schedulerName ?? ""),
  };
  return (
    controller("scheduler")
      .for(Pods, { predicates: [mine] })
      // Bindings are round trips: several in flight, as kube-scheduler binds asynchronously. Decisions stay
      // one at a time (each is synchronous up to its assumption).
      .withOptions({ maxConcurrent: BINDING_WORKERS })
      // Binding is the scheduler's one write to a pod's placement; the condition says why it could not.
      .rbac([
        { kind: Pods, verbs: ["create"], subresource: "binding" },
        { kind: Pods, verbs: ["patch"], subresource: "status" },
      ])
      .watches(Nodes, (_node, { cache }) => pending(cache), {
        predicates: [nodeSchedulingChanged],
      })
      .watches(Pods, (_pod, { cache }) => pending(cache), { predicates: [boundPodFreed] })
      .reconcile(async (req, ctx) => {
        const pod = ctx.cache.get(Pods, req.name, { namespace: req.namespace });
        if (!pod || !isPendingFor(names, pod)) {
          if (pod?.metadata.uid) retries.forget(pod.metadata.uid);
          return;
        }
        const uid = pod.metadata.uid ?? "";
        const nodes = nodeCacheFor(nodeCaches, ctx.cache);
        // Bound here already; the cache has not caught up yet.
        if (nodes.isAssumed(uid)) return;
        const profile = byName.get(pod.spec?.schedulerName ?? "") as Profile;
        const decision = schedule(pod, nodes.snapshot(), profile);
        if (decision.kind === "scheduled") {
          // Assumed before the first await: deciding and assuming run without a gap, so the other workers'
          // decisions (and this pod's, if anything goes wrong) always count this placement.
          nodes.assume(pod, decision.node);
          try {
            const binding: Binding = {
              apiVersion: "v1",
              kind: "Binding",
              // The uid makes the binding fail instead of placing a pod recreated under the same name.
              metadata: { name: req.name, namespace: req.namespace, uid },
              target: { apiVersion: "v1", kind: "Node", name: decision.node },
            };
            await ctx.client.createSubresource(Pods, req.name, "binding", binding, {
              namespace: req.namespace,
            });
          } catch (err) {
            nodes.forget(uid);
            // Bound meanwhile (by us before a restart, or by another scheduler) or gone: nothing to do.
            if (
              err instanceof ConflictError ||
              err instanceof NotFoundError ||
              err instanceof AlreadyExistsError
            ) {
              ctx.log.info({ err: String(err) }, "pod is no longer pending; not bound");
              return;
            }
            throw err;
          }
          retries.forget(uid);
          ctx.log.info(
            {
              node: decision.node,
              scores: topScores(decision.scores, LOGGED_SCORES),
              feasibleNodes: Object.keys(decision.scores).length,
              profile: profile.schedulerName,
            },
            "bound",
          );
          void ctx.recorder.record(podRef(pod), {
            type: "Normal",
            reason: SCHEDULED,
            action: "Binding",
            note: `Successfully assigned ${req.namespace}/${req.name} to ${decision.node}`,
          });
          return;
        }
        const current = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
        if (
          current?.status !== "False" ||
          current.reason !== "Unschedulable" ||
          current.message !== decision.message
        ) {
          await ctx.client.patch(
            Pods,
            req.name,
            {
              status: {
                conditions: [
                  {
                    type: "PodScheduled",
                    status: "False",
                    reason: "Unschedulable",
                    message: decision.message,
                    lastProbeTime: null,
                    lastTransitionTime:
                      current?.status === "False" ? current.lastTransitionTime : new Date().toISOString(),
                  },
                ],
              },
            },
            { namespace: req.namespace, type: "strategic", subresource: "status" },
          );
        }
        void ctx.recorder.record(podRef(pod), {
          type: "Warning",
          reason: FAILED_SCHEDULING,
          action: "Scheduling",
          note: decision.message,
        });
        ctx.log.info({ message: decision.message, profile: profile.schedulerName }, "unschedulable");
        return requeueAfter(retries.next(uid));
      })
  );
}
