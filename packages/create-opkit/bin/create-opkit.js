#!/usr/bin/env node
// `npm create opkit@latest my-operator -- --domain example.com`: runs `opkit init` of the @opkit/cli
// installed with this package, so the project is the one `opkit init` makes. The CLI's own launcher
// checks the Node version (and sends an old Node to `opkit doctor`), so this file only needs Node 18.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const args = process.argv.slice(2);
if (args.length === 0 || args[0] === "--help" || args[0] === "-h") {
  process.stdout.write(
    [
      "usage: npm create opkit@latest <directory> -- --domain <domain> [--name <name>] [--no-install]",
      "",
      "Creates a Kubernetes operator project that depends on opkit and @opkit/cli from the registry,",
      "installs it, and passes its own tests (npm test, on a local control plane).",
      "  --domain <domain>  API domain of the project's kinds, e.g. example.com (required)",
      "  --name <name>      operator name (default: the directory name)",
      "  --no-install       do not run npm install",
      "",
      "Then: cd <directory> && npx opkit create api --group <group> --version v1alpha1 --kind <Kind>",
      "",
    ].join("\n"),
  );
  process.exit(args.length === 0 ? 1 : 0);
}
if (!args.includes("--domain") && !args.some((a) => a.startsWith("--domain="))) {
  process.stderr.write(
    "create-opkit: --domain is required, e.g. npm create opkit@latest my-operator -- --domain example.com\n" +
      "(the `--` passes the flags through npm to create-opkit)\n",
  );
  process.exit(1);
}
const cli = dirname(createRequire(import.meta.url).resolve("@opkit/cli/package.json"));
const r = spawnSync(process.execPath, [join(cli, "bin", "opkit.js"), "init", ...args], { stdio: "inherit" });
process.exit(r.status ?? 1);
