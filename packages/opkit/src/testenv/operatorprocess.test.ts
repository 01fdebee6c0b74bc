/** startOperatorProcess: output lines, a graceful stop, and the orphan guard when the test process dies. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startOperatorProcess } from "./operatorprocess.ts";

const helper = fileURLToPath(new URL("./operatorprocess.ts", import.meta.url));

/** A stand-in operator: says it is ready, then exits 0 on SIGTERM like a Manager does. */
const FAKE = `process.on("SIGTERM", () => { console.log("stopping"); process.exit(0); });
console.log("ready " + process.pid);
setInterval(() => {}, 1000);
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("collects output lines and stops gracefully", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-opproc-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, "fake.mjs"), FAKE);
  const p = startOperatorProcess(join(dir, "fake.mjs"), { args: ["--x"] });
  t.after(() => p.kill());
  assert.match(await p.waitForLine(/^ready/), /^ready \d+$/);
  assert.equal(await p.stop(), 0);
  assert.ok(p.output.includes("stopping"));
  await assert.rejects(p.waitForLine(/never/, 1_000), /exited before printing a line matching \/never\//);
});

test("an operator whose test process died stops by itself", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-opproc-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, "fake.mjs"), FAKE);
  // A "test process" that starts the operator, reports its pid and dies without stopping it.
  await writeFile(
    join(dir, "parent.ts"),
    `import { startOperatorProcess } from ${JSON.stringify(helper)};
const p = startOperatorProcess(${JSON.stringify(join(dir, "fake.mjs"))});
const line = await p.waitForLine(/^ready/);
console.log(line);
process.exit(0);
`,
  );
  const parent = spawn(process.execPath, [join(dir, "parent.ts")], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  parent.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await new Promise((r) => parent.on("exit", r));
  const pid = Number(/ready (\d+)/.exec(out)?.[1]);
  assert.ok(pid > 0, `the parent reported the operator's pid: ${out}`);
  t.after(() => {
    if (alive(pid)) process.kill(pid, "SIGKILL");
  });
  const deadline = Date.now() + 5_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.equal(alive(pid), false, "the orphaned operator stopped within 5 s");
});
