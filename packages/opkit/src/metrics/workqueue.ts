/**
 * client-go's workqueue metrics: the declaration table, the callbacks a controller's queue reports
 * through, and the scrape-time gauges read from the queues in progress.
 */
import type { Registry } from "prom-client";
import type { QueueMetrics } from "../queue/workqueue.ts";
import { counter, gauge, histogram, register } from "./declare.ts";

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

// client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s.
const WORKQUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));
const LABELS = ["name", "controller"] as const;

const WORKQUEUE_METRICS = {
  depth: gauge("workqueue_depth", "Current depth of workqueue", LABELS),
  adds: counter("workqueue_adds_total", "Total number of adds handled by workqueue", LABELS),
  retries: counter("workqueue_retries_total", "Total number of retries handled by workqueue", LABELS),
  queueDuration: histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    LABELS,
    WORKQUEUE_BUCKETS,
  ),
  workDuration: histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    LABELS,
    WORKQUEUE_BUCKETS,
  ),
  // These two are read from the queues at scrape time: a stuck worker never reports on its own, and
  // exposing exactly that is what these gauges are for.
  unfinishedWork: gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by " +
      "work_duration. Large values indicate stuck threads.",
    LABELS,
  ),
  longestRunning: gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    LABELS,
  ),
};

/** The workqueue adapters of `Metrics`. */
export interface WorkqueueAdapters {
  /** `Metrics.queueMetrics`. */
  queueMetrics(controller: string): QueueMetrics<string>;
  /** `Metrics.trackQueue`. */
  trackQueue(controller: string, queue: ObservableQueue): () => void;
}

/** Register the workqueue metrics. A queue is labelled with its controller's name for both labels, as controller-runtime does. */
export function workqueueMetrics(registry: Registry): WorkqueueAdapters {
  const queues = new Map<string, ObservableQueue>();
  const m = register(registry, WORKQUEUE_METRICS, {
    unfinishedWork: (g) => {
      for (const [controller, queue] of queues)
        g.set({ name: controller, controller }, queue.unfinishedWorkMs() / 1000);
    },
    longestRunning: (g) => {
      for (const [controller, queue] of queues)
        g.set({ name: controller, controller }, queue.longestRunningMs() / 1000);
    },
  });
  return {
    queueMetrics(controller) {
      const labels = { name: controller, controller };
      m.depth.set(labels, 0);
      m.adds.inc(labels, 0);
      m.retries.inc(labels, 0);
      return {
        onAdd: () => m.adds.inc(labels),
        onDepth: (depth) => m.depth.set(labels, depth),
        onGet: (_key, queuedMs) => m.queueDuration.observe(labels, queuedMs / 1000),
        onDone: (_key, workMs) => m.workDuration.observe(labels, workMs / 1000),
        onRetry: () => m.retries.inc(labels),
      };
    },
    trackQueue(controller, queue) {
      queues.set(controller, queue);
      return () => {
        if (queues.get(controller) !== queue) return;
        queues.delete(controller);
        const labels = { name: controller, controller };
        // A removed queue must not keep exporting its last values.
        m.unfinishedWork.remove(labels);
        m.longestRunning.remove(labels);
      };
    },
  };
}
