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

test("--shards: a sharded Manager with lease timings from --shard-lease-duration", () => {
  assert.equal(managerOptionsFromFlags(def, parseOperatorFlags([], {}), logger).shards, undefined);
  const opts = managerOptionsFromFlags(
    def,
    parseOperatorFlags(["--shards", "16", "--shard-lease-duration", "6"], {}),
    logger,
  );
  assert.deepEqual(opts.shards, {
    count: 16,
    filtering: "auto",
    leaseDurationMs: 6000,
    renewDeadlineMs: 4000,
    retryPeriodMs: 800,
  });
  assert.equal(parseOperatorFlags([], { OPKIT_SHARDS: "4" }).shards, 4);
});

test("--shards: bad values and --leader-elect together are FlagErrors naming the flag", () => {
  assert.throws(
    () => parseOperatorFlags(["--shards", "many"], {}),
    /^FlagError: --shards: "many" is not a whole/,
  );
  assert.throws(() => parseOperatorFlags(["--shards", "5000"], {}), /--shards: .* from 0 to 4096/);
  assert.throws(() => parseOperatorFlags(["--shard-lease-duration", "1"], {}), /--shard-lease-duration/);
  assert.throws(() => parseOperatorFlags(["--shard-filtering", "both"], {}), /--shard-filtering: "both"/);
  assert.throws(
    () => parseOperatorFlags(["--shards", "4", "--leader-elect"], {}),
    /--shards: cannot be combined with --leader-elect/,
  );
});
