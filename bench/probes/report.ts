/**
 * What every TypeScript cache probe prints: one JSON line after the sync and a full garbage collection
 * (the process runs with --expose-gc), with the same fields as the Go peer's --probe-pods line.
 */
import { cpuUsage, memoryUsage } from "node:process";
import { setTimeout as sleep } from "node:timers/promises";

/** Collect garbage until the heap stops shrinking, then print the probe line. */
export async function report(fields: {
  pods: number;
  syncMs: number;
  syncCpuSeconds: number;
}): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 4 && gc; i++) {
    gc();
    await sleep(50);
  }
  const mem = memoryUsage();
  const cpu = cpuUsage();
  process.stdout.write(
    JSON.stringify({
      event: "probe",
      ...fields,
      startMs: Math.round(performance.now()),
      heapBytes: mem.heapUsed,
      rssBytes: mem.rss,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
    }) + "\n",
  );
}

/** CPU seconds of this process so far. */
export function cpuSeconds(): number {
  const cpu = cpuUsage();
  return (cpu.user + cpu.system) / 1e6;
}

/** `--name value` from argv. */
export function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
