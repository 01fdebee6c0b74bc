/**
 * Reading Prometheus metrics back: the text exposition format (version 0.0.4, what prom-client and
 * Go's client_golang serve) parsed into samples, and a scrape of an operator's /metrics endpoint.
 * `opkit top` and tests read operators through this, Go operators included.
 *
 * The format is line based and small; no maintained npm package parses it (the few that exist are
 * unmaintained for years), so the parser lives here, with tests against prom-client's own output.
 */

/** One sample: a series name, its labels and its value (`+Inf`, `-Inf` and `NaN` included). */
export interface Sample {
  /** The series name, with a histogram's `_bucket`/`_sum`/`_count` suffix as served. */
  readonly name: string;
  /** The labels, unescaped. */
  readonly labels: Readonly<Record<string, string>>;
  /** The value; NaN and ±Infinity as the text says. */
  readonly value: number;
}

/** A line the exposition parser could not read, with its line number. */
export class ExpositionParseError extends Error {
  /** The 1-based line of the text that could not be read. */
  readonly line: number;
  constructor(line: number, message: string) {
    super(`metrics text line ${line}: ${message}`);
    this.name = "ExpositionParseError";
    this.line = line;
  }
}

/** A scrape that failed: the endpoint did not answer, or answered with an error status. */
export class ScrapeError extends Error {
  /** The endpoint scraped. */
  readonly url: string;
  constructor(url: string, message: string, options?: { cause?: unknown }) {
    super(`scraping ${url}: ${message}`, options);
    this.name = "ScrapeError";
    this.url = url;
  }
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseValue(text: string, line: number): number {
  // Case-insensitive, as Prometheus parses values (Go's ParseFloat): prom-client writes NaN as "Nan".
  switch (text.toLowerCase()) {
    case "+inf":
    case "inf":
    case "+infinity":
    case "infinity":
      return Infinity;
    case "-inf":
    case "-infinity":
      return -Infinity;
    case "nan":
      return NaN;
  }
  const v = Number(text);
  if (text === "" || Number.isNaN(v)) throw new ExpositionParseError(line, `value "${text}" is not a number`);
  return v;
}

/**
 * Parse the text exposition format into samples, in order. Comments (`# HELP`, `# TYPE`) and blank
 * lines are skipped; timestamps are ignored. Throws ExpositionParseError naming the line on text
 * that is not in the format (e.g. an HTML error page served in its place).
 */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (line === "" || line.startsWith("#")) continue;
    const lineNo = n + 1;
    const name = NAME.exec(line)?.[0];
    if (!name) throw new ExpositionParseError(lineNo, `expected a metric name at "${line.slice(0, 40)}"`);
    let i = name.length;
    const labels: Record<string, string> = {};
    if (line[i] === "{") {
      i++;
      for (;;) {
        while (line[i] === " " || line[i] === ",") i++;
        if (line[i] === "}") {
          i++;
          break;
        }
        const label = LABEL_NAME.exec(line.slice(i))?.[0];
        if (!label) throw new ExpositionParseError(lineNo, `expected a label name in ${name}`);
        i += label.length;
        if (line[i] !== "=" || line[i + 1] !== '"')
          throw new ExpositionParseError(lineNo, `expected ="…" after label ${label} of ${name}`);
        i += 2;
        let value = "";
        for (;;) {
          const c = line[i++];
          if (c === undefined) throw new ExpositionParseError(lineNo, `unterminated value of label ${label}`);
          if (c === '"') break;
          if (c === "\\") {
            const e = line[i++];
            value += e === "n" ? "\n" : (e ?? "");
          } else value += c;
        }
        labels[label] = value;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    samples.push({ name, labels, value: parseValue(rest[0] ?? "", lineNo) });
  }
  return samples;
}

/** Options of `scrape`. */
export interface ScrapeOptions {
  /** Give up after this long (default 5 s): a hung endpoint must not hang the caller. */
  timeoutMs?: number;
  /** Cancels the scrape (e.g. when a live view quits). */
  signal?: AbortSignal;
}

/** The largest answer `scrape` reads; an endpoint sending more is not a metrics endpoint. */
const MAX_SCRAPE_BYTES = 32 * 1024 * 1024;

/**
 * Fetch and parse a /metrics endpoint over HTTP(S). Throws ScrapeError when it does not answer, answers
 * with an error status or with more than 32 MiB, and ExpositionParseError when the answer is not metrics.
 */
export async function scrape(url: string, options: ScrapeOptions = {}): Promise<Sample[]> {
  const timeout = AbortSignal.timeout(options.timeoutMs ?? 5_000);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let res: Response;
  try {
    res = await fetch(url, { signal, headers: { accept: "text/plain;version=0.0.4" } });
  } catch (err) {
    const reason = timeout.aborted ? "no answer within the timeout" : (err as Error).message;
    throw new ScrapeError(url, reason, { cause: err });
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new ScrapeError(url, `HTTP ${res.status} ${res.statusText}`);
  }
  const length = Number(res.headers.get("content-length") ?? 0);
  if (length > MAX_SCRAPE_BYTES) {
    await res.body?.cancel();
    throw new ScrapeError(url, `answer of ${length} bytes is larger than ${MAX_SCRAPE_BYTES}`);
  }
  const text = await res.text();
  if (text.length > MAX_SCRAPE_BYTES)
    throw new ScrapeError(url, `answer larger than ${MAX_SCRAPE_BYTES} bytes`);
  return parseExposition(text);
}
