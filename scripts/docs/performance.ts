/**
 * docs/performance.md and its charts (docs/performance/*.svg), generated from bench/results/latest.json,
 * the file `make bench` writes: `node scripts/docs/performance.ts` rewrites them. The output depends on
 * that file alone (no clock, no machine), so regenerating without a new bench run changes nothing;
 * performance.test.ts checks that the committed page is what it writes.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { markdownTable, type Figure, type Results } from "../../bench/lib/stats.ts";

const root = join(import.meta.dirname, "..", "..");
/** The bench results the page is made from. */
export const RESULTS = join(root, "bench", "results", "latest.json");
/** The page and the folder of its charts. */
export const PAGE = join(root, "docs", "performance.md");
export const CHART_DIR = join(root, "docs", "performance");

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function num(n: number, digits = 2): string {
  return Number(n.toFixed(digits)).toString();
}

/** Horizontal bars of opkit ÷ peer for every figure whose target is a ratio, with parity and the bound. */
function ratioChart(figures: readonly Figure[]): string {
  const rows = figures.filter((f) => f.target?.on === "ratio" && f.ratio !== undefined);
  const label = 430;
  const width = 860;
  const plot = width - label - 20;
  const max = Math.max(2.5, ...rows.map((f) => f.ratio ?? 0)) * 1.05;
  const x = (v: number): number => label + (v / max) * plot;
  const rowH = 22;
  const top = 40;
  const height = top + rows.length * rowH + 40;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>opkit ÷ peer for every figure with a ratio target (shorter is better; the tick is the target)</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">opkit ÷ peer (lower is better; | marks the target)</text>`,
  ];
  rows.forEach((f, i) => {
    const y = top + i * rowH;
    const r = f.ratio ?? 0;
    const colour = f.verdict === "pass" ? "#3b7dd8" : "#d83b3b";
    out.push(
      `<text x="${label - 8}" y="${y + 15}" text-anchor="end">${esc(f.name)}</text>`,
      `<rect x="${label}" y="${y + 4}" width="${num(x(r) - label)}" height="${rowH - 8}" fill="${colour}"/>`,
      `<text x="${num(Math.max(x(r), x(f.target?.bound ?? 0)) + 5)}" y="${y + 15}">${num(r)}×</text>`,
      `<line x1="${num(x(f.target?.bound ?? 0))}" x2="${num(x(f.target?.bound ?? 0))}" y1="${y + 2}" y2="${y + rowH - 2}" stroke="#000" stroke-width="2"/>`,
    );
  });
  const bottom = top + rows.length * rowH;
  out.push(
    `<line x1="${num(x(1))}" x2="${num(x(1))}" y1="${top}" y2="${bottom}" stroke="#888" stroke-dasharray="4 3"/>`,
    `<text x="${num(x(1))}" y="${bottom + 16}" text-anchor="middle" fill="#555">1× (same as the peer)</text>`,
    `</svg>`,
  );
  return `${out.join("\n")}\n`;
}

