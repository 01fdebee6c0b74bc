/**
 * Watchdog for environments owned by a test run: started detached by `startOwnedEnv`, it polls the owner
 * PID and tears the environment down when the owner is gone — also when the owner was killed with
 * SIGKILL or Ctrl-C skipped its cleanup. It exits on its own once the environment's state is gone.
 *
 * Usage: node watchdog.(ts|js) <ownerPid> <envName>
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ControlPlane } from "./controlplane.ts";
import { sleep } from "./eventually.ts";

const [ownerArg, name] = process.argv.slice(2);
const owner = Number(ownerArg);
if (!Number.isInteger(owner) || !name) {
  process.stderr.write("usage: watchdog <ownerPid> <envName>\n");
  process.exit(2);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const cp = new ControlPlane(name);
while (existsSync(join(cp.dir, "state.json"))) {
  if (!alive(owner)) {
    await cp.down();
    break;
  }
  await sleep(500);
}
