// The architecture table is enforced by lint: a wrong-way import must fail, a right-way one must pass.
// Runs ESLint with only the architecture rules (no type information needed) on virtual files placed
// in the folders they claim to be in.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { ESLint } from "eslint";
import tseslint from "typescript-eslint";
import { architectureConfigs, ALLOWED_IMPORTS } from "../../../eslint/architecture.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));

async function lint(file: string, code: string): Promise<string[]> {
  const eslint = new ESLint({
    cwd: root,
    overrideConfigFile: true,
    overrideConfig: [
      { files: ["**/*.ts"], languageOptions: { parser: tseslint.parser } },
      ...architectureConfigs(),
    ],
  });
  const [result] = await eslint.lintText(code, { filePath: `${root}${file}` });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? "parse"}: ${m.message}`);
}

describe("architecture lint rule", () => {
  it("fails a wrong-way import (the cache importing a controller)", async () => {
    const msgs = await lint(
      "packages/opkit/src/cache/wrong.ts",
      'import { Controller } from "../controller/controller.ts";\nexport const x = Controller;\n',
    );
    assert.equal(msgs.length, 1, msgs.join("\n"));
    assert.match(msgs[0] ?? "", /no-restricted-imports: .*cache\/ may import only client, clock, logging/);
  });

  it("fails the two arrows the guide marked wrong (controller → helpers, generate → testenv)", async () => {
    const a = await lint("packages/opkit/src/controller/x.ts", 'export * from "../helpers/status.ts";\n');
    const b = await lint(
      "packages/opkit/src/generate/x.ts",
      'export { cacheDir } from "../testenv/versions.ts";\n',
    );
    assert.equal(a.length, 1, "controller → helpers is refused");
    assert.equal(b.length, 1, "generate → testenv is refused");
  });

  it("passes every import its row allows", async () => {
    for (const [folder, allowed] of Object.entries(ALLOWED_IMPORTS)) {
      const code = allowed.map((f, i) => `export * as m${i} from "../${f}/index.ts";`).join("\n") + "\n";
      assert.deepEqual(await lint(`packages/opkit/src/${folder}/ok.ts`, code), [], folder);
    }
  });

  it("keeps operators and the CLI on the public entries", async () => {
    const msgs = await lint(
      "operators/memcached/src/controller.ts",
      'import { Reflector } from "../../../packages/opkit/src/cache/reflector.ts";\nexport const r = Reflector;\n',
    );
    assert.equal(msgs.length, 1, msgs.join("\n"));
    assert.deepEqual(
      await lint("operators/memcached/src/ok.ts", 'export { controller } from "opkit";\n'),
      [],
    );
  });
});
