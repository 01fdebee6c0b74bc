/**
 * The screen of `opkit top`: an OperatorSummary as fixed-width text that fits an 80-column terminal.
 * Pure, so it is tested without a terminal; the command redraws it in place.
 */
import type { ControllerSummary, InformerSummary, OperatorSummary } from "opkit";

/** What the header says besides the summary. */
export interface TopHeader {
  source: string;
  intervalSeconds: number;
  /** The last scrape's error, shown instead of stale figures being taken for live ones. */
  error?: string;
  /** When the shown figures were scraped. */
  at: Date;
}

const fit = (text: string, width: number): string =>
  text.length > width ? `${text.slice(0, width - 1)}…` : text.padEnd(width);
const right = (text: string, width: number): string =>
  text.length > width ? text.slice(0, width) : text.padStart(width);

function num(v: number | undefined, digits = 1): string {
  if (v === undefined || Number.isNaN(v)) return "-";
  if (v >= 10_000) return `${Math.round(v / 1000)}k`;
  return v.toFixed(digits);
}

function ms(seconds: number | undefined): string {
  if (seconds === undefined) return "-";
  const v = seconds * 1000;
  return v >= 10_000 ? `${(v / 1000).toFixed(0)}s` : v >= 100 ? v.toFixed(0) : v.toFixed(1);
}

function duration(seconds: number): string {
  if (seconds <= 0) return "-";
  return seconds >= 60
    ? `${Math.floor(seconds / 60)}m${Math.round(seconds % 60)}s`
    : `${seconds.toFixed(1)}s`;
}

function sumRates(r: Readonly<Record<string, number>> | undefined): number | undefined {
  return r ? Object.values(r).reduce((a, b) => a + b, 0) : undefined;
}

// Column widths add up to exactly 80 with their separators.
const CONTROLLER_HEAD =
  `${fit("CONTROLLER", 15)} ${right("DEPTH", 6)} ${right("ADDS/s", 7)} ${right("RECS/s", 7)} ` +
  `${right("ERR/s", 6)} ${right("REQ/s", 6)} ${right("P50ms", 6)} ${right("P99ms", 6)} ` +
  `${right("WORK", 5)} ${right("LONGEST", 7)}`;

function controllerLine(c: ControllerSummary): string {
  const work = `${c.activeWorkers}/${c.maxWorkers ?? "?"}`;
  return (
    `${fit(c.name, 15)} ${right(String(c.depth), 6)} ${right(num(c.addsPerSecond), 7)} ` +
    `${right(num(sumRates(c.reconcilesPerSecond)), 7)} ${right(num(c.errorsPerSecond), 6)} ` +
    `${right(num(c.requeuesPerSecond), 6)} ${right(ms(c.p50Seconds), 6)} ${right(ms(c.p99Seconds), 6)} ` +
    `${right(work, 5)} ${right(duration(c.longestRunningSeconds), 7)}`
  );
}

const INFORMER_HEAD = `${fit("INFORMER", 32)} ${fit("NAMESPACE", 14)} ${right("OBJECTS", 8)} ${right("SYNCED", 6)} ${right("RESTARTS", 8)} ${right("RELISTS", 7)}`;

function informerLine(i: InformerSummary): string {
  return (
    `${fit(i.kind, 32)} ${fit(i.namespace || "(all)", 14)} ${right(String(i.objects), 8)} ` +
    `${right(i.synced ? "yes" : "no", 6)} ${right(String(i.watchRestarts), 8)} ${right(String(i.relists), 7)}`
  );
}

/** The whole screen, lines of at most `width` (default 80) columns. */
export function renderTop(summary: OperatorSummary | undefined, header: TopHeader, width = 80): string {
  const lines: string[] = [];
  const leases = Object.entries(summary?.leases ?? {});
  const leader =
    leases.length === 0
      ? "leader election off"
      : leases.map(([name, leading]) => `${leading ? "LEADER" : "standby"} (${name})`).join(", ");
  lines.push(`opkit top  ${header.source}`);
  lines.push(`every ${header.intervalSeconds}s  ${header.at.toISOString().slice(11, 19)}  ${leader}`);
  lines.push(
    `API ${num(summary?.requestsPerSecond)} req/s (${num(summary?.failedRequestsPerSecond)} failed)` +
      (summary?.residentBytes ? `  RSS ${Math.round(summary.residentBytes / 2 ** 20)} MiB` : ""),
  );
  if (header.error) lines.push(`! ${header.error}`);
  lines.push("");
  lines.push(CONTROLLER_HEAD);
  const controllers = summary?.controllers ?? [];
  if (controllers.length === 0) lines.push("(no controller metrics yet)");
  for (const c of controllers) lines.push(controllerLine(c));
  const informers = summary?.informers ?? [];
  if (informers.length > 0) {
    lines.push("");
    lines.push(INFORMER_HEAD);
    for (const i of informers) lines.push(informerLine(i));
  }
  lines.push("");
  lines.push("q or Ctrl-C quits");
  return lines.map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l)).join("\n");
}
