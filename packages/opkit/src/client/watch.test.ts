import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import fc from "fast-check";
import { MAX_WATCH_EVENT_BYTES, parseWatchStream, typedErrors, withoutManagedFields } from "./watch.ts";
import { ConnectionError, GoneError, RequestAbortedError } from "./errors.ts";

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

  it("a stream that ends inside an event is a ConnectionError after the events before it, as a protobuf watch's", async () => {
    const out: string[] = [];
    await assert.rejects(
      async () => {
        const body = Readable.from([ev("ADDED", "a", "1") + ev("ADDED", "b", "2").slice(0, 30)]);
        for await (const e of parseWatchStream(body, req)) out.push(`${e.type}:${e.object.metadata.name}`);
      },
      (err: unknown) => err instanceof ConnectionError && /ended inside an event/.test(err.message),
    );
    assert.deepEqual(out, ["ADDED:a"]);
  });

  // (Without the limit the endless line is read for ever: the timeout fails the test.)
  it(
    "ends the watch with a ConnectionError once an event outgrows 16 MiB, without buffering the rest of it",
    { timeout: 20_000 },
    async () => {
      const out: string[] = [];
      let served = 0;
      // An endless line after one event: 1 MiB pieces of a string that never closes.
      const piece = "x".repeat(1 << 20);
      async function* endless() {
        yield ev("ADDED", "a", "1") + '{"type":"ADDED","object":{"metadata":{"name":"';
        for (;;) {
          served++;
          yield piece;
        }
      }
      await assert.rejects(
        async () => {
          for await (const e of parseWatchStream(Readable.from(endless()), req))
            out.push(`${e.type}:${e.object.metadata.name}`);
        },
        (err: unknown) => err instanceof ConnectionError && /larger than 16777216 bytes/.test(err.message),
      );
      assert.deepEqual(out, ["ADDED:a"]);
      assert.ok(served * piece.length <= MAX_WATCH_EVENT_BYTES + 3 * piece.length, `read ${served} MiB`);
    },
  );

  it("decodes one large event in many chunks in time linear in its size (no rescan of the held text per chunk)", async () => {
    // A ConfigMap of 2 MiB of quotes is 4 MiB of JSON; in 1 KiB chunks that is 4,096 chunks. Joining and
    // searching the held text again at every chunk is ~8 GB of copying (seconds); linear work is milliseconds.
    const value = '"'.repeat(2 ** 21);
    const line = JSON.stringify({
      type: "MODIFIED",
      object: { metadata: { name: "big" }, data: { v: value } },
    });
    const bytes = Buffer.from(`${line}\n${ev("ADDED", "after", "2")}`);
    const chunks: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 1024) chunks.push(bytes.subarray(i, i + 1024));
    const start = performance.now();
    const events = [];
    for await (const e of parseWatchStream(Readable.from(chunks), req)) events.push(e);
    const ms = performance.now() - start;
    assert.equal(events.length, 2);
    assert.equal((events[0]?.object as { data?: { v: string } }).data?.v, value);
    assert.equal(events[1]?.object.metadata.name, "after");
    assert.ok(ms < 1500, `took ${ms.toFixed(0)} ms`);
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

  it("after the caller's abort hands over nothing more, not even the rest of a chunk's events", async () => {
    const ac = new AbortController();
    const events = parseWatchStream(
      Readable.from([Buffer.from(ev("ADDED", "a", "1") + ev("ADDED", "b", "2") + ev("ADDED", "c", "3"))]),
      req,
      ac.signal,
    );
    assert.equal(
      ((await events.next()).value as { object: { metadata: { name?: string } } }).object.metadata.name,
      "a",
    );
    ac.abort(new Error("stop"));
    await assert.rejects(events.next(), RequestAbortedError);
  });
});

