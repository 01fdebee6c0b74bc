/**
 * docs/cli.md lists every command and flag the CLI defines: the committed page is what the generator
 * writes now, each command has its section with each of its flags, and the real `opkit --help` (main.ts,
 * which registers the commands) lists no command the page leaves out.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CLI_PAGE, allCommands, renderCliReference, topLevelCommands } from "./cli-reference.ts";

const page = readFileSync(CLI_PAGE, "utf8");
const main = join(import.meta.dirname, "..", "..", "packages", "cli", "src", "main.ts");

/** The command names under "Commands:" in commander's help output (without `help`). */
function helpCommands(args: string[]): string[] {
  const out = execFileSync(process.execPath, ["--conditions=opkit-source", main, ...args, "--help"], {
    encoding: "utf8",
  });
  const section = out.split(/^Commands:$/m)[1] ?? "";
  return [...section.matchAll(/^ {2}(\S+)/gm)].map((m) => m[1] as string).filter((n) => n !== "help");
}

test("docs/cli.md is what scripts/docs/cli-reference.ts writes (regenerate it after changing a command)", () => {
  assert.equal(page, renderCliReference());
});

test("every command has a section listing each of its flags and arguments", () => {
  const sections = page.split(/^## /m).slice(1);
  const byName = new Map(sections.map((s) => [s.slice(0, s.indexOf("\n")), s]));
  for (const cmd of allCommands()) {
    let name = cmd.name();
    for (let p = cmd.parent; p; p = p.parent) name = `${p.name()} ${name}`;
    const section = byName.get(`opkit ${name}`);
    assert.ok(section, `no section for opkit ${name}`);
    for (const o of cmd.options)
      assert.ok(section.includes(`\`${o.flags}\``), `opkit ${name}: ${o.flags} missing`);
    for (const a of cmd.registeredArguments)
      assert.ok(section.includes(a.name()), `opkit ${name}: ${a.name()}`);
  }
});

test("opkit --help and each command group's --help list exactly the commands of the page", () => {
  assert.deepEqual(
    helpCommands([]),
    topLevelCommands().map((c) => c.name()),
  );
  for (const group of topLevelCommands().filter((c) => c.commands.length > 0))
    assert.deepEqual(
      helpCommands([group.name()]),
      group.commands.map((c) => c.name()),
      `opkit ${group.name()} --help`,
    );
});
