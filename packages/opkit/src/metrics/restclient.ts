/** client-go's REST client metrics: the declaration table and the client's `onRequest` hook. */
import type { Registry } from "prom-client";
import type { RequestEvent } from "../client/transport.ts";
import { counter, histogram, register } from "./declare.ts";

// client-go's rest_client_request_duration_seconds buckets.
const REST_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

const REST_CLIENT_METRICS = {
  requests: counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
  ),
  duration: histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    REST_BUCKETS,
  ),
};

/** Register the REST client metrics; returns `Metrics.onRequest`. */
export function restClientMetrics(registry: Registry): (host: string) => (event: RequestEvent) => void {
  const m = register(registry, REST_CLIENT_METRICS);
  return (host) => (event) => {
    // The transport reports code 0 when no response arrived; client-go labels that "<error>".
    const code = event.code === 0 ? "<error>" : String(event.code);
    m.requests.inc({ code, method: event.method, host });
    if (!event.watch) m.duration.observe({ verb: event.method, host }, event.durationMs / 1000);
  };
}
