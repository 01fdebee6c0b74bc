import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { kwokStages, SIMULATE_EXIT_CODE_ANNOTATION } from "./stages.ts";

describe("kwok stages", () => {
  const docs = parseAllDocuments(kwokStages()).map(
    (d) => d.toJS() as { kind: string; metadata: { name: string }; spec: Record<string, unknown> },
  );

  it("is valid YAML with one Stage per simulated kubelet behaviour", () => {
    assert.deepEqual(
      docs.map((d) => d.metadata.name),
      [
        "opkit-node-initialize",
        "opkit-node-heartbeat",
        "opkit-pod-running",
        "opkit-pod-succeed",
        "opkit-pod-succeed-exit-zero",
        "opkit-pod-fail",
        "opkit-pod-delete",
      ],
    );
    for (const d of docs) assert.equal(d.kind, "Stage");
  });

  it("never lets the success and failure stages match the same pod", () => {
    const exprs = (name: string): { key: string; operator: string; values?: string[] }[] =>
      (docs.find((d) => d.metadata.name === name)?.spec.selector as { matchExpressions: never[] })
        .matchExpressions;
    const key = `.metadata.annotations["${SIMULATE_EXIT_CODE_ANNOTATION}"]`;
    assert.ok(exprs("opkit-pod-succeed").some((e) => e.key === key && e.operator === "DoesNotExist"));
    assert.ok(
      exprs("opkit-pod-succeed-exit-zero").some(
        (e) => e.key === key && e.operator === "In" && e.values?.[0] === "0",
      ),
    );
    assert.ok(
      exprs("opkit-pod-fail").some((e) => e.key === key && e.operator === "NotIn" && e.values?.[0] === "0"),
    );
  });
});
