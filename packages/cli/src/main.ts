#!/usr/bin/env node
/**
 * The `opkit` command. Each subcommand parses its flags and calls the library; no logic lives here.
 */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { DOCTOR_HINT, machineCaused } from "./commands/doctor.ts";
import { allCommands } from "./commands/index.ts";

// src/main.ts or dist/main.js: package.json is one level up either way.
const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};
// The library this CLI runs with (a project's own opkit can differ; `npm ls opkit` shows that one).
const library = (
  JSON.parse(readFileSync(createRequire(import.meta.url).resolve("opkit/package.json"), "utf8")) as {
    version: string;
  }
).version;

const program = new Command("opkit")
  .description("opkit — write, test, ship and run Kubernetes operators in TypeScript")
  // Positional options: `--version` before a subcommand is the program's; after `create api` it is
  // the API version (as in kubebuilder), so no subcommand option shadows the program's.
  .version(
    `opkit CLI ${version}\nopkit library ${library}`,
    "-V, --version",
    "print the CLI and library versions",
  )
  .helpOption("-h, --help", "show help")
  .enablePositionalOptions()
  .showHelpAfterError();

for (const c of allCommands()) program.addCommand(c);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.stderr.write(`opkit: ${err instanceof Error ? err.message : String(err)}\n`);
  if (machineCaused(err)) process.stderr.write(`opkit: ${DOCTOR_HINT}\n`);
  process.exitCode = 1;
}
