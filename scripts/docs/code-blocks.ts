/**
 * The guide's code blocks, checked so that none rots: every ```ts block is type-checked against the built
 * packages (`opkit`, `opkit/testenv`, `opkit/generate`, `opkit/schemas` as an operator project resolves
 * them, from dist/), and every ```sh block either is run by a test or says on its first line why not.
 *
 * A block may be a fragment: names it uses from the public entries without importing them are imported
 * for it, and the example kinds the pages share (Memcached, ...) come from code-blocks-prelude.ts. Blocks
 * marked `file=...` in tutorial.md are files of the tutorial's project, which its own test writes and runs.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

const root = join(import.meta.dirname, "..", "..");
export const DOCS = join(root, "docs");

/** Pages whose shell blocks a test runs as written (packages/cli/src/tutorial.int.test.ts). */
const RUN_BY_A_TEST = new Set(["tutorial.md"]);
/** The first line of a shell block that is not run, with the reason after the colon. */
export const NOT_RUN = /^# not run here: \S/;

/** One fenced block of a page. */
export interface Block {
  page: string;
  line: number;
  lang: string;
  meta: string;
  code: string;
}

/** Every fenced block of the Markdown pages of docs/ (generated pages included). */
export function blocks(dir = DOCS): Block[] {
  const out: Block[] = [];
  for (const page of readdirSync(dir).filter((f) => f.endsWith(".md"))) {
    const lines = readFileSync(join(dir, page), "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
      const open = /^(`{3,})(\w*)\s*(.*)$/.exec(lines[i] as string);
      if (!open) continue;
      const end = lines.findIndex((l, j) => j > i && l.startsWith(open[1] as string));
      out.push({
        page,
        line: i + 1,
        lang: open[2] ?? "",
        meta: open[3] ?? "",
        code: lines.slice(i + 1, end).join("\n"),
      });
      i = end;
    }
  }
  return out;
}

/** Shell blocks that are neither run by a test nor say why not, and kubectl calls that may hit the user's context. */
export function shellDefects(all: readonly Block[]): string[] {
  const defects: string[] = [];
  for (const b of all.filter((x) => x.lang === "sh" || x.lang === "bash" || x.lang === "shell")) {
    const where = `${b.page}:${b.line}`;
    const first = b.code.split("\n")[0] ?? "";
    if (!RUN_BY_A_TEST.has(b.page) && !NOT_RUN.test(first))
      defects.push(`${where}: a shell block no test runs must start with "# not run here: <why>"`);
    for (const line of b.code.split("\n")) {
      const cmd = line.replace(/#.*$/, "");
      if (/(^|[\s;&|(])kubectl\s/.test(cmd) && !/env kubectl|--kubeconfig|--context/.test(cmd))
        defects.push(`${where}: "${line.trim()}" uses the current kubectl context; use the env's kubeconfig`);
    }
  }
  return defects;
}

/** Names each public entry exports (values and types), read from the built declarations. */
function publicNames(): Map<string, string> {
  const entries: [string, string][] = [
    ["opkit", "packages/opkit/dist/index.d.ts"],
    ["opkit/testenv", "packages/opkit/dist/testenv/index.d.ts"],
    ["opkit/generate", "packages/opkit/dist/generate/index.d.ts"],
  ];
  const program = ts.createProgram(
    entries.map(([, f]) => join(root, f)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
    },
  );
  const checker = program.getTypeChecker();
  const names = new Map<string, string>();
  for (const [entry, file] of entries) {
    const sf = program.getSourceFile(join(root, file));
    const sym = sf && checker.getSymbolAtLocation(sf);
    if (!sym) throw new Error(`${file} is missing: run make build`);
    for (const e of checker.getExportsOfModule(sym)) if (!names.has(e.name)) names.set(e.name, entry);
  }
  return names;
}

const PRELUDE = join(import.meta.dirname, "code-blocks-prelude.ts");

/** The module a ts block becomes: its code, with imports added for the public and prelude names it uses. */
export function moduleOf(
  b: Block,
  names: ReadonlyMap<string, string>,
  preludeNames: readonly string[],
): string {
  const sf = ts.createSourceFile("b.ts", b.code, ts.ScriptTarget.ES2023, true);
  const declared = new Set<string>();
  const used = new Set<string>();
  const visit = (n: ts.Node): void => {
    if (ts.isIdentifier(n)) {
      const p = n.parent;
      const isDecl =
        ts.isImportSpecifier(p) ||
        ts.isNamespaceImport(p) ||
        ts.isImportClause(p) ||
        ((ts.isVariableDeclaration(p) ||
          ts.isFunctionDeclaration(p) ||
          ts.isClassDeclaration(p) ||
          ts.isInterfaceDeclaration(p) ||
          ts.isTypeAliasDeclaration(p) ||
          ts.isParameter(p) ||
          ts.isBindingElement(p)) &&
          p.name === n);
      const isMember =
        (ts.isPropertyAccessExpression(p) && p.name === n) ||
        (ts.isPropertyAssignment(p) && p.name === n) ||
        (ts.isPropertySignature(p) && p.name === n) ||
        (ts.isQualifiedName(p) && p.right === n);
      if (isDecl) declared.add(n.text);
      else if (!isMember) used.add(n.text);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  const wanted = [...used].filter((n) => !declared.has(n));
  const byEntry = new Map<string, string[]>();
  for (const n of wanted) {
    const from = preludeNames.includes(n) ? "./code-blocks-prelude.ts" : names.get(n);
    if (!from) continue;
    byEntry.set(from, [...(byEntry.get(from) ?? []), n]);
  }
  const imports = [...byEntry].map(([from, ns]) => `import { ${ns.sort().join(", ")} } from "${from}";`);
  return `${imports.join("\n")}\n// ${b.page}:${b.line}\n${b.code}\nexport {};\n`;
}

/** Type-checks every ts block; returns the diagnostics, each naming its page and line. */
export function typecheckBlocks(all: readonly Block[]): { checked: number; errors: string[] } {
  const tsBlocks = all.filter((b) => (b.lang === "ts" || b.lang === "typescript") && !/\bfile=/.test(b.meta));
  // Inside the workspace, so `opkit` resolves as in an operator project: node_modules/opkit, its dist types.
  const dir = join(root, "node_modules", ".cache", "opkit-doc-blocks");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "code-blocks-prelude.ts"), readFileSync(PRELUDE, "utf8"));
  const preludeNames = [
    ...readFileSync(PRELUDE, "utf8").matchAll(/^export (?:const|function|type|interface) (\w+)/gm),
  ].map((m) => m[1] as string);
  const names = publicNames();
  const files = tsBlocks.map((b, i) => {
    const file = join(dir, `block-${String(i).padStart(3, "0")}.ts`);
    writeFileSync(file, moduleOf(b, names, preludeNames));
    return { file, b };
  });
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023,
    lib: ["lib.es2023.d.ts"],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    allowImportingTsExtensions: true,
    verbatimModuleSyntax: false,
    types: ["node"],
  };
  const program = ts.createProgram(
    [...files.map((f) => f.file), join(dir, "code-blocks-prelude.ts")],
    options,
  );
  const errors = ts.getPreEmitDiagnostics(program).map((d) => {
    const f = files.find((x) => x.file === d.file?.fileName);
    const text = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (!f || !d.file || d.start === undefined) return `${d.file?.fileName ?? "?"}: ${text}`;
    const { line } = d.file.getLineAndCharacterOfPosition(d.start);
    const header = d.file.text.split("\n").findIndex((l) => l.startsWith("// ") && l.includes(".md:"));
    return `${f.b.page}:${f.b.line + (line - header)}: ${text}`;
  });
  return { checked: files.length, errors };
}
