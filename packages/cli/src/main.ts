#!/usr/bin/env node
/**
 * The `opkit` command. Each subcommand parses its flags and calls the library; no logic lives here.
 */
import { Command } from "commander";
import { readFileSync } from "node:fs";
import { buildCommand } from "./commands/build.ts";
import { doctorCommand } from "./commands/doctor-command.ts";
import { DOCTOR_HINT, machineCaused } from "./commands/doctor.ts";
import { envCommand } from "./commands/env.ts";
import { generateCommands } from "./commands/generate.ts";
import { operatorCommands } from "./commands/operator.ts";
import { projectCommands } from "./commands/project.ts";
import { topCommand } from "./commands/top.ts";

// src/main.ts or dist/main.js: package.json is one level up either way.
const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const program = new Command("opkit")
  .description("opkit — write, test, ship and run Kubernetes operators in TypeScript")
  // `--version` belongs to `create api` (the API version, as in kubebuilder); the CLI's own is -V.
  .version(version, "-V, --cli-version")
  .enablePositionalOptions()
  .showHelpAfterError();

for (const c of [
  ...projectCommands(),
  ...generateCommands(),
  ...operatorCommands(),
  buildCommand(),
  topCommand(),
  envCommand(),
  doctorCommand(),
])
  program.addCommand(c);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.stderr.write(`opkit: ${err instanceof Error ? err.message : String(err)}\n`);
  if (machineCaused(err)) process.stderr.write(`opkit: ${DOCTOR_HINT}\n`);
  process.exitCode = 1;
}
