/**
 * The nodejs_eventloop_lag_* gauges of prom-client's default metrics, sampled every 100 ms instead of
 * prom-client's 10 ms, and reported as lag.
 *
 * prom-client's sampler (perf_hooks' monitorEventLoopDelay) wakes the process at its resolution: at 10 ms
 * that was an idle operator's whole CPU (8 ms per second, about 7% of its CPU while 300 AppServices
 * converge). Node records the time between two samples, the interval included, and prom-client reports
 * it as is: an idle process showed 10 ms of "lag" at 10 ms, and would show 100 ms at 100 ms. Here the
 * interval is subtracted, so the gauges read what the loop was late by.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { Registry } from "prom-client";
import Gauge from "prom-client/lib/gauge.js";

/** How often the event loop is sampled. A stall is seen when it covers a sample (0.9 ms of CPU per second). */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** The names prom-client's default metrics give the event-loop gauges this module replaces. */
export const EVENT_LOOP_METRICS: readonly string[] = [
  "nodejs_eventloop_lag_seconds",
  "nodejs_eventloop_lag_min_seconds",
  "nodejs_eventloop_lag_max_seconds",
  "nodejs_eventloop_lag_mean_seconds",
  "nodejs_eventloop_lag_stddev_seconds",
  "nodejs_eventloop_lag_p50_seconds",
  "nodejs_eventloop_lag_p90_seconds",
  "nodejs_eventloop_lag_p99_seconds",
];

/** Register the event-loop gauges in `registry`, sampling every `sampleMs`; values are since the last scrape. */
export function registerEventLoopLag(registry: Registry, sampleMs = EVENT_LOOP_SAMPLE_MS): void {
  const histogram = monitorEventLoopDelay({ resolution: sampleMs });
  histogram.enable();
  const intervalNs = sampleMs * 1e6;
  const lagSeconds = (ns: number): number => Math.max(0, ns - intervalNs) / 1e9;
  const registers = [registry];
  // Registered first: its collect sets the others, which the registry reads after it.
  const lag: Gauge = new Gauge({
    name: "nodejs_eventloop_lag_seconds",
    help: "Lag of event loop in seconds.",
    registers,
    collect() {
      const start = process.hrtime.bigint();
      setImmediate(() => lag.set(Number(process.hrtime.bigint() - start) / 1e9));
      // No sample since the last scrape (scrapes closer than sampleMs): keep the last values.
      if (histogram.count === 0) return;
      min.set(lagSeconds(histogram.min));
      max.set(lagSeconds(histogram.max));
      mean.set(lagSeconds(histogram.mean));
      stddev.set(histogram.stddev / 1e9);
      p50.set(lagSeconds(histogram.percentile(50)));
      p90.set(lagSeconds(histogram.percentile(90)));
      p99.set(lagSeconds(histogram.percentile(99)));
      histogram.reset();
    },
  });
  const gauge = (name: string, what: string): Gauge =>
    new Gauge({
      name: `nodejs_eventloop_lag_${name}_seconds`,
      help: `The ${what} recorded event loop delay.`,
      registers,
    });
  const min = gauge("min", "minimum");
  const max = gauge("max", "maximum");
  const mean = gauge("mean", "mean of the");
  const stddev = gauge("stddev", "standard deviation of the");
  const p50 = gauge("p50", "50th percentile of the");
  const p90 = gauge("p90", "90th percentile of the");
  const p99 = gauge("p99", "99th percentile of the");
}
