/**
 * docs/tutorial.md, run as written so it cannot rot: every ```sh line goes, in order, to one bash
 * session (as a reader types them into one shell: `cd`, `export` and `&` carry over) and must exit 0;
 * every ```ts file=PATH block is written to PATH in the session's current directory before the next
 * command. The only differences from a reader's shell are environment variables: OPKIT_CHECKOUT
 * (this checkout), OPKIT_TEST_ENV (the tests' shared env, so the project's `npm test` needs no
 * control plane of its own), and free ports for the operator's metrics and probes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { kindRef } from "opkit";
import { useTestEnv, type TestEnv } from "opkit/testenv";

const checkout = fileURLToPath(new URL("../../../", import.meta.url));
const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const tutorialFile = join(checkout, "docs", "tutorial.md");
const ENV_NAME = "tutorial";
const CRD = "memcacheds.cache.tutorial.example.com";

/**
 * What some commands must print besides exiting 0: the outcomes the tutorial promises (the project's
 * test ran and passed, the sample converged, the manifests are valid), keyed by the command line.
 */
const EXPECTED: Record<string, RegExp[]> = {
  "npm test": [/^(?:#|ℹ) pass 1$/m, /^(?:#|ℹ) fail 0$/m],
  "npx opkit env kubectl --name tutorial -- wait --for=condition=Ready memcached/memcached-sample --timeout=120s":
    [/memcached-sample condition met/],
  "npx opkit env kubectl --name tutorial -- get memcacheds,deployments": [
    /memcached-sample\s+2\s+True/,
    /deployment\.apps\/memcached-sample\s+2\/2/,
  ],
  "npx opkit generate": [/wrote config\/crds\/memcacheds\.cache\.tutorial\.example\.com\.yaml/],
  "npx opkit deploy --dry-run": [
    /customresourcedefinition\/memcacheds\.cache\.tutorial\.example\.com valid \(server dry-run\)/,
    /deployment\/memcached-operator not checkable: namespace memcached-operator-system does not exist yet/,
  ],
};

/** One step of the tutorial: a shell command, or a file to write. */
type Step = { kind: "sh"; line: string } | { kind: "file"; path: string; content: string };

/** The steps of a tutorial in Markdown: ```sh lines and ```ts file=PATH blocks, in document order. */
function tutorialSteps(markdown: string): Step[] {
  const steps: Step[] = [];
  const fence = /^```([^\n]*)\n([\s\S]*?)^```$/gm;
  for (const m of markdown.matchAll(fence)) {
    const info = (m[1] ?? "").trim();
    const body = m[2] ?? "";
    if (info === "sh") {
      for (const raw of body.split("\n")) {
        const line = raw.trim();
        if (!line || line.startsWith("#")) continue;
        assert.ok(!line.endsWith("\\"), `tutorial commands are one line each: ${line}`);
        steps.push({ kind: "sh", line });
      }
    } else {
      const file = /^ts file=(\S+)$/.exec(info);
      if (file?.[1]) steps.push({ kind: "file", path: file[1], content: body });
    }
  }
  return steps;
}

/** A bash session fed one command at a time; each answer ends with a marker line carrying $? and $PWD. */
class Shell {
  readonly #child: ChildProcessWithoutNullStreams;
  #out = "";
  #log = "";
  #waiting: (() => void) | undefined;

  constructor(cwd: string, env: NodeJS.ProcessEnv) {
    // Its own process group, so background jobs (`opkit run &`) can be stopped with it.
    this.#child = spawn("bash", ["--noprofile", "--norc"], { cwd, env, detached: true });
    const take = (d: Buffer): void => {
      this.#out += d.toString();
      this.#log += d.toString();
      this.#waiting?.();
    };
    this.#child.stdout.on("data", take);
    this.#child.stderr.on("data", (d: Buffer) => (this.#log += d.toString()));
  }

  /** Run one command line; resolves with its exit code, the directory after it and its output. */
  async run(line: string, timeoutMs: number): Promise<{ code: number; cwd: string; log: string }> {
    const marker = `__opkit_tutorial_${Math.random().toString(36).slice(2)}__`;
    this.#out = "";
    this.#log = "";
    this.#child.stdin.write(`${line}\necho "${marker} $? $PWD"\n`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = new RegExp(`${marker} (\\d+) (.*)\\n`).exec(this.#out);
      if (m) return { code: Number(m[1]), cwd: m[2] ?? "", log: this.#log };
      if (this.#child.exitCode !== null) return { code: -1, cwd: "", log: this.#log };
      if (Date.now() > deadline) return { code: -2, cwd: "", log: this.#log };
      await new Promise<void>((resolve) => {
        this.#waiting = resolve;
        setTimeout(resolve, 1000);
      });
    }
  }

  /** End the session and everything it left running. */
  stop(): void {
    const pid = this.#child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

describe("docs/tutorial.md, command by command", () => {
  let env: TestEnv;
  let work: string;
  let shell: Shell | undefined;
  before(async () => {
    env = await useTestEnv();
    work = mkdtempSync(join(tmpdir(), "opkit-tutorial-"));
  });
  after(async () => {
    shell?.stop();
    // Whatever step failed: the tutorial's own cluster goes, and its CRD leaves the shared env.
    spawnSync(process.execPath, ["--conditions=opkit-source", main, "env", "down", "--name", ENV_NAME], {
      encoding: "utf8",
    });
    await env?.client
      .delete(kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD)
      .catch(() => undefined);
    await env?.cleanup();
    await rm(work, { recursive: true, force: true });
  });

  it("every command succeeds and every file fits, in order", async (t) => {
    const steps = tutorialSteps(readFileSync(tutorialFile, "utf8"));
    assert.ok(steps.filter((s) => s.kind === "sh").length >= 15, "the tutorial's commands were found");
    assert.ok(steps.filter((s) => s.kind === "file").length >= 3, "the tutorial's files were found");
    // The reader's environment, minus this runner's internals (a project's own test runner must not
    // report to us) and plus the variables named in the module comment.
    const { NODE_TEST_CONTEXT: _, KUBECONFIG: __, ...outer } = process.env;
    shell = new Shell(work, {
      ...outer,
      PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ""}`,
      OPKIT_CHECKOUT: checkout,
      OPKIT_TEST_ENV: env.name,
      OPKIT_METRICS_BIND_ADDRESS: "127.0.0.1:0",
      OPKIT_HEALTH_PROBE_BIND_ADDRESS: "127.0.0.1:0",
    });
    let cwd = work;
    for (const step of steps) {
      if (step.kind === "file") {
        const file = join(cwd, step.path);
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, step.content);
        t.diagnostic(`wrote ${step.path}`);
        continue;
      }
      const started = Date.now();
      const r = await shell.run(step.line, 900_000);
      t.diagnostic(`$ ${step.line}  (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      assert.equal(r.code, 0, `\`${step.line}\` failed (exit ${r.code}) in ${cwd}:\n${r.log}`);
      for (const want of EXPECTED[step.line] ?? [])
        assert.match(r.log, want, `\`${step.line}\` printed:\n${r.log}`);
      cwd = r.cwd;
    }
    const missing = Object.keys(EXPECTED).filter(
      (line) => !steps.some((s) => s.kind === "sh" && s.line === line),
    );
    assert.deepEqual(missing, [], "every expectation belongs to a command of the tutorial");
    // What the tutorial promises along the way.
    const operatorLog = readFileSync(join(work, "memcached-operator", "operator.log"), "utf8");
    assert.match(operatorLog, /caches synced/, operatorLog);
  });
});
