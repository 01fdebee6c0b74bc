/**
 * The Memcached controller (seed 003): a Deployment of `spec.size` memcached pods owned by the
 * Memcached, and `status.nodes` = the names of its live pods, sorted. Pods are watched directly (they
 * belong to the Deployment's ReplicaSet, not to the Memcached) and mapped back by their instance label,
 * so a pod that starts or goes wakes the Memcached it serves.
 */
import {
  CacheNotSyncedError,
  Deployments,
  Pods,
  RetryTracker,
  controller,
  generationChanged,
  labelSelectorPredicate,
  manageError,
  reconcileChildren,
  requeueAfter,
  setCondition,
  updateStatusIfChanged,
  type DeepReadonly,
  type Deployment,
  type Pod,
} from "opkit";
import { Memcached, type MemcachedObject } from "../api/v1alpha1/memcached.ts";

const NAME_LABEL = "app.kubernetes.io/name";
const INSTANCE_LABEL = "app.kubernetes.io/instance";
const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
const MANAGER = "memcached-operator";

export function labelsFor(m: DeepReadonly<MemcachedObject>): Record<string, string> {
  return { [NAME_LABEL]: "memcached", [INSTANCE_LABEL]: m.metadata.name ?? "", [MANAGED_BY_LABEL]: MANAGER };
}

export function desiredDeployment(m: DeepReadonly<MemcachedObject>): Deployment {
  const labels = labelsFor(m);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: m.metadata.name, namespace: m.metadata.namespace, labels },
    spec: {
      replicas: m.spec.size,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "memcached",
              image: "memcached:1.6.38-alpine",
              command: ["memcached", "--memory-limit=64", "-o", "modern", "-v"],
              ports: [{ name: "memcached", containerPort: 11211, protocol: "TCP" }],
              securityContext: {
                runAsUser: 1001,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ["ALL"] },
              },
            },
          ],
        },
      },
    },
  };
}

/** The pods that serve: not being deleted and not finished, by name. */
export function nodeNames(pods: readonly DeepReadonly<Pod>[]): string[] {
  return pods
    .filter(
      (p) => !p.metadata.deletionTimestamp && p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed",
    )
    .map((p) => p.metadata.name ?? "")
    .sort();
}

export function memcachedController() {
  const retries = new RetryTracker();
  return controller("memcached")
    .for(Memcached, { predicates: [generationChanged()] })
    .owns(Deployments)
    .watches(
      Pods,
      (pod) => {
        const instance = pod.metadata.labels?.[INSTANCE_LABEL];
        return instance ? [{ namespace: pod.metadata.namespace, name: instance }] : [];
      },
      { predicates: [labelSelectorPredicate(`${NAME_LABEL}=memcached,${MANAGED_BY_LABEL}=${MANAGER}`)] },
    )
    .reconcile(async (req, ctx) => {
      const m = ctx.cache.get(Memcached, req.name, { namespace: req.namespace });
      if (!m) return;
      const manage = { client: ctx.client, recorder: ctx.recorder, retries };
      try {
        const result = await reconcileChildren(ctx.client, m, [desiredDeployment(m)], {
          fieldManager: ctx.fieldManager,
          ownedKinds: [Deployments],
          cache: ctx.cache,
        });
        const selector = Object.entries(labelsFor(m))
          .map(([k, v]) => `${k}=${v}`)
          .join(",");
        const nodes = nodeNames(ctx.cache.list(Pods, { namespace: req.namespace, labelSelector: selector }));
        const ready = result.ready && nodes.length === m.spec.size;
        const { conditions } = setCondition(m.status?.conditions, {
          type: "Ready",
          status: ready ? "True" : "False",
          reason: ready ? "Available" : "Scaling",
          message: `${nodes.length} of ${m.spec.size} memcached pods`,
          observedGeneration: m.metadata.generation,
        });
        await updateStatusIfChanged(ctx.client, m, {
          observedGeneration: m.metadata.generation,
          nodes,
          conditions,
        });
        retries.forget(m.metadata.uid ?? "");
      } catch (err) {
        if (err instanceof CacheNotSyncedError) throw err;
        return requeueAfter(await manageError(manage, m, err));
      }
    });
}
