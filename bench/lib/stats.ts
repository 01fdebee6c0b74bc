/**
 * The pure part of `make bench`: medians and percentiles of repeated runs, the opkit ÷ peer ratio and
 * its verdict against a target, the rows of the printed table, the shape of bench/results/latest.json,
 * and the Prometheus text sums the runner reads from /metrics. No I/O here, so it is unit-tested.
 */

/** The median of the values (the mean of the middle two for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The p-th percentile (0..100) by nearest rank; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const rank = Math.min(s.length, Math.max(1, Math.ceil((p / 100) * s.length)));
  return s[rank - 1]!;
}

/** opkit ÷ peer; undefined when there is no peer figure or it is zero (a ratio would mean nothing). */
export function ratio(value: number, peer: number | undefined): number | undefined {
  if (peer === undefined || !Number.isFinite(peer) || peer === 0 || !Number.isFinite(value)) return undefined;
  return value / peer;
}

/**
 * What a figure must reach: a ratio to the peer (`ratio ≤ 1.0`) or an absolute bound on opkit's value
 * (`value ≥ 1,000,000`).
 */
export interface Target {
  /** "ratio": compares opkit ÷ peer; "value": compares opkit's value itself. */
  on: "ratio" | "value";
  /** "max": must be at most `bound`; "min": at least. */
  kind: "max" | "min";
  /** The bound. */
  bound: number;
}

/** One measured figure, as it goes into latest.json. */
export interface Figure {
  /** e.g. "converge.wall", "cache-memory.bytes-per-pod.10000.default". */
  name: string;
  /** opkit's value (median over the runs). */
  value: number;
  /** Unit of value and peerValue, e.g. "s", "bytes", "ops/s". */
  unit: string;
  /** Which peer stands beside it: "controller-runtime", "client-node", "kube-scheduler" or none. */
  peer?: string;
  /** The peer's value (median), when there is a peer. */
  peerValue?: number;
  /** opkit ÷ peer. */
  ratio?: number;
  /** The target from issue 13. */
  target?: Target;
  /** pass / fail against the target; "n/a" when there is no target or nothing to compare. */
  verdict: "pass" | "fail" | "n/a";
  /** Every run's value, opkit's and the peer's, in the order they ran. */
  runs: { opkit: number[]; peer: number[] };
  /** Sizes and settings that produced it. */
  parameters: Record<string, string | number | boolean>;
}

/** The verdict of a value/ratio against a target. */
export function verdict(value: number, r: number | undefined, target: Target | undefined): Figure["verdict"] {
  if (!target) return "n/a";
  const x = target.on === "ratio" ? r : value;
  if (x === undefined || !Number.isFinite(x)) return "n/a";
  return (target.kind === "max" ? x <= target.bound : x >= target.bound) ? "pass" : "fail";
}

/** Build a Figure from the runs: medians, ratio and verdict. */
export function figure(input: {
  name: string;
  unit: string;
  opkit: readonly number[];
  peer?: readonly number[];
  peerName?: string;
  target?: Target;
  parameters?: Record<string, string | number | boolean>;
}): Figure {
  const value = median(input.opkit);
  const peerValue = input.peer && input.peer.length > 0 ? median(input.peer) : undefined;
  const r = ratio(value, peerValue);
  return {
    name: input.name,
    value,
    unit: input.unit,
    ...(peerValue !== undefined ? { peer: input.peerName ?? "controller-runtime", peerValue } : {}),
    ...(r !== undefined ? { ratio: r } : {}),
    ...(input.target ? { target: input.target } : {}),
    verdict: verdict(value, r, input.target),
    runs: { opkit: [...input.opkit], peer: [...(input.peer ?? [])] },
    parameters: input.parameters ?? {},
  };
}

/** The whole of bench/results/latest.json. */
export interface Results {
  /** When the run started (ISO 8601). */
  startedAt: string;
  /** Wall time of the whole run in seconds. */
  durationSeconds: number;
  /** The machine and toolchains. */
  machine: { cores: number; cpuModel: string; loadAverage: number[]; node: string; go: string };
  /** The command that produced it, e.g. "make bench BENCH_N=1000". */
  command: string;
  /** The measured figures. */
  figures: Figure[];
  /** Figures asked for but not measured, with why. */
  skipped: { name: string; reason: string }[];
}

function fmt(n: number | undefined, unit = ""): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  const abs = Math.abs(n);
  const digits = abs >= 1000 ? 0 : abs >= 100 ? 1 : abs >= 1 ? 2 : 3;
  const text = n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit ? `${text} ${unit}` : text;
}

/** A target as people read it: "≤ 1.0× peer", "≥ 1,000,000 ops/s". */
export function formatTarget(t: Target | undefined, unit: string): string {
  if (!t) return "";
  const op = t.kind === "max" ? "≤" : "≥";
  return t.on === "ratio" ? `${op} ${t.bound}× peer` : `${op} ${fmt(t.bound, unit)}`;
}

