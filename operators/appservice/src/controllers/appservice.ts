/**
 * The AppService controller: states the Deployment and the Service an AppService wants and lets
 * `reconcileChildren` apply them (server-side apply, owner reference, pruning), so a spec change, an
 * edited child or a deleted child all converge back to the spec; deleting the AppService removes both
 * through garbage collection. Status mirrors the Deployment's counts and merges its conditions with the
 * operator's own Ready, by type.
 */
import {
  CacheNotSyncedError,
  Deployments,
  RetryTracker,
  Services,
  controller,
  generationChanged,
  manageError,
  reconcileChildren,
  requeueAfter,
  setCondition,
  updateStatusIfChanged,
  type ConditionLike,
  type Deployment,
} from "opkit";
import { AppService } from "../api/v1/appservice.ts";
import { desiredDeployment, desiredService } from "../resources.ts";

/** The condition the operator owns; every other type is the Deployment's, copied as it reports it. */
export const READY = "Ready";

export function appServiceController() {
  const retries = new RetryTracker();
  return controller("appservice")
    .for(AppService, { predicates: [generationChanged()] })
    .owns(Deployments)
    .owns(Services)
    .reconcile(async (req, ctx) => {
      const app = ctx.cache.get(AppService, req.name, { namespace: req.namespace });
      if (!app) return; // deleted: garbage collection removes the children
      const manage = { client: ctx.client, recorder: ctx.recorder, retries };
      try {
        const result = await reconcileChildren(
          ctx.client,
          app,
          [desiredDeployment(app), desiredService(app)],
          {
            fieldManager: ctx.fieldManager,
            ownedKinds: [Deployments, Services],
            cache: ctx.cache,
          },
        );
        const dep = result.applied.find((o): o is Deployment => o.kind === "Deployment");
        const ds = dep?.status ?? {};
        const mine = (app.status?.conditions ?? []).filter((c) => c.type === READY);
        const { conditions: ready } = setCondition<ConditionLike>(mine, {
          type: READY,
          status: result.ready ? "True" : "False",
          reason: result.ready ? "Available" : "Progressing",
          message: result.ready
            ? `${ds.availableReplicas ?? 0} of ${app.spec.size} pods available`
            : `waiting for ${result.notReady.join(", ")}: ${ds.availableReplicas ?? 0} of ${app.spec.size} pods available, ${ds.updatedReplicas ?? 0} updated`,
          observedGeneration: app.metadata.generation,
        });
        await updateStatusIfChanged(ctx.client, app, {
          observedGeneration: app.metadata.generation,
          replicas: ds.replicas,
          readyReplicas: ds.readyReplicas,
          availableReplicas: ds.availableReplicas,
          updatedReplicas: ds.updatedReplicas,
          unavailableReplicas: ds.unavailableReplicas,
          conditions: [...(ds.conditions ?? []).filter((c) => c.type !== READY), ...ready],
        });
        retries.forget(app.metadata.uid ?? "");
      } catch (err) {
        if (err instanceof CacheNotSyncedError) throw err;
        // A False Ready condition, a Warning Event, and a retry that backs off (capped at 6 h).
        return requeueAfter(await manageError(manage, app, err));
      }
    });
}
