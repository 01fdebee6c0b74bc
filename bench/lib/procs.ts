/**
 * The processes `make bench` starts (operators, probes, the Go peer) and what it reads about them from
 * /proc: CPU seconds, RSS and peak RSS. Every process started here is remembered, so `stopAll` ends
 * them on success, on failure and on Ctrl-C.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { OPERATOR_NODE_FLAGS } from "opkit/generate";

/** A started process with its output lines. */
export interface Proc {
  /** The child's pid. */
  readonly pid: number;
  /** Every output line (stdout and stderr) so far. */
  readonly lines: string[];
  /** Resolves with the exit code (null after a signal). */
  readonly exited: Promise<number | null>;
  /** Wait for a line matching `pattern`; throws naming the last lines on exit or timeout. */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<string>;
  /** SIGTERM, then SIGKILL after graceMs. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once. */
  kill(): Promise<void>;
}

const running = new Set<ChildProcess>();

/** Start a process; its output is collected line by line and echoed with a prefix when `echo` is set. */
export function start(
  cmd: string,
  args: readonly string[],
  opts: { env?: Record<string, string>; echo?: string } = {},
): Proc {
  const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  const lines: string[] = [];
  const collect = (s: NodeJS.ReadableStream | null) => {
    let rest = "";
    s?.on("data", (d: Buffer) => {
      const parts = (rest + d.toString()).split("\n");
      rest = parts.pop() ?? "";
      for (const l of parts) {
        if (!l) continue;
        lines.push(l);
        if (lines.length > 20_000) lines.splice(0, 10_000);
        if (opts.echo) process.stderr.write(`[${opts.echo}] ${l}\n`);
      }
    });
  };
  collect(child.stdout);
  collect(child.stderr);
  const exited = new Promise<number | null>((resolve) =>
    child.on("exit", (code) => {
      running.delete(child);
      resolve(code);
    }),
  );
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    pid: child.pid ?? -1,
    lines,
    exited,
    async waitFor(pattern, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      let seen = 0;
      for (;;) {
        for (; seen < lines.length; seen++) if (pattern.test(lines[seen]!)) return lines[seen]!;
        if (!alive() && seen >= lines.length) {
          throw new Error(`${cmd} exited before ${String(pattern)}:\n${lines.slice(-20).join("\n")}`);
        }
        if (Date.now() > deadline) {
          throw new Error(
            `${cmd}: no ${String(pattern)} in ${timeoutMs} ms:\n${lines.slice(-20).join("\n")}`,
          );
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async stop(graceMs = 5_000) {
      if (!alive()) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(t);
    },
    async kill() {
      if (alive()) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** SIGKILL every process started here that still runs (the cleanup path). */
export function killAll(): void {
  for (const c of running) c.kill("SIGKILL");
}

/** How many started processes still run. */
export function runningCount(): number {
  return running.size;
}

const TICKS = 100; // USER_HZ on Linux

/** CPU seconds (user + system) the process has used, from /proc/<pid>/stat; NaN when gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS;
  } catch {
    return Number.NaN;
  }
}

function statusField(pid: number, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Resident memory now, bytes. */
export function rss(pid: number): number {
  return statusField(pid, "VmRSS");
}

/** Peak resident memory since the process started, bytes. */
export function peakRss(pid: number): number {
  return statusField(pid, "VmHWM");
}

/**
 * The AppService operator, Go peer or opkit, with the same flags on both sides: metrics on
 * `metricsAddress` (default any free port), leader election when asked, the Go peer unthrottled;
 * `args` are appended (e.g. opkit's `--shards`), `env` added to the environment; `logReconciles` makes
 * both print one line per reconcile with its event → reconcile-start wait. opkit runs as its image does:
 * the `opkit build` bundle (operators/appservice/dist/main.js, built by `make bench`), else src/main.ts.
 */
export function startAppService(
  impl: "go" | "opkit",
  o: { kubeconfig: string; goBin: string; root: string },
  opts: {
    leaderElect?: boolean;
    metricsAddress?: string;
    args?: readonly string[];
    logReconciles?: boolean;
    /** Where /healthz and /readyz are served (default: off). */
    healthAddress?: string;
  } = {},
  env: Record<string, string> = {},
): Proc {
  const common = [
    ...(opts.leaderElect ? ["--leader-elect"] : []),
    ...(opts.metricsAddress ? ["--metrics-bind-address", opts.metricsAddress] : []),
    ...(opts.healthAddress ? ["--health-probe-bind-address", opts.healthAddress] : []),
  ];
  return impl === "go"
    ? start(
        o.goBin,
        [...common, "--qps", "-1", ...(opts.logReconciles ? ["--log-reconciles"] : []), ...(opts.args ?? [])],
        { env: { KUBECONFIG: o.kubeconfig, ...env } },
      )
    : start(
        process.execPath,
        [
          // As the operator's image runs it (the generated Dockerfile's ENTRYPOINT).
          ...OPERATOR_NODE_FLAGS,
          operatorEntry(o.root, "appservice"),
          "--kubeconfig",
          o.kubeconfig,
          ...common,
          ...(opts.metricsAddress ? [] : ["--metrics-bind-address", "0"]),
          ...(opts.healthAddress ? [] : ["--health-probe-bind-address", "0"]),
          "--log-format",
          "json",
          // At debug level each reconcile's "reconcile done" line carries its queue wait (queuedMs).
          ...(opts.logReconciles ? ["--log-level", "debug"] : []),
          ...(opts.args ?? []),
        ],
        { env },
      );
}

/** A free TCP port on 127.0.0.1 (closed again, so a process can bind it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/** A seed operator's bundle when `opkit build` made one (as in its image), else its TypeScript. */
export function operatorEntry(root: string, operator: "appservice" | "scheduler"): string {
  const bundle = join(root, `operators/${operator}/dist/main.js`);
  return existsSync(bundle) ? bundle : join(root, `operators/${operator}/src/main.ts`);
}
