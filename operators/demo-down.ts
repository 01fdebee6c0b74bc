/**
 * `make demo-down`: stop what `KEEP=1 make demo` left running: the operators it recorded (only those
 * PIDs, and only while they still run the demo's entry files) and then env "demo".
 */
import { readFile, rm } from "node:fs/promises";
import { ControlPlane } from "opkit/testenv";

const cp = new ControlPlane("demo");
const file = `${cp.dir}/demo-operators.json`;
const recorded = JSON.parse(await readFile(file, "utf8").catch(() => "[]")) as {
  name: string;
  pid: number;
  entry: string;
}[];
for (const op of recorded) {
  // A recorded PID may have been reused by another process since: signal it only if it is still ours.
  const cmdline = await readFile(`/proc/${op.pid}/cmdline`, "utf8").catch(() => "");
  if (!cmdline.includes(op.entry)) continue;
  process.kill(op.pid, "SIGTERM");
  console.log(`stopped operator ${op.name} (pid ${op.pid})`);
}
await rm(file, { force: true });
await cp.down();
console.log("env demo stopped");
