/**
 * Starting and stopping the control plane's processes. Components run detached (so `opkit env up` can
 * return while they keep running) with their output in a log file. They are stopped only by the PID we
 * recorded, and only after checking that the PID still runs the binary we started (PIDs are reused).
 */
import { spawn } from "node:child_process";
import { openSync, closeSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { realClock, type Clock } from "../clock/index.ts";
import { sleep } from "./eventually.ts";

/** A process we started: its PID, executable and (when known) the arguments it was given. */
export interface StartedProcess {
  pid: number;
  exe: string;
  /**
   * The arguments it was started with. When given, a PID counts as ours only if its command line still
   * matches them: several components share one executable (Node runs the provisioner and watchdogs).
   */
  args?: readonly string[];
}

/** Start `exe` in its own process group with stdout and stderr appended to `logFile`. */
export function startDetached(
  exe: string,
  args: string[],
  logFile: string,
  env?: NodeJS.ProcessEnv,
): StartedProcess {
  const fd = openSync(logFile, "a");
  try {
    const child = spawn(exe, args, { detached: true, stdio: ["ignore", fd, fd], env: env ?? process.env });
    if (child.pid === undefined) throw new Error(`could not start ${exe}`);
    child.unref();
    return { pid: child.pid, exe, args };
  } finally {
    closeSync(fd);
  }
}

/** True when `pid` is alive and runs `exe` (with `args`, when given): guards against a recycled PID. */
export function isRunning(pid: number, exe: string, args?: readonly string[]): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    if (argv[0] !== exe) return false;
    if (args && args.some((a, i) => argv[i + 1] !== a)) return false;
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // A zombie (state Z) has exited; it only waits for its parent to reap it.
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/**
 * SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. The grace is short because
 * kube-apiserver stops listening at once but lingers on open watches; a test env holds nothing to flush.
 */
export async function stopProcess(
  p: StartedProcess,
  graceMs = 3_000,
  clock: Clock = realClock,
): Promise<void> {
  const ours = (): boolean => isRunning(p.pid, p.exe, p.args);
  if (!ours()) return;
  try {
    process.kill(p.pid, "SIGTERM");
  } catch {
    return;
  }
  const deadline = clock.now() + graceMs;
  while (clock.now() < deadline) {
    if (!ours()) return;
    await sleep(50, clock);
  }
  try {
    process.kill(p.pid, "SIGKILL");
  } catch {
    return;
  }
  while (ours()) await sleep(20, clock);
}

/** Ask the kernel for free ports on 127.0.0.1 (held until all are chosen, so they differ). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Server>((resolve, reject) => {
          const s = createServer();
          s.once("error", reject);
          s.listen(0, "127.0.0.1", () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    return typeof a === "object" && a ? a.port : 0;
  });
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/** Whether something already listens on 127.0.0.1:port. */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(true));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(false)));
  });
}

/** The last `lines` lines of a log file, or "(no log)". */
export function tailFile(file: string, lines = 25): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}
