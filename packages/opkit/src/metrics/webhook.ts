/** controller-runtime's webhook metrics: the declaration table and the per-path request adapter. */
import type { Registry } from "prom-client";
import type { Clock } from "../clock/index.ts";
import { counter, gauge, histogram, register } from "./declare.ts";

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

// controller-runtime's webhook latency buckets (prometheus.DefBuckets).
const WEBHOOK_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const WEBHOOK_METRICS = {
  requests: counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
  ),
  latency: histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    WEBHOOK_BUCKETS,
  ),
  inFlight: gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
  ),
};

/** Register the webhook metrics; returns `Metrics.webhook`. */
export function webhookMetrics(registry: Registry, clock: Clock): (path: string) => WebhookMetrics {
  const m = register(registry, WEBHOOK_METRICS);
  return (webhook) => {
    m.inFlight.inc({ webhook }, 0);
    m.requests.inc({ webhook, code: "200" }, 0);
    m.requests.inc({ webhook, code: "500" }, 0);
    return {
      start: () => {
        const startedAt = clock.now();
        m.inFlight.inc({ webhook });
        let ended = false;
        return {
          end: (code) => {
            if (ended) return;
            ended = true;
            m.inFlight.dec({ webhook });
            m.latency.observe({ webhook }, (clock.now() - startedAt) / 1000);
            m.requests.inc({ webhook, code: String(code) });
          },
        };
      },
    };
  };
}
