/**
 * `make docs`, the site step: `vitepress build docs`, failing on any warning it prints (a dead link is
 * already an error in VitePress; a chunk-size or Vue warning only a line of output), then the static
 * crawl of every link and anchor of the built site (crawl.ts).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { crawl } from "./crawl.ts";

const root = join(import.meta.dirname, "..", "..");
const vitepress = join(root, "node_modules", ".bin", "vitepress");
const run = spawnSync(vitepress, ["build", "docs"], { cwd: root, encoding: "utf8" });
const output = `${run.stdout}${run.stderr}`;
process.stdout.write(output);
const warnings = output.split("\n").filter((l) => /\bwarn(ing)?\b|\(!\)|dead link/i.test(l));
if (run.status !== 0) {
  console.error(`vitepress build failed (exit ${run.status ?? run.signal})`);
  process.exit(1);
}
if (warnings.length > 0) {
  console.error(`vitepress build printed ${warnings.length} warning(s); the site must build without any:`);
  for (const w of warnings) console.error(`  ${w}`);
  process.exit(1);
}
const { pages, links, broken } = crawl(join(root, "docs", ".vitepress", "dist"));
for (const b of broken) console.error(`${b.page}: ${b.href}: ${b.reason}`);
console.log(`site: ${pages} pages, ${links} internal links checked, ${broken.length} broken`);
if (broken.length > 0) process.exit(1);
