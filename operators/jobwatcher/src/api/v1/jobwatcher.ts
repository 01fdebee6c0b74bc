/**
 * JobWatcher (namespaced) and ClusterJobWatcher (cluster-scoped): the batch.my.github.com/v1 API of seed
 * 000, defined once — TypeScript types, runtime validation and the CRDs come from here.
 *
 * A namespaced JobWatcher only ever covers Jobs in its own namespace (its namespacePatterns can narrow
 * that, never widen it), so whoever may create one can only have their own namespace's Jobs deleted. A
 * ClusterJobWatcher covers namespaces by pattern; only those allowed to create cluster-scoped objects can
 * make one.
 */
import * as Type from "typebox/type";
import { cel, conditions, defineKind, type ObjectOf } from "opkit";

/** A TTL of ten years is as good as never; the bound keeps the arithmetic far from overflow. */
export const MAX_TTL_SECONDS = 315_360_000;
export const MAX_PATTERNS = 32;
export const MAX_PATTERN_LENGTH = 256;
export const MIN_CHECK_INTERVAL_SECONDS = 10;
export const MAX_CHECK_INTERVAL_SECONDS = 86_400;
export const DEFAULT_CHECK_INTERVAL_SECONDS = 300;

/**
 * CEL rules the API server applies to each pattern. CEL's `matches` compiles its argument with Go's RE2,
 * so using the pattern as the regular expression makes an invalid one fail evaluation, which the server
 * reports as the field's error with RE2's own message ("error parsing regexp: missing closing )").
 * Named groups are refused because the two RE2 ports disagree on duplicate names and matching needs none.
 */
export const PATTERN_RULES = [
  {
    rule: "''.matches(self) || !''.matches(self)",
    message: "must be a valid RE2 regular expression",
  },
  {
    rule: "!self.contains('(?P<') && !self.contains('(?<')",
    message:
      "must not use named groups ((?P<name>...) or (?<name>...)): matching needs none, write (...) or (?:...)",
  },
];

const pattern = cel(
  Type.String({
    minLength: 1,
    maxLength: MAX_PATTERN_LENGTH,
    description: "An RE2 regular expression that must match the whole name, e.g. `batch-.*`.",
  }),
  PATTERN_RULES,
);

const patterns = (description: string) =>
  Type.Optional(Type.Array(pattern, { maxItems: MAX_PATTERNS, description }));

const ttl = (outcome: string) =>
  Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: MAX_TTL_SECONDS,
      description: `Seconds after a Job ${outcome} before it is deleted (with its pods). Absent: never delete such Jobs.`,
    }),
  );

/** The spec both kinds share. */
export const JobWatcherSpec = Type.Object({
  ttlSecondsAfterSucceeded: ttl("succeeded"),
  ttlSecondsAfterFailed: ttl("failed"),
  namespacePatterns: patterns(
    "Namespaces whose Jobs are covered (whole-name RE2 patterns). Default: every namespace the watcher may reach — its own for a JobWatcher, all for a ClusterJobWatcher.",
  ),
  jobNamePatterns: patterns("Job names that are covered (whole-name RE2 patterns). Default: every Job name."),
  checkIntervalSeconds: Type.Integer({
    minimum: MIN_CHECK_INTERVAL_SECONDS,
    maximum: MAX_CHECK_INTERVAL_SECONDS,
    default: DEFAULT_CHECK_INTERVAL_SECONDS,
    description:
      "How often the watcher re-examines its Jobs as a safety net. Jobs are deleted on their expiry time from Job events; this only catches what an event could have missed.",
  }),
});

export const JobWatcherStatus = Type.Object({
  observedGeneration: Type.Optional(Type.Integer({ description: "The generation the status describes." })),
  lastRunStartTime: Type.Optional(
    Type.String({ format: "date-time", description: "When the last run over the covered Jobs started." }),
  ),
  lastRunEndTime: Type.Optional(
    Type.String({ format: "date-time", description: "When the last run over the covered Jobs ended." }),
  ),
  jobsDeleted: Type.Optional(
    Type.Integer({
      minimum: 0,
      description:
        "Jobs this watcher's TTL deleted so far (a Job counts for the watcher whose TTL decided it).",
    }),
  ),
  matchingJobs: Type.Optional(Type.Integer({ minimum: 0, description: "Finished Jobs it covers now." })),
  pendingJobs: Type.Optional(
    Type.Integer({
      minimum: 0,
      description: "Covered Jobs whose deletion it decided, waiting for their TTL.",
    }),
  ),
  conditions: Type.Optional(conditions()),
});

const printerColumns = [
  { name: "Succeeded-TTL", type: "integer" as const, jsonPath: ".spec.ttlSecondsAfterSucceeded" },
  { name: "Failed-TTL", type: "integer" as const, jsonPath: ".spec.ttlSecondsAfterFailed" },
  { name: "Deleted", type: "integer" as const, jsonPath: ".status.jobsDeleted" },
  { name: "Ready", type: "string" as const, jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: "Age", type: "date" as const, jsonPath: ".metadata.creationTimestamp" },
];

export const JobWatcher = defineKind({
  group: "batch.my.github.com",
  version: "v1",
  kind: "JobWatcher",
  scope: "Namespaced",
  shortNames: ["jw"],
  description: "JobWatcher deletes finished Jobs of its own namespace after a TTL per outcome.",
  spec: JobWatcherSpec,
  status: JobWatcherStatus,
  printerColumns,
});

export const ClusterJobWatcher = defineKind({
  group: "batch.my.github.com",
  version: "v1",
  kind: "ClusterJobWatcher",
  scope: "Cluster",
  shortNames: ["cjw"],
  description:
    "ClusterJobWatcher deletes finished Jobs of the namespaces its patterns match after a TTL per outcome.",
  spec: JobWatcherSpec,
  status: JobWatcherStatus,
  printerColumns,
});

export type JobWatcherObject = ObjectOf<typeof JobWatcher>;
/** Either kind of watcher: both kinds share one spec and status, so one object type serves both. */
export type AnyJobWatcher = JobWatcherObject;
/** JobWatcher or ClusterJobWatcher (their definitions have the same type; `scope` tells them apart). */
export type WatcherKind = typeof JobWatcher;
