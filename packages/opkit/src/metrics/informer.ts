/**
 * opkit's own informer metrics (client-go exports none per informer): the declaration table, read from
 * the caches at scrape time. A watch that reconnects in a loop or a kind that relists over and over shows
 * here, and so does the size of every cache. The counters are the informers' own totals, reset at each
 * scrape so that a removed informer's series disappear.
 */
import type { Registry } from "prom-client";
import { counter, gauge, register } from "./declare.ts";

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

const LABELS = ["kind", "namespace"] as const;

const INFORMER_METRICS = {
  objects: gauge(
    "opkit_informer_objects",
    "Objects held in the informer's cache, by kind and watched namespace (empty: all).",
    LABELS,
  ),
  synced: gauge("opkit_informer_synced", "1 once the informer's first list completed, else 0.", LABELS),
  watchRestarts: counter(
    "opkit_informer_watch_restarts_total",
    "Watches the informer reopened after its first (stream ended, broke, or went silent).",
    LABELS,
  ),
  received: counter(
    "opkit_informer_received_total",
    "Objects the informer received from the API server: list items and watch events, before any client-side filter.",
    LABELS,
  ),
  relists: counter(
    "opkit_informer_relists_total",
    "Full lists after the first (the watch's resourceVersion expired: 410 Gone).",
    LABELS,
  ),
};

/** Register the informer metrics; returns `Metrics.trackInformers`. */
export function informerMetrics(
  registry: Registry,
): (source: () => readonly ObservableInformer[]) => () => void {
  const sources = new Set<() => readonly ObservableInformer[]>();
  const informers = (): Array<{ labels: Record<(typeof LABELS)[number], string>; i: ObservableInformer }> =>
    [...sources].flatMap((source) =>
      source().map((i) => ({ labels: { kind: i.kind, namespace: i.namespace ?? "" }, i })),
    );
  register(registry, INFORMER_METRICS, {
    objects: (g) => {
      g.reset();
      for (const { labels, i } of informers()) g.set(labels, i.objects);
    },
    synced: (g) => {
      g.reset();
      for (const { labels, i } of informers()) g.set(labels, i.synced ? 1 : 0);
    },
    watchRestarts: (c) => {
      c.reset();
      for (const { labels, i } of informers()) c.inc(labels, Math.max(0, i.watchRequests - 1));
    },
    received: (c) => {
      c.reset();
      for (const { labels, i } of informers()) c.inc(labels, i.received ?? 0);
    },
    relists: (c) => {
      c.reset();
      for (const { labels, i } of informers()) c.inc(labels, i.relists);
    },
  });
  return (source) => {
    sources.add(source);
    return () => {
      sources.delete(source);
    };
  };
}
