/**
 * opkit — the operator kit for TypeScript.
 *
 * This is the one public entry of the runtime: what operator authors use, folder by folder. Each
 * folder's index.ts lists its public names explicitly (and says what the folder is for). Machinery
 * (the HTTP transport, the reflector, the store, the ops server) stays internal so it can change
 * without breaking operators; `etc/opkit.api.md` records this surface and `make lint` compares it, so
 * a change to it is visible in review. Code generation lives in `opkit/generate`, the local control
 * plane in `opkit/testenv` and the built-in API schemas in `opkit/schemas`, so operators load none of
 * them.
 *
 * @module opkit
 */

export * from "./client/index.ts";
export { FakeClock, realClock, type Clock, type TimerHandle } from "./clock/index.ts";
export * from "./cache/index.ts";
export * from "./queue/index.ts";
export * from "./api/index.ts";
export * from "./events/index.ts";
export * from "./helpers/index.ts";
export * from "./children/index.ts";
export {
  DEFAULT_REDACT_PATHS,
  InvalidLogLevelError,
  REDACTED,
  controllerLogger,
  createLogger,
  reconcileLogger,
  type LogFormat,
  type LogLevel,
  type Logger,
  type LoggerOptions,
  type ReconcileLogFields,
} from "./logging/index.ts";
export {
  ExpositionParseError,
  Metrics,
  ScrapeError,
  histogramQuantile,
  parseExposition,
  scrape,
  summarizeOperator,
  type ControllerSummary,
  type InformerSummary,
  type OperatorSummary,
  type Sample,
  type ScrapeOptions,
  type MetricsOptions,
  type ObservableInformer,
  type ObservableQueue,
  type ReconcileMetrics,
  type ReconcileMetricsOptions,
  type ReconcileOutcome,
  type ReconcileResultLabel,
  type ReconcileTimer,
} from "./metrics/index.ts";
export * from "./controller/index.ts";
export * from "./webhook/index.ts";
export * from "./manager/index.ts";
export * from "./sharding/index.ts";
export * from "./migrate/index.ts";