/** The rows of the printed table (figure, opkit, peer, ratio, target, verdict). */
export function tableRows(figures: readonly Figure[]): string[][] {
  return figures.map((f) => [
    f.name,
    fmt(f.value, f.unit),
    f.peerValue === undefined ? "" : `${fmt(f.peerValue, f.unit)} (${f.peer ?? ""})`,
    f.ratio === undefined ? "" : `${f.ratio.toFixed(f.ratio >= 10 ? 1 : 3)}×`,
    formatTarget(f.target, f.unit),
    f.verdict,
  ]);
}

/** A Markdown table of the figures (README's Performance section and the console). */
export function markdownTable(figures: readonly Figure[]): string {
  const head = ["figure", "opkit", "peer", "opkit ÷ peer", "target", "verdict"];
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  for (const row of tableRows(figures)) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
}

/**
 * Sum the samples of one metric in Prometheus text, keeping those whose labels match every given
 * label value (a value list matches any of them).
 */
export function sumMetric(
  text: string,
  name: string,
  match: Record<string, string | readonly string[]> = {},
): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    const labels: Record<string, string> = {};
    let valueText = rest;
    if (rest[0] === "{") {
      const end = rest.lastIndexOf("}");
      for (const m of rest.slice(1, end).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
      valueText = rest.slice(end + 1);
    }
    const ok = Object.entries(match).every(([k, v]) =>
      typeof v === "string" ? labels[k] === v : v.includes(labels[k] ?? ""),
    );
    if (ok) total += Number(valueText.trim().split(/\s+/)[0]);
  }
  return total;
}

/** The figures named by FIGURES=a,b (all when empty); an unknown name is an error that lists the known. */
export function selectFigures(text: string | undefined, known: readonly string[]): string[] {
  const asked = (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (asked.length === 0) return [...known];
  const unknown = asked.filter((a) => !known.includes(a));
  if (unknown.length > 0) {
    throw new Error(`unknown figure ${unknown.join(", ")}: choose from ${known.join(", ")}`);
  }
  return known.filter((k) => asked.includes(k));
}

/**
 * The event → reconcile-start waits (ms) in an AppService operator's output, for reconciles that started
 * at or after `sinceMs` (wall clock, ms since the epoch): the Go peer's `--log-reconciles` lines
 * (`{"event":"reconcile","tsNs":…,"queuedUs":…}`, queuedUs -1 when no event queued it) and opkit's
 * debug lines (`{"msg":"reconcile done","startedAt":…,"queuedMs":…}`). Other lines are skipped.
 */
export function reconcileWaits(lines: readonly string[], sinceMs: number): number[] {
  const waits: number[] = [];
  for (const line of lines) {
    const go = line.includes('"event":"reconcile"');
    if (!go && !line.includes('"reconcile done"')) continue;
    let rec: { tsNs?: number; queuedUs?: number; startedAt?: number; queuedMs?: number };
    try {
      rec = JSON.parse(line) as typeof rec;
    } catch {
      continue;
    }
    const startedMs = go ? (rec.tsNs ?? 0) / 1e6 : (rec.startedAt ?? 0);
    const wait = go
      ? rec.queuedUs !== undefined && rec.queuedUs >= 0
        ? rec.queuedUs / 1000
        : undefined
      : rec.queuedMs;
    if (startedMs >= sinceMs && typeof wait === "number" && Number.isFinite(wait)) waits.push(wait);
  }
  return waits;
}

/**
 * How many sends are due `elapsedMs` into a steady stream of `rate` per second, capped at `total`: the
 * first at once, then one every 1000/rate ms, so a late tick catches up instead of lowering the rate.
 */
export function dueBy(elapsedMs: number, rate: number, total: number): number {
  return Math.min(total, Math.floor((elapsedMs / 1000) * rate) + 1);
}

/**
 * The indexes i in 0..count-1 whose object `${prefix}${i}` is not among `names`: what a figure must
 * still create to hold `count` objects (objects left by an earlier run are reused).
 */
export function missingIndexes(names: Iterable<string>, count: number, prefix: string): number[] {
  const have = new Set(names);
  const missing: number[] = [];
  for (let i = 0; i < count; i++) if (!have.has(`${prefix}${i}`)) missing.push(i);
  return missing;
}

/**
 * Events per second between the first and the last of `times` (ms): (n − 1) ÷ (last − first), the pace
 * once the work runs, without the wait before the first; NaN for fewer than two or no time between.
 */
export function bindRate(times: readonly number[]): number {
  if (times.length < 2) return Number.NaN;
  let first = Infinity;
  let last = -Infinity;
  for (const t of times) {
    if (t < first) first = t;
    if (t > last) last = t;
  }
  return last > first ? ((times.length - 1) * 1000) / (last - first) : Number.NaN;
}
