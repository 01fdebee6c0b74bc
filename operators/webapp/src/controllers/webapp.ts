/**
 * The WebApp controller (seed 004): states the seven objects a WebApp wants — ConfigMap, Secret,
 * headless database Service, PostgreSQL StatefulSet, app Deployment, app Service, Ingress — and lets
 * `reconcileChildren` apply them (server-side apply, owner reference, pruning), so a spec change, an
 * edited child or a deleted child converge back to the spec; deleting the WebApp removes them all by
 * garbage collection. Three things need more than "apply the desired state":
 * - the Secret's credentials are generated once (src/credentials.ts) and read back afterwards, and a
 *   Secret of that name the WebApp does not own is never adopted or overwritten (condition Conflict);
 * - a tier change that alters the StatefulSet's volume claim templates, which Kubernetes cannot update,
 *   replaces the StatefulSet: deleted with propagation Orphan when it has claims (the pod and claims
 *   stay and the new one adopts them), with propagation Background when its storage was ephemeral
 *   (nothing to keep, and a pod's volumes cannot change), then created anew (see README);
 * - a spec the schema let through but the operator cannot act on (src/validation.ts) is reported and
 *   left until the user changes it.
 * Status: the seed's `created` flag, one condition per child's readiness, and Ready.
 */
import {
  AlreadyExistsError,
  CacheNotSyncedError,
  ConfigMaps,
  ConflictError,
  Deployments,
  Ingresses,
  MANAGER_LABEL,
  NotFoundError,
  OWNER_UID_LABEL,
  PersistentVolumeClaims,
  RetryTracker,
  Secrets,
  Services,
  StatefulSets,
  controller,
  controllerReferenceTo,
  generationChanged,
  getControllerOf,
  isChildReady,
  isControlledBy,
  manageError,
  managerLabelValue,
  reconcileChildren,
  removeCondition,
  requeueAfter,
  setCondition,
  setControllerReference,
  updateStatusIfChanged,
  type Condition,
  type DeepReadonly,
  type KubeObject,
  type ReconcileContext,
  type Secret,
  type StatefulSet,
} from "opkit";
import { WebApp, type WebAppObject } from "../api/v1alpha1/webapp.ts";
import { credentialsFrom, generateCredentials } from "../credentials.ts";
import {
  claimTemplates,
  desiredConfigMap,
  desiredDatabaseService,
  desiredDeployment,
  desiredIngress,
  desiredSecret,
  desiredService,
  desiredStatefulSet,
  names,
  storageSignature,
  type Credentials,
} from "../resources.ts";
import { specProblems } from "../validation.ts";

type App = DeepReadonly<WebAppObject>;

export const READY = "Ready";
export const CONFLICT = "Conflict";

/** The readiness condition of each child, by the child's role. */
export const CHILD_CONDITIONS = {
  configMap: "ConfigMapReady",
  secret: "SecretReady",
  databaseService: "DatabaseServiceReady",
  statefulSet: "DatabaseReady",
  deployment: "DeploymentReady",
  service: "ServiceReady",
  ingress: "IngressReady",
} as const;
type Role = keyof typeof CHILD_CONDITIONS;

/** Every kind a WebApp's children have: the only kinds pruned, and the controller's `owns`. */
export const OWNED_KINDS = [ConfigMaps, Secrets, Services, StatefulSets, Deployments, Ingresses] as const;

/** A child's name is taken by an object the WebApp does not control: it is neither adopted nor changed. */
export class ChildConflictError extends Error {
  /** The child's role, e.g. "secret". */
  readonly role: Role;
  constructor(role: Role, what: string, owner: string) {
    super(
      `${what} already exists and is ${owner}; it is left as it is. Delete or rename it, or rename the WebApp`,
    );
    this.name = "ChildConflictError";
    this.role = role;
  }
}

function ownerText(obj: DeepReadonly<KubeObject>): string {
  const ref = getControllerOf(obj);
  return ref ? `controlled by ${ref.kind} ${ref.name}` : "not owned by this WebApp";
}

/**
 * The credentials of the WebApp's Secret. A Secret it controls is read back (from the cache, or from
 * the API server when the cache has not seen it yet); none at all is created with fresh credentials,
 * by a create that fails if someone else created it meanwhile, so two reconciles never write two
 * different passwords.
 */
