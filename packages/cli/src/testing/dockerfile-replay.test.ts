/**
 * The Dockerfile replay itself: parsing, `.dockerignore` with Docker's rules, COPY semantics (directory
 * contents, --from, excluded sources fail), RUN failures, refusing what it cannot replay, and running
 * the image's command (as its USER when the tests run as root). Small fake projects, no npm, no cluster.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  nonRootUser,
  parseDockerfile,
  replayDockerfile,
  ReplayError,
  startImage,
} from "./dockerfile-replay.ts";

const major = process.versions.node.split(".")[0]!;

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "opkit-replay-ctx-"));
  for (const [f, content] of Object.entries(files)) {
    await mkdir(join(dir, f, ".."), { recursive: true });
    await writeFile(join(dir, f), content);
  }
  return dir;
}

test("parse: comments, continuations, flags and JSON form", () => {
  const ins = parseDockerfile(
    `# syntax=docker/dockerfile:1\nFROM node:24-slim AS build\n\n# a comment\nRUN echo a \\\n  && echo b\nCOPY --from=build /app/src ./src\nENTRYPOINT ["node", "src/main.ts"]\n`,
  );
  assert.deepEqual(
    ins.map((i) => [i.line, i.keyword, i.flags, i.args, i.json]),
    [
      [2, "FROM", {}, ["node:24-slim", "AS", "build"], false],
      [5, "RUN", {}, ["echo", "a", "&&", "echo", "b"], false],
      [7, "COPY", { from: "build" }, ["/app/src", "./src"], false],
      [8, "ENTRYPOINT", {}, ["node", "src/main.ts"], true],
    ],
  );
  assert.throws(() => parseDockerfile('CMD ["node", 1]'), /line 1: .* is not a JSON array of strings/);
});

test("builds the stages as an engine would and runs the image's command", async (t) => {
  const ctx = await project({
    ".dockerignore": "secret.txt\nlogs\n*.tmp\n",
    "app.js": "console.log('hello from ' + process.env.GREETING + ' as ' + process.getuid());\n",
    "lib/util.txt": "util\n",
    "secret.txt": "do not ship\n",
    "logs/a.log": "x\n",
    "build.tmp": "x\n",
    "sub/build.tmp": "kept: patterns are anchored at the context root\n",
  });
  const work = await mkdtemp(join(tmpdir(), "opkit-replay-"));
  t.after(() =>
    Promise.all([rm(ctx, { recursive: true, force: true }), rm(work, { recursive: true, force: true })]),
  );
  await writeFile(
    join(ctx, "Dockerfile"),
    `FROM node:${major}-slim AS build
WORKDIR /app
COPY . .
RUN ls -R . > listing.txt && echo built > out.txt
FROM node:${major}-slim
WORKDIR /app
ENV GREETING=replay OTHER="two words"
COPY --from=build /app/out.txt /app/listing.txt ./
COPY lib ./lib
COPY app.js ./
USER 65532:65532
ENTRYPOINT ["node", "app.js"]
`,
  );
  const steps: string[] = [];
  const replay = await replayDockerfile({
    context: ctx,
    work,
    env: process.env,
    onStep: (s) => steps.push(s),
  });
  assert.deepEqual(replay.contextFiles, [
    ".dockerignore",
    "Dockerfile",
    "app.js",
    "lib/util.txt",
    "sub/build.tmp",
  ]);
  assert.equal(replay.stages.length, 2);
  assert.equal(replay.stages[0]!.name, "build");
  const app = join(replay.final.root, "app");
  assert.equal(await readFile(join(app, "out.txt"), "utf8"), "built\n");
  assert.equal(
    await readFile(join(app, "lib/util.txt"), "utf8"),
    "util\n",
    "a directory's contents land in the destination",
  );
  const listing = await readFile(join(app, "listing.txt"), "utf8");
  assert.doesNotMatch(listing, /secret|a\.log/, "excluded files never reach the build");
  assert.ok(!existsSync(join(app, "secret.txt")));
  assert.deepEqual(replay.final.env, { GREETING: "replay", OTHER: "two words" });
  assert.deepEqual(nonRootUser(replay.final.user), { uid: 65532, gid: 65532 });
  assert.ok(steps.includes("RUN ls -R . > listing.txt && echo built > out.txt"));

  const child = await startImage(replay, process.env);
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((r) => child.on("exit", r));
  assert.equal(code, 0, out);
  const uid = process.getuid?.() === 0 ? 65532 : process.getuid?.();
  assert.equal(out.trim(), `hello from replay as ${uid}`);
});

test("fails where the engine would: excluded or missing sources, failing RUN, unknown stages", async (t) => {
  const ctx = await project({ ".dockerignore": "secret.txt\n", "secret.txt": "x\n", "ok.txt": "ok\n" });
  t.after(() => rm(ctx, { recursive: true, force: true }));
  const cases: [string, RegExp][] = [
    [
      `FROM node:${major}\nCOPY secret.txt ./\n`,
      /line 2 \(COPY\): secret\.txt is not in the build context \(missing, or excluded by \.dockerignore\)/,
    ],
    [`FROM node:${major}\nCOPY vendor ./vendor\n`, /vendor is not in the build context/],
    [`FROM node:${major}\nCOPY ../x ./\n`, /is outside the build context/],
    [`FROM node:${major}\nRUN exit 3\n`, /line 2 \(RUN\): `exit 3` exited 3/],
    [`FROM node:${major}\nCOPY --from=nope /a ./\n`, /no stage named nope/],
    [`FROM node:${major}\nCOPY --chown=1:1 ok.txt ./\n`, /flags chown are not replayed/],
    [`FROM node:${major}\nHEALTHCHECK CMD true\n`, /HEALTHCHECK is not replayed/],
    [
      `FROM node:${Number(major) - 2}-slim\n`,
      new RegExp(`the image runs Node ${Number(major) - 2}, the replay Node ${major}`),
    ],
    [`FROM alpine:3\n`, /only node:<major> images can be replayed/],
    [`RUN true\n`, /before the first FROM/],
  ];
  for (const [dockerfile, error] of cases) {
    const work = await mkdtemp(join(tmpdir(), "opkit-replay-"));
    await writeFile(join(ctx, "Dockerfile"), dockerfile);
    await assert.rejects(replayDockerfile({ context: ctx, work, env: process.env }), (err: unknown) => {
      assert.ok(err instanceof ReplayError, String(err));
      assert.match(err.message, error);
      return true;
    });
    await rm(work, { recursive: true, force: true });
  }
});

test("nonRootUser: numeric, non-zero uids only", () => {
  assert.deepEqual(nonRootUser("65532:65532"), { uid: 65532, gid: 65532 });
  assert.deepEqual(nonRootUser("1000"), { uid: 1000, gid: 1000 });
  assert.equal(nonRootUser("0:0"), undefined);
  assert.equal(nonRootUser("node"), undefined, "a name cannot be checked by runAsNonRoot");
  assert.equal(nonRootUser(undefined), undefined);
});
