import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  formatLabelSelector,
  labelMatcher,
  parseLabelSelector,
  LabelSelectorError,
  matchRequirements,
} from "./labels.ts";

describe("label selectors", () => {
  it("parses every operator form", () => {
    assert.deepEqual(parseLabelSelector("a=b, c!=d,e in (x, y),f notin (z),g,!h,i==j"), [
      { key: "a", operator: "In", values: ["b"] },
      { key: "c", operator: "NotIn", values: ["d"] },
      { key: "e", operator: "In", values: ["x", "y"] },
      { key: "f", operator: "NotIn", values: ["z"] },
      { key: "g", operator: "Exists" },
      { key: "h", operator: "DoesNotExist" },
      { key: "i", operator: "In", values: ["j"] },
    ]);
  });

  it("matches as the API server does", () => {
    const m = labelMatcher("app=web,tier in (fe,be),!legacy,env!=prod");
    assert.equal(m({ app: "web", tier: "fe" }), true);
    assert.equal(m({ app: "web", tier: "fe", env: "dev" }), true);
    assert.equal(m({ app: "web", tier: "fe", env: "prod" }), false);
    assert.equal(m({ app: "web", tier: "db" }), false);
    assert.equal(m({ app: "web", tier: "fe", legacy: "" }), false);
    assert.equal(m(undefined), false);
    assert.equal(labelMatcher("")(undefined), true);
  });

  it("rejects malformed selectors with a message naming the selector", () => {
    assert.throws(() => parseLabelSelector("a in x"), LabelSelectorError);
    assert.throws(() => parseLabelSelector("a in (x"), /missing '\)'/);
    assert.throws(() => parseLabelSelector("=b"), /expected a key/);
  });

  it("round-trips structured selectors through the string form (property)", () => {
    const key = fc.stringMatching(/^[a-z][a-z0-9]{0,5}$/);
    const val = fc.stringMatching(/^[a-z0-9]{1,4}$/);
    fc.assert(
      fc.property(
        fc.dictionary(key, val, { maxKeys: 4 }),
        fc.dictionary(key, val, { maxKeys: 6 }),
        (matchLabels, labels) => {
          const str = formatLabelSelector({ matchLabels });
          const viaString = labelMatcher(str)(labels);
          const direct = matchRequirements(
            Object.entries(matchLabels).map(([k, v]) => ({ key: k, operator: "In" as const, values: [v] })),
          )(labels);
          assert.equal(viaString, direct);
        },
      ),
      { numRuns: 300 },
    );
  });
});
