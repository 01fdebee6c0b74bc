import { test } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../client/types.ts";
import { ApplyMemo, containsJson } from "./memo.ts";

function body(data: Record<string, string>, labels: Record<string, string> = { app: "x" }): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "c", namespace: "ns", labels },
    data,
  } as KubeObject;
}

function stored(b: KubeObject, meta: Partial<KubeObject["metadata"]> = {}): KubeObject {
  return {
    ...b,
    metadata: { ...b.metadata, uid: "u1", resourceVersion: "10", generation: 1, ...meta },
  };
}

test("the digest follows the body: equal bodies match, a changed field does not", () => {
  assert.equal(ApplyMemo.digest(body({ a: "1" })), ApplyMemo.digest(body({ a: "1" })));
  assert.notEqual(ApplyMemo.digest(body({ a: "1" })), ApplyMemo.digest(body({ a: "2" })));
});

test("a child is up to date only after an apply of the same body that the cache still shows", () => {
  const memo = new ApplyMemo();
  const b = body({ a: "1" });
  const hash = ApplyMemo.digest(b);
  const s = stored(b);
  assert.equal(memo.upToDate("k", hash, b, s), false, "never applied");
  memo.remember("k", hash, b, s);
  assert.equal(memo.upToDate("k", hash, b, undefined), false, "not cached");
  assert.equal(memo.upToDate("k", hash, b, s), true, "the stored object is cached");
  assert.equal(
    memo.upToDate("k", ApplyMemo.digest(body({ a: "2" })), body({ a: "2" }), s),
    false,
    "new body",
  );
  assert.equal(memo.upToDate("k", hash, b, stored(b, { uid: "u2" })), false, "recreated child");
});

test("a newer version of the child counts as applied only when just its status changed", () => {
  const memo = new ApplyMemo();
  const b = body({ a: "1" });
  const hash = ApplyMemo.digest(b);
  memo.remember("k", hash, b, stored(b));
  const statusOnly = { ...stored(b, { resourceVersion: "11" }), status: { ok: true } } as KubeObject;
  assert.equal(memo.upToDate("k", hash, b, statusOnly), true);
  const edited = stored({ ...b, data: { a: "changed" } } as KubeObject, { resourceVersion: "12" });
  assert.equal(memo.upToDate("k", hash, b, edited), false, "someone changed a field the body states");
  const newGeneration = stored(b, { resourceVersion: "13", generation: 2 });
  assert.equal(memo.upToDate("k", hash, b, newGeneration), false, "the generation moved");
});

test("another manager's label edits are skipped; a label that comes back after it was gone applies once", () => {
  const memo = new ApplyMemo();
  const b = body({ a: "1" });
  const hash = ApplyMemo.digest(b);
  memo.remember("k", hash, b, stored(b, { labels: { app: "x", team: "a" } }));
  const edited = stored(b, { resourceVersion: "11", labels: { app: "x", team: "b" } });
  assert.equal(memo.upToDate("k", hash, b, edited), true, "foreign label value changed");
  const gone = stored(b, { resourceVersion: "12", labels: { app: "x" } });
  assert.equal(memo.upToDate("k", hash, b, gone), true, "foreign label removed");
  const back = stored(b, { resourceVersion: "13", labels: { app: "x", team: "c" } });
  assert.equal(memo.upToDate("k", hash, b, back), false, "a key nobody held is new");
});

test("the memo keeps the most recently applied children up to its limit", () => {
  const memo = new ApplyMemo(2);
  const b = body({ a: "1" });
  const hash = ApplyMemo.digest(b);
  memo.remember("a", hash, b, stored(b));
  memo.remember("b", hash, b, stored(b));
  memo.remember("a", hash, b, stored(b)); // a is now the most recent
  memo.remember("c", hash, b, stored(b));
  assert.equal(memo.size, 2);
  assert.equal(memo.has("a"), true);
  assert.equal(memo.has("b"), false, "the least recently applied goes first");
  assert.equal(memo.has("c"), true);
});

test("containsJson ignores what the server added and compares arrays whole", () => {
  assert.equal(containsJson({ a: 1 }, { a: 1, b: 2 }), true);
  assert.equal(containsJson({ a: [1, 2] }, { a: [1, 2, 3] }), false);
  assert.equal(containsJson({ a: { b: "x" } }, { a: { b: "y" } }), false);
});
