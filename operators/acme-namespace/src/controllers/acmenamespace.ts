/**
 * The AcmeNamespace controller (seed 004). Each reconcile:
 *
 * 1. Deleting: tell billing (the seed's external system), then remove the finalizer
 *    `namespace.finalizer.tenancy.acme.com`; garbage collection removes the Namespace and everything in
 *    it. While billing fails the finalizer stays: `BillingNotified=False`, a Warning Event, and a retry
 *    that backs off (1 s doubling, capped at 6 h).
 * 2. A Namespace of that name that this AcmeNamespace does not control: `Conflict=True`, a Warning
 *    Event, and nothing is adopted or changed. The Namespace watch wakes the AcmeNamespace when it goes.
 * 3. The finalizer, then `status.phase`: empty → `CreationInProgress` (written before any child is
 *    made) → `Created` once every child exists as the spec says. In `CreationInProgress` the operator may
 *    have died half-way: it reads what exists and completes it. The Namespace is created only when it
 *    does not exist (a create, never an apply, so it can never take over someone else's), the children
 *    inside it are server-side applied by name, so nothing is ever created twice.
 * 4. Tier and admin changes re-apply the quota (named after the tier; the old one is pruned), the
 *    limits, the binding and the Namespace's `admin` label.
 */
import {
  AlreadyExistsError,
  CacheNotSyncedError,
  ConflictError,
  LimitRanges,
  Namespaces,
  NetworkPolicies,
  ResourceQuotas,
  RetryTracker,
  RoleBindings,
  controller,
  ensureFinalizer,
  generationChanged,
  getControllerOf,
  hasFinalizer,
  isControlledBy,
  jsonEqual,
  manageError,
  or,
  reconcileChildren,
  removeFinalizer,
  requeueAfter,
  setCondition,
  setControllerReference,
  updateStatusIfChanged,
  type Condition,
  type DeepReadonly,
  type Predicate,
  type ResourceQuota,
  type ReconcileContext,
  type Result,
} from "opkit";
import { AcmeNamespace, type AcmeNamespaceObject, type Phase } from "../api/v1alpha1/acmenamespace.ts";
import { BillingError, type BillingClient } from "../billing.ts";
import { ADMIN_LABEL, desiredNamespace, desiredNamespaceChildren } from "../resources.ts";

/** The seed's finalizer name. */
export const FINALIZER = "namespace.finalizer.tenancy.acme.com";
export const READY = "Ready";
export const CONFLICT = "Conflict";
export const BILLING_NOTIFIED = "BillingNotified";

/** The kinds created inside the namespace (pruned when no longer wanted, e.g. the old tier's quota). */
const NAMESPACE_CHILD_KINDS = [ResourceQuotas, LimitRanges, NetworkPolicies, RoleBindings];
/** A write that lost a race with another writer (stale cache): read again shortly, quietly. */
const RACE_RETRY_MS = 200;
/** Remembered UIDs whose deletion billing accepted; more than this and the oldest are forgotten. */
const MAX_BILLED = 10_000;

type Acme = DeepReadonly<AcmeNamespaceObject>;

const quotaSpecChanged: Predicate<ResourceQuota> = { update: (o, n) => !jsonEqual(o.spec, n.spec) };

/**
 * Spec changes and the start of deletion wake the controller; its own status writes do not (they would
 * re-run a failing billing call at once and defeat the backoff).
 */
const specOrDeletion: Predicate<AcmeNamespaceObject> = or(generationChanged(), {
  update: (o, n) => Boolean(o.metadata.deletionTimestamp) !== Boolean(n.metadata.deletionTimestamp),
});

export interface AcmeNamespaceControllerOptions {
  /** Where deletions are reported; without one the finalizer is removed with a log line saying so. */
  billing?: BillingClient;
}

