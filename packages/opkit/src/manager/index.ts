/**
 * manager — what runs around the controllers of one operator process: Prometheus metrics under
 * controller-runtime's names, the metrics and health-probe HTTP endpoints, structured logging, and
 * Lease-based leader election so that only one replica reconciles at a time.
 *
 * The pieces here are independent and know nothing about each other's callers: the queue, the client
 * and leader election report through plain callbacks, and `Metrics` provides the adapters. The
 * manager (manager.ts) wires them together and owns the start/stop order: servers, caches, then
 * leader-elected controllers; stopping in reverse.
 */
export {
  Metrics,
  type MetricsOptions,
  type ObservableQueue,
  type ReconcileMetrics,
  type ReconcileMetricsOptions,
  type ReconcileOutcome,
  type ReconcileResultLabel,
  type ReconcileTimer,
} from "./metrics.ts";
export {
  DEFAULT_HEALTH_PORT,
  DEFAULT_METRICS_PORT,
  DuplicateCheckError,
  OpsServer,
  ServerListenError,
  cacheSyncedCheck,
  type Check,
  type CheckResult,
  type OpsServerOptions,
} from "./server.ts";
export {
  DEFAULT_REDACT_PATHS,
  InvalidLogLevelError,
  REDACTED,
  controllerLogger,
  createLogger,
  reconcileLogger,
  type LogLevel,
  type Logger,
  type LoggerOptions,
  type ReconcileLogFields,
} from "./logging.ts";
export {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  LeaderElectionConfigError,
  LeaderElector,
  LeadershipLostError,
  Leases,
  type Lease,
  type LeaseClient,
  type LeaseSpec,
  type LeaderCallbacks,
  type LeaderElectorOptions,
  type StoppedLeadingInfo,
} from "./leaderelection.ts";
