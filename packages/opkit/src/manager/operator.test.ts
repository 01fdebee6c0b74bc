/** An operator definition's cache options reach the Manager, with or without namespace flags. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { cacheKind } from "../cache/cache.ts";
import { Secrets } from "../client/builtins.ts";
import { createLogger } from "../logging/index.ts";
import { parseOperatorFlags } from "./flags.ts";
import { defineOperator, managerOptionsFromFlags } from "./operator.ts";

const logger = createLogger({ name: "t", level: "silent" });
const secrets = cacheKind(Secrets, { labelSelector: "opkit.dev/manager=t" });
const def = defineOperator({ name: "t", kinds: [], controllers: [], cacheKinds: [secrets] });

test("cacheKinds: given to the Manager's cache", () => {
  const opts = managerOptionsFromFlags(def, parseOperatorFlags([], {}), logger);
  assert.deepEqual(opts.cache, { kinds: [secrets] });
});

test("cacheKinds: kept next to the namespaces a flag scopes the cache to", () => {
  const one = managerOptionsFromFlags(def, parseOperatorFlags(["--namespace=a"], {}), logger);
  assert.deepEqual(one.cache, { namespace: "a", kinds: [secrets] });
  const two = managerOptionsFromFlags(def, parseOperatorFlags(["--namespace=a,b"], {}), logger);
  assert.deepEqual(two.cache, { namespaces: ["a", "b"], kinds: [secrets] });
});

test("no cacheKinds and no namespace: the Manager's default cache", () => {
  const opts = managerOptionsFromFlags({ ...def, cacheKinds: undefined }, parseOperatorFlags([], {}), logger);
  assert.equal(opts.cache, undefined);
});
