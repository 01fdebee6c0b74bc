/**
 * What an operator is doing, from two scrapes of its /metrics a known time apart: per controller the
 * queue, the reconcile rates by result, latency quantiles and workers; per informer the cache; leader
 * status and API request rates. Built on controller-runtime's and client-go's metric names, so it reads
 * Go operators too (the informer part is opkit's own metrics and is empty for them).
 */
import type { Sample } from "./exposition.ts";

/** One controller's figures. Rates are per second over the interval (undefined on a single scrape). */
export interface ControllerSummary {
  /** The controller's name (the `controller` label). */
  name: string;
  /** workqueue_depth. */
  depth: number;
  /** workqueue_adds_total per second: how fast events (and requeues) arrive. */
  addsPerSecond: number | undefined;
  /** controller_runtime_reconcile_total by result, per second. */
  reconcilesPerSecond: Readonly<Record<string, number>> | undefined;
  /** controller_runtime_reconcile_errors_total per second (terminal errors and panics included). */
  errorsPerSecond: number | undefined;
  /** requeue + requeue_after, per second. */
  requeuesPerSecond: number | undefined;
  /** Reconciles since the operator started, by result. */
  reconcilesTotal: Readonly<Record<string, number>>;
  /** Reconcile errors since the operator started. */
  errorsTotal: number;
  /**
   * Reconcile time quantiles in seconds, over the reconciles of the interval (over all since start
   * when the interval had none or there is one scrape). Undefined without any reconcile.
   */
  p50Seconds: number | undefined;
  /** The 99th percentile, over the same reconciles as `p50Seconds`. */
  p99Seconds: number | undefined;
  /** Reconciles running now (controller_runtime_active_workers). */
  activeWorkers: number;
  /** controller_runtime_max_concurrent_reconciles, when exported. */
  maxWorkers: number | undefined;
  /** workqueue_longest_running_processor_seconds: a stuck reconcile shows here. */
  longestRunningSeconds: number;
}

/** One informer's cache (opkit's own metrics). */
export interface InformerSummary {
  /** The kind cached (the `kind` label). */
  kind: string;
  /** Empty: all namespaces. */
  namespace: string;
  /** Objects held now. */
  objects: number;
  /** Whether the first list completed. */
  synced: boolean;
  /** Watches reopened since start (a reconnect loop shows here). */
  watchRestarts: number;
  /** Full lists after the first (410 Gone) since start. */
  relists: number;
}

/** An operator at a moment, as `opkit top` shows it. */
export interface OperatorSummary {
  /** One entry per controller, by name. */
  controllers: ControllerSummary[];
  /** One entry per informer (opkit operators only), by kind and namespace. */
  informers: InformerSummary[];
  /** leader_election_master_status by lease name: true while leading. */
  leases: Readonly<Record<string, boolean>>;
  /** rest_client_requests_total per second over the interval, and of those with a 5xx or 429 answer. */
  requestsPerSecond: number | undefined;
  /** Of those, the ones answered 429 or 5xx or without an answer, per second. */
  failedRequestsPerSecond: number | undefined;
  /** process_resident_memory_bytes, when the operator exports it. */
  residentBytes: number | undefined;
}

type Series = Map<string, Sample[]>;

function index(samples: readonly Sample[]): Series {
  const m: Series = new Map();
  for (const s of samples) {
    const list = m.get(s.name);
    if (list) list.push(s);
    else m.set(s.name, [s]);
  }
  return m;
}

