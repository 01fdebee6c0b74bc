/**
 * Running an operator as a child process in a test — its real entry point, flags and signal handling —
 * so a test can stop, kill and restart it. Output is collected line by line for assertions and failure
 * messages. The child stops itself when the test process disappears (orphanguard.ts), and `stop()` is
 * meant for `t.after`, so a failing test never leaves one running.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** How `startOperatorProcess` runs an operator's entry file as its own Node process. */
export interface OperatorProcessOptions {
  /** Command-line arguments after the entry file, e.g. ["--kubeconfig", path]. */
  args?: readonly string[];
  /** Added to the test process's environment. */
  env?: Readonly<Record<string, string>>;
  /** Working directory of the process (default the test's). */
  cwd?: string;
  /** Node's `--conditions` (default ["opkit-source"]: `opkit` resolves to its TypeScript source). */
  conditions?: readonly string[];
}

/**
 * An operator running as a child process of a test, with its output captured, so tests exercise it as it runs
 * in production (own process, own credentials).
 */
export interface OperatorProcess {
  /** The child's process id. */
  readonly pid: number;
  /** Every line written to stdout and stderr so far. */
  readonly output: readonly string[];
  /** Resolves with the exit code (null when ended by a signal). */
  readonly exited: Promise<number | null>;
  /** Wait for an output line matching `pattern`; on timeout the error shows the last lines. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** The last `n` lines, for failure messages. */
  tail(n?: number): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. Safe to call twice. */
  stop(graceMs?: number): Promise<number | null>;
  /** SIGKILL at once (a crash): nothing runs its shutdown. */
  kill(): Promise<number | null>;
}

const guard = fileURLToPath(import.meta.url).replace(/operatorprocess\.(ts|js)$/, "orphanguard.$1");

/** Start `node <entry> ...args` with the orphan guard preloaded. */
export function startOperatorProcess(entry: string, opts: OperatorProcessOptions = {}): OperatorProcess {
  const conditions = (opts.conditions ?? ["opkit-source"]).map((c) => `--conditions=${c}`);
  const child = spawn(process.execPath, [...conditions, "--import", guard, entry, ...(opts.args ?? [])], {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const collect = (stream: NodeJS.ReadableStream | null) => {
    let rest = "";
    stream?.on("data", (d: Buffer) => {
      const lines = (rest + d.toString()).split("\n");
      rest = lines.pop() ?? "";
      output.push(...lines.filter(Boolean));
    });
    stream?.on("end", () => {
      if (rest) output.push(rest);
    });
  };
  collect(child.stdout);
  collect(child.stderr);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const running = () => child.exitCode === null && child.signalCode === null;
  const tail = (n = 40) => output.slice(-n).join("\n");
  return {
    pid: child.pid ?? -1,
    output,
    exited,
    tail,
    async waitForLine(pattern, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = output.find((l) => pattern.test(l));
        if (line) return line;
        if (!running())
          throw new Error(`${entry} exited before printing a line matching ${String(pattern)}:\n${tail()}`);
        if (Date.now() > deadline)
          throw new Error(
            `no line matching ${String(pattern)} from ${entry} within ${timeoutMs} ms:\n${tail()}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(graceMs = 10_000) {
      if (running()) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
        try {
          await exited;
        } finally {
          clearTimeout(timer);
        }
      }
      return exited;
    },
    async kill() {
      if (running()) child.kill("SIGKILL");
      return exited;
    },
  };
}
