/**
 * The JobWatcher operator's single description of itself: `opkit generate` derives its CRDs, RBAC and
 * manifests from it, and src/main.ts runs it.
 */
import { defineOperator, denyIssues, validator, type OperatorContext } from "opkit";
import { ClusterJobWatcher, JobWatcher } from "./api/v1/jobwatcher.ts";
import { jobController } from "./controllers/jobs.ts";
import { watcherController } from "./controllers/watchers.ts";
import { DeletionTally } from "./tally.ts";
import { validateJobWatcherSpec } from "./validation.ts";

// The three controllers of one running operator share one tally (the Job controller deletes, the
// watcher controllers count). Each Manager hands all factories the same context object, so it keys
// the tally: two operators in one process (tests) never share counts.
const tallies = new WeakMap<OperatorContext, DeletionTally>();
function tallyOf(ctx: OperatorContext): DeletionTally {
  let t = tallies.get(ctx);
  if (!t) tallies.set(ctx, (t = new DeletionTally()));
  return t;
}

export default defineOperator({
  name: "jobwatcher",
  domain: "my.github.com",
  kinds: [JobWatcher, ClusterJobWatcher],
  controllers: [
    (ctx) => jobController({ tally: tallyOf(ctx) }),
    (ctx) => watcherController(JobWatcher, { tally: tallyOf(ctx) }),
    (ctx) => watcherController(ClusterJobWatcher, { tally: tallyOf(ctx) }),
  ],
  // The same check as the controller's, at admission: an invalid pattern is refused at `kubectl apply`
  // with the field named. The controller keeps checking, since the webhook may not be installed.
  // cert-manager provides the serving certificate in clusters: the generated manifests hold no key.
  webhookCertificates: "cert-manager",
  webhooks: [JobWatcher, ClusterJobWatcher].map((kind) =>
    validator(kind, {
      create: (obj) => denyIssues(validateJobWatcherSpec(obj.spec)),
      update: (_old, obj) => denyIssues(validateJobWatcherSpec(obj.spec)),
    }),
  ),
});
