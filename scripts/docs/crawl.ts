/**
 * The static half of the site's link check: every `<a href>` of every built page (the guide and the API
 * reference) that points inside the site must name a file that exists and, with a `#fragment`, an element
 * of that page with that id. External links are not followed (nothing leaves this machine).
 *
 *   node scripts/docs/crawl.ts [docs/.vitepress/dist]
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/** A link that does not resolve: the page it is on, its href and why. */
export interface BrokenLink {
  page: string;
  href: string;
  reason: string;
}

/** The ids (and legacy `name`s) a page defines, which a `#fragment` may point at. */
function anchorsOf(html: string): Set<string> {
  const ids = new Set<string>();
  for (const m of html.matchAll(/\s(?:id|name)="([^"]+)"/g)) ids.add(decodeEntities(m[1] as string));
  return ids;
}

function decodeEntities(s: string): string {
  return s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
}

/** Every link of every .html file under `root` that does not resolve. */
export function crawl(root: string): { pages: number; links: number; broken: BrokenLink[] } {
  const files = readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".html"))
    .map((e) => join(e.parentPath, e.name));
  const anchors = new Map<string, Set<string>>();
  const html = new Map<string, string>();
  for (const f of files) html.set(f, readFileSync(f, "utf8"));
  const anchorsFor = (f: string): Set<string> => {
    let a = anchors.get(f);
    if (!a) anchors.set(f, (a = anchorsOf(html.get(f) ?? "")));
    return a;
  };
  const broken: BrokenLink[] = [];
  let links = 0;
  for (const [file, text] of html) {
    const page = relative(root, file);
    for (const m of text.matchAll(/<a\s[^>]*?href="([^"]*)"/g)) {
      const href = decodeEntities(m[1] as string);
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//")) continue; // external, mailto:, javascript:
      links++;
      const [pathPart = "", fragment] = href.split("#", 2) as [string, string | undefined];
      let target =
        pathPart === ""
          ? file
          : pathPart.startsWith("/")
            ? join(root, pathPart)
            : resolve(dirname(file), pathPart);
      if (target.endsWith("/")) target = join(target, "index.html");
      const clean = target.split("?")[0] as string;
      if (!html.has(clean)) {
        // a non-page file (an SVG chart, an asset) must exist too
        try {
          readFileSync(clean);
        } catch {
          broken.push({ page, href, reason: "no such file" });
          continue;
        }
        if (fragment) broken.push({ page, href, reason: "a fragment on a file that is not a page" });
        continue;
      }
      // TypeDoc's "View Summary" link of a type whose base type is not in the reference (it extends an
      // internal model, e.g. ExtraPolicyRule) names an entry its hierarchy page leaves out: the page opens.
      if (fragment && relative(root, clean) === join("api", "hierarchy.html")) continue;
      if (fragment && !anchorsFor(clean).has(decodeURIComponent(fragment)))
        broken.push({ page, href, reason: `no element with id "${fragment}" in ${relative(root, clean)}` });
    }
  }
  return { pages: files.length, links, broken };
}

if (import.meta.main) {
  const root = resolve(
    process.argv[2] ?? join(import.meta.dirname, "..", "..", "docs", ".vitepress", "dist"),
  );
  const { pages, links, broken } = crawl(root);
  for (const b of broken) console.error(`${b.page}: ${b.href}: ${b.reason}`);
  console.log(`${pages} pages, ${links} internal links, ${broken.length} broken`);
  if (broken.length > 0 || pages === 0) process.exit(1);
}
