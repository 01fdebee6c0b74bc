/**
 * Every code block of the guide is checked: ts blocks type-check against the built packages, shell blocks
 * are run by a test or say why not, and none calls kubectl on the user's current context.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { blocks, shellDefects, typecheckBlocks } from "./code-blocks.ts";

const all = blocks();

test("every TypeScript block of docs/ type-checks against the built opkit packages", () => {
  const { checked, errors } = typecheckBlocks(all);
  assert.deepEqual(errors, []);
  assert.ok(checked > 0);
});

test("a block with a type error is reported with its page and line", () => {
  const { errors } = typecheckBlocks([
    {
      page: "x.md",
      line: 4,
      lang: "ts",
      meta: "",
      code: 'const n: number = "one";\nawait Manager.create({ nmae: "x" });',
    },
  ]);
  assert.equal(errors.length, 2, errors.join("\n"));
  assert.match(errors[0] as string, /^x\.md:5: /);
  assert.match(errors[1] as string, /^x\.md:6: .*nmae/);
});

test("every shell block is run by a test or says why not, and uses the env's kubeconfig", () => {
  assert.deepEqual(shellDefects(all), []);
});

test("a shell block without a reason, or with a bare kubectl, is reported", () => {
  const defects = shellDefects([
    { page: "x.md", line: 3, lang: "sh", meta: "", code: "kubectl apply -f a.yaml" },
    {
      page: "x.md",
      line: 9,
      lang: "sh",
      meta: "",
      code: "# not run here: needs a cluster\nopkit env kubectl -- get pods",
    },
  ]);
  assert.equal(defects.length, 2);
  assert.match(defects[0] as string, /x\.md:3: a shell block no test runs/);
  assert.match(defects[1] as string, /current kubectl context/);
});
