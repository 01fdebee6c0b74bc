/**
 * The custom scheduler's single description of itself (seed 004, "extending the scheduler"): `opkit
 * generate` derives its RBAC and manifests from it, and src/main.ts runs it. It defines no kinds; it
 * reconciles Pods.
 */
import { readFileSync } from "node:fs";
import { defineOperator, type OperatorContext } from "opkit";
import {
  DEFAULT_SCHEDULER_NAME,
  defaultProfile,
  parseConfig,
  SchedulerConfigError,
  type Profile,
} from "./config.ts";
import { schedulerController } from "./controllers/scheduler.ts";

/** The profiles the flags ask for: the `--config` file's, else one default profile named `--scheduler-name`. */
export function profilesFromFlags(ctx: OperatorContext): Profile[] {
  const file = ctx.flags.config;
  if (typeof file === "string" && file !== "") {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new SchedulerConfigError(file, [
        { field: "(file)", message: `cannot read it: ${(err as Error).message}` },
      ]);
    }
    return parseConfig(text, file);
  }
  const name = ctx.flags["scheduler-name"];
  return [defaultProfile(typeof name === "string" && name ? name : DEFAULT_SCHEDULER_NAME)];
}

export default defineOperator({
  name: "opkit-scheduler",
  kinds: [],
  flags: {
    config: {
      description: "Scheduling profiles (YAML, see the README); without it one default profile.",
      env: "SCHEDULER_CONFIG",
    },
    "scheduler-name": {
      description: "The spec.schedulerName served when no --config is given.",
      env: "SCHEDULER_NAME",
      default: DEFAULT_SCHEDULER_NAME,
    },
  },
  controllers: [
    (ctx) => {
      const profiles = profilesFromFlags(ctx);
      ctx.logger.info({ profiles: profiles.map((p) => p.schedulerName) }, "serving scheduler names");
      return schedulerController(profiles);
    },
  ],
});
