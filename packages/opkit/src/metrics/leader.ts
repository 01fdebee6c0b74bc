/** client-go's leader election metric: the declaration and the LeaderElector callback. */
import type { Registry } from "prom-client";
import { gauge, register } from "./declare.ts";

const LEADER_METRICS = {
  status: gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
    ["name"],
  ),
};

/** Register the leader election metric; returns `Metrics.leaderStatus`. */
export function leaderMetrics(registry: Registry): (name: string) => (leading: boolean) => void {
  const m = register(registry, LEADER_METRICS);
  return (name) => {
    m.status.set({ name }, 0);
    return (leading) => m.status.set({ name }, leading ? 1 : 0);
  };
}
