/**
 * `opkit top`: a live view of a running operator (opkit's or any controller-runtime one), read from its
 * Prometheus endpoint every interval: either a URL, or a pod's metrics port through the API server's
 * pod proxy (`--pod ns/name`, so nothing needs port-forwarding). `--once --json` prints one summary
 * for scripts. The figures come from the library (scrape, parseExposition, summarizeOperator); this
 * file only fetches, redraws and handles keys.
 */
import { Command, Option } from "commander";
import { emitKeypressEvents } from "node:readline";
import {
  KubeClient,
  parseExposition,
  scrape,
  summarizeOperator,
  type OperatorSummary,
  type Sample,
} from "opkit";
import { renderTop } from "../top/render.ts";
import { UsageError } from "./project.ts";

interface TopOptions {
  url?: string;
  pod?: string;
  port: string;
  path: string;
  interval: string;
  once?: boolean;
  json?: boolean;
  kubeconfig?: string;
}

type Scraper = { source: string; scrape(signal: AbortSignal): Promise<Sample[]>; close(): Promise<void> };

async function scraperFor(o: TopOptions): Promise<Scraper> {
  if (o.url && o.pod) throw new UsageError("--url and --pod exclude each other: give one");
  if (o.url) {
    if (!/^https?:\/\//.test(o.url)) throw new UsageError(`--url ${o.url}: give an http:// or https:// URL`);
    const url = o.url;
    return { source: url, scrape: (signal) => scrape(url, { signal }), close: async () => {} };
  }
  if (!o.pod) throw new UsageError("give --url http://host:port/metrics or --pod namespace/name");
  const m = /^([a-z0-9-]+)\/([a-z0-9.-]+)$/.exec(o.pod);
  if (!m) throw new UsageError(`--pod ${o.pod}: expected namespace/name`);
  const port = Number(o.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new UsageError(`--port ${o.port}: expected a port number (1-65535)`);
  const [, namespace, name] = m;
  const client = await KubeClient.load({ kubeconfig: o.kubeconfig, fieldManager: "opkit-top" });
  const path = `/api/v1/namespaces/${namespace}/pods/${name}:${port}/proxy${o.path}`;
  return {
    source: `pod ${namespace}/${name}:${port}${o.path}`,
    async scrape(signal) {
      const body = await client.transport.stream({ method: "GET", path, accept: "text/plain", signal });
      let text = "";
      for await (const chunk of body) text += String(chunk);
      return parseExposition(text);
    },
    close: () => client.close(),
  };
}

function intervalOf(o: TopOptions): number {
  const seconds = Number(o.interval);
  if (!Number.isFinite(seconds) || seconds < 0.2 || seconds > 3600)
    throw new UsageError(`--interval ${o.interval}: expected seconds between 0.2 and 3600`);
  return seconds;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });

/** Two scrapes an interval apart, summarized (rates need two). */
async function once(s: Scraper, seconds: number, json: boolean): Promise<void> {
  const signal = new AbortController().signal;
  const first = await s.scrape(signal);
  const started = performance.now();
  await sleep(seconds * 1000, signal);
  const second = await s.scrape(signal);
  const summary = summarizeOperator(second, first, (performance.now() - started) / 1000);
  process.stdout.write(
    json
      ? `${JSON.stringify({ source: s.source, ...summary }, null, 2)}\n`
      : `${renderTop(summary, { source: s.source, intervalSeconds: seconds, at: new Date() }, process.stdout.columns || 80)}\n`,
  );
}

async function live(s: Scraper, seconds: number): Promise<void> {
  // log-update redraws by erasing only the lines it wrote: no full-screen clear, so no flicker.
  const { createLogUpdate } = await import("log-update");
  const draw = createLogUpdate(process.stdout, { showCursor: false });
  const stop = new AbortController();
  const quit = (): void => stop.abort();
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
  const stdin = process.stdin;
  const keys = (_: string, key: { name?: string; ctrl?: boolean } | undefined): void => {
    if (key?.name === "q" || (key?.ctrl && key.name === "c")) quit();
  };
  if (stdin.isTTY) {
    emitKeypressEvents(stdin);
    stdin.setRawMode(true);
    stdin.on("keypress", keys);
    stdin.resume();
  }
  let previous: { samples: Sample[]; at: number } | undefined;
  let summary: OperatorSummary | undefined;
  try {
    while (!stop.signal.aborted) {
      let error: string | undefined;
      try {
        const samples = await s.scrape(stop.signal);
        const at = performance.now();
        summary = summarizeOperator(
          samples,
          previous?.samples,
          previous ? (at - previous.at) / 1000 : undefined,
        );
        previous = { samples, at };
      } catch (err) {
        if (stop.signal.aborted) break;
        error = err instanceof Error ? err.message : String(err);
      }
      draw(
        renderTop(
          summary,
          { source: s.source, intervalSeconds: seconds, error, at: new Date() },
          process.stdout.columns || 80,
        ),
      );
      await sleep(seconds * 1000, stop.signal);
    }
  } finally {
    draw.done();
    process.removeListener("SIGINT", quit);
    process.removeListener("SIGTERM", quit);
    if (stdin.isTTY) {
      stdin.removeListener("keypress", keys);
      stdin.setRawMode(false);
      stdin.pause();
    }
  }
}

export function topCommand(): Command {
  return new Command("top")
    .description(
      "a live view of a running operator from its Prometheus metrics: per controller queue depth, rates, " +
        "latency and workers; per informer the cache (works on controller-runtime operators too)",
    )
    .option("--url <url>", "the operator's metrics URL, e.g. http://127.0.0.1:8080/metrics")
    .option("--pod <namespace/name>", "read a pod's metrics through the API server's pod proxy")
    .option("--port <port>", "the pod's metrics port (with --pod)", "8080")
    .option("--path <path>", "the metrics path (with --pod)", "/metrics")
    .option("--interval <seconds>", "seconds between scrapes", "1")
    .option("--once", "scrape twice an interval apart, print one summary and exit")
    .option("--json", "with --once: print the summary as JSON")
    .addOption(new Option("--kubeconfig <path>", "kubeconfig for --pod (default: the standard rules)"))
    .action(async (o: TopOptions) => {
      if (o.json && !o.once) throw new UsageError("--json needs --once (the live view is for terminals)");
      const seconds = intervalOf(o);
      const s = await scraperFor(o);
      try {
        if (o.once || !process.stdout.isTTY) await once(s, seconds, o.json ?? false);
        else await live(s, seconds);
      } finally {
        await s.close();
      }
    });
}
