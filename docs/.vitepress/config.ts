/**
 * The documentation site: VitePress over the Markdown pages of docs/ as they are in the repository, with
 * local search and the TypeDoc API reference (`make docs` writes it into docs/public/api/, so VitePress
 * copies it into the site and checks every `api/...` link of the guide against its files).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { defineConfig, type DefaultTheme } from "vitepress";

/** Pages written elsewhere appear in the sidebar once their file exists. */
function ifPresent(item: DefaultTheme.SidebarItem & { link: string }): DefaultTheme.SidebarItem[] {
  return existsSync(join(import.meta.dirname, "..", `${item.link.replace(/^\//, "")}.md`)) ? [item] : [];
}

const sidebar: DefaultTheme.SidebarItem[] = [
  {
    text: "Guide",
    items: [
      { text: "Getting started", link: "/getting-started" },
      { text: "Tutorial", link: "/tutorial" },
      { text: "Concepts", link: "/concepts" },
      { text: "Testing your operator", link: "/testing" },
      { text: "Webhooks", link: "/webhooks" },
      { text: "Evolving your API", link: "/evolving-your-api" },
      { text: "Deploying", link: "/deploying" },
      { text: "Observability", link: "/observability" },
      { text: "Troubleshooting and FAQ", link: "/troubleshooting" },
      { text: "Coming from controller-runtime", link: "/controller-runtime" },
    ],
  },
  {
    text: "Reference",
    items: [
      { text: "API reference", link: "/api/index.html", target: "_self" },
      { text: "CLI reference", link: "/cli" },
      { text: "Examples: the seed operators", link: "/examples" },
      { text: "Performance", link: "/performance" },
      ...ifPresent({ text: "Compatibility", link: "/compatibility" }),
      { text: "Architecture", link: "/architecture" },
    ],
  },
];

export default defineConfig({
  title: "opkit",
  description: "Write, test, ship and run Kubernetes operators in TypeScript.",
  // Relative links between pages (`concepts.md`, `api/classes/...html`) resolve the same in the
  // repository and on the site only with .html page URLs.
  cleanUrls: false,
  srcExclude: ["public/**"],
  lastUpdated: false,
  // Without an icon of its own the browser asks for /favicon.ico, and the 404 is a console error.
  head: [["link", { rel: "icon", type: "image/svg+xml", href: "/favicon.svg" }]],
  themeConfig: {
    nav: [
      { text: "Guide", link: "/getting-started" },
      { text: "API", link: "/api/index.html", target: "_self" },
      { text: "CLI", link: "/cli" },
    ],
    sidebar,
    search: { provider: "local" },
    outline: { level: [2, 3] },
  },
  markdown: {
    config(md) {
      // The API reference is TypeDoc's own HTML, not a VitePress page: a link to it must load the page
      // instead of letting the site's router look for a Markdown page of that name.
      const render = md.renderer.rules.link_open;
      md.renderer.rules.link_open = (tokens, idx, options, env: unknown, self) => {
        const token = tokens[idx];
        const href = token?.attrGet("href") ?? "";
        if (/^(\.\/|\/)?api\//.test(href)) token?.attrSet("target", "_self");
        return render ? render(tokens, idx, options, env, self) : self.renderToken(tokens, idx, options);
      };
    },
  },
});
