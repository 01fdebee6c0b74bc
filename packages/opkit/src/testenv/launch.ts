/**
 * Starting one component and knowing when it is healthy: start it detached with the flags from
 * flags.ts, record its PID in the state before waiting (so a failure or Ctrl-C can still stop it),
 * and probe its health endpoint until it answers. A component that dies or stays unhealthy raises a
 * ComponentError carrying the tail of its log.
 */
import { readFile } from "node:fs/promises";
import { Agent, request } from "undici";
import { realClock, type Clock } from "../clock/index.ts";
import { kubeconfigFile, pkiFile } from "./certs.ts";
import { sleep } from "./eventually.ts";
import { componentArgs, componentExe } from "./flags.ts";
import { isRunning, portInUse, startDetached, tailFile } from "./processes.ts";
import type { ComponentName, EnvFiles, EnvState } from "./state.ts";

/** A component did not become healthy (or died); carries its log tail. */
export class ComponentError extends Error {
  /** The component that failed, e.g. "kube-apiserver". */
  readonly component: string;
  /** The last lines of its log. */
  readonly logTail: string;
  constructor(component: string, problem: string, logFile: string) {
    const tail = tailFile(logFile, 25);
    const port = /address already in use|bind: address/.test(tail) ? " (a port it needs is in use)" : "";
    super(`${component} ${problem}${port}; last lines of ${logFile}:\n${tail}`);
    this.name = "ComponentError";
    this.component = component;
    this.logTail = tail;
  }
}

/** The result of one health check. */
export interface Health {
  ok: boolean;
  detail: string;
}

/**
 * Start component `c` of env `s` and wait until it is healthy. The PID is written to the state file
 * as soon as the process exists.
 */
export async function launchComponent(
  files: EnvFiles,
  s: EnvState,
  c: ComponentName,
  timeoutMs: number,
  clock: Clock = realClock,
): Promise<void> {
  const port = s.ports[c];
  if (await portInUse(port)) {
    throw new Error(`${c} cannot start: port ${port} on 127.0.0.1 is in use by another process`);
  }
  const exe = componentExe(c, s.kubernetesVersion);
  const args = componentArgs(s, c);
  const log = files.logFile(c);
  const p = startDetached(exe, args, log);
  s.components[c] = { pid: p.pid, exe, args, port, log };
  await files.write(s);
  const deadline = clock.now() + timeoutMs;
  for (;;) {
    if (!isRunning(p.pid, exe, args)) throw new ComponentError(c, "exited during start", log);
    const h = await probeComponent(s, c);
    if (h.ok) return;
    if (clock.now() > deadline) {
      throw new ComponentError(
        c,
        `did not become healthy within ${timeoutMs / 1000}s (last check: ${h.detail})`,
        log,
      );
    }
    await sleep(250, clock);
  }
}

/** One health check of component `c`; never throws. */
export async function probeComponent(s: EnvState, c: ComponentName): Promise<Health> {
  const port = s.ports[c];
  try {
    switch (c) {
      case "etcd":
        return await httpProbe(`http://127.0.0.1:${port}/health`, undefined, (b) =>
          b.includes('"health":"true"'),
        );
      case "kwok":
      case "local-provisioner":
        return await httpProbe(`http://127.0.0.1:${port}/healthz`, undefined);
      case "kube-apiserver": {
        const kcText = await readFile(kubeconfigFile(s.dir, "admin"), "utf8");
        const cert = /client-certificate-data: (\S+)/.exec(kcText)?.[1] ?? "";
        const key = /client-key-data: (\S+)/.exec(kcText)?.[1] ?? "";
        const agent = new Agent({
          connect: {
            ca: await readFile(pkiFile(s.dir, "ca.crt")),
            cert: Buffer.from(cert, "base64"),
            key: Buffer.from(key, "base64"),
          },
        });
        try {
          return await httpProbe(`https://127.0.0.1:${port}/readyz`, agent);
        } finally {
          await agent.close();
        }
      }
      case "kube-controller-manager":
      case "kube-scheduler": {
        // They serve health on a self-signed certificate of their own.
        const agent = new Agent({ connect: { rejectUnauthorized: false } });
        try {
          return await httpProbe(`https://127.0.0.1:${port}/healthz`, agent);
        } finally {
          await agent.close();
        }
      }
    }
  } catch (err) {
    return { ok: false, detail: err instanceof Error ? err.message : String(err) };
  }
}

async function httpProbe(
  url: string,
  dispatcher: Agent | undefined,
  accept: (body: string) => boolean = () => true,
): Promise<Health> {
  const res = await request(url, { dispatcher, headersTimeout: 2_000, bodyTimeout: 2_000 });
  const body = await res.body.text();
  const ok = res.statusCode === 200 && accept(body);
  return { ok, detail: ok ? "ok" : `${res.statusCode} ${body.slice(0, 200).replace(/\s+/g, " ")}` };
}