/** Bytes of RSS per cached Pod: opkit (default and metadata-only), controller-runtime, client-node. */
function memoryChart(figures: readonly Figure[]): string {
  const sizes = [
    ...new Set(
      figures.flatMap((f) => {
        const m = /^cache-memory: RSS per Pod, (\d+) Pods, default$/.exec(f.name);
        return m ? [Number(m[1])] : [];
      }),
    ),
  ];
  const find = (size: number, suffix: string): Figure | undefined =>
    figures.find((f) => f.name === `cache-memory: RSS per Pod, ${size} Pods, ${suffix}`);
  const series = [
    { name: "opkit", colour: "#3b7dd8", value: (s: number) => find(s, "default")?.value },
    {
      name: "opkit, metadata-only",
      colour: "#8fb8ee",
      value: (s: number) => find(s, "metadata-only (vs Go's full cache)")?.value,
    },
    { name: "controller-runtime", colour: "#00add8", value: (s: number) => find(s, "default")?.peerValue },
    {
      name: "client-node informer",
      colour: "#e39b2d",
      value: (s: number) => find(s, "default vs client-node")?.peerValue,
    },
  ];
  const width = 860;
  const groupW = (width - 120) / Math.max(1, sizes.length);
  const barW = Math.min(60, (groupW - 40) / series.length);
  const plotTop = 60;
  const plotH = 220;
  const max = Math.max(1, ...sizes.flatMap((s) => series.map((se) => se.value(s) ?? 0))) * 1.1;
  const height = plotTop + plotH + 70;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>Bytes of RSS per cached Pod</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">Bytes of RSS per cached Pod (lower is better)</text>`,
  ];
  series.forEach((se, i) => {
    const lx = 80 + i * 190;
    out.push(
      `<rect x="${lx}" y="32" width="12" height="12" fill="${se.colour}"/>`,
      `<text x="${lx + 16}" y="42">${esc(se.name)}</text>`,
    );
  });
  sizes.forEach((size, g) => {
    const gx = 80 + g * groupW + 20;
    series.forEach((se, i) => {
      const v = se.value(size);
      if (v === undefined) return;
      const h = (v / max) * plotH;
      const bx = gx + i * (barW + 6);
      out.push(
        `<rect x="${num(bx)}" y="${num(plotTop + plotH - h)}" width="${num(barW)}" height="${num(h)}" fill="${se.colour}"/>`,
        `<text x="${num(bx + barW / 2)}" y="${num(plotTop + plotH - h - 4)}" text-anchor="middle">${Math.round(v).toLocaleString("en-US")}</text>`,
      );
    });
    out.push(
      `<text x="${num(gx + (series.length * (barW + 6)) / 2)}" y="${plotTop + plotH + 20}" text-anchor="middle">${size.toLocaleString("en-US")} Pods</text>`,
    );
  });
  out.push(
    `<line x1="80" x2="${width - 20}" y1="${plotTop + plotH}" y2="${plotTop + plotH}" stroke="#000"/>`,
    `</svg>`,
  );
  return `${out.join("\n")}\n`;
}

function section(title: string, figures: readonly Figure[], prefix: RegExp): string[] {
  const rows = figures.filter((f) => prefix.test(f.name));
  return rows.length === 0 ? [] : [`### ${title}`, "", markdownTable(rows), ""];
}