function pick(series: Series, name: string, labels: Record<string, string>): Sample[] {
  return (series.get(name) ?? []).filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

function sum(series: Series, name: string, labels: Record<string, string> = {}): number {
  return pick(series, name, labels).reduce((a, s) => a + s.value, 0);
}

/**
 * The q-quantile of a cumulative histogram's buckets, interpolated linearly inside the bucket as
 * Prometheus' histogram_quantile does. Undefined without observations.
 */
export function histogramQuantile(
  q: number,
  buckets: ReadonlyArray<{ le: number; count: number }>,
): number | undefined {
  const sorted = [...buckets].sort((a, b) => a.le - b.le);
  const total = sorted.at(-1)?.count ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of sorted) {
    if (b.count >= rank) {
      // The +Inf bucket has no upper bound: answer the largest finite one, as Prometheus does.
      if (b.le === Infinity) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket <= 0 ? b.le : prevLe + ((b.le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

function buckets(series: Series, name: string, labels: Record<string, string>): Map<number, number> {
  const out = new Map<number, number>();
  for (const s of pick(series, `${name}_bucket`, labels)) {
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/**
 * Summarize `current`; with `previous` (scraped `intervalSeconds` earlier) also rates and the latency
 * of the interval's reconciles. A counter that went down (the operator restarted) counts from zero.
 */
export function summarizeOperator(
  current: readonly Sample[],
  previous?: readonly Sample[],
  intervalSeconds?: number,
): OperatorSummary {
  const cur = index(current);
  const prev = previous && intervalSeconds && intervalSeconds > 0 ? index(previous) : undefined;
  const rate = (name: string, labels: Record<string, string> = {}): number | undefined => {
    if (!prev || !intervalSeconds) return undefined;
    const now = sum(cur, name, labels);
    const before = sum(prev, name, labels);
    return (now >= before ? now - before : now) / intervalSeconds;
  };

  const names = new Set<string>();
  for (const name of ["controller_runtime_reconcile_total", "controller_runtime_active_workers"])
    for (const s of cur.get(name) ?? []) if (s.labels.controller) names.add(s.labels.controller);

  const controllers = [...names].sort().map((name) => controllerSummary(name, cur, prev, rate));

  const informers = informerSummaries(cur);

  const leases: Record<string, boolean> = {};
  for (const s of cur.get("leader_election_master_status") ?? []) leases[s.labels.name ?? ""] = s.value === 1;

  let failedRequestsPerSecond: number | undefined;
  if (prev && intervalSeconds) {
    const failed = (series: Series): number =>
      (series.get("rest_client_requests_total") ?? [])
        .filter(
          (s) => s.labels.code === "429" || /^5/.test(s.labels.code ?? "") || s.labels.code === "<error>",
        )
        .reduce((a, s) => a + s.value, 0);
    const d = failed(cur) - failed(prev);
    failedRequestsPerSecond = (d >= 0 ? d : failed(cur)) / intervalSeconds;
  }
  return {
    controllers,
    informers,
    leases,
    requestsPerSecond: rate("rest_client_requests_total"),
    failedRequestsPerSecond,
    residentBytes: cur.get("process_resident_memory_bytes")?.[0]?.value,
  };
}

/** One controller's figures: queue, reconcile counts and rates, latency quantiles, workers. */
function controllerSummary(
  name: string,
  cur: Series,
  prev: Series | undefined,
  rate: (name: string, labels?: Record<string, string>) => number | undefined,
): ControllerSummary {
  const c = { controller: name };
  const q = { name };
  const results = new Set(
    pick(cur, "controller_runtime_reconcile_total", c).map((s) => s.labels.result ?? ""),
  );
  const reconcilesTotal: Record<string, number> = {};
  for (const r of results)
    reconcilesTotal[r] = sum(cur, "controller_runtime_reconcile_total", { ...c, result: r });
  let reconcilesPerSecond: Record<string, number> | undefined;
  if (prev) {
    reconcilesPerSecond = {};
    for (const r of results)
      reconcilesPerSecond[r] = rate("controller_runtime_reconcile_total", { ...c, result: r }) ?? 0;
  }
  const now = buckets(cur, "controller_runtime_reconcile_time_seconds", c);
  let hist = [...now].map(([le, count]) => ({ le, count }));
  if (prev) {
    const before = buckets(prev, "controller_runtime_reconcile_time_seconds", c);
    const delta = hist.map((b) => ({ le: b.le, count: b.count - (before.get(b.le) ?? 0) }));
    if ((delta.find((b) => b.le === Infinity)?.count ?? 0) > 0 && delta.every((b) => b.count >= 0))
      hist = delta;
  }
  const requeue = rate("controller_runtime_reconcile_total", { ...c, result: "requeue" });
  const requeueAfter = rate("controller_runtime_reconcile_total", { ...c, result: "requeue_after" });
  const max = pick(cur, "controller_runtime_max_concurrent_reconciles", c)[0]?.value;
  return {
    name,
    depth: sum(cur, "workqueue_depth", q),
    addsPerSecond: rate("workqueue_adds_total", q),
    reconcilesPerSecond,
    errorsPerSecond: rate("controller_runtime_reconcile_errors_total", c),
    requeuesPerSecond: requeue === undefined ? undefined : requeue + (requeueAfter ?? 0),
    reconcilesTotal,
    errorsTotal: sum(cur, "controller_runtime_reconcile_errors_total", c),
    p50Seconds: histogramQuantile(0.5, hist),
    p99Seconds: histogramQuantile(0.99, hist),
    activeWorkers: sum(cur, "controller_runtime_active_workers", c),
    maxWorkers: max,
    longestRunningSeconds: sum(cur, "workqueue_longest_running_processor_seconds", q),
  };
}

/** Every informer's size, sync state, watch restarts and relists. */
function informerSummaries(cur: Series): InformerSummary[] {
  return (cur.get("opkit_informer_objects") ?? [])
    .map((s): InformerSummary => {
      const l = { kind: s.labels.kind ?? "", namespace: s.labels.namespace ?? "" };
      return {
        ...l,
        objects: s.value,
        synced: sum(cur, "opkit_informer_synced", l) > 0,
        watchRestarts: sum(cur, "opkit_informer_watch_restarts_total", l),
        relists: sum(cur, "opkit_informer_relists_total", l),
      };
    })
    .sort((a, b) => a.kind.localeCompare(b.kind) || a.namespace.localeCompare(b.namespace));
}