async function ensureCredentials(ctx: ReconcileContext, app: App): Promise<Credentials> {
  const name = names(app).secret;
  const namespace = app.metadata.namespace;
  let live: DeepReadonly<Secret> | undefined = ctx.cache.get(Secrets, name, { namespace });
  if (!live) {
    const body = desiredSecret(app, generateCredentials());
    body.metadata.labels = {
      ...body.metadata.labels,
      [OWNER_UID_LABEL]: app.metadata.uid ?? "",
      [MANAGER_LABEL]: managerLabelValue(ctx.fieldManager),
    };
    setControllerReference(app, body, { ownerNamespaced: true, childNamespaced: true });
    try {
      live = await ctx.client.create(body);
      ctx.log.info({ secret: name }, "generated database credentials");
    } catch (err) {
      if (!(err instanceof AlreadyExistsError)) throw err;
      live = await ctx.client.get(Secrets, name, { namespace });
    }
  }
  if (!isControlledBy(live, app))
    throw new ChildConflictError("secret", `Secret ${namespace}/${name}`, ownerText(live));
  return credentialsFrom(live);
}

/**
 * Add the WebApp as a (non-controller) owner of the claims a StatefulSet made from its templates. A
 * strategic merge patch adds the reference next to the StatefulSet's own, which the orphaning delete
 * then removes; a claim that does not exist is skipped.
 */
