/**
 * Deleting one expired Job, shared by the Job controller (on the Job's own expiry) and the watcher
 * controllers (their safety-net runs). Background propagation, so the garbage collector removes the
 * Job's pods too; preconditions on UID and resourceVersion, so a Job that changed or was replaced since
 * the cache showed it is never deleted on stale grounds. A Job that vanished meanwhile is not an error.
 */
import {
  ConflictError,
  Jobs,
  NotFoundError,
  type DeepReadonly,
  type Job,
  type ReconcileContext,
} from "opkit";
import type { Decision } from "../policy.ts";
import type { DeletionTally } from "../tally.ts";

export type DeleteOutcome = "deleted" | "gone" | "changed";

export async function deleteExpiredJob(
  ctx: Pick<ReconcileContext, "client" | "log" | "signal">,
  job: DeepReadonly<Job>,
  d: Extract<Decision, { action: "delete" }>,
  tally: DeletionTally,
): Promise<DeleteOutcome> {
  const { name = "", namespace, uid = "", resourceVersion } = job.metadata;
  tally.expect(uid, d.decidedBy);
  let deleted = false;
  try {
    await ctx.client.delete(Jobs, name, {
      namespace,
      propagationPolicy: "Background",
      preconditions: { uid, resourceVersion },
    });
    deleted = true;
  } catch (err) {
    if (err instanceof NotFoundError) return "gone";
    // The Job changed since the cache showed it: its update event brings it back with fresh state.
    if (err instanceof ConflictError) return "changed";
    throw err;
  } finally {
    tally.settle(d.decidedBy, deleted);
  }
  ctx.log.info(
    {
      job: `${namespace}/${name}`,
      outcome: d.outcome,
      finishedAt: new Date(d.finishedAt).toISOString(),
      ttlSeconds: d.ttlSeconds,
      watcher: `${d.decidedBy.kind}/${d.decidedBy.namespace ? `${d.decidedBy.namespace}/` : ""}${d.decidedBy.name}`,
      lateMs: Date.now() - d.at,
    },
    "deleted finished Job",
  );
  return "deleted";
}
