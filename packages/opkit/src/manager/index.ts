/**
 * manager — what runs around the controllers of one operator process: the metrics and health-probe
 * HTTP endpoints, Lease-based leader election so that only one replica reconciles at a time, signal
 * handling and graceful shutdown. (Metrics and logging live in their own folders, since controllers
 * use them too.)
 *
 * The pieces here are independent and know nothing about each other's callers: the queue, the client
 * and leader election report through plain callbacks, and `Metrics` provides the adapters. The
 * manager (manager.ts) wires them together and owns the start/stop order: servers, caches, then
 * leader-elected controllers; stopping in reverse.
 */

export {
  Manager,
  ManagerConfigError,
  GracefulShutdownTimeoutError,
  type LeaderElectionOptions,
  type ListenAddress,
  type ManagerOptions,
  type Runnable,
} from "./manager.ts";
export type { ShardingOptions } from "./sharded.ts";
export {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  LeaderElectionConfigError,
  LeaderElector,
  LeadershipLostError,
  defaultIdentity,
  type LeaderCallbacks,
  type LeaderElectorOptions,
  type LeaseClient,
  type LeaseSpec,
  type StoppedLeadingInfo,
} from "./leaderelection.ts";
export {
  DEFAULT_HEALTH_PORT,
  DEFAULT_METRICS_PORT,
  ServerListenError,
  type Check,
  type CheckResult,
} from "./server.ts";
export {
  DEFAULT_WEBHOOK_CERT_DIR,
  FlagError,
  operatorUsage,
  parseBindAddress,
  parseOperatorFlags,
  type FlagSpec,
  type FlagValues,
  type OperatorFlags,
} from "./flags.ts";
export {
  OperatorDefinitionError,
  defineOperator,
  offlineContext,
  operatorCrdNames,
  runOperator,
  type OperatorContext,
  type OperatorDefinition,
} from "./operator.ts";
