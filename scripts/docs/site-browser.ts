/**
 * `make test-docs`: the built documentation site (docs/.vitepress/dist, from `make docs`) in a real
 * browser. It serves the folder on loopback and drives the system Chromium (/usr/bin/chromium, Debian's
 * package; nothing is downloaded) with playwright-core, in a new empty profile:
 *
 * - every guide page loads with no console error and no uncaught exception;
 * - every internal link of the guide pages (to another page, an anchor, the API reference, a chart) opens
 *   with status 200, and its #fragment names an element of the page it opens;
 * - the search box finds "finalizer" and "shard";
 * - the API page of Manager opens by clicking its link in Concepts.
 *
 *   node --test scripts/docs/site-browser.ts
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

const dist = join(import.meta.dirname, "..", "..", "docs", ".vitepress", "dist");
const CHROMIUM = process.env["CHROMIUM"] ?? "/usr/bin/chromium";
/** No GPU, sandbox, QUIC or background traffic: a headless browser that talks only to the loopback server. */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The one DOM call made in the page (the scripts' tsconfig has Node's types, not the DOM's). */
interface Browser {
  document: { getElementById(id: string): unknown };
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript",
  ".css": "text/css",
  ".svg": "image/svg+xml",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".png": "image/png",
  ".ico": "image/x-icon",
};

let server: Server;
let base: string;
let context: BrowserContext;
let profile: string;

/** A static file server of dist/ (404 for anything outside it or missing). */
function serve(): Promise<string> {
  server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
    let file = join(dist, path);
    if (!file.startsWith(dist)) file = join(dist, "404.html");
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, "index.html");
    if (!existsSync(file)) {
      res.writeHead(404, { "content-type": "text/html" }).end(readFileSync(join(dist, "404.html")));
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`),
    ),
  );
}

/** The guide's pages: the .html files at the top of dist/ (the API reference is under api/). */
const guidePages = readdirSync(dist).filter((f) => f.endsWith(".html") && f !== "404.html");

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: make test-docs installs Debian's chromium`);
  assert.ok(guidePages.length > 5, `no built site in ${dist}: run make docs first`);
  base = await serve();
  profile = mkdtempSync(join(tmpdir(), "opkit-docs-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
  });
});

after(async () => {
  await context?.close();
  server?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** Opens a URL, collecting console errors and uncaught exceptions while it loads. */
async function open(page: Page, url: string, settle = true): Promise<{ status: number; errors: string[] }> {
  const errors: string[] = [];
  const onConsole = (m: { type(): string; text(): string; location(): unknown }): void => {
    if (m.type() === "error") errors.push(`${m.text()} (${JSON.stringify(m.location())})`);
  };
  const onError = (e: Error): void => void errors.push(e.message);
  page.on("console", onConsole);
  page.on("pageerror", onError);
  try {
    const response = await page.goto(url, { waitUntil: "load" });
    if (settle) await page.waitForLoadState("networkidle"); // late errors of the page's scripts too
    return { status: response?.status() ?? 0, errors };
  } finally {
    page.off("console", onConsole);
    page.off("pageerror", onError);
  }
}

test("every guide page loads with no console error, and every internal link and anchor on it resolves", async () => {
  const page = await context.newPage();
  // Each linked document is opened once, then every #fragment linked on it is looked up there.
  const links = new Map<string, Map<string, string>>(); // document URL -> fragment -> the page linking it
  let count = 0;
  for (const file of guidePages) {
    const { status, errors } = await open(page, base + file);
    assert.equal(status, 200, file);
    assert.deepEqual(errors, [], `console errors on ${file}`);
    const hrefs = await page.$$eval("a[href]", (as) =>
      as.map((a) => (a as unknown as { href: string }).href),
    );
    for (const href of hrefs) {
      if (!href.startsWith(base)) continue;
      const url = new URL(href);
      const fragment = decodeURIComponent(url.hash.slice(1));
      url.hash = "";
      const fragments = links.get(url.href) ?? new Map<string, string>();
      links.set(url.href, fragments);
      if (!fragments.has(fragment)) count++;
      fragments.set(fragment, fragments.get(fragment) ?? file);
    }
  }
  const broken: string[] = [];
  for (const [doc, fragments] of links) {
    const { status } = await open(page, doc, false);
    if (status !== 200) {
      broken.push(`${doc}: status ${status} (linked from ${[...new Set(fragments.values())].join(", ")})`);
      continue;
    }
    for (const [id, from] of fragments)
      if (
        id &&
        !(await page.evaluate(
          (i) => (globalThis as unknown as Browser).document.getElementById(i) !== null,
          id,
        ))
      )
        broken.push(`${from}: ${doc}#${id}: no element with that id`);
  }
  await page.close();
  assert.deepEqual(broken, [], `${broken.length} of ${count} internal links do not resolve`);
  assert.ok(count > 100, `only ${count} internal links found`);
});

for (const word of ["finalizer", "shard"]) {
  test(`the search box finds "${word}"`, async () => {
    const page = await context.newPage();
    await open(page, `${base}index.html`);
    await page.click("button.DocSearch-Button");
    await page.fill("#localsearch-input", word);
    const first = page.locator(".VPLocalSearchBox .results li").first();
    await first.waitFor({ timeout: 10_000 });
    const text = (await page.locator(".VPLocalSearchBox .results").innerText()).toLowerCase();
    assert.ok(text.includes(word), `the results do not mention ${word}: ${text.slice(0, 200)}`);
    await page.close();
  });
}

test("the API page of Manager opens from its link in Concepts", async () => {
  const page = await context.newPage();
  await open(page, `${base}concepts.html`);
  await Promise.all([
    page.waitForURL(/api\/classes\/opkit\.Manager\.html$/),
    page.locator('a[href="api/classes/opkit.Manager.html"]').first().click(),
  ]);
  await page.waitForLoadState("load");
  assert.match(await page.locator("h1").first().innerText(), /Manager/);
  await page.close();
});
