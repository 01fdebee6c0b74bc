#!/usr/bin/env node
// The `opkit` command's launcher. It is committed (unlike dist/) so that `npm ci` links the bin even
// before the first build; it runs the built CLI.
import { existsSync } from "node:fs";

const main = new URL("../dist/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write("opkit: the CLI is not built yet: run `make build` (or `npx tsc -b packages/opkit packages/cli`)\n");
  process.exit(1);
}
await import(main.href);
