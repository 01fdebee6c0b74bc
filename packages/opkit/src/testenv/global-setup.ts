/**
 * node:test global setup for `make test`: one control plane for the whole run, shared by every test
 * file through OPKIT_TEST_ENV, stopped in global teardown (and by its watchdog if the run is killed).
 * It prints how long the env took to start and stop and how long the whole run took, so the CI budget
 * stays visible at the end of the output.
 */
import type { ControlPlane } from "./controlplane.ts";
import { TEST_ENV_OPTIONS, TEST_ENV_VARIABLE, startOwnedEnv } from "./testing.ts";

let cp: ControlPlane | undefined;
let runStarted = 0;

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

export async function globalSetup(): Promise<void> {
  runStarted = performance.now();
  if (process.env[TEST_ENV_VARIABLE]) return; // an env chosen by the caller: leave it alone
  const started = performance.now();
  cp = await startOwnedEnv(`test-${process.pid}`, TEST_ENV_OPTIONS);
  process.env[TEST_ENV_VARIABLE] = cp.name;
  process.stderr.write(`opkit test env "${cp.name}" up in ${secs(performance.now() - started)}\n`);
}

export async function globalTeardown(): Promise<void> {
  const started = performance.now();
  if (cp) {
    await cp.down();
    process.stderr.write(`opkit test env "${cp.name}" down in ${secs(performance.now() - started)}\n`);
  }
  process.stderr.write(`opkit test run took ${secs(performance.now() - runStarted)} in all\n`);
}
