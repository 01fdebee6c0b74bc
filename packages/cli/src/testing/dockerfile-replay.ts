/**
 * Replays a Dockerfile without a container engine, so that tests catch a broken recipe on machines
 * that have no Docker: the build context is copied as `.dockerignore` allows (Docker's own matching
 * rules, via @balena/dockerignore), each stage gets a directory standing in for its filesystem, COPY
 * and RUN act on it as the engine would (RUN through `sh -c` with the host's Node, which must be the
 * image's major version), and the final stage's ENTRYPOINT/CMD can be started — as the image's USER
 * when the tests run as root. It understands the instructions opkit's generated Dockerfile uses and
 * refuses any other, so a recipe it cannot replay faithfully fails loudly instead of passing.
 *
 * Test tooling only (excluded from the published package).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  access,
  chmod,
  constants,
  copyFile,
  cp,
  link,
  mkdir,
  readFile,
  readdir,
  stat,
} from "node:fs/promises";
import { existsSync } from "node:fs";
import { dirname, isAbsolute, join, normalize, posix } from "node:path";
import ignoreModule from "@balena/dockerignore";

/** One instruction: its keyword, flags (`--from=build`) and arguments (JSON form already decoded). */
export interface Instruction {
  line: number;
  keyword: string;
  flags: Record<string, string>;
  args: string[];
  /** Whether the arguments were given in JSON (exec) form. */
  json: boolean;
  /** The raw text after the keyword and flags (shell form). */
  text: string;
}

/** A Dockerfile the replay cannot or will not replay; the message names the line. */
export class ReplayError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReplayError";
  }
}

