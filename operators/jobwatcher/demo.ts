/**
 * `make demo`: a JobWatcher with a 5 s TTL for finished Jobs, and the seed's Job `pi` (kwok completes
 * it): converged once the Job completed and the operator deleted it.
 */
import { Jobs, NotFoundError, type Job } from "opkit";
import { eventually } from "opkit/testenv";
import { readSample, type DemoEntry } from "../demo/entry.ts";
import { JobWatcher } from "./src/api/v1/jobwatcher.ts";
import operator from "./src/operator.ts";

let completed = false;

export const demo: DemoEntry = {
  name: "jobwatcher",
  webhooks: operator.webhooks,
  async apply(ctx) {
    const { client, namespace } = ctx;
    await client.apply(
      JobWatcher.new(
        "demo",
        { ttlSecondsAfterSucceeded: 5, ttlSecondsAfterFailed: 60, checkIntervalSeconds: 300 },
        { namespace },
      ),
      { force: true },
    );
    // A Job left by an earlier demo run would be deleted at once: start from a fresh one.
    await client.delete(Jobs, "pi", { namespace, propagationPolicy: "Background" }).catch((err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
    });
    await eventually(
      "the previous demo Job gone",
      async () => !(await client.getOptional(Jobs, "pi", { namespace })),
    );
    completed = false;
    await client.create(await readSample<Job>(ctx, "job.yaml"));
  },
  async rows({ client, namespace }) {
    const job = await client.getOptional(Jobs, "pi", { namespace });
    if (job?.status?.conditions?.some((c) => c.type === "Complete" && c.status === "True")) completed = true;
    const state = !job
      ? completed
        ? "Job pi completed, then deleted"
        : "Job pi not seen yet"
      : completed
        ? "Job pi completed; TTL 5 s"
        : "Job pi running";
    return [
      {
        object: `JobWatcher ${namespace}/demo`,
        state,
        children: job ? "Job pi" : "-",
        converged: completed && !job,
        ref: { kind: JobWatcher, name: "demo", namespace },
      },
    ];
  },
};
