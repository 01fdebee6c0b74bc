// Types of the prom-client files metrics/declare.ts and metrics/metrics.ts load one by one instead of through prom-client's index
// (see there why): each is the class or function the index exports under the same name.
declare module "prom-client/lib/registry.js" {
  export { Registry as default } from "prom-client";
}
declare module "prom-client/lib/counter.js" {
  export { Counter as default } from "prom-client";
}
declare module "prom-client/lib/gauge.js" {
  export { Gauge as default } from "prom-client";
}
declare module "prom-client/lib/histogram.js" {
  export { Histogram as default } from "prom-client";
}
declare module "prom-client/lib/defaultMetrics.js" {
  export { collectDefaultMetrics as default } from "prom-client";
}