/** Split a Dockerfile into instructions: comments and blank lines dropped, continuations joined. */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i + 1;
    let line = lines[i]!;
    if (/^\s*(#.*)?$/.test(line)) continue;
    while (/\\\s*$/.test(line) && i + 1 < lines.length) {
      line = line.replace(/\\\s*$/, " ") + lines[++i]!.replace(/^\s*#.*$/, "");
    }
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(line);
    if (!m) throw new ReplayError(`Dockerfile line ${start}: cannot parse "${line}"`);
    let rest = m[2]!.trim();
    const flags: Record<string, string> = {};
    for (let f = /^--([a-z-]+)=(\S+)\s*/.exec(rest); f; f = /^--([a-z-]+)=(\S+)\s*/.exec(rest)) {
      flags[f[1]!] = f[2]!;
      rest = rest.slice(f[0].length);
    }
    let args: string[];
    let json = false;
    if (rest.startsWith("[")) {
      try {
        args = JSON.parse(rest) as string[];
        json = Array.isArray(args) && args.every((a) => typeof a === "string");
      } catch {
        json = false;
      }
      if (!json) throw new ReplayError(`Dockerfile line ${start}: "${rest}" is not a JSON array of strings`);
      args = JSON.parse(rest) as string[];
    } else {
      args = rest.split(/\s+/).filter(Boolean);
    }
    out.push({ line: start, keyword: m[1]!.toUpperCase(), flags, args, json, text: rest });
  }
  return out;
}

/** A replayed stage: its image, its stand-in filesystem, and what the image would run. */
export interface Stage {
  name?: string;
  image: string;
  /** The directory standing in for the stage's `/`. */
  root: string;
  /** The working directory inside the stage (a container path). */
  workdir: string;
  env: Record<string, string>;
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
}

export interface ReplayOptions {
  /** The build context (the project directory). */
  context: string;
  /** An empty scratch directory for the context copy and the stages. */
  work: string;
  /** Dockerfile path (default `<context>/Dockerfile`). */
  dockerfile?: string;
  /** Environment for RUN steps besides the stage's ENV (PATH with node and npm, HOME, npm settings). */
  env?: NodeJS.ProcessEnv;
  /** Called before each step with a one-line description. */
  onStep?: (step: string) => void;
}

export interface Replay {
  /** The scratch directory everything was built in. */
  work: string;
  stages: Stage[];
  /** The last stage: the image that would be shipped. */
  final: Stage;
  /** The files of the build context after `.dockerignore` (relative paths). */
  contextFiles: string[];
}

const NODE_IN_IMAGE = "usr/local/bin/node";

const ignore = ignoreModule as unknown as (typeof ignoreModule)["default"];

async function walk(dir: string, rel: string, out: string[], skip: (rel: string) => boolean): Promise<void> {
  for (const e of await readdir(join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (!skip(r)) await walk(dir, r, out, skip);
    } else out.push(r);
  }
}

/** Copy the build context as the engine sends it: every file `.dockerignore` does not exclude. */
export async function copyContext(context: string, target: string): Promise<string[]> {
  const rules = await readFile(join(context, ".dockerignore"), "utf8").catch(() => "");
  const ig = ignore().add(rules.split("\n"));
  // Without exceptions (`!…`), nothing under an excluded directory can come back: skip it whole.
  const hasExceptions = rules.split("\n").some((l) => l.trim().startsWith("!"));
  const all: string[] = [];
  await walk(context, "", all, (rel) => !hasExceptions && ig.ignores(rel));
  const kept = all.filter((f) => !ig.ignores(f));
  for (const f of kept) {
    await mkdir(dirname(join(target, f)), { recursive: true });
    await cp(join(context, f), join(target, f), { preserveTimestamps: true });
  }
  return kept.sort();
}

function inStage(stage: Stage, containerPath: string): string {
  const abs = posix.isAbsolute(containerPath) ? containerPath : posix.join(stage.workdir, containerPath);
  const norm = posix.normalize(abs);
  return join(stage.root, norm);
}

async function copyInto(src: string, dest: string, destIsDir: boolean): Promise<void> {
  const st = await stat(src);
  if (st.isDirectory()) {
    // Docker copies a directory's contents, not the directory itself.
    await mkdir(dest, { recursive: true });
    await cp(src, dest, { recursive: true, preserveTimestamps: true });
  } else {
    const target = destIsDir ? join(dest, src.split("/").pop()!) : dest;
    await mkdir(dirname(target), { recursive: true });
    await cp(src, target, { preserveTimestamps: true });
  }
}

function nodeMajorOf(image: string): number | undefined {
  const m = /^(?:docker\.io\/)?(?:library\/)?node:(\d+)/.exec(image);
  return m ? Number(m[1]) : undefined;
}

/** Build every stage of the Dockerfile in `opts.work`; throws at the first step that would fail. */
export async function replayDockerfile(opts: ReplayOptions): Promise<Replay> {
  // Long on purpose: one pass over the Dockerfile's instructions, a few lines per instruction.
  const text = await readFile(opts.dockerfile ?? join(opts.context, "Dockerfile"), "utf8");
  const instructions = parseDockerfile(text);
  const contextDir = join(opts.work, "context");
  await mkdir(contextDir, { recursive: true });
  const contextFiles = await copyContext(opts.context, contextDir);
  const stages: Stage[] = [];
  const step = (s: string): void => opts.onStep?.(s);
  let stage: Stage | undefined;
  const hostMajor = Number(process.versions.node.split(".")[0]);

  for (const ins of instructions) {
    const where = `Dockerfile line ${ins.line} (${ins.keyword})`;
    if (ins.keyword === "FROM") {
      const [image, as, name] = ins.args;
      if (!image) throw new ReplayError(`${where}: no image`);
      const major = nodeMajorOf(image);
      if (major === undefined)
        throw new ReplayError(`${where}: only node:<major> images can be replayed, not ${image}`);
      if (major !== hostMajor)
        throw new ReplayError(
          `${where}: the image runs Node ${major}, the replay Node ${hostMajor}: run it with Node ${major}`,
        );
      const root = join(opts.work, `stage-${stages.length}`);
      // The image's node, where node images keep it (a hard link when the filesystem allows).
      await mkdir(join(root, "usr", "local", "bin"), { recursive: true });
      await link(process.execPath, join(root, NODE_IN_IMAGE)).catch(() =>
        copyFile(process.execPath, join(root, NODE_IN_IMAGE)),
      );
      stage = { image, root, workdir: "/", env: {}, ...(as?.toUpperCase() === "AS" && name ? { name } : {}) };
      stages.push(stage);
      step(`FROM ${image}${stage.name ? ` AS ${stage.name}` : ""}`);
      continue;
    }
    if (!stage) throw new ReplayError(`${where}: before the first FROM`);
    switch (ins.keyword) {
      case "WORKDIR": {
        stage.workdir = posix.normalize(
          posix.isAbsolute(ins.text) ? ins.text : posix.join(stage.workdir, ins.text),
        );
        await mkdir(inStage(stage, stage.workdir), { recursive: true });
        break;
      }
      case "ENV": {
        const pairs = ins.text.includes("=")
          ? [...ins.text.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("([^"]*)"|\S*)/g)].map((m) => [
              m[1]!,
              m[3] ?? m[2]!,
            ])
          : [[ins.args[0]!, ins.args.slice(1).join(" ")]];
        for (const [k, v] of pairs) stage.env[k!] = v!;
        break;
      }
      case "COPY": {
        const unknown = Object.keys(ins.flags).filter((f) => f !== "from");
        if (unknown.length) throw new ReplayError(`${where}: flags ${unknown.join(", ")} are not replayed`);
        const parts = [...ins.args];
        const dest = parts.pop();
        if (!dest || parts.length === 0) throw new ReplayError(`${where}: needs a source and a destination`);
        const from = ins.flags.from === undefined ? undefined : stages.find((s) => s.name === ins.flags.from);
        if (ins.flags.from !== undefined && !from)
          throw new ReplayError(`${where}: no stage named ${ins.flags.from}`);
        const destPath = inStage(stage, dest);
        const destIsDir = dest.endsWith("/") || parts.length > 1 || dest === "." || dest === "./";
        for (const src of parts) {
          if (/[*?[]/.test(src))
            throw new ReplayError(`${where}: wildcard sources are not replayed (${src})`);
          let source: string;
          if (from) source = inStage(from, src);
          else {
            const rel = normalize(src);
            if (isAbsolute(rel) || rel.startsWith(".."))
              throw new ReplayError(`${where}: ${src} is outside the build context`);
            source = join(contextDir, rel);
          }
          if (!existsSync(source))
            throw new ReplayError(
              from
                ? `${where}: ${src} does not exist in stage ${from.name}`
                : `${where}: ${src} is not in the build context (missing, or excluded by .dockerignore)`,
            );
          await copyInto(source, destPath, destIsDir);
        }
        step(
          `COPY ${Object.entries(ins.flags)
            .map(([k, v]) => `--${k}=${v} `)
            .join("")}${ins.text}`,
        );
        break;
      }
      case "RUN": {
        const argv = ins.json ? ins.args : ["sh", "-c", ins.text];
        step(`RUN ${ins.text}`);
        const r = spawnSync(argv[0]!, argv.slice(1), {
          cwd: inStage(stage, stage.workdir),
          env: { ...opts.env, ...stage.env },
          encoding: "utf8",
          timeout: 600_000,
        });
        if (r.status !== 0)
          throw new ReplayError(
            `${where}: \`${ins.text}\` exited ${r.status ?? r.signal}:\n${(r.stdout + r.stderr).slice(-4000)}`,
          );
        break;
      }
      case "USER":
        stage.user = ins.text;
        break;
      case "ENTRYPOINT":
        stage.entrypoint = ins.json ? ins.args : ["sh", "-c", ins.text];
        break;
      case "CMD":
        stage.cmd = ins.json ? ins.args : ["sh", "-c", ins.text];
        break;
      default:
        throw new ReplayError(
          `${where}: ${ins.keyword} is not replayed; extend the replay or change the recipe`,
        );
    }
  }
  if (!stage) throw new ReplayError("Dockerfile has no FROM");
  return { work: opts.work, stages, final: stage, contextFiles };
}

