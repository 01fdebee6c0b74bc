#!/usr/bin/env node
// The `opkit` command's launcher. It is committed (unlike dist/) so that `npm ci` links the bin even
// before the first build. It runs on any Node from 18 up: on a Node too old for opkit (the HTTP stack
// needs 22.19+) it says so and runs `opkit doctor`'s Node check, or the whole doctor when asked
// (`opkit doctor` has an entry of its own that loads nothing needing a newer Node).
import { existsSync } from "node:fs";

const built = (file) => {
  const url = new URL(`../dist/${file}`, import.meta.url);
  if (existsSync(url)) return url;
  process.stderr.write(
    "opkit: the CLI is not built yet: run `make build` (or `npx tsc -b packages/opkit packages/cli`)\n",
  );
  process.exit(1);
};

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  if (process.argv[2] === "doctor") {
    await import(built("doctor-main.js").href);
  } else {
    const { DOCTOR_HINT, formatReport, runDoctor } = await import(built("commands/doctor.js").href);
    process.stderr.write(
      `opkit: needs Node 22.19 or later (Node 24 LTS recommended); this is ${process.version} at ${process.execPath}.\n`,
    );
    const report = await runDoctor({ network: false });
    const node = report.checks.filter((c) => c.id === "node");
    process.stderr.write(
      formatReport({ ok: false, checks: node }).split("\n").slice(0, -2).join("\n") + "\n",
    );
    process.stderr.write(`opkit: ${DOCTOR_HINT}\n`);
    process.exit(1);
  }
} else {
  await import(built("main.js").href);
}