async function keepClaimsWithWebApp(
  ctx: ReconcileContext,
  app: App,
  sts: DeepReadonly<StatefulSet>,
): Promise<void> {
  const ref = { ...controllerReferenceTo(app), controller: false, blockOwnerDeletion: false };
  const replicas = sts.spec?.replicas ?? 1;
  for (const template of sts.spec?.volumeClaimTemplates ?? []) {
    for (let i = 0; i < replicas; i++) {
      const claim = `${template.metadata?.name ?? ""}-${sts.metadata.name ?? ""}-${i}`;
      try {
        await ctx.client.patch(
          PersistentVolumeClaims,
          claim,
          { metadata: { ownerReferences: [ref] } },
          { type: "strategic", namespace: app.metadata.namespace },
        );
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
  }
}

export function webAppController() {
  const retries = new RetryTracker();
  return controller("webapp")
    .for(WebApp, { predicates: [generationChanged()] })
    .owns(ConfigMaps)
    .owns(Secrets)
    .owns(Services)
    .owns(StatefulSets)
    .owns(Deployments)
    .owns(Ingresses)
    .reconcile(async (req, ctx) => {
      const app = ctx.cache.get(WebApp, req.name, { namespace: req.namespace });
      if (!app || app.metadata.deletionTimestamp) return; // garbage collection removes the children
      const id = app.metadata.uid ?? "";
      let conditions: Condition[] = (app.status?.conditions ?? []).map((c) => ({ ...c }) as Condition);
      const set = (type: string, ok: boolean, reason: string, message: string) => {
        conditions = setCondition(conditions, {
          type,
          status: ok ? "True" : "False",
          reason,
          message,
          observedGeneration: app.metadata.generation,
        }).conditions;
      };
      const writeStatus = (created: boolean) =>
        updateStatusIfChanged(ctx.client, app, {
          created,
          observedGeneration: app.metadata.generation,
          conditions,
        });
      const created = app.status?.created ?? false;

      const problems = specProblems(app);
      if (problems.length > 0) {
        // Only the user can fix this: report it once per spec and wait for the next change of the spec.
        const message = problems.join("; ");
        const before = app.status?.conditions?.find((c) => c.type === READY);
        set(READY, false, "InvalidSpec", message);
        // Children's events may still wake it: the Event is recorded when the problem is new.
        if (before?.reason !== "InvalidSpec" || before.message !== message) {
          await ctx.recorder.record(app, {
            type: "Warning",
            reason: "InvalidSpec",
            action: "Validate",
            note: message,
          });
        }
        await writeStatus(created);
        retries.forget(id);
        return;
      }

      try {
        const creds = await ensureCredentials(ctx, app);
        conditions = removeCondition(conditions, CONFLICT).conditions;
        const n = names(app);

        // The StatefulSet: replaced when its volume claim templates must change (see the file's comment).
        const sts = desiredStatefulSet(app);
        const live = ctx.cache.get(StatefulSets, n.statefulSet, { namespace: app.metadata.namespace });
        if (live && !isControlledBy(live, app)) {
          throw new ChildConflictError(
            "statefulSet",
            `StatefulSet ${app.metadata.namespace ?? ""}/${n.statefulSet}`,
            ownerText(live),
          );
        }
        const replacing = Boolean(live?.metadata.deletionTimestamp);
        if (live && !replacing) {
          const from = storageSignature(live.spec?.volumeClaimTemplates ?? []) || "ephemeral";
          const to = storageSignature(claimTemplates(app)) || "ephemeral";
          if (from !== to) {
            // Claims no template will use any more stay (their data is never deleted by a tier change)
            // and get the WebApp as owner, so deleting the WebApp still removes them.
            if (to === "ephemeral") await keepClaimsWithWebApp(ctx, app, live);
            // From ephemeral storage there is nothing to keep, and an adopted pod could never be moved
            // onto claims (a pod's volumes are immutable): the old pod goes with the old StatefulSet.
            const keep = from !== "ephemeral";
            try {
              await ctx.client.delete(StatefulSets, n.statefulSet, {
                namespace: app.metadata.namespace,
                propagationPolicy: keep ? "Orphan" : "Background",
                preconditions: { uid: live.metadata.uid },
              });
            } catch (err) {
              // The cache lags: the old one is already gone, or a new one took the name. Its event is on
              // the way and wakes this WebApp again.
              if (err instanceof NotFoundError || err instanceof ConflictError) return;
              throw err;
            }
            const note = `the database storage changes (${from} -> ${to}), which a StatefulSet cannot update: replacing StatefulSet ${n.statefulSet}; ${keep ? "its pod and volume claims are kept and adopted by the new one" : "its pod had ephemeral storage only and is replaced"}`;
            ctx.log.info({ statefulSet: n.statefulSet, from, to }, "replacing the database StatefulSet");
            await ctx.recorder.record(app, {
              type: "Normal",
              reason: "ReplacingStatefulSet",
              action: "Replace",
              note,
            });
            set(CHILD_CONDITIONS.statefulSet, false, "Replacing", note);
            set(READY, false, "Replacing", note);
            await writeStatus(created);
            // The StatefulSet's deletion wakes this WebApp again; nothing else is applied meanwhile, so a
            // prune can never turn the orphaning delete into a cascading one.
            return;
          }
        }

        const desired: { role: Role; obj: KubeObject }[] = [
          { role: "configMap", obj: desiredConfigMap(app) },
          { role: "secret", obj: desiredSecret(app, creds) },
          { role: "databaseService", obj: desiredDatabaseService(app) },
          ...(replacing ? [] : [{ role: "statefulSet" as const, obj: sts }]),
          { role: "deployment", obj: desiredDeployment(app) },
          { role: "service", obj: desiredService(app) },
          { role: "ingress", obj: desiredIngress(app) },
        ];
        const result = await reconcileChildren(
          ctx.client,
          app,
          desired.map((d) => d.obj),
          { fieldManager: ctx.fieldManager, ownedKinds: OWNED_KINDS, cache: ctx.cache },
        );
        const waiting: string[] = [];
        result.applied.forEach((obj, i) => {
          const role = desired[i]?.role;
          if (!role) return;
          const ready = isChildReady(obj);
          const what = `${obj.kind ?? ""} ${obj.metadata.name ?? ""}`;
          if (!ready) waiting.push(what);
          set(CHILD_CONDITIONS[role], ready, ready ? "Ready" : "NotReady", childMessage(obj, ready));
        });
        if (replacing) {
          waiting.push(`StatefulSet ${n.statefulSet}`);
          set(
            CHILD_CONDITIONS.statefulSet,
            false,
            "Replacing",
            `waiting for the old StatefulSet ${n.statefulSet} to be deleted`,
          );
        }
        const ready = waiting.length === 0;
        set(
          READY,
          ready,
          ready ? "Available" : "Progressing",
          ready ? "every child is ready" : `waiting for ${waiting.join(", ")}`,
        );
        await writeStatus(created || !replacing);
        retries.forget(id);
      } catch (err) {
        if (err instanceof CacheNotSyncedError) throw err;
        const manage = { client: ctx.client, recorder: ctx.recorder, retries };
        if (err instanceof ChildConflictError) {
          // Retried with backoff: the other object may be deleted or renamed, and nothing else wakes us.
          set(CONFLICT, true, "NameTaken", err.message);
          set(CHILD_CONDITIONS[err.role], false, "Conflict", err.message);
          set(READY, false, "Conflict", err.message);
          await ctx.recorder.record(app, {
            type: "Warning",
            reason: "Conflict",
            action: "Reconcile",
            note: err.message,
          });
          await writeStatus(created);
          return requeueAfter(retries.next(id));
        }
        // A False Ready condition, a Warning Event, and a retry that backs off (capped at 6 h).
        return requeueAfter(await manageError(manage, app, err));
      }
    });
}

function childMessage(obj: DeepReadonly<KubeObject>, ready: boolean): string {
  const what = `${obj.kind ?? ""} ${obj.metadata.name ?? ""}`;
  const status = (obj as DeepReadonly<{ status?: { readyReplicas?: number; availableReplicas?: number } }>)
    .status;
  const spec = (obj as DeepReadonly<{ spec?: { replicas?: number } }>).spec;
  if (obj.kind === "Deployment" || obj.kind === "StatefulSet") {
    const count = obj.kind === "Deployment" ? status?.availableReplicas : status?.readyReplicas;
    return `${what}: ${count ?? 0} of ${spec?.replicas ?? 1} pods ${obj.kind === "Deployment" ? "available" : "ready"}`;
  }
  return ready ? `${what} exists` : `${what} is not ready`;
}
