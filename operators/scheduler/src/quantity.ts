/**
 * Resource quantities ("500m", "1Gi", "2e3") as numbers in the units the scheduler adds up: CPU in
 * millicores, everything else (memory in bytes, pods, extended resources) in whole units, rounded up as
 * Kubernetes does (a request of 0.5m CPU is 1m). The API server has validated every quantity a pod or a
 * node carries, so a string that does not parse is treated as zero, never thrown.
 */

const SUFFIX: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY_RE = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$/;

/** The value of a quantity in base units (cores, bytes, counts); NaN when it does not parse. */
export function parseQuantity(q: string | number | undefined): number {
  if (q === undefined) return 0;
  if (typeof q === "number") return q;
  const m = QUANTITY_RE.exec(q.trim());
  if (!m) return Number.NaN;
  const base = Number(m[1]);
  if (m[2]) return Number(`${m[1]}${m[2]}`);
  return base * (SUFFIX[m[3] ?? ""] ?? 1);
}

/**
 * A quantity of `resource` in the scheduler's unit: millicores for `cpu`, whole units otherwise,
 * rounded up; 0 for a value that does not parse or is negative.
 */
export function resourceAmount(resource: string, q: string | number | undefined): number {
  const v = parseQuantity(q) * (resource === "cpu" ? 1000 : 1);
  // Rounding guards against binary fractions: 0.1 * 1000 is 100.00000000000001, still 100m.
  return Number.isFinite(v) && v > 0 ? Math.ceil(Math.round(v * 1e6) / 1e6) : 0;
}