export function acmeNamespaceController(opts: AcmeNamespaceControllerOptions = {}) {
  const retries = new RetryTracker();
  // A reconcile queued before the finalizer was removed may still see it in the cache: billing must not
  // hear of the same deletion twice from this process.
  const billed = new Set<string>();

  async function writeStatus(
    ctx: ReconcileContext,
    a: Acme,
    phase: Phase | undefined,
    ...changes: Omit<Condition, "lastTransitionTime" | "observedGeneration">[]
  ): Promise<void> {
    let conditions = a.status?.conditions;
    for (const c of changes)
      conditions = setCondition(conditions, { ...c, observedGeneration: a.metadata.generation }).conditions;
    await updateStatusIfChanged(ctx.client, a, {
      ...a.status,
      ...(phase ? { phase } : {}),
      observedGeneration: a.metadata.generation,
      conditions,
    });
  }

  async function finalize(ctx: ReconcileContext, a: Acme): Promise<Result | undefined> {
    if (!hasFinalizer(a, FINALIZER)) return;
    const uid = a.metadata.uid ?? "";
    if (!billed.has(uid)) {
      const notice = {
        event: "NamespaceDeleted" as const,
        acmeNamespace: a.metadata.name ?? "",
        uid,
        namespace: a.spec.namespaceName,
        tier: a.spec.deploymentTier,
        adminUsername: a.spec.adminUsername,
      };
      if (opts.billing) {
        await opts.billing.notify(notice, ctx.signal);
        if (billed.size >= MAX_BILLED) billed.delete(billed.values().next().value ?? "");
        billed.add(uid);
        ctx.log.info(
          { billing: opts.billing.url, namespace: notice.namespace },
          "billing notified of the deletion",
        );
        await ctx.recorder.record(a, {
          type: "Normal",
          reason: "BillingNotified",
          action: "Finalize",
          note: `billing at ${opts.billing.url} was told that namespace ${notice.namespace} (${notice.tier}) is deleted`,
        });
      } else {
        ctx.log.info(
          { namespace: notice.namespace },
          "billing is not configured (no --billing-url / BILLING_URL): the deletion is not reported",
        );
      }
    }
    await removeFinalizer(ctx.client, a, FINALIZER);
    retries.forget(uid);
    return undefined;
  }

  async function reconcile(ctx: ReconcileContext, a: Acme): Promise<Result | undefined> {
    if (a.metadata.deletionTimestamp) return finalize(ctx, a);
    const name = a.spec.namespaceName;

    // Read the Namespace from the API server, not the cache: adopting someone else's namespace because
    // the cache had not seen it yet is the one mistake this operator must never make.
    const existing = await ctx.client.getOptional(Namespaces, name);
    if (existing && !isControlledBy(existing, a)) {
      const owner = getControllerOf(existing);
      const message = `namespace ${name} already exists and is ${owner ? `controlled by ${owner.kind} ${owner.name}` : "not owned by this AcmeNamespace"}; it is left unchanged. Delete it, or delete this AcmeNamespace and choose another namespaceName.`;
      await ctx.recorder.record(a, { type: "Warning", reason: CONFLICT, action: "Reconcile", note: message });
      await writeStatus(
        ctx,
        a,
        undefined,
        { type: CONFLICT, status: "True", reason: "NamespaceExists", message },
        { type: READY, status: "False", reason: CONFLICT, message },
      );
      return undefined; // the Namespace watch wakes this object when that namespace goes
    }

    if (!hasFinalizer(a, FINALIZER)) await ensureFinalizer(ctx.client, a, FINALIZER);

    const phase = a.status?.phase;
    if (!phase) {
      // Said before anything is created, so a crash from here on is visible on the next start.
      await writeStatus(ctx, a, "CreationInProgress", {
        type: READY,
        status: "False",
        reason: "CreationInProgress",
        message: `creating namespace ${name} and its quota, limits, network policy and admin binding`,
      });
    } else if (phase === "CreationInProgress") {
      ctx.log.info({ namespace: name }, "creation was in progress: completing it from what exists");
    }

    if (!existing) {
      const ns = setControllerReference(a, desiredNamespace(a), {
        ownerNamespaced: false,
        childNamespaced: false,
      });
      try {
        await ctx.client.create(ns);
        ctx.log.info({ namespace: name }, "created the namespace");
      } catch (err) {
        // Someone made it since our read: the next reconcile decides whether it is ours.
        if (err instanceof AlreadyExistsError) return requeueAfter(RACE_RETRY_MS);
        throw err;
      }
    } else if (existing.metadata.labels?.[ADMIN_LABEL] !== a.spec.adminUsername) {
      await ctx.client.patch(
        Namespaces,
        name,
        { metadata: { labels: { [ADMIN_LABEL]: a.spec.adminUsername } } },
        { type: "merge" },
      );
    }

    const result = await reconcileChildren(ctx.client, a, desiredNamespaceChildren(a), {
      fieldManager: ctx.fieldManager,
      ownedKinds: NAMESPACE_CHILD_KINDS,
      cache: ctx.cache,
    });
    if (result.pruned.length > 0)
      ctx.log.info({ pruned: result.pruned }, "removed children no longer wanted");

    await writeStatus(
      ctx,
      a,
      "Created",
      {
        type: READY,
        status: "True",
        reason: "Created",
        message: `namespace ${name}: ${a.spec.deploymentTier} quota and limits, same-namespace network policy, ${a.spec.adminUsername} bound to admin`,
      },
      {
        type: CONFLICT,
        status: "False",
        reason: "Owned",
        message: `namespace ${name} is this AcmeNamespace's`,
      },
    );
    retries.forget(a.metadata.uid ?? "");
    return undefined;
  }

  return (
    controller("acmenamespace")
      .for(AcmeNamespace, { predicates: [specOrDeletion] })
      // The quota controller rewrites status.used at every pod change: only spec edits need us.
      .owns(ResourceQuotas, { predicates: [quotaSpecChanged] })
      .owns(LimitRanges)
      .owns(NetworkPolicies)
      .owns(RoleBindings)
      // By name rather than by owner: a Namespace of the wanted name that is not ours (a Conflict) wakes
      // its AcmeNamespace when it goes, and ours when someone edits or deletes it. (Not `owns`: that would
      // also grant `delete` on every namespace, which this operator never needs.)
      .watches(Namespaces, (ns, { cache }) =>
        cache
          .list(AcmeNamespace)
          .filter((a) => a.spec.namespaceName === ns.metadata.name)
          .map((a) => ({ name: a.metadata.name ?? "" })),
      )
      .reconcile(async (req, ctx) => {
        const a = ctx.cache.get(AcmeNamespace, req.name);
        if (!a) return;
        try {
          return await reconcile(ctx, a);
        } catch (err) {
          if (err instanceof CacheNotSyncedError) throw err;
          // A write based on a stale read: not a failure to report, just read again.
          if (err instanceof ConflictError) return requeueAfter(RACE_RETRY_MS);
          const manage = { client: ctx.client, recorder: ctx.recorder, retries };
          if (err instanceof BillingError)
            return requeueAfter(
              await manageError(manage, a, err, {
                conditionType: BILLING_NOTIFIED,
                reason: "BillingUnavailable",
                action: "Finalize",
              }),
            );
          return requeueAfter(await manageError(manage, a, err));
        }
      })
  );
}
