import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseListBody } from "./liststream.ts";

interface List {
  items: unknown[];
  [key: string]: unknown;
}

/** The body cut into chunks of `size` bytes (as Buffers, so multi-byte characters are split too). */
async function parse(
  body: string,
  size: number,
  omitManagedFields = false,
): Promise<{ list: List; items: unknown[] }> {
  const bytes = Buffer.from(body, "utf8");
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size));
  const items: unknown[] = [];
  const list = await parseListBody<List>(
    (async function* () {
      yield* chunks;
    })(),
    (item) => items.push(item),
    { omitManagedFields },
  );
  return { list, items };
}

describe("parseListBody", () => {
  it("hands over each item and returns the rest of the list, whatever the chunking", async () => {
    const want = {
      kind: "PodList",
      apiVersion: "v1",
      metadata: { resourceVersion: "12", continue: 'a"b{[' },
      items: [
        {
          metadata: { name: 'x\\"}{[' },
          spec: { containers: [{ name: "c", args: ["]", "}"] }, { name: "é✓" }] },
        },
        { metadata: { name: "\\\\" }, n: [1, -2.5e3, true, null] },
        {},
      ],
      extra: [1, [2, { y: "}" }]],
    };
    const body = JSON.stringify(want, null, 1); // whitespace between tokens too
    for (const size of [1, 2, 3, 7, 64, body.length]) {
      const { list, items } = await parse(body, size);
      assert.deepEqual(items, want.items, `chunks of ${size}`);
      assert.deepEqual(list, { ...want, items: [] }, `chunks of ${size}`);
    }
  });

  it("reads a list whose items come before its metadata, and an empty list", async () => {
    const { list, items } = await parse('{"items":[{"a":1}],"metadata":{"resourceVersion":"3"}}', 5);
    assert.deepEqual(items, [{ a: 1 }]);
    assert.deepEqual(list, { metadata: { resourceVersion: "3" }, items: [] });
    const empty = await parse('{"kind":"PodList","metadata":{},"items":[]}', 4);
    assert.deepEqual(empty.items, []);
    assert.deepEqual(empty.list, { kind: "PodList", metadata: {}, items: [] });
  });

  it("omitManagedFields cuts metadata.managedFields out of each item, and nothing else", async () => {
    const mf = [{ manager: "m", fieldsV1: { "f:metadata": { "f:labels": { ".": {} } } }, time: "]" }];
    const items = [
      { metadata: { name: "a", managedFields: mf, labels: { x: "1" } }, spec: { managedFields: [1] } },
      { metadata: { managedFields: mf, name: "b" } },
      { metadata: { name: "c", managedFields: [] } },
      { metadata: { managedFields: mf } },
      { metadata: { name: "d", annotations: { managedFields: "[]" } }, managedFields: [2] },
    ];
    const body = JSON.stringify({ kind: "PodList", metadata: { resourceVersion: "1" }, items });
    const want = structuredClone(items).map((i) => {
      delete (i.metadata as { managedFields?: unknown }).managedFields;
      return i;
    });
    for (const size of [1, 5, 16, body.length]) {
      const got = await parse(body, size, true);
      assert.deepEqual(got.items, want, `chunks of ${size}`);
      assert.deepEqual(got.list, { kind: "PodList", metadata: { resourceVersion: "1" }, items: [] });
    }
    // Without the option they stay.
    assert.deepEqual((await parse(body, 7)).items, items);
  });

  it("omitManagedFields leaves an item's field whose key only ends in `\"metadata` alone", async () => {
    // A custom resource with a root schema that keeps unknown fields: a real API server sends these keys.
    const items = [
      { apiVersion: "v", metadata: { name: "a", managedFields: [1] }, 'z"metadata': { managedFields: [2] } },
    ];
    const body = JSON.stringify({ kind: "WidgetList", metadata: {}, items });
    const got = await parse(body, 7, true);
    assert.deepEqual(got.items, [
      { apiVersion: "v", metadata: { name: "a" }, 'z"metadata': { managedFields: [2] } },
    ]);
  });

  it("rejects what is not a complete JSON object", async () => {
    await assert.rejects(parse('{"items":[{"a":1}', 3), SyntaxError);
    await assert.rejects(parse('[{"a":1}]', 3), SyntaxError);
    await assert.rejects(parse('{"items":[{"a":1,}]}', 3), SyntaxError);
    await assert.rejects(parse('{"items":[]} x', 3), SyntaxError);
  });

  it("decodes one large item in many chunks in time linear in its size (no re-copy of the held text per chunk)", async () => {
    // A 4 MiB string of escaped quotes in 1 KiB chunks: 4,096 chunks. Re-copying
    // the item's text held so far at every chunk is ~8 GB of copying (seconds); linear work is milliseconds.
    const value = '\\"'.repeat(2 ** 21);
    const body = `{"kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"big","managedFields":[{"m":"x"}]},"data":{"v":"${value}"}}]}`;
    const start = performance.now();
    const { items } = await parse(body, 1024, true);
    const ms = performance.now() - start;
    assert.deepEqual(items, [{ metadata: { name: "big" }, data: { v: '"'.repeat(2 ** 21) } }]);
    assert.ok(ms < 1500, `took ${ms.toFixed(0)} ms`);
  });
});