/** The page and its charts, by path. */
export function renderPerformance(results: Results): Map<string, string> {
  const f = results.figures;
  const m = results.machine;
  const passed = f.filter((x) => x.verdict === "pass").length;
  const failed = f.filter((x) => x.verdict === "fail").length;
  const page = [
    "<!-- Generated by scripts/docs/performance.ts from bench/results/latest.json. DO NOT EDIT. -->",
    "",
    "# Performance",
    "",
    "`make bench` runs opkit beside the usual ways of writing an operator on one local control plane and",
    "records every figure in `bench/results/latest.json`; this page is generated from that file. Machines",
    "are noisy, so the result is the ratio of opkit to its peer measured in the same run, not the seconds.",
    "",
    `The run below (\`${results.command}\`, started ${results.startedAt}, ${Math.round(results.durationSeconds / 60)} minutes)`,
    `measured ${f.length} figures: ${passed} meet their target, ${failed} miss it, the others have no target`,
    "and are there for context.",
    "",
    "![opkit ÷ peer for every figure with a ratio target](performance/ratios.svg)",
    "",
    "![Bytes of RSS per cached Pod](performance/memory.svg)",
    "",
    "## The peers",
    "",
    "- **controller-runtime**: `bench/peers/go-appservice/`, the AppService operator of",
    "  `operators/appservice` written in Go with controller-runtime (the same CRD, the same children, a",
    "  Deployment and a Service applied server-side with a controller owner reference, and the same status,",
    "  written only when it differs). Its `--probe-pods` mode caches Pods with controller-runtime's cache; its",
    "  `--bench-queue` mode measures client-go's workqueue. `make bench` builds it with the machine's `go`.",
    "- **client-node**: the informer of `@kubernetes/client-node` on all Pods",
    "  (`bench/probes/client-node-cache.ts`).",
    "- **kube-scheduler**: the scheduler `opkit env` runs, beside the seed scheduler operator.",
    "- **one unsharded replica**: the same operator with sharding off, for the sharding figures.",
    "",
    "## Results",
    "",
    ...section("Converge: 1,000 AppServices created at once", f, /^converge:/),
    ...section("Start-up", f, /^startup:/),
    ...section("Cache: sync time and memory", f, /^cache(-memory)?:/),
    ...section("Latency: event to reconcile", f, /^latency:/),
    ...section("Leader failover", f, /^failover:/),
    ...section("Sharding: three replicas", f, /^shard:/),
    ...section("Scheduling", f, /^schedule:/),
    ...section("Workqueue and decoding", f, /^(queue|decode):/),
    ...(results.skipped.length > 0
      ? ["Not measured in this run:", "", ...results.skipped.map((s) => `- ${s.name}: ${s.reason}`), ""]
      : []),
    "## Method",
    "",
    "- Every figure alternates runs, peer then opkit, `BENCH_REPS` times each, and reports the medians;",
    "  `runs` in the JSON keeps every run's value, `parameters` the sizes.",
    "- All of them run against the same `opkit env` (a real etcd and kube-apiserver; kwok nodes), started",
    "  by the bench as an env named `bench` and stopped at the end, with the `ShardedListAndWatch` feature",
    "  gate on (only the sharding figures use it).",
    "- The operators run as separate processes; memory is read from `/proc` (RSS) and from the runtime",
    "  (heap), CPU from `/proc/<pid>/stat`, requests from each operator's client metrics and from",
    "  kube-apiserver's `apiserver_request_total` (the two counts are both reported).",
    "- A verdict compares opkit's value, or its ratio to the peer, with the target; figures without a",
    "  target are reported for context only.",
    "",
    "## The machine",
    "",
    "| | |",
    "| --- | --- |",
    `| CPU | ${m.cores} cores, ${esc(m.cpuModel)} |`,
    `| load average at the start | ${m.loadAverage.map((l) => l.toFixed(2)).join(", ")} |`,
    `| Node | ${m.node} |`,
    `| Go (the peers) | ${m.go} |`,
    "",
    "The machine is shared and small; on a larger one the seconds shrink and the ratios stay close.",
    "",
    "## Reproduce",
    "",
    "`make bench` needs the control-plane binaries (`make env-build`, once) and `go` on PATH for the",
    "controller-runtime peer. It writes `bench/results/latest.json`; then regenerate this page.",
    "",
    "```sh",
    "# not run here: a full bench run takes about 20 minutes of the whole machine; make bench runs it",
    "make bench                                    # every figure at the sizes above",
    "make bench FIGURES=queue,decode               # some figures: queue, decode, cache-memory, startup,",
    "                                              #   converge, latency, failover, shard, schedule",
    "make bench BENCH_N=300 BENCH_PODS=10000 BENCH_REPS=3",
    "node scripts/docs/performance.ts              # this page, from bench/results/latest.json",
    "```",
    "",
    "The history of these figures, and of the changes that moved them, is in the git history of",
    "`bench/results/` and of this page.",
  ];
  return new Map([
    [PAGE, `${page.join("\n")}\n`],
    [join(CHART_DIR, "ratios.svg"), ratioChart(f)],
    [join(CHART_DIR, "memory.svg"), memoryChart(f)],
  ]);
}

/** Reads latest.json. */
export function loadResults(path = RESULTS): Results {
  return JSON.parse(readFileSync(path, "utf8")) as Results;
}

if (import.meta.main) {
  mkdirSync(CHART_DIR, { recursive: true });
  for (const [path, text] of renderPerformance(loadResults())) writeFileSync(path, text);
  console.log(`wrote ${PAGE} and its charts from ${RESULTS}`);
}
