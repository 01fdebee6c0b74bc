/**
 * etcd maintenance through its HTTP/JSON gateway: compaction and defragmentation, for the fault hook that
 * makes watches on old resource versions get 410 Gone.
 */
import { request } from "undici";

/**
 * Compact etcd at `clientPort` to its current revision and defragment it; returns the revision.
 * Compacting again without writes in between is not an error.
 */
export async function compactEtcd(clientPort: number): Promise<{ revision: number }> {
  const base = `http://127.0.0.1:${clientPort}`;
  const post = async (path: string, body: unknown): Promise<Record<string, unknown>> => {
    const res = await request(base + path, { method: "POST", body: JSON.stringify(body) });
    const json = (await res.body.json()) as Record<string, unknown>;
    if (res.statusCode !== 200) throw new Error(`etcd ${path}: ${res.statusCode} ${JSON.stringify(json)}`);
    return json;
  };
  // A range over one key is the cheapest way to read the current revision from the response header.
  const status = (await post("/v3/kv/range", { key: Buffer.from("/").toString("base64"), limit: 1 })) as {
    header?: { revision?: string };
  };
  const revision = Number(status.header?.revision ?? 0);
  try {
    await post("/v3/kv/compaction", { revision: String(revision), physical: true });
  } catch (err) {
    // Nothing was written since the last compaction: already compacted to this revision.
    if (!String(err).includes("required revision has been compacted")) throw err;
  }
  await post("/v3/maintenance/defragment", {});
  return { revision };
}

/** One key of etcd and its value: parsed JSON where the API server stored JSON (custom resources), else undefined. */
export interface StoredEntry {
  /** The etcd key, e.g. `/registry/example.com/widgets/ns/name`. */
  key: string;
  /** The stored object as JSON, or undefined when it is not JSON (built-in kinds are stored as protobuf). */
  value: unknown;
}

/**
 * Every key under `prefix` with its stored value, read straight from etcd: what the API server really
 * stored, e.g. the version a custom resource is stored in (its `apiVersion`), which no API read shows.
 */
export async function readEtcdPrefix(clientPort: number, prefix: string): Promise<StoredEntry[]> {
  const key = Buffer.from(prefix);
  const end = Buffer.from(key);
  end[end.length - 1] = (end[end.length - 1] ?? 0) + 1; // the first key after every key with the prefix
  const res = await request(`http://127.0.0.1:${clientPort}/v3/kv/range`, {
    method: "POST",
    body: JSON.stringify({ key: key.toString("base64"), range_end: end.toString("base64") }),
  });
  const json = (await res.body.json()) as { kvs?: { key: string; value?: string }[] };
  if (res.statusCode !== 200)
    throw new Error(`etcd range ${prefix}: ${res.statusCode} ${JSON.stringify(json)}`);
  return (json.kvs ?? []).map((kv) => {
    const text = Buffer.from(kv.value ?? "", "base64").toString("utf8");
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = undefined;
    }
    return { key: Buffer.from(kv.key, "base64").toString("utf8"), value };
  });
}
