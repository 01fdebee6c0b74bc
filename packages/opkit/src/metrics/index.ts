/**
 * Prometheus metrics under the names controller-runtime and client-go use, so the dashboards and
 * alerts written for Go operators work unchanged. Everything lives in one Registry owned by the
 * manager (never prom-client's global one: two managers in a process, or a library that also uses
 * prom-client, must not collide).
 *
 * The queue, the client and leader election know nothing of prom-client; they report through plain
 * callbacks, and the adapters here turn those into metric updates.
 */
// The deep files' types, also for programs that compile this file from source (the operators, with the
// opkit-source condition); a .d.ts of ambient modules cannot be imported.
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="./prom-client-parts.d.ts" />
// prom-client's files one by one: its index also loads the Summary (with tdigest), the Pushgateway (with
// node:https and node:zlib) and the cluster aggregator (node:cluster), which opkit never uses, for ~7 ms
// of every operator's start-up CPU. Same modules, so a user's metrics from "prom-client" register here.
// The public `registry` is typed from prom-client's index: consumers have no types for the deep files.
import type { Registry } from "prom-client";
import Counter from "prom-client/lib/counter.js";
import Gauge from "prom-client/lib/gauge.js";
import Histogram from "prom-client/lib/histogram.js";
import RegistryImpl from "prom-client/lib/registry.js";
import collectDefaultMetrics from "prom-client/lib/defaultMetrics.js";
import { realClock, type Clock } from "../clock/index.ts";
import { EVENT_LOOP_METRICS, registerEventLoopLag } from "./eventloop.ts";
import type { RequestEvent } from "../client/transport.ts";
import type { QueueMetrics } from "../queue/workqueue.ts";

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

/** One webhook request in progress; `end` is idempotent. */
export interface WebhookRequestTimer {
  /** The HTTP status code the server answered with. */
  end(code: number): void;
}

/** Per-webhook (per path) request instrumentation. */
export interface WebhookMetrics {
  /** Call when a request arrives; counts it in flight until `end`. */
  start(): WebhookRequestTimer;
}

/** What the scrape-time workqueue gauges read from a queue (WorkQueue satisfies it). */
export interface ObservableQueue {
  /**
   * How long the items now in progress have been running, summed, in milliseconds (client-go's
   * unfinished_work_seconds gauge); it grows when reconciles hang.
   */
  unfinishedWorkMs(): number;
  /**
   * How long the oldest item in progress has been running, in milliseconds; a large value means a stuck
   * reconcile.
   */
  longestRunningMs(): number;
}

/**
 * What the scrape-time informer metrics read of one informer (the cache's `health()` entries satisfy
 * it). Counters are cumulative since the informer started.
 */
export interface ObservableInformer {
  /** The kind, as the cache names it (e.g. "apps/v1/Deployment"). */
  kind: string;
  /** The namespace the informer watches (absent: all). */
  namespace?: string;
  /** Whether the first list completed. */
  synced: boolean;
  /** Objects held. */
  objects: number;
  /** Watch requests opened so far, the first included. */
  watchRequests: number;
  /** Lists after the first (410 Gone). */
  relists: number;
  /** Objects received from the server (list items and watch events), before client-side filters. */
  received?: number;
}

/** Options of a `Metrics` registry. */
export interface MetricsOptions {
  /** Register Node's process_* and nodejs_* metrics (default true). */
  processMetrics?: boolean;
  /** Time source for reconcile durations (tests inject a FakeClock). */
  clock?: Clock;
}

