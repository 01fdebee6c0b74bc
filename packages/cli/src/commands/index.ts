/**
 * Every top-level command of `opkit`, in the order `opkit --help` lists them: main.ts registers these,
 * and the CLI reference (docs/cli.md) is generated from the same list, so the two cannot drift.
 */
import type { Command } from "commander";
import { apiCommand } from "./api.ts";
import { buildCommand } from "./build.ts";
import { doctorCommand } from "./doctor-command.ts";
import { envCommand } from "./env.ts";
import { generateCommands } from "./generate.ts";
import { migrateCommand } from "./migrate.ts";
import { operatorCommands } from "./operator.ts";
import { projectCommands } from "./project.ts";
import { topCommand } from "./top.ts";

/** Fresh instances of every top-level command. */
export function allCommands(): Command[] {
  return [
    ...projectCommands(),
    ...generateCommands(),
    apiCommand(),
    migrateCommand(),
    ...operatorCommands(),
    buildCommand(),
    topCommand(),
    envCommand(),
    doctorCommand(),
  ];
}
