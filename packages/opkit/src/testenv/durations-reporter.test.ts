import { describe, it } from "node:test";
import assert from "node:assert/strict";
import durationsReporter from "./durations-reporter.ts";

async function* events(): AsyncGenerator<{ type: string; data?: Record<string, unknown> }> {
  const ev = (type: string, file: string, nesting: number, ms: number) => ({
    type,
    data: { file: `${process.cwd()}/${file}`, nesting, details: { duration_ms: ms } },
  });
  yield ev("test:pass", "a.test.ts", 0, 1_000);
  yield ev("test:pass", "a.test.ts", 1, 900); // inside the suite above: not counted again
  yield ev("test:fail", "b.int.test.ts", 0, 30_000);
  yield ev("test:pass", "a.test.ts", 0, 500);
  yield { type: "test:diagnostic", data: { message: "ignored" } };
}

describe("durations reporter", () => {
  it("prints each file's top-level time, slowest first, and the total", async () => {
    let out = "";
    for await (const chunk of durationsReporter(events())) out += chunk;
    const lines = out.trim().split("\n");
    assert.equal(lines[0], "test file durations (slowest first)");
    assert.match(lines[1] ?? "", /^\s+b\.int\.test\.ts\s+30\.0s\s+1 failed$/);
    assert.match(lines[2] ?? "", /^\s+a\.test\.ts\s+1\.5s$/);
    assert.match(lines[3] ?? "", /^\s+total\s+31\.5s\s+\(2 files\)$/);
  });

  it("prints nothing for a run without tests", async () => {
    let out = "";
    for await (const chunk of durationsReporter((async function* () {})())) out += chunk;
    assert.equal(out, "");
  });
});
