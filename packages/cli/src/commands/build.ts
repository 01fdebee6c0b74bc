/**
 * `opkit build`: the operator as a few JavaScript files for production (what the generated Dockerfile runs).
 *
 * Running `src/main.ts` directly costs every start the resolution and loading of some 600 modules and
 * Node's type stripping of the project's TypeScript: about half of an operator's start-up CPU and a third
 * of its idle memory. One bundle (esbuild: ESM, code splitting so the library's lazy imports stay lazy)
 * skips both. Packages that load parts of themselves at run time through `require` (undici) or that
 * are only loaded on demand and are large (`@kubernetes/client-node`) stay in node_modules.
 */
import { Command } from "commander";
import type { Plugin } from "esbuild";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { builtinModules } from "node:module";
import { join, relative, resolve } from "node:path";

/** What `buildOperator` needs: the project and where to write. */
export interface BuildOptions {
  /** Output directory, relative to the project (default "dist"); emptied first. */
  outDir?: string;
  /** The entry file, relative to the project (default "src/main.ts"). */
  entry?: string;
  /** Minify identifiers and whitespace (default false: stack traces stay readable). */
  minify?: boolean;
}

/** `opkit build` could not produce the bundle; the message names the file or the esbuild error. */
export class BuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BuildError";
  }
}

/** Packages resolved from node_modules at run time instead of bundled. */
export const BUNDLE_EXTERNALS: readonly string[] = ["@kubernetes/client-node"];

const BUILTINS = new Set(builtinModules);

/**
 * Node's built-in modules through `require` instead of ESM imports. An ESM import of a built-in builds a
 * facade that reads every export once, and the lazy ones load whole subsystems nobody asked for:
 * `node:http`'s WebSocket getter loads Node's bundled undici, `node:util`'s TextDecoder the encodings,
 * `node:crypto`'s webcrypto. About a third of an operator's start-up CPU went there.
 */
const builtinsThroughRequire: Plugin = {
  name: "opkit-builtins-through-require",
  setup(b) {
    b.onResolve({ filter: /^[a-z0-9_/:]+$/ }, (args) => {
      const name = args.path.startsWith("node:") ? args.path.slice(5) : args.path;
      if (!BUILTINS.has(name) || args.kind === "require-call") return undefined;
      return { path: `node:${name}`, namespace: "opkit-builtin" };
    });
    b.onLoad({ filter: /.*/, namespace: "opkit-builtin" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

/**
 * Bundle the project's entry into `outDir` (ESM, Node 22.19+, source maps). Returns the written files,
 * relative to the project.
 */
export async function buildOperator(dir: string, opts: BuildOptions = {}): Promise<string[]> {
  const project = resolve(dir);
  const entry = join(project, opts.entry ?? join("src", "main.ts"));
  if (!existsSync(entry))
    throw new BuildError(`opkit build: no entry file ${relative(process.cwd(), entry)} (set --entry)`);
  const outdir = resolve(project, opts.outDir ?? "dist");
  if (outdir === project || !outdir.startsWith(project))
    throw new BuildError(`opkit build: --out-dir must be a directory inside the project, got ${opts.outDir}`);
  // Loaded here only: the bundler is a build-time tool, never part of `opkit run`.
  const { build } = await import("esbuild");
  await rm(outdir, { recursive: true, force: true });
  try {
    const result = await build({
      absWorkingDir: project,
      entryPoints: [entry],
      bundle: true,
      splitting: true,
      format: "esm",
      platform: "node",
      target: "node22.19",
      outdir,
      sourcemap: true,
      minify: opts.minify ?? false,
      // The ESM builds where packages ship both (the CommonJS ones lose their named exports in a chunk).
      mainFields: ["module", "main"],
      external: [...BUNDLE_EXTERNALS],
      plugins: [builtinsThroughRequire],
      // Bundled CommonJS code (and the library's lazy loading of undici's parts) calls require().
      banner: {
        js: "import { createRequire as __opkitRequire } from 'node:module'; const require = __opkitRequire(import.meta.url);",
      },
      metafile: true,
      logLevel: "silent",
    });
    return Object.keys(result.metafile.outputs)
      .map((f) => relative(project, resolve(project, f)))
      .sort();
  } catch (err) {
    const errors = (err as { errors?: { text: string; location?: { file: string; line: number } | null }[] })
      .errors;
    if (errors?.length)
      throw new BuildError(
        `opkit build: ${errors.map((e) => (e.location ? `${e.location.file}:${e.location.line}: ` : "") + e.text).join("; ")}`,
      );
    throw err;
  }
}

/** `opkit build --dir <dir>`. */
export function buildCommand(): Command {
  return new Command("build")
    .description(
      "bundle the operator into dist/ (what its container image runs): starts with about half the CPU and less memory than running src/main.ts",
    )
    .option("--dir <dir>", "project directory", ".")
    .option("--out-dir <dir>", "output directory inside the project", "dist")
    .option("--entry <file>", "entry file", "src/main.ts")
    .option("--minify", "minify the bundle")
    .action(async (o: { dir: string; outDir: string; entry: string; minify?: boolean }) => {
      const files = await buildOperator(o.dir, o);
      for (const f of files.filter((f) => !f.endsWith(".map"))) console.log(`wrote ${f}`);
    });
}
