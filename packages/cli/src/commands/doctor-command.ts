/**
 * `opkit doctor` as a subcommand of the CLI (on a Node new enough to load it); on an older Node the
 * launcher runs the doctor through its own entry (doctor-main.ts) instead.
 */
import { Command } from "commander";
import { doctorMain } from "./doctor.ts";

export function doctorCommand(): Command {
  return new Command("doctor")
    .description(
      "check this machine for opkit: Node, Go and its module proxy, disk, the cache, the kubeconfig's cluster, and the project",
    )
    .option("--json", "print the report as JSON")
    .option("--offline", "do not ask the Go module proxy or the cluster")
    .option("--dir <dir>", "the project to check (default: the current directory)")
    .action(async (o: { json?: boolean; offline?: boolean; dir?: string }) => {
      const argv = [
        ...(o.json ? ["--json"] : []),
        ...(o.offline ? ["--offline"] : []),
        ...(o.dir ? ["--dir", o.dir] : []),
      ];
      process.exitCode = await doctorMain(argv);
    });
}
