/**
 * The `Metrics` registry a manager owns: one prom-client Registry holding every subsystem's metrics
 * (declared beside their adapters in reconcile.ts, workqueue.ts, leader.ts, sharding.ts, restclient.ts,
 * webhook.ts and informer.ts) and Node's process metrics.
 */
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="./prom-client-parts.d.ts" />
// The public `registry` is typed from prom-client's index: consumers have no types for the deep files.
import type { Registry } from "prom-client";
import RegistryImpl from "prom-client/lib/registry.js";
import collectDefaultMetrics from "prom-client/lib/defaultMetrics.js";
import { realClock, type Clock } from "../clock/index.ts";
import type { RequestEvent } from "../client/transport.ts";
import type { QueueMetrics } from "../queue/workqueue.ts";
import { EVENT_LOOP_METRICS, registerEventLoopLag } from "./eventloop.ts";
import { informerMetrics, type ObservableInformer } from "./informer.ts";
import { leaderMetrics } from "./leader.ts";
import { reconcileMetrics, type ReconcileMetrics, type ReconcileMetricsOptions } from "./reconcile.ts";
import { restClientMetrics } from "./restclient.ts";
import { shardMetrics, type ShardMetricsSink } from "./sharding.ts";
import { webhookMetrics, type WebhookMetrics } from "./webhook.ts";
import { workqueueMetrics, type ObservableQueue, type WorkqueueAdapters } from "./workqueue.ts";

/** Options of a `Metrics` registry. */
export interface MetricsOptions {
  /** Register Node's process_* and nodejs_* metrics (default true). */
  processMetrics?: boolean;
  /** Time source for reconcile durations (tests inject a FakeClock). */
  clock?: Clock;
}

/**
 * The operator's Prometheus metrics, one registry per manager, with controller-runtime's and client-go's
 * metric names (reconcile totals and durations, workqueue, REST client, leader election, webhooks). The
 * manager creates one and serves it at /metrics; create your own only to add metrics of your operator or in
 * tests.
 */
export class Metrics {
  /**
   * The prom-client registry holding every metric; register your own metrics here so /metrics serves them.
   */
  readonly registry: Registry;
  private readonly reconcileOf: (controller: string, options?: ReconcileMetricsOptions) => ReconcileMetrics;
  private readonly workqueue: WorkqueueAdapters;
  private readonly leaderOf: (name: string) => (leading: boolean) => void;
  private readonly shardsOf: (keys: () => ReadonlyMap<number, number>) => ShardMetricsSink;
  private readonly requestsOf: (host: string) => (event: RequestEvent) => void;
  private readonly webhookOf: (path: string) => WebhookMetrics;
  private readonly informersOf: (source: () => readonly ObservableInformer[]) => () => void;

  constructor(options: MetricsOptions = {}) {
    this.registry = new RegistryImpl();
    const clock = options.clock ?? realClock;
    if (options.processMetrics ?? true) {
      // prom-client's own event-loop gauges are replaced (eventloop.ts says why); its sampler, which
      // nothing reads then, runs every 10 s, where it costs nothing.
      collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 10_000 });
      for (const name of EVENT_LOOP_METRICS) this.registry.removeSingleMetric(name);
      registerEventLoopLag(this.registry);
    }
    // The order of registration is the order of the exposition.
    this.reconcileOf = reconcileMetrics(this.registry, clock);
    this.workqueue = workqueueMetrics(this.registry);
    this.leaderOf = leaderMetrics(this.registry);
    this.shardsOf = shardMetrics(this.registry);
    this.requestsOf = restClientMetrics(this.registry);
    this.webhookOf = webhookMetrics(this.registry, clock);
    this.informersOf = informerMetrics(this.registry);
  }

  /** The exposition text for a scrape. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** Content-Type of `text()`. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Reconcile instrumentation for one controller. Every series starts at zero, as in
   * controller-runtime, so rate() and absent() work before the first reconcile.
   */
  reconcile(controller: string, options: ReconcileMetricsOptions = {}): ReconcileMetrics {
    return this.reconcileOf(controller, options);
  }

  /**
   * Callbacks for a controller's WorkQueue. The queue is labelled with the controller's name for both
   * `name` and `controller`, as controller-runtime does.
   */
  queueMetrics(controller: string): QueueMetrics<string> {
    return this.workqueue.queueMetrics(controller);
  }

  /**
   * Read a queue's in-progress work on every scrape (unfinished_work_seconds,
   * longest_running_processor_seconds). Returns a function that stops tracking it.
   */
  trackQueue(controller: string, queue: ObservableQueue): () => void {
    return this.workqueue.trackQueue(controller, queue);
  }

  /**
   * The client's `onRequest` hook for one API server: rest_client_requests_total for every exchange,
   * rest_client_request_duration_seconds for non-watch requests (a watch's duration is how long it
   * stayed open, which would drown the latency signal; client-go leaves watches out too).
   */
  onRequest(host: string): (event: RequestEvent) => void {
    return this.requestsOf(host);
  }

  /**
   * Request instrumentation for one webhook path: controller_runtime_webhook_requests_total{webhook,code},
   * controller_runtime_webhook_latency_seconds{webhook} and controller_runtime_webhook_requests_in_flight{webhook}.
   * The 200 and 500 series start at zero so that rate() works before the first request.
   */
  webhook(path: string): WebhookMetrics {
    return this.webhookOf(path);
  }

  /**
   * Export opkit_informer_objects, opkit_informer_synced, opkit_informer_watch_restarts_total and
   * opkit_informer_relists_total for the informers `source` lists, read at every scrape (the manager
   * passes its cache's `health()`). Returns a function that stops tracking them.
   */
  trackInformers(source: () => readonly ObservableInformer[]): () => void {
    return this.informersOf(source);
  }

  /**
   * Export opkit_shards_held and opkit_shard_handovers_total through the returned sink (ShardCoordinator's
   * `metrics`), and opkit_shard_keys{shard} read from `keys` at every scrape.
   */
  shards(keys: () => ReadonlyMap<number, number>): {
    /** Sets opkit_shards_held to the number of shard Leases this replica holds now. */
    held(count: number): void;
    /** Counts one shard Lease acquired, released or lost in opkit_shard_handovers_total. */
    handover(direction: "acquired" | "released" | "lost"): void;
  } {
    return this.shardsOf(keys);
  }

  /** A callback for LeaderElector's `onLeaderStatus`: 1 while leading the named lease, else 0. */
  leaderStatus(name: string): (leading: boolean) => void {
    return this.leaderOf(name);
  }
}
