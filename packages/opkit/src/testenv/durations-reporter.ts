/**
 * A node:test reporter that prints, at the end of a run, how long each test file took (the sum of its
 * top-level tests and suites) and the total, slowest first, so the CI budget of `make test` stays
 * visible. Used beside the spec reporter:
 *
 *   node --test --test-reporter=spec --test-reporter-destination=stdout \
 *     --test-reporter=./packages/opkit/src/testenv/durations-reporter.ts --test-reporter-destination=stderr …
 */
import { relative } from "node:path";

interface TestEventData {
  file?: string;
  nesting?: number;
  details?: { duration_ms?: number };
}

interface TestEvent {
  type: string;
  data?: TestEventData;
}

interface FileTotal {
  ms: number;
  tests: number;
  failed: number;
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Sum the top-level durations per file and yield the table once the run ends. */
export default async function* durationsReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const files = new Map<string, FileTotal>();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const data = event.data ?? {};
    if (data.nesting !== 0 || !data.file) continue;
    const total = files.get(data.file) ?? { ms: 0, tests: 0, failed: 0 };
    total.ms += data.details?.duration_ms ?? 0;
    total.tests++;
    if (event.type === "test:fail") total.failed++;
    files.set(data.file, total);
  }
  if (files.size === 0) return;
  const rows = [...files].sort((a, b) => b[1].ms - a[1].ms);
  const width = Math.max(...rows.map(([f]) => relative(process.cwd(), f).length));
  yield "\ntest file durations (slowest first)\n";
  for (const [file, t] of rows) {
    const failed = t.failed ? `  ${t.failed} failed` : "";
    yield `  ${relative(process.cwd(), file).padEnd(width)}  ${secs(t.ms).padStart(8)}${failed}\n`;
  }
  const all = rows.reduce((sum, [, t]) => sum + t.ms, 0);
  yield `  ${"total".padEnd(width)}  ${secs(all).padStart(8)}  (${rows.length} files)\n`;
}