// controller-runtime's reconcile_time_seconds buckets: fine-grained under a second, where most
// reconciles land, and up to a minute for slow ones.
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
// client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s.
const WORKQUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));
// client-go's rest_client_request_duration_seconds buckets.
const REST_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];
// controller-runtime's webhook latency buckets (prometheus.DefBuckets).
const WEBHOOK_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type QueueLabels = "name" | "controller";
type InformerLabels = "kind" | "namespace";

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
  private readonly clock: Clock;
  private readonly queues = new Map<string, ObservableQueue>();
  private readonly informerSources = new Set<() => readonly ObservableInformer[]>();

  private readonly reconcileTotal: Counter<"controller" | "result">;
  private readonly reconcileErrors: Counter<"controller">;
  private readonly terminalErrors: Counter<"controller">;
  private readonly panics: Counter<"controller">;
  private readonly reconcileTime: Histogram<"controller">;
  private readonly maxConcurrent: Gauge<"controller">;
  private readonly activeWorkers: Gauge<"controller">;

  private readonly depth: Gauge<QueueLabels>;
  private readonly adds: Counter<QueueLabels>;
  private readonly retries: Counter<QueueLabels>;
  private readonly queueDuration: Histogram<QueueLabels>;
  private readonly workDuration: Histogram<QueueLabels>;
  private readonly unfinishedWork: Gauge<QueueLabels>;
  private readonly longestRunning: Gauge<QueueLabels>;

  private readonly leader: Gauge<"name">;
  private readonly shardsHeld: Gauge;
  private readonly shardHandovers: Counter<"direction">;
  private readonly shardKeys: Gauge<"shard">;
  private shardKeySource: (() => ReadonlyMap<number, number>) | undefined;
  private readonly requests: Counter<"code" | "method" | "host">;
  private readonly requestDuration: Histogram<"verb" | "host">;

  private readonly webhookRequests: Counter<"webhook" | "code">;
  private readonly webhookLatency: Histogram<"webhook">;
  private readonly webhookInFlight: Gauge<"webhook">;

  private readonly informerObjects: Gauge<InformerLabels>;
  private readonly informerSynced: Gauge<InformerLabels>;
  private readonly watchRestarts: Counter<InformerLabels>;
  private readonly relists: Counter<InformerLabels>;
  private readonly received: Counter<InformerLabels>;

  constructor(options: MetricsOptions = {}) {
    this.registry = new RegistryImpl();
    this.clock = options.clock ?? realClock;
    const registers = [this.registry];
    if (options.processMetrics ?? true) {
      // prom-client's own event-loop gauges are replaced (eventloop.ts says why); its sampler, which
      // nothing reads then, runs every 10 s, where it costs nothing.
      collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 10_000 });
      for (const name of EVENT_LOOP_METRICS) this.registry.removeSingleMetric(name);
      registerEventLoopLag(this.registry);
    }

    this.reconcileTotal = new Counter({
      name: "controller_runtime_reconcile_total",
      help: "Total number of reconciliations per controller",
      labelNames: ["controller", "result"],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: "controller_runtime_reconcile_errors_total",
      help: "Total number of reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.terminalErrors = new Counter({
      name: "controller_runtime_terminal_reconcile_errors_total",
      help: "Total number of terminal reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.panics = new Counter({
      name: "controller_runtime_reconcile_panics_total",
      help: "Total number of reconciliation panics per controller",
      labelNames: ["controller"],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: "controller_runtime_reconcile_time_seconds",
      help: "Length of time per reconciliation per controller",
      labelNames: ["controller"],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.maxConcurrent = new Gauge({
      name: "controller_runtime_max_concurrent_reconciles",
      help: "Maximum number of concurrent reconciles per controller",
      labelNames: ["controller"],
      registers,
    });
    this.activeWorkers = new Gauge({
      name: "controller_runtime_active_workers",
      help: "Number of currently used workers per controller",
      labelNames: ["controller"],
      registers,
    });

    this.depth = new Gauge({
      name: "workqueue_depth",
      help: "Current depth of workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.adds = new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.retries = new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.queueDuration = new Histogram({
      name: "workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in workqueue before being requested",
      labelNames: ["name", "controller"],
      buckets: WORKQUEUE_BUCKETS,
      registers,
    });
    this.workDuration = new Histogram({
      name: "workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from workqueue takes",
      labelNames: ["name", "controller"],
      buckets: WORKQUEUE_BUCKETS,
      registers,
    });
    // These two are read from the queues at scrape time: a stuck worker never reports on its own, and
    // exposing exactly that is what these gauges are for.
    this.unfinishedWork = new Gauge({
      name: "workqueue_unfinished_work_seconds",
      help:
        "How many seconds of work has been done that is in progress and hasn't been observed by " +
        "work_duration. Large values indicate stuck threads.",
      labelNames: ["name", "controller"],
      registers,
      collect: () => {
        for (const [controller, queue] of this.queues) {
          this.unfinishedWork.set({ name: controller, controller }, queue.unfinishedWorkMs() / 1000);
        }
      },
    });
    this.longestRunning = new Gauge({
      name: "workqueue_longest_running_processor_seconds",
      help: "How many seconds has the longest running processor for workqueue been running.",
      labelNames: ["name", "controller"],
      registers,
      collect: () => {
        for (const [controller, queue] of this.queues) {
          this.longestRunning.set({ name: controller, controller }, queue.longestRunningMs() / 1000);
        }
      },
    });

    this.leader = new Gauge({
      name: "leader_election_master_status",
      help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
      labelNames: ["name"],
      registers,
    });
    this.shardsHeld = new Gauge({
      name: "opkit_shards_held",
      help: "Shards whose Lease this replica holds (including shards being handed back).",
      registers,
    });
    this.shardHandovers = new Counter({
      name: "opkit_shard_handovers_total",
      help: "Shard Leases this replica acquired, released or lost.",
      labelNames: ["direction"],
      registers,
    });
    const keysGauge: Gauge<"shard"> = new Gauge({
      name: "opkit_shard_keys",
      help: "Objects of the reconciled kinds cached per held shard.",
      labelNames: ["shard"],
      registers,
      collect: () => {
        keysGauge.reset();
        for (const [shard, n] of this.shardKeySource?.() ?? []) keysGauge.set({ shard: String(shard) }, n);
      },
    });
    this.shardKeys = keysGauge;
    this.requests = new Counter({
      name: "rest_client_requests_total",
      help: "Number of HTTP requests, partitioned by status code, method, and host.",
      labelNames: ["code", "method", "host"],
      registers,
    });
    this.requestDuration = new Histogram({
      name: "rest_client_request_duration_seconds",
      help: "Request latency in seconds. Broken down by verb, and host.",
      labelNames: ["verb", "host"],
      buckets: REST_BUCKETS,
      registers,
    });

    this.webhookRequests = new Counter({
      name: "controller_runtime_webhook_requests_total",
      help: "Total number of admission requests by HTTP status code.",
      labelNames: ["webhook", "code"],
      registers,
    });
    this.webhookLatency = new Histogram({
      name: "controller_runtime_webhook_latency_seconds",
      help: "Histogram of the latency of processing admission requests",
      labelNames: ["webhook"],
      buckets: WEBHOOK_BUCKETS,
      registers,
    });
    this.webhookInFlight = new Gauge({
      name: "controller_runtime_webhook_requests_in_flight",
      help: "Current number of admission requests being served.",
      labelNames: ["webhook"],
      registers,
    });

    // opkit's own informer metrics (client-go exports none per informer), read from the caches at scrape
    // time: a watch that reconnects in a loop or a kind that relists over and over shows here, and so
    // does the size of every cache. The counters are the informers' own totals, reset at each scrape
    // so that a removed informer's series disappear.
    const informers = (): Array<{ labels: Record<InformerLabels, string>; i: ObservableInformer }> =>
      [...this.informerSources].flatMap((source) =>
        source().map((i) => ({ labels: { kind: i.kind, namespace: i.namespace ?? "" }, i })),
      );
    this.informerObjects = new Gauge({
      name: "opkit_informer_objects",
      help: "Objects held in the informer's cache, by kind and watched namespace (empty: all).",
      labelNames: ["kind", "namespace"],
      registers,
      collect: () => {
        this.informerObjects.reset();
        for (const { labels, i } of informers()) this.informerObjects.set(labels, i.objects);
      },
    });
    this.informerSynced = new Gauge({
      name: "opkit_informer_synced",
      help: "1 once the informer's first list completed, else 0.",
      labelNames: ["kind", "namespace"],
      registers,
      collect: () => {
        this.informerSynced.reset();
        for (const { labels, i } of informers()) this.informerSynced.set(labels, i.synced ? 1 : 0);
      },
    });
    this.watchRestarts = new Counter({
      name: "opkit_informer_watch_restarts_total",
      help: "Watches the informer reopened after its first (stream ended, broke, or went silent).",
      labelNames: ["kind", "namespace"],
      registers,
      collect: () => {
        this.watchRestarts.reset();
        for (const { labels, i } of informers())
          this.watchRestarts.inc(labels, Math.max(0, i.watchRequests - 1));
      },
    });
    this.received = new Counter({
      name: "opkit_informer_received_total",
      help: "Objects the informer received from the API server: list items and watch events, before any client-side filter.",
      labelNames: ["kind", "namespace"],
      registers,
      collect: () => {
        this.received.reset();
        for (const { labels, i } of informers()) this.received.inc(labels, i.received ?? 0);
      },
    });
    this.relists = new Counter({
      name: "opkit_informer_relists_total",
      help: "Full lists after the first (the watch's resourceVersion expired: 410 Gone).",
      labelNames: ["kind", "namespace"],
      registers,
      collect: () => {
        this.relists.reset();
        for (const { labels, i } of informers()) this.relists.inc(labels, i.relists);
      },
    });
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
    for (const result of RESULT_LABELS) this.reconcileTotal.inc({ controller, result }, 0);
    this.reconcileErrors.inc({ controller }, 0);
    this.terminalErrors.inc({ controller }, 0);
    this.panics.inc({ controller }, 0);
    this.activeWorkers.inc({ controller }, 0);
    if (options.maxConcurrentReconciles !== undefined) {
      this.maxConcurrent.set({ controller }, options.maxConcurrentReconciles);
    }
    return {
      start: () => {
        const startedAt = this.clock.now();
        this.activeWorkers.inc({ controller });
        let ended = false;
        return {
          end: (outcome) => {
            if (ended) return;
            ended = true;
            this.activeWorkers.dec({ controller });
            this.reconcileTime.observe({ controller }, (this.clock.now() - startedAt) / 1000);
            this.countOutcome(controller, outcome);
          },
        };
      },
    };
  }

  private countOutcome(controller: string, outcome: ReconcileOutcome): void {
    switch (outcome) {
      case "success":
      case "requeue":
      case "requeue_after":
        this.reconcileTotal.inc({ controller, result: outcome });
        return;
      case "terminal":
        this.terminalErrors.inc({ controller });
        break;
      case "panic":
        this.panics.inc({ controller });
        break;
      case "error":
        break;
    }
    this.reconcileErrors.inc({ controller });
    this.reconcileTotal.inc({ controller, result: "error" });
  }

  /**
   * Callbacks for a controller's WorkQueue. The queue is labelled with the controller's name for both
   * `name` and `controller`, as controller-runtime does.
   */
  queueMetrics(controller: string): QueueMetrics<string> {
    const labels = { name: controller, controller };
    this.depth.set(labels, 0);
    this.adds.inc(labels, 0);
    this.retries.inc(labels, 0);
    return {
      onAdd: () => this.adds.inc(labels),
      onDepth: (depth) => this.depth.set(labels, depth),
      onGet: (_key, queuedMs) => this.queueDuration.observe(labels, queuedMs / 1000),
      onDone: (_key, workMs) => this.workDuration.observe(labels, workMs / 1000),
      onRetry: () => this.retries.inc(labels),
    };
  }

  /**
   * Read a queue's in-progress work on every scrape (unfinished_work_seconds,
   * longest_running_processor_seconds). Returns a function that stops tracking it.
   */
  trackQueue(controller: string, queue: ObservableQueue): () => void {
    this.queues.set(controller, queue);
    return () => {
      if (this.queues.get(controller) !== queue) return;
      this.queues.delete(controller);
      const labels = { name: controller, controller };
      // A removed queue must not keep exporting its last values.
      this.unfinishedWork.remove(labels);
      this.longestRunning.remove(labels);
    };
  }

  /**
   * The client's `onRequest` hook for one API server: rest_client_requests_total for every exchange,
   * rest_client_request_duration_seconds for non-watch requests (a watch's duration is how long it
   * stayed open, which would drown the latency signal; client-go leaves watches out too).
   */
  onRequest(host: string): (event: RequestEvent) => void {
    return (event) => {
      // The transport reports code 0 when no response arrived; client-go labels that "<error>".
      const code = event.code === 0 ? "<error>" : String(event.code);
      this.requests.inc({ code, method: event.method, host });
      if (!event.watch) this.requestDuration.observe({ verb: event.method, host }, event.durationMs / 1000);
    };
  }

  /**
   * Request instrumentation for one webhook path: controller_runtime_webhook_requests_total{webhook,code},
   * controller_runtime_webhook_latency_seconds{webhook} and controller_runtime_webhook_requests_in_flight{webhook}.
   * The 200 and 500 series start at zero so that rate() works before the first request.
   */
  webhook(path: string): WebhookMetrics {
    const webhook = path;
    this.webhookInFlight.inc({ webhook }, 0);
    this.webhookRequests.inc({ webhook, code: "200" }, 0);
    this.webhookRequests.inc({ webhook, code: "500" }, 0);
    return {
      start: () => {
        const startedAt = this.clock.now();
        this.webhookInFlight.inc({ webhook });
        let ended = false;
        return {
          end: (code) => {
            if (ended) return;
            ended = true;
            this.webhookInFlight.dec({ webhook });
            this.webhookLatency.observe({ webhook }, (this.clock.now() - startedAt) / 1000);
            this.webhookRequests.inc({ webhook, code: String(code) });
          },
        };
      },
    };
  }

  /**
   * Export opkit_informer_objects, opkit_informer_synced, opkit_informer_watch_restarts_total and
   * opkit_informer_relists_total for the informers `source` lists, read at every scrape (the manager
   * passes its cache's `health()`). Returns a function that stops tracking them.
   */
  trackInformers(source: () => readonly ObservableInformer[]): () => void {
    this.informerSources.add(source);
    return () => {
      this.informerSources.delete(source);
    };
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
    this.shardKeySource = keys;
    this.shardsHeld.set(0);
    return {
      held: (count) => this.shardsHeld.set(count),
      handover: (direction) => this.shardHandovers.inc({ direction }),
    };
  }

  /** A callback for LeaderElector's `onLeaderStatus`: 1 while leading the named lease, else 0. */
  leaderStatus(name: string): (leading: boolean) => void {
    this.leader.set({ name }, 0);
    return (leading) => this.leader.set({ name }, leading ? 1 : 0);
  }
}

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
