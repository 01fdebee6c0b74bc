/**
 * controller-runtime's reconcile metrics: the declaration table and the adapter a controller's workers
 * report through.
 */
import type { Registry } from "prom-client";
import type { Clock } from "../clock/index.ts";
import { counter, gauge, histogram, register } from "./declare.ts";

/**
 * How a reconcile ended. "terminal" (an error that must not be retried) and "panic" (an exception
 * caught by the controller) are counted as errors too, as controller-runtime does.
 */
export type ReconcileOutcome = "success" | "error" | "requeue" | "requeue_after" | "terminal" | "panic";

/** The `result` label values of controller_runtime_reconcile_total. */
export type ReconcileResultLabel = "success" | "error" | "requeue" | "requeue_after";

const RESULT_LABELS: readonly ReconcileResultLabel[] = ["success", "error", "requeue", "requeue_after"];

/** One reconcile in progress; `end` is idempotent so a double call cannot skew active_workers. */
export interface ReconcileTimer {
  /**
   * Record the reconcile's outcome and duration and release its active-worker slot; later calls do nothing.
   */
  end(outcome: ReconcileOutcome): void;
}

/** Per-controller reconcile instrumentation. */
export interface ReconcileMetrics {
  /** Call when a worker picks up a key; counts the worker active until `end`. */
  start(): ReconcileTimer;
}

/** Options of `Metrics.reconcile` for one controller. */
export interface ReconcileMetricsOptions {
  /** Exported as controller_runtime_max_concurrent_reconciles. */
  maxConcurrentReconciles?: number;
}

// controller-runtime's reconcile_time_seconds buckets: fine-grained under a second, where most
// reconciles land, and up to a minute for slow ones.
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];

const RECONCILE_METRICS = {
  total: counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller", [
    "controller",
    "result",
  ]),
  errors: counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
  ),
  terminalErrors: counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
  ),
  panics: counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"],
  ),
  time: histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    RECONCILE_BUCKETS,
  ),
  maxConcurrent: gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
  ),
  activeWorkers: gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
  ),
};

/** Register the reconcile metrics; returns `Metrics.reconcile`. */
export function reconcileMetrics(
  registry: Registry,
  clock: Clock,
): (controller: string, options?: ReconcileMetricsOptions) => ReconcileMetrics {
  const m = register(registry, RECONCILE_METRICS);
  const countOutcome = (controller: string, outcome: ReconcileOutcome): void => {
    switch (outcome) {
      case "success":
      case "requeue":
      case "requeue_after":
        m.total.inc({ controller, result: outcome });
        return;
      case "terminal":
        m.terminalErrors.inc({ controller });
        break;
      case "panic":
        m.panics.inc({ controller });
        break;
      case "error":
        break;
    }
    m.errors.inc({ controller });
    m.total.inc({ controller, result: "error" });
  };
  return (controller, options = {}) => {
    for (const result of RESULT_LABELS) m.total.inc({ controller, result }, 0);
    m.errors.inc({ controller }, 0);
    m.terminalErrors.inc({ controller }, 0);
    m.panics.inc({ controller }, 0);
    m.activeWorkers.inc({ controller }, 0);
    if (options.maxConcurrentReconciles !== undefined) {
      m.maxConcurrent.set({ controller }, options.maxConcurrentReconciles);
    }
    return {
      start: () => {
        const startedAt = clock.now();
        m.activeWorkers.inc({ controller });
        let ended = false;
        return {
          end: (outcome) => {
            if (ended) return;
            ended = true;
            m.activeWorkers.dec({ controller });
            m.time.observe({ controller }, (clock.now() - startedAt) / 1000);
            countOutcome(controller, outcome);
          },
        };
      },
    };
  };
}
