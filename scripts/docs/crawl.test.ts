/** The static link check finds a missing page and a missing anchor, and passes good links. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crawl } from "./crawl.ts";

test("crawl reports links to missing pages and anchors, and only those", (t) => {
  const root = mkdtempSync(join(tmpdir(), "opkit-crawl-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, "api", "classes"), { recursive: true });
  writeFileSync(
    join(root, "api", "classes", "M.html"),
    '<h1 id="top">M</h1><a href="../../index.html#intro">up</a>',
  );
  writeFileSync(join(root, "chart.svg"), "<svg/>");
  writeFileSync(
    join(root, "index.html"),
    [
      '<h2 id="intro">Intro</h2>',
      '<a href="api/classes/M.html#top">ok</a>',
      '<a href="#intro">ok</a>',
      '<a href="/chart.svg">ok</a>',
      '<a href="https://example.com/x">external</a>',
      '<a href="api/classes/N.html">missing page</a>',
      '<a class="x" href="api/classes/M.html#nope">missing anchor</a>',
    ].join("\n"),
  );
  const { pages, links, broken } = crawl(root);
  assert.equal(pages, 2);
  assert.equal(links, 6);
  assert.deepEqual(
    broken.map((b) => `${b.page} ${b.href}`),
    ["index.html api/classes/N.html", "index.html api/classes/M.html#nope"],
  );
});
