/**
 * REST mapping from discovery: apiVersion + kind → resource name, scope and verbs. Each group-version's
 * resource list is cached; a kind missing from the cache triggers one refresh of its group-version, so a
 * CRD installed after start becomes usable without a restart.
 */
import { NotFoundError, UnknownKindError } from "./errors.ts";
import { raceAbort, type Transport } from "./transport.ts";
import { registerKind } from "./scopes.ts";

/** Where a kind lives in the API: its resource, scope, verbs and subresources. */
export interface ResourceMapping {
  /** "group/version", or "v1" for the core group. */
  apiVersion: string;
  /** The API group; "" for the core group. */
  group: string;
  /** The version within the group. */
  version: string;
  /** The kind name. */
  kind: string;
  /** Plural resource name, e.g. "deployments". */
  resource: string;
  /** Whether objects of the kind live in a namespace. */
  namespaced: boolean;
  /** The verbs the server allows on the resource (get, list, watch, patch, ...). */
  verbs: string[];
  /** The subresources the server serves, e.g. ["status", "scale"]. */
  subresources: string[];
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

interface ApiResourceList {
  groupVersion: string;
  resources: ApiResource[];
}

/** Refresh a group-version at most this often when asked for an unknown kind, so typos do not hammer discovery. */
const MIN_REFRESH_MS = 1_000;

/** apiVersion + kind → ResourceMapping, from discovery, cached per group-version. */
export class RestMapper {
  private readonly transport: Transport;
  private readonly byGroupVersion = new Map<string, { at: number; mappings: Map<string, ResourceMapping> }>();
  private readonly inflight = new Map<string, Promise<Map<string, ResourceMapping>>>();

  constructor(transport: Transport) {
    this.transport = transport;
  }

  /**
   * The mapping of a kind. `signal` stops the caller's wait; a discovery request shared with other
   * callers goes on for them.
   */
  async mapping(apiVersion: string, kind: string, signal?: AbortSignal): Promise<ResourceMapping> {
    const cached = this.byGroupVersion.get(apiVersion);
    const hit = cached?.mappings.get(kind);
    if (hit) return hit;
    const info = { method: "GET", path: discoveryPath(apiVersion) };
    // A kind we did not know may have just been installed: look again, but at most once a second so a
    // misspelt kind cannot hammer discovery.
    const age = cached ? Date.now() - cached.at : MIN_REFRESH_MS;
    if (age < MIN_REFRESH_MS) await this.transport.pause(MIN_REFRESH_MS - age, signal, info);
    const fresh = await raceAbort(this.refresh(apiVersion), signal, info);
    const found = fresh.get(kind);
    if (!found) {
      throw new UnknownKindError(
        apiVersion,
        kind,
        "not in discovery (install its CRD, or check the kind's spelling)",
      );
    }
    return found;
  }

  /** Forget everything (e.g. after CRDs were removed). */
  invalidate(apiVersion?: string): void {
    if (apiVersion) this.byGroupVersion.delete(apiVersion);
    else this.byGroupVersion.clear();
  }

  private refresh(apiVersion: string): Promise<Map<string, ResourceMapping>> {
    const running = this.inflight.get(apiVersion);
    if (running) return running;
    const p = this.load(apiVersion).finally(() => this.inflight.delete(apiVersion));
    this.inflight.set(apiVersion, p);
    return p;
  }

  private async load(apiVersion: string): Promise<Map<string, ResourceMapping>> {
    const path = discoveryPath(apiVersion);
    let list: ApiResourceList;
    try {
      list = await this.transport.request<ApiResourceList>({ method: "GET", path });
    } catch (err) {
      if (err instanceof NotFoundError) {
        this.byGroupVersion.set(apiVersion, { at: Date.now(), mappings: new Map() });
        throw new UnknownKindError(apiVersion, "*", `group-version ${apiVersion} is not served`);
      }
      throw err;
    }
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/", 2) : ["", apiVersion];
    const subresources = new Map<string, string[]>();
    for (const r of list.resources) {
      const slash = r.name.indexOf("/");
      if (slash > 0) {
        const parent = r.name.slice(0, slash);
        subresources.set(parent, [...(subresources.get(parent) ?? []), r.name.slice(slash + 1)]);
      }
    }
    const mappings = new Map<string, ResourceMapping>();
    for (const r of list.resources) {
      if (r.name.includes("/")) continue;
      registerKind(
        { apiVersion, kind: r.kind },
        { resource: r.name, scope: r.namespaced ? "Namespaced" : "Cluster" },
      );
      mappings.set(r.kind, {
        apiVersion,
        group: group ?? "",
        version: version ?? apiVersion,
        kind: r.kind,
        resource: r.name,
        namespaced: r.namespaced,
        verbs: r.verbs ?? [],
        subresources: subresources.get(r.name) ?? [],
      });
    }
    this.byGroupVersion.set(apiVersion, { at: Date.now(), mappings });
    return mappings;
  }
}

function discoveryPath(apiVersion: string): string {
  return apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

/** The URL path of a collection or an object. */
export function resourcePath(
  m: ResourceMapping,
  namespace?: string,
  name?: string,
  subresource?: string,
): string {
  const prefix = m.group ? `/apis/${m.group}/${m.version}` : `/api/${m.version}`;
  const ns = m.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  let p = `${prefix}${ns}/${m.resource}`;
  if (name !== undefined) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}
