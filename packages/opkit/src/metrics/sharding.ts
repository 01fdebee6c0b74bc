/** opkit's shard metrics: the declaration table and the sink a ShardCoordinator reports through. */
import type { Registry } from "prom-client";
import { counter, gauge, register } from "./declare.ts";

const SHARD_METRICS = {
  held: gauge(
    "opkit_shards_held",
    "Shards whose Lease this replica holds (including shards being handed back).",
  ),
  handovers: counter("opkit_shard_handovers_total", "Shard Leases this replica acquired, released or lost.", [
    "direction",
  ]),
  keys: gauge("opkit_shard_keys", "Objects of the reconciled kinds cached per held shard.", ["shard"]),
};

/** The sink `Metrics.shards` returns (ShardCoordinator's `metrics`). */
export interface ShardMetricsSink {
  /** The number of shards held now. */
  held(count: number): void;
  /** A shard Lease acquired, released or lost. */
  handover(direction: "acquired" | "released" | "lost"): void;
}

/** Register the shard metrics; returns `Metrics.shards`. */
export function shardMetrics(
  registry: Registry,
): (keys: () => ReadonlyMap<number, number>) => ShardMetricsSink {
  let keySource: (() => ReadonlyMap<number, number>) | undefined;
  const m = register(registry, SHARD_METRICS, {
    keys: (g) => {
      g.reset();
      for (const [shard, n] of keySource?.() ?? []) g.set({ shard: String(shard) }, n);
    },
  });
  return (keys) => {
    keySource = keys;
    m.held.set(0);
    return {
      held: (count) => m.held.set(count),
      handover: (direction) => m.handovers.inc({ direction }),
    };
  };
}
