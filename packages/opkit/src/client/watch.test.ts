import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { parseWatchStream } from "./watch.ts";
import { GoneError } from "./errors.ts";

const req = { method: "GET", path: "/api/v1/configmaps?watch=true" };

function ev(type: string, name: string, rv: string): string {
  return JSON.stringify({ type, object: { metadata: { name, resourceVersion: rv } } }) + "\n";
}

async function collect(chunks: (string | Buffer)[]): Promise<string[]> {
  const out: string[] = [];
  for await (const e of parseWatchStream(Readable.from(chunks), req))
    out.push(`${e.type}:${e.object.metadata.name}`);
  return out;
}

describe("parseWatchStream", () => {
  it("decodes events split at arbitrary byte boundaries, including inside multi-byte characters", async () => {
    const text = ev("ADDED", "a", "1") + ev("MODIFIED", "é-ü", "2") + ev("DELETED", "c", "3");
    const bytes = Buffer.from(text);
    for (const size of [1, 2, 3, 7, 64]) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
      assert.deepEqual(await collect(chunks), ["ADDED:a", "MODIFIED:é-ü", "DELETED:c"], `chunk size ${size}`);
    }
  });

  it("yields a final event that has no trailing newline", async () => {
    assert.deepEqual(await collect([ev("ADDED", "a", "1").trimEnd()]), ["ADDED:a"]);
  });

  it("turns an ERROR event carrying 410 into GoneError", async () => {
    const status = {
      kind: "Status",
      status: "Failure",
      reason: "Expired",
      code: 410,
      message: "too old resource version",
    };
    const chunks = [ev("ADDED", "a", "1"), JSON.stringify({ type: "ERROR", object: status }) + "\n"];
    await assert.rejects(collect(chunks), (err: unknown) => err instanceof GoneError && err.code === 410);
  });
});
