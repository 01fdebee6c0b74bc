#!/usr/bin/env node
/**
 * The `opkit` command. Each subcommand parses its flags and calls the library; no logic lives here.
 */
import { Command } from "commander";
import { envCommand } from "./commands/env.ts";

const program = new Command("opkit")
  .description("opkit — write, test, ship and run Kubernetes operators in TypeScript")
  .version("0.1.0")
  .showHelpAfterError();

program.addCommand(envCommand());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.stderr.write(`opkit: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
}
