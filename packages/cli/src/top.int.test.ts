/**
 * `opkit top` against a real operator: the Memcached seed operator running as its own process on the
 * local control plane, read by `--once --json` and by the live view in a pseudo-terminal whose screen
 * is read back through a headless terminal emulator.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { OperatorSummary } from "opkit";
import {
  eventually,
  operatorProject,
  readManifests,
  useTestEnv,
  type OperatorProcess,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";

const cli = fileURLToPath(new URL("./main.ts", import.meta.url));
const memcached = fileURLToPath(new URL("../../../operators/memcached", import.meta.url));
const run = promisify(execFile);

describe("opkit top", () => {
  let env: TestEnv;
  let project: OperatorProject;
  let op: OperatorProcess;
  let url: string;

  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, memcached, { namespace: "top" });
    op = await project.start();
    const line = await op.waitForLine(/serving metrics and probes/);
    const port = (JSON.parse(line) as { metrics: number }).metrics;
    url = `http://127.0.0.1:${port}/metrics`;
    for (const obj of await readManifests(`${memcached}/config/samples/cache_v1alpha1_memcached.yaml`)) {
      obj.metadata.namespace = project.namespace;
      await env.client.apply(obj, { force: true });
    }
  });
  after(async () => {
    await project?.cleanup();
    await env?.cleanup();
  });

  it("--once --json reports the operator's controllers with reconciles, and its informers", async () => {
    const summary = await eventually(
      "a summary with reconciles",
      async () => {
        const { stdout } = await run(process.execPath, [
          "--conditions=opkit-source",
          cli,
          "top",
          "--url",
          url,
          "--once",
          "--json",
          "--interval",
          "0.5",
        ]);
        const s = JSON.parse(stdout) as OperatorSummary & { source: string };
        const c = s.controllers.find((x) => x.name === "memcached");
        return c && (c.reconcilesTotal.success ?? 0) > 0 ? s : undefined;
      },
      30_000,
    );
    const c = summary.controllers.find((x) => x.name === "memcached")!;
    assert.ok(c.p50Seconds !== undefined && c.p50Seconds > 0, "reconcile latency is known");
    assert.ok(c.maxWorkers !== undefined && c.maxWorkers >= 1);
    assert.ok(c.reconcilesPerSecond !== undefined, "two scrapes give rates");
    const kinds = summary.informers.map((i) => i.kind);
    assert.ok(
      kinds.some((k) => k.includes("Memcached")),
      `informers: ${kinds.join(", ")}`,
    );
    assert.ok(summary.informers.every((i) => i.synced));
    assert.ok(summary.informers.find((i) => i.kind.includes("Memcached"))!.objects >= 1);
    assert.ok((summary.requestsPerSecond ?? -1) >= 0);
  });

  it("a bad flag is refused naming it; an endpoint that is down is a clear error", async () => {
    await assert.rejects(
      run(process.execPath, ["--conditions=opkit-source", cli, "top", "--pod", "no-slash"]),
      (err: { stderr: string; code: number }) =>
        /--pod no-slash: expected namespace\/name/.test(err.stderr) && err.code === 1,
    );
    await assert.rejects(
      run(process.execPath, [
        "--conditions=opkit-source",
        cli,
        "top",
        "--url",
        "http://127.0.0.1:1/metrics",
        "--once",
      ]),
      (err: { stderr: string }) => /scraping http:\/\/127\.0\.0\.1:1\/metrics/.test(err.stderr),
    );
  });

  it("the live view fits 80 columns, shows the controller, and quits on q", async (t) => {
    const pty = await import("@lydell/node-pty");
    // CommonJS: its exports arrive as the default export.
    const { Terminal } = (await import("@xterm/headless")).default;
    const term = new Terminal({ cols: 80, rows: 30, allowProposedApi: true });
    const child = pty.spawn(
      process.execPath,
      ["--conditions=opkit-source", cli, "top", "--url", url, "--interval", "0.5"],
      {
        cols: 80,
        rows: 30,
        env: { ...process.env, TERM: "xterm-256color" },
      },
    );
    const exited = new Promise<number>((resolve) => child.onExit(({ exitCode }) => resolve(exitCode)));
    t.after(() => {
      try {
        child.kill();
      } catch {
        /* already gone */
      }
    });
    child.onData((d) => term.write(d));
    const screen = (): string[] => {
      const lines: string[] = [];
      const buf = term.buffer.active;
      for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? "");
      return lines;
    };
    const shown = await eventually(
      "the controller row with a reconcile rate",
      () => {
        const lines = screen();
        return lines.some((l) => l.startsWith("CONTROLLER")) &&
          lines.some((l) => /^memcached\s+\d+\s+[\d.]+/.test(l))
          ? lines
          : undefined;
      },
      20_000,
    );
    assert.ok(
      shown.some((l) => l.startsWith("INFORMER")),
      shown.join("\n"),
    );
    // Nothing wrapped: every line fits the 80 columns.
    const buf = term.buffer.active;
    for (let i = 0; i < buf.length; i++)
      assert.ok(!buf.getLine(i)?.isWrapped, `line ${i} wrapped:\n${shown.join("\n")}`);
    // Redrawn in place: the header appears once on screen after several redraws, not once per redraw.
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal(screen().filter((l) => l.startsWith("opkit top")).length, 1, screen().join("\n"));
    child.write("q");
    assert.equal(await exited, 0);
  });
});