/** Whether the USER is a non-root numeric uid (what `runAsNonRoot` can verify without a passwd file). */
export function nonRootUser(user: string | undefined): { uid: number; gid: number } | undefined {
  const m = /^(\d+)(?::(\d+))?$/.exec(user ?? "");
  if (!m) return undefined;
  const uid = Number(m[1]);
  return uid === 0 ? undefined : { uid, gid: Number(m[2] ?? m[1]) };
}

/**
 * Start the final stage's ENTRYPOINT + CMD in its working directory with the image's ENV plus `env`,
 * and the image's node first on PATH. When this process is root and the image has a numeric USER, the
 * command runs as that uid/gid, so a file the image's user could not read fails here too.
 */
export async function startImage(replay: Replay, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const img = replay.final;
  const argv = [...(img.entrypoint ?? []), ...(img.cmd ?? [])];
  if (argv.length === 0) throw new ReplayError("the final stage has neither ENTRYPOINT nor CMD");
  const user = nonRootUser(img.user);
  const asUser = user && process.getuid?.() === 0 ? user : undefined;
  if (asUser) {
    // mkdtemp makes 0700 directories: open the scratch directory as an image's / is open. Directories
    // above it are not ours to change: they must be passable already.
    const st = await stat(replay.work);
    await chmod(replay.work, st.mode | 0o055);
    for (let d = dirname(replay.work); d !== dirname(d); d = dirname(d)) {
      if (((await stat(d)).mode & 0o001) === 0)
        throw new ReplayError(
          `${d} is closed to others: put the replay's scratch directory elsewhere (e.g. under /tmp)`,
        );
    }
  }
  await access(join(img.root, NODE_IN_IMAGE), constants.X_OK);
  const path = [join(img.root, "usr", "local", "bin"), env.PATH ?? ""].join(":");
  return spawn(argv[0]!, argv.slice(1), {
    cwd: inStage(img, img.workdir),
    env: { ...env, ...img.env, PATH: path },
    stdio: ["ignore", "pipe", "pipe"],
    ...(asUser ? { uid: asUser.uid, gid: asUser.gid } : {}),
  });
}
