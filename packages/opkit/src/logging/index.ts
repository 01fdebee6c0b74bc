/**
 * Structured JSON logs (pino) shaped like controller-runtime's: a string `level`, an ISO `time`,
 * `msg`, and per-reconcile fields `controller`, `namespace`, `name`, `reconcileID`, so log queries
 * written for Go operators keep working. Values that may hold credentials are redacted before they
 * are written: a log line is far easier to leak than a Secret.
 */
export {
  controllerLogger,
  createLogger,
  DEFAULT_REDACT_PATHS,
  InvalidLogLevelError,
  type LogFormat,
  type Logger,
  type LoggerOptions,
  type LogLevel,
  type ReconcileLogFields,
  reconcileLogger,
  REDACTED,
} from "./logger.ts";
