/**
 * The watcher controllers (one for JobWatcher, one for ClusterJobWatcher). A reconcile is a "run": it
 * validates the spec (an invalid one gets Ready=False and a Warning Event, and nothing is deleted),
 * examines the finished Jobs the watcher covers — deleting any whose expiry passed more than a second
 * ago, the safety net for anything an event could have missed — and writes status: run times, Jobs
 * deleted so far, how many it covers and how many wait. It runs on every spec change, every
 * `checkIntervalSeconds`, and when a Job it was credited with is gone (to count it). Deleting on time is
 * the Job controller's work, not this timer's.
 */
import {
  CacheNotSyncedError,
  InvalidError,
  TerminalError,
  Jobs,
  RetryTracker,
  controller,
  generationChanged,
  manageError,
  requeueAfter,
  setCondition,
  updateStatusIfChanged,
  type Job,
  type Predicate,
  type ReconcileContext,
} from "opkit";
import { ClusterJobWatcher, JobWatcher, type WatcherKind } from "../api/v1/jobwatcher.ts";
import { compileWatcher, covers, decide } from "../policy.ts";
import type { DeletionTally } from "../tally.ts";
import { deleteExpiredJob } from "./delete.ts";

const deletesOnly: Predicate<Job> = { create: () => false, update: () => false };

/**
 * How long after a Job's expiry a watcher's run deletes it itself: on-time deletes are the Job
 * controller's, and a run must not race it to the same delete.
 */
export const SWEEP_GRACE_MS = 1_000;

export interface WatcherControllerOptions {
  tally: DeletionTally;
  now?: () => number;
}

function watchersFor(ctx: ReconcileContext, namespace: string) {
  return [...ctx.cache.list(JobWatcher, { namespace }), ...ctx.cache.list(ClusterJobWatcher)].map(
    compileWatcher,
  );
}

export function watcherController(kind: WatcherKind, opts: WatcherControllerOptions) {
  const now = opts.now ?? Date.now;
  const cluster = kind.kind === ClusterJobWatcher.kind;
  const retries = new RetryTracker();
  const refKind = cluster ? "ClusterJobWatcher" : "JobWatcher";
  return controller(kind.kind.toLowerCase())
    .for(kind, { predicates: [generationChanged()] })
    .watches(Jobs, (job) => opts.tally.wake(job.metadata.uid, refKind), { predicates: [deletesOnly] })
    .reconcile(async (req, ctx) => {
      const w = ctx.cache.get(kind, req.name, { namespace: req.namespace });
      if (!w) return;
      const started = now();
      const compiled = compileWatcher(w);
      const manage = { client: ctx.client, recorder: ctx.recorder, retries };
      try {
        let matching = 0;
        let pending = 0;
        if (compiled.errors.length === 0) {
          const jobs = cluster ? ctx.cache.list(Jobs) : ctx.cache.list(Jobs, { namespace: req.namespace });
          for (const job of jobs) {
            const ns = job.metadata.namespace ?? "";
            if (!covers(compiled, ns, job.metadata.name ?? "")) continue;
            const d = decide(job, watchersFor(ctx, ns));
            if (d.action !== "delete") continue;
            matching++;
            // The safety net: a Job the Job controller should have deleted a while ago.
            if (d.at + SWEEP_GRACE_MS <= now()) {
              if ((await deleteExpiredJob(ctx, job, d, opts.tally)) !== "deleted") continue;
            } else if (d.decidedBy.uid === compiled.ref.uid) pending++;
          }
        }
        const count = opts.tally.total(compiled.ref.uid, w.status?.jobsDeleted);
        // Read with the count: a delete that settles after this line is counted by the next run.
        const unsettled = opts.tally.inflight(compiled.ref.uid) > 0;
        const valid = compiled.errors.length === 0;
        const message = valid
          ? `covers ${matching} finished Job(s) with a TTL; ${pending} wait for the TTL it decided`
          : `invalid spec, nothing is deleted in its reach until it is fixed: ${compiled.errors.map((e) => `${e.path} ${e.message}`).join("; ")}`;
        const { conditions } = setCondition(w.status?.conditions, {
          type: "Ready",
          status: valid ? "True" : "False",
          reason: valid ? "Watching" : "InvalidPattern",
          message,
          observedGeneration: w.metadata.generation,
        });
        if (!valid)
          // First, so it is told even when the status write below is refused: the API server rejects any
          // write to an object whose stored spec breaks a rule the CRD gained later.
          await ctx.recorder.record(w, {
            type: "Warning",
            reason: "InvalidPattern",
            action: "Validate",
            note: message,
          });
        await updateStatusIfChanged(ctx.client, w, {
          ...w.status,
          observedGeneration: w.metadata.generation,
          lastRunStartTime: new Date(started).toISOString(),
          lastRunEndTime: new Date(now()).toISOString(),
          jobsDeleted: count.total,
          matchingJobs: matching,
          pendingJobs: pending,
          conditions,
        });
        opts.tally.written(compiled.ref.uid, count.pending, count.total);
        retries.forget(compiled.ref.uid);
        // An invalid spec stays invalid until someone edits it, and the edit wakes us: no retries.
        if (!valid) return;
        const interval = compiled.checkIntervalSeconds * 1000;
        // A delete credited to this watcher was in flight: count it shortly, once it has settled.
        const settle = unsettled ? 250 : Infinity;
        return requeueAfter(Math.min(interval, settle));
      } catch (err) {
        // A kind still syncing is not a failure: the controller runs this again once it has synced.
        if (err instanceof CacheNotSyncedError) throw err;
        // A spec stored before the CRD had its rules: the server refuses every write but a fix, and the
        // fix wakes us. Retrying could not help; the Warning Event above has told the user.
        if (compiled.errors.length > 0 && err instanceof InvalidError)
          throw new TerminalError(
            `${compiled.ref.kind} ${req.namespace ? `${req.namespace}/` : ""}${req.name} has an invalid spec the API server no longer accepts writes to; fix its patterns`,
            { cause: err },
          );
        return requeueAfter(await manageError(manage, w, err));
      }
    });
}
