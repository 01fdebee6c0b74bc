/**
 * node:test reporter for `make test-compat`: one JSON line per finished test (file, name, outcome, skip
 * reason), so scripts/test-compat.ts can tabulate what passed on each Kubernetes release. Suites count only
 * when they fail by themselves (a failing hook), not for their tests' failures.
 */
interface TestEventData {
  name: string;
  file?: string;
  nesting: number;
  skip?: string | boolean;
  todo?: string | boolean;
  details?: {
    type?: string;
    duration_ms?: number;
    error?: { failureType?: string; message?: string; cause?: unknown };
  };
}

interface TestEvent {
  type: string;
  data: TestEventData;
}

/** The outcome of one test as the runner reads it. */
export interface CompatRecord {
  file: string;
  name: string;
  outcome: "pass" | "fail" | "skip";
  reason?: string;
  ms: number;
}

function errorText(e: NonNullable<TestEventData["details"]>["error"]): string {
  const cause = e?.cause;
  const text =
    cause instanceof Error ? cause.message : typeof cause === "string" ? cause : (e?.message ?? "");
  return text.split("\n").slice(0, 3).join(" ").slice(0, 300);
}

export default async function* compatReporter(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const d = event.data;
    const suite = d.details?.type === "suite";
    if (suite && (event.type === "test:pass" || d.details?.error?.failureType === "subtestsFailed")) continue;
    const record: CompatRecord = {
      file: d.file ?? d.name,
      name: d.name,
      outcome:
        event.type === "test:fail" ? "fail" : d.skip !== undefined && d.skip !== false ? "skip" : "pass",
      ms: Math.round(d.details?.duration_ms ?? 0),
    };
    if (record.outcome === "skip" && typeof d.skip === "string") record.reason = d.skip;
    if (record.outcome === "fail") record.reason = errorText(d.details?.error);
    yield `${JSON.stringify(record)}\n`;
  }
}
