/**
 * `opkit generate crd <file>`: the CRDs of a module's kinds on stdout, `--kind` to pick one, and clear
 * errors for a missing file, a module without kinds and a module whose import fails. Runs the CLI as a
 * user does (a child process); no control plane needed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import * as Type from "typebox/type";
import { defineKind, defineOperator } from "opkit";
import { kindsOf, selectKinds } from "./commands/crd.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const testdata = (f: string): string => fileURLToPath(new URL(`./testdata/${f}`, import.meta.url));

function opkit(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

interface Crd {
  kind: string;
  metadata: { name: string };
  spec: { scope: string; versions: { name: string; storage: boolean }[] };
}

test("prints one CRD per kind as a YAML stream; grouped versions make one CRD", () => {
  const r = opkit(["generate", "crd", testdata("kinds.ts")]);
  assert.equal(r.code, 0, r.stderr);
  const docs = parseAllDocuments(r.stdout);
  for (const d of docs) assert.deepEqual(d.errors, []);
  const crds = docs.map((d) => d.toJS() as Crd);
  assert.deepEqual(crds.map((c) => c.metadata.name).sort(), [
    "gadgets.test.opkit.dev",
    "widgets.test.opkit.dev",
  ]);
  const widgets = crds.find((c) => c.metadata.name === "widgets.test.opkit.dev")!;
  assert.deepEqual(
    widgets.spec.versions.map((v) => [v.name, v.storage]),
    [
      ["v1alpha1", false],
      ["v1", true],
    ],
  );
  assert.doesNotMatch(r.stdout, /(^|\s)[&*]a\d/m, "plain YAML");
});

test("--kind selects by kind, plural or plural.group; an unknown kind lists what exists", () => {
  for (const sel of ["Gadget", "gadget", "gadgets", "gadgets.test.opkit.dev"]) {
    const r = opkit(["generate", "crd", testdata("kinds.ts"), "--kind", sel]);
    assert.equal(r.code, 0, r.stderr);
    const crds = parseAllDocuments(r.stdout).map((d) => d.toJS() as Crd);
    assert.deepEqual(
      crds.map((c) => [c.metadata.name, c.spec.scope]),
      [["gadgets.test.opkit.dev", "Cluster"]],
      sel,
    );
  }
  const r = opkit(["generate", "crd", testdata("kinds.ts"), "--kind", "Nope"]);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  assert.match(
    r.stderr,
    /--kind Nope: .*kinds\.ts exports no such kind; it exports Gadget \(gadgets\.test\.opkit\.dev\), Widget/,
  );
});

test("errors name the file and say what to do", () => {
  const missing = opkit(["generate", "crd", "no/such/file.ts"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no\/such\/file\.ts: no such file; pass the module that exports your kinds/);
  const none = opkit(["generate", "crd", testdata("no-kinds.ts")]);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /no-kinds\.ts exports no kinds: export the result of defineKind/);
  const throws = opkit(["generate", "crd", testdata("throws.ts")]);
  assert.equal(throws.code, 1);
  assert.match(throws.stderr, /could not import .*throws\.ts: boom at import time/);
  const usage = opkit(["generate", "crd"]);
  assert.notEqual(usage.code, 0);
  assert.match(usage.stderr, /missing required argument 'file'/);
});

test("kindsOf finds kinds by shape, once each, also inside an exported operator", () => {
  const A = defineKind({ group: "a.example.com", version: "v1", kind: "A", spec: Type.Object({}) });
  const B = defineKind({ group: "a.example.com", version: "v1", kind: "B", spec: Type.Object({}) });
  // A copy with the same shape (another opkit copy's defineKind) counts as a kind too.
  const foreign = { ...B, kind: "C", plural: "cs" };
  const op = defineOperator({ name: "op", kinds: [A, B], controllers: [] });
  const found = kindsOf({ A, default: op, foreign, other: { kind: "X" }, n: 1, nil: null });
  assert.deepEqual(
    found.map((k) => k.kind),
    ["A", "B", "C"],
  );
  assert.deepEqual(
    selectKinds(found, "cs").map((k) => k.kind),
    ["C"],
  );
});