describe("withoutManagedFields", () => {
  const managedFields = [
    {
      manager: "kubectl",
      operation: "Apply",
      time: "2026-11-26T00:00:00Z",
      fieldsType: "FieldsV1",
      fieldsV1: { "f:metadata": { "f:labels": { 'f:a]"[': {} } }, "f:spec": { "f:x": {} } },
    },
  ];
  const strip = (o: { metadata: Record<string, unknown> }) => {
    const { managedFields: _m, ...metadata } = o.metadata;
    return { ...o, metadata };
  };

  it("cuts the object's metadata.managedFields, first, middle or last in metadata", () => {
    for (const metadata of [
      { managedFields, name: "a", labels: { x: "y" } },
      { name: "a", managedFields, labels: { x: "y" } },
      { name: "a", labels: { x: "y" }, managedFields },
      { managedFields },
      { name: "a", managedFields: [] },
    ]) {
      const object = { kind: "ConfigMap", metadata, data: { k: "v" } };
      const line = JSON.stringify({ type: "MODIFIED", object });
      const cut = withoutManagedFields(line);
      assert.ok(cut.length < line.length, line);
      assert.deepEqual(JSON.parse(cut), { type: "MODIFIED", object: strip(object) });
    }
  });

  it("leaves the text alone when the key is not the object's metadata member", () => {
    const texts = [
      // A custom resource's own field of that name, with no managedFields in metadata.
      { type: "ADDED", object: { metadata: { name: "a" }, spec: { managedFields: [1, 2] } } },
      // The key's text inside strings: a label value and an annotation key.
      {
        type: "ADDED",
        object: {
          metadata: {
            name: '"managedFields":[',
            labels: { v: 'x","managedFields":["' },
            annotations: { '"managedFields":[': "]" },
          },
        },
      },
      { type: "BOOKMARK", object: { metadata: { resourceVersion: "7" } } },
    ].map((o) => JSON.stringify(o));
    for (const text of texts) assert.equal(withoutManagedFields(text), text);
    // Not JSON, or cut short: unchanged, for JSON.parse to reject.
    for (const text of ['{"object":{"metadata":{"managedFields":[{"a":"]', '"managedFields":[']) {
      assert.equal(withoutManagedFields(text), text);
    }
  });

  it("leaves the text alone when a look-alike could make the cut wrong", () => {
    const texts = [
      // A custom resource's own top-level field whose key ends in `"metadata` (a real API server sends this
      // for a root schema that keeps unknown fields): its managedFields are user data, not the object's.
      '{"type":"ADDED","object":{"a\\"metadata":{"managedFields":[1]},"metadata":{"name":"x","managedFields":[2]}}}',
      '{"type":"ADDED","x\\"object":{"metadata":{"managedFields":[1]}},"object":{"metadata":{"managedFields":[2]}}}',
      // Duplicate keys: JSON.parse keeps the last one.
      '{"type":"ADDED","object":{"metadata":{"managedFields":[1],"managedFields":[2]}}}',
      '{"type":"ADDED","object":{"metadata":{"managedFields":[1]},"metadata":{"managedFields":[2]}}}',
      // Whitespace around the member: cutting it with its comma would leave `{"name":"a", }`.
      '{"type":"ADDED","object":{"metadata":{"name":"a", "managedFields":[]}}}',
      '{"type":"ADDED","object":{"metadata":{"managedFields":[] ,"name":"a"}}}',
    ];
    for (const text of texts) {
      JSON.parse(text); // each is JSON
      assert.equal(withoutManagedFields(text), text);
    }
  });

  it("equals parse-then-delete for any object (property)", () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), json, { maxKeys: 4 }),
        fc.dictionary(fc.string(), json, { maxKeys: 4 }),
        fc.option(fc.array(json, { maxLength: 3 }), { nil: undefined }),
        fc.nat(4),
        (meta, rest, mf, at) => {
          const entries = Object.entries(meta).filter(([k]) => k !== "managedFields");
          if (mf !== undefined) entries.splice(Math.min(at, entries.length), 0, ["managedFields", mf]);
          // As the API server writes objects: metadata before the rest (kind and apiVersion aside).
          const { metadata: _dropped, ...others } = rest;
          const object = { kind: "Widget", metadata: Object.fromEntries(entries), ...others };
          const event = { type: "MODIFIED", object };
          const parsed = JSON.parse(JSON.stringify(event)) as typeof event;
          const expected = mf !== undefined ? { ...parsed, object: strip(parsed.object) } : parsed;
          assert.deepEqual(JSON.parse(withoutManagedFields(JSON.stringify(event))), expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("is used by parseWatchStream when asked", async () => {
    const line = JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", managedFields } } });
    const kept: unknown[] = [];
    const cut: unknown[] = [];
    for await (const e of parseWatchStream(Readable.from([line]), req))
      kept.push(e.object.metadata.managedFields);
    for await (const e of parseWatchStream(Readable.from([line]), req, undefined, {
      omitManagedFields: true,
    }))
      cut.push(e.object.metadata.managedFields);
    assert.deepEqual(kept, [managedFields]);
    assert.deepEqual(cut, [undefined]);
  });
});

describe("typedErrors", () => {
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

  it("hands what arrived in one event loop turn over as one batch, in order", async () => {
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, undefined);
    const first = it.next();
    for (let i = 0; i < 100; i++) body.push(Buffer.from(`${i},`));
    const got = await first;
    assert.equal(String(got.value), Array.from({ length: 100 }, (_, i) => `${i},`).join(""));
    body.push("tail");
    body.push(null);
    assert.equal(String((await it.next()).value), "tail");
    assert.equal((await it.next()).done, true);
  });

  it("pauses a body its consumer does not keep up with, and resumes it when the consumer reads", async () => {
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, undefined);
    const first = it.next();
    body.push(Buffer.alloc(10));
    await first; // the consumer now holds a batch and reads nothing
    for (let i = 0; i < 4; i++) body.push(Buffer.alloc(512 * 1024, i));
    await turn();
    assert.equal(body.isPaused(), true, "paused past the high water mark");
    const batches: Buffer[] = [];
    const held = (await it.next()).value as Buffer;
    assert.equal(held.length, 2 * 512 * 1024, "held up to the high water mark, the rest left in the body");
    batches.push(held);
    assert.equal(body.isPaused(), false, "resumed once the consumer took the batch");
    body.push(null);
    for (let r = await it.next(); !r.done; r = await it.next()) batches.push(r.value as Buffer);
    const all = Buffer.concat(batches);
    assert.equal(all.length, 4 * 512 * 1024, "nothing lost while paused");
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => all[i * 512 * 1024]),
      [0, 1, 2, 3],
      "nor reordered",
    );
  });

  it("delivers what arrived before a network error, then throws ConnectionError", async () => {
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, undefined);
    const first = it.next();
    body.push("a");
    assert.equal(String((await first).value), "a");
    body.destroy(new Error("socket hang up"));
    await assert.rejects(it.next(), ConnectionError);
  });

  it("throws RequestAbortedError when the caller's signal cut the body", async () => {
    const ac = new AbortController();
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, ac.signal);
    const next = it.next();
    ac.abort(new Error("stop"));
    body.destroy(new Error("aborted"));
    await assert.rejects(next, RequestAbortedError);
  });

  it("after the caller's abort hands over nothing more, not even what arrived before it", async () => {
    // As a stream iterator: a body cut by the signal reads nothing more. Held data handed over after the
    // abort would reach a stopped informer's handlers (stop() aborts, then awaits the loop).
    const ac = new AbortController();
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, ac.signal);
    const first = it.next();
    body.push("a");
    assert.equal(String((await first).value), "a");
    body.push("b"); // arrives while the consumer is busy
    await turn();
    ac.abort(new Error("stop"));
    body.destroy(new Error("aborted"));
    await assert.rejects(it.next(), RequestAbortedError);
  });

  it("destroys the body when its consumer stops early (the connection is released)", async () => {
    const body = new Readable({ read() {} });
    body.push("a");
    for await (const chunk of typedErrors(body, req, undefined)) {
      assert.equal(String(chunk), "a");
      break;
    }
    assert.equal(body.destroyed, true);
  });

  it("reports a body cut without an error (premature close) as ConnectionError", async () => {
    const body = new Readable({ read() {} });
    const it = typedErrors(body, req, undefined);
    const next = it.next();
    body.destroy();
    await assert.rejects(next, ConnectionError);
  });
});
