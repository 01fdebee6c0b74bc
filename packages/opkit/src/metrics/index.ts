/**
 * Prometheus metrics under the names controller-runtime and client-go use, so the dashboards and
 * alerts written for Go operators work unchanged. Everything lives in one Registry owned by the
 * manager (never prom-client's global one: two managers in a process, or a library that also uses
 * prom-client, must not collide).
 *
 * Each subsystem's metrics are one declaration table (name, help, labels, buckets) beside the adapter
 * that feeds them. The queue, the client and leader election know nothing of prom-client; they report
 * through plain callbacks, and the adapters turn those into metric updates.
 */
export { Metrics, type MetricsOptions } from "./metrics.ts";
export type { ObservableInformer } from "./informer.ts";
export type {
  ReconcileMetrics,
  ReconcileMetricsOptions,
  ReconcileOutcome,
  ReconcileResultLabel,
  ReconcileTimer,
} from "./reconcile.ts";
export type { WebhookMetrics, WebhookRequestTimer } from "./webhook.ts";
export type { ObservableQueue } from "./workqueue.ts";
export {
  ExpositionParseError,
  ScrapeError,
  parseExposition,
  scrape,
  type Sample,
  type ScrapeOptions,
} from "./exposition.ts";
export {
  histogramQuantile,
  summarizeOperator,
  type ControllerSummary,
  type InformerSummary,
  type OperatorSummary,
} from "./summary.ts";
