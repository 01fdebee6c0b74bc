/**
 * Entry point: runs the scheduler until SIGTERM (flags and their environment fallbacks: see --help).
 * Pods are cached without finished ones, as kube-scheduler does: finished pods hold no resources and
 * are never scheduled. A wrong `--config` prints every problem with its field and exits 2.
 */
import { Pods, cacheKind, runOperator } from "opkit";
import { SchedulerConfigError } from "./config.ts";
import operator from "./operator.ts";

try {
  await runOperator(operator, {
    cache: { kinds: [cacheKind(Pods, { fieldSelector: "status.phase!=Succeeded,status.phase!=Failed" })] },
  });
} catch (err) {
  if (!(err instanceof SchedulerConfigError)) throw err;
  process.stderr.write(`${operator.name}: ${err.message}\n`);
  process.exit(2);
}
