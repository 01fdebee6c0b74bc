#!/usr/bin/env node
// The `opkit` command's launcher. It is committed (unlike dist/) so that `npm ci` links the bin even
// before the first build; it checks the Node version (the HTTP stack needs 22.19+) and runs the built CLI.
import { existsSync } from "node:fs";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(
    `opkit: needs Node 22.19 or later (Node 24 LTS recommended); this is ${process.version} at ${process.execPath}.\n` +
      "In the opkit repository, `make node` installs Node 24 into ~/.cache/opkit/node; put its bin/ first on PATH.\n",
  );
  process.exit(1);
}
const main = new URL("../dist/main.js", import.meta.url);
if (!existsSync(main)) {
  process.stderr.write(
    "opkit: the CLI is not built yet: run `make build` (or `npx tsc -b packages/opkit packages/cli`)\n",
  );
  process.exit(1);
}
await import(main.href);
