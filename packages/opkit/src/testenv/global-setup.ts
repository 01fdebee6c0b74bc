/**
 * node:test global setup for `make test`: one control plane for the whole run, shared by every test
 * file through OPKIT_TEST_ENV, stopped in global teardown (and by its watchdog if the run is killed).
 */
import type { ControlPlane } from "./controlplane.ts";
import { TEST_ENV_VARIABLE, startOwnedEnv } from "./testing.ts";

let cp: ControlPlane | undefined;

export async function globalSetup(): Promise<void> {
  if (process.env[TEST_ENV_VARIABLE]) return; // an env chosen by the caller: leave it alone
  const started = Date.now();
  cp = await startOwnedEnv(`test-${process.pid}`, 3);
  process.env[TEST_ENV_VARIABLE] = cp.name;
  process.stderr.write(`opkit test env "${cp.name}" up in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
}

export async function globalTeardown(): Promise<void> {
  await cp?.down();
}
