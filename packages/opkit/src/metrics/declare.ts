/**
 * Metric declarations as data: each subsystem writes its metrics as one table (kind, name, help, label
 * names, buckets), and `register` turns a table into prom-client instruments in a registry.
 */
// The deep files' types, also for programs that compile this file from source (the operators, with the
// opkit-source condition); a .d.ts of ambient modules cannot be imported.
// eslint-disable-next-line @typescript-eslint/triple-slash-reference
/// <reference path="./prom-client-parts.d.ts" />
// prom-client's files one by one: its index also loads the Summary (with tdigest), the Pushgateway (with
// node:https and node:zlib) and the cluster aggregator (node:cluster), which opkit never uses, for ~7 ms
// of every operator's start-up CPU. Same modules, so a user's metrics from "prom-client" register here.
import type { Registry } from "prom-client";
import Counter from "prom-client/lib/counter.js";
import Gauge from "prom-client/lib/gauge.js";
import Histogram from "prom-client/lib/histogram.js";

/** A counter's declaration. */
export interface CounterSpec<L extends string> {
  type: "counter";
  name: string;
  help: string;
  labels: readonly L[];
}

/** A gauge's declaration. */
export interface GaugeSpec<L extends string> {
  type: "gauge";
  name: string;
  help: string;
  labels: readonly L[];
}

/** A histogram's declaration, with its bucket bounds in seconds. */
export interface HistogramSpec<L extends string> {
  type: "histogram";
  name: string;
  help: string;
  labels: readonly L[];
  buckets: readonly number[];
}

/** One metric's declaration. */
export type MetricSpec = CounterSpec<string> | GaugeSpec<string> | HistogramSpec<string>;

/** Declare a counter. */
export function counter<L extends string = never>(
  name: string,
  help: string,
  labels: readonly L[] = [],
): CounterSpec<L> {
  return { type: "counter", name, help, labels };
}

/** Declare a gauge. */
export function gauge<L extends string = never>(
  name: string,
  help: string,
  labels: readonly L[] = [],
): GaugeSpec<L> {
  return { type: "gauge", name, help, labels };
}

/** Declare a histogram. */
export function histogram<L extends string>(
  name: string,
  help: string,
  labels: readonly L[],
  buckets: readonly number[],
): HistogramSpec<L> {
  return { type: "histogram", name, help, labels, buckets };
}

/** The prom-client instrument a declaration becomes. */
export type Instrument<S> =
  S extends CounterSpec<infer L>
    ? Counter<L>
    : S extends GaugeSpec<infer L>
      ? Gauge<L>
      : S extends HistogramSpec<infer L>
        ? Histogram<L>
        : never;

/** A table's instruments, under the table's keys. */
export type Instruments<T> = { readonly [K in keyof T]: Instrument<T[K]> };

/** Scrape-time readers: the named metric's reader runs before each scrape to set its values. */
export type Collectors<T> = { [K in keyof T]?: (metric: Instrument<T[K]>) => void };

/** Create the instruments of `table` in `registry`, in the table's order. */
export function register<T extends Record<string, MetricSpec>>(
  registry: Registry,
  table: T,
  collectors: Collectors<T> = {},
): Instruments<T> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(table)) {
    const read = collectors[key as keyof T] as ((metric: unknown) => void) | undefined;
    const config = {
      name: spec.name,
      help: spec.help,
      labelNames: [...spec.labels],
      registers: [registry],
      ...(read ? { collect: () => read(out[key]) } : {}),
    };
    out[key] =
      spec.type === "counter"
        ? new Counter(config)
        : spec.type === "gauge"
          ? new Gauge(config)
          : new Histogram({ ...config, buckets: [...spec.buckets] });
  }
  return out as Instruments<T>;
}
