/**
 * Which proxy a request to the API server goes through, with client-go's rules: the cluster's
 * `proxy-url` when set; otherwise `HTTPS_PROXY` (or `HTTP_PROXY` for an http server) unless `NO_PROXY`
 * exempts the host; never for localhost and loopback addresses.
 */
import { BlockList, isIP } from "node:net";

/**
 * The proxy URL for `server`, or undefined for a direct connection. `env` is consulted only when the
 * cluster names no proxy of its own; upper-case variables win over lower-case ones, as in Go.
 */
export function proxyFor(
  server: URL,
  proxyUrl: string | undefined,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  if (proxyUrl) return proxyUrl;
  const fromEnv =
    server.protocol === "https:" ? (env.HTTPS_PROXY ?? env.https_proxy) : (env.HTTP_PROXY ?? env.http_proxy);
  if (!fromEnv) return undefined;
  const host = hostOf(server);
  if (host === "localhost" || isLoopback(host)) return undefined;
  if (noProxyMatches(env.NO_PROXY ?? env.no_proxy ?? "", host, portOf(server))) return undefined;
  // "proxy.example:3128" is taken as http, as Go does.
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(fromEnv) ? fromEnv : `http://${fromEnv}`;
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

function portOf(url: URL): string {
  return url.port || (url.protocol === "https:" ? "443" : "80");
}

function isLoopback(host: string): boolean {
  const family = isIP(host);
  if (family === 4) return host.startsWith("127.");
  if (family === 6) return host === "::1";
  return false;
}

/**
 * Go's NO_PROXY: comma-separated entries; `*` matches everything; an IP or a CIDR matches addresses;
 * `example.com` matches it and its subdomains, `.example.com` (or `*.example.com`) only subdomains;
 * an entry with `:port` matches only that port.
 */
export function noProxyMatches(noProxy: string, host: string, port: string): boolean {
  const ipFamily = isIP(host);
  for (const raw of noProxy.split(",")) {
    let entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === "*") return true;
    if (entry.includes("/")) {
      if (ipFamily && cidrContains(entry, host, ipFamily)) return true;
      continue;
    }
    let entryPort: string | undefined;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      entry = bracketed[1] ?? "";
      entryPort = bracketed[2];
    } else if (!isIP(entry)) {
      const colon = entry.lastIndexOf(":");
      if (colon > 0 && /^\d+$/.test(entry.slice(colon + 1))) {
        entryPort = entry.slice(colon + 1);
        entry = entry.slice(0, colon);
      }
    }
    if (entryPort && entryPort !== port) continue;
    if (isIP(entry)) {
      if (ipFamily && sameAddress(entry, host)) return true;
      continue;
    }
    if (entry.startsWith("*.")) entry = entry.slice(1);
    if (entry.startsWith(".")) {
      if (host.endsWith(entry)) return true;
    } else if (host === entry || host.endsWith(`.${entry}`)) return true;
  }
  return false;
}

function cidrContains(cidr: string, host: string, family: number): boolean {
  const [net, bits] = cidr.split("/");
  const prefix = Number(bits);
  const netFamily = isIP(net ?? "");
  if (!net || !netFamily || netFamily !== family || !Number.isInteger(prefix)) return false;
  const list = new BlockList();
  try {
    list.addSubnet(net, prefix, family === 4 ? "ipv4" : "ipv6");
  } catch {
    return false;
  }
  return list.check(host, family === 4 ? "ipv4" : "ipv6");
}

function sameAddress(a: string, b: string): boolean {
  const family = isIP(a);
  if (family !== isIP(b)) return false;
  const list = new BlockList();
  list.addAddress(a, family === 4 ? "ipv4" : "ipv6");
  return list.check(b, family === 4 ? "ipv4" : "ipv6");
}
