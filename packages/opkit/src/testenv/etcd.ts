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
