/**
 * The Job controller: each finished Job is reconciled when it finishes and again at exactly its expiry
 * time (finish time + the merged TTL, see policy.ts), when it is deleted. A watcher that is created,
 * changes its spec or is deleted wakes every finished Job in its reach, so a new TTL, a released hold
 * or a removed longer TTL applies on time too. Everything it reads comes from the cache; its only API
 * calls are the deletes. After a restart the initial list brings every finished Job back, so pending
 * expiries are honoured (ones that passed while the operator was down go at once).
 */
import { Jobs, controller, generationChanged, requeue, requeueAfter, type Job, type Predicate } from "opkit";
import { ClusterJobWatcher, JobWatcher } from "../api/v1/jobwatcher.ts";
import { FinishedJobs } from "../finished.ts";
import { compileWatcher, decide, finished } from "../policy.ts";
import type { DeletionTally } from "../tally.ts";
import { deleteExpiredJob } from "./delete.ts";

/**
 * Running Jobs change often (pod counts) and need nothing; only finished ones are worth a reconcile. A
 * deleted one is, to forget it.
 */
const finishedJobs: Predicate<Job> = {
  create: (j) => finished(j) !== undefined,
  update: (_o, n) => finished(n) !== undefined,
};

export interface JobControllerOptions {
  tally: DeletionTally;
  /** Wall clock in epoch ms (tests may pin it). */
  now?: () => number;
}

export function jobController(opts: JobControllerOptions) {
  const now = opts.now ?? Date.now;
  const seen = new FinishedJobs();
  // Status writes (every watcher run) do not move a Job's fate; a spec change, creation or deletion can.
  const specChanges = { predicates: [generationChanged()] };
  // Deleting is the point: the one write to Jobs, declared for the generated RBAC.
  return controller("job-ttl")
    .for(Jobs, { predicates: [finishedJobs] })
    .watches(JobWatcher, (w) => seen.requests(w.metadata.namespace ?? ""), specChanges)
    .watches(ClusterJobWatcher, () => seen.requests(), specChanges)
    .rbac([{ kind: Jobs, verbs: ["delete"] }])
    .withOptions({ maxConcurrent: 4 })
    .reconcile(async (req, ctx) => {
      const namespace = req.namespace ?? "";
      const job = ctx.cache.get(Jobs, req.name, { namespace });
      if (!job || !finished(job)) {
        seen.remove(namespace, req.name);
        return;
      }
      seen.add(namespace, req.name);
      const watchers = [
        ...ctx.cache.list(JobWatcher, { namespace }),
        ...ctx.cache.list(ClusterJobWatcher),
      ].map(compileWatcher);
      const d = decide(job, watchers);
      if (d.action === "keep") {
        if (d.why === "held") ctx.log.debug({ heldBy: d.heldBy }, "an invalid watcher holds this Job back");
        return;
      }
      const wait = d.at - now();
      if (wait > 0) return requeueAfter(wait);
      const result = await deleteExpiredJob(ctx, job, d, opts.tally);
      if (result !== "changed") seen.remove(namespace, req.name);
      return result === "changed" ? requeue() : undefined;
    });
}
