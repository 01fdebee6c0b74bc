/**
 * The protobuf list decoder on hand-encoded answers: JSON's rules (order, omitempty, zero values, times,
 * negative numbers, bytes), answers split at every byte, and every malformed input refused with
 * ProtobufDecodeError; the client then reads the kind as JSON. protobuf.int.test.ts compares it with the
 * JSON answers of a real server for every kind.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Cache } from "../../cache/cache.ts";
import { KubeClient } from "../client.ts";
import { CORE_V1_DISCOVERY, fakeApiServer } from "../testdata/fake-apiserver.ts";
import { kindRef, type KubeObject } from "../types.ts";
import { ProtobufDecodeError } from "./decode.ts";
import { decodeProtobufStatus, parseProtobufList } from "./list.ts";
import { parseProtobufWatchStream } from "./watch.ts";
import { Readable } from "node:stream";
import { ConnectionError, GoneError, RequestAbortedError } from "../errors.ts";

// A minimal encoder: enough to write the answers the API server sends.
function varint(n: number | bigint): Buffer {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    const b = Number(v & 127n);
    v >>= 7n;
    out.push(v ? b | 128 : b);
  } while (v);
  return Buffer.from(out);
}
const field = (num: number, value: Buffer | string): Buffer => {
  const b = typeof value === "string" ? Buffer.from(value) : value;
  return Buffer.concat([varint((num << 3) | 2), varint(b.length), b]);
};
const num = (n: number, v: number | bigint): Buffer => Buffer.concat([varint(n << 3), varint(v)]);
const msg = (...parts: Buffer[]): Buffer => Buffer.concat(parts);

function answer(apiVersion: string, kind: string, list: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from("k8s\0", "latin1"),
    field(1, msg(field(1, apiVersion), field(2, kind))),
    field(2, list),
    field(3, ""),
    field(4, ""),
  ]);
}

const meta = (name: string, extra: Buffer[] = []): Buffer =>
  msg(field(1, name), field(3, "ns"), field(6, "42"), num(7, 0), field(8, msg(num(1, 1767323045))), ...extra);

const configMaps = answer(
  "v1",
  "ConfigMapList",
  msg(
    field(1, msg(field(2, "99"))),
    // data and binaryData before metadata on the wire; JSON's order is metadata, immutable, data, binaryData.
    field(
      2,
      msg(
        field(2, msg(field(1, "b"), field(2, "x"))),
        field(2, msg(field(1, "a"), field(2, ""))),
        field(3, msg(field(1, "raw"), field(2, Buffer.from([0, 255, 128])))),
        field(1, meta("one", [field(11, msg(field(1, "app"), field(2, "é😀")))])),
      ),
    ),
    field(2, msg(field(1, meta("two")), num(4, 1))),
  ),
);

async function decode(body: Buffer, chunkSize = body.length, omitManagedFields = false, freeze = false) {
  const items: unknown[] = [];
  async function* chunks() {
    for (let i = 0; i < body.length; i += chunkSize) yield body.subarray(i, i + chunkSize);
  }
  const list = await parseProtobufList(chunks(), (o) => items.push(o), { omitManagedFields, freeze });
  return { list, items };
}

/** Every object and array below `value`'s top is frozen, and the top is not. */
function frozenBelowTop(value: object): boolean {
  const below = (v: unknown): boolean =>
    typeof v !== "object" || v === null || (Object.isFrozen(v) && Object.values(v).every(below));
  return !Object.isFrozen(value) && Object.values(value).every(below);
}

describe("protobuf lists", () => {
  it("decodes to the JSON form: JSON's key order, zero values left out as JSON leaves them", async () => {
    const { list, items } = await decode(configMaps);
    assert.deepEqual(list, {
      apiVersion: "v1",
      kind: "ConfigMapList",
      metadata: { resourceVersion: "99" },
      items: [],
    });
    assert.equal(
      JSON.stringify(items),
      JSON.stringify([
        {
          metadata: {
            name: "one",
            namespace: "ns",
            resourceVersion: "42",
            creationTimestamp: "2026-01-02T03:04:05Z",
            labels: { app: "é😀" },
          },
          data: { b: "x", a: "" },
          binaryData: { raw: "AP+A" },
        },
        {
          metadata: {
            name: "two",
            namespace: "ns",
            resourceVersion: "42",
            creationTimestamp: "2026-01-02T03:04:05Z",
          },
          immutable: true,
        },
      ]),
    );
  });

  it("gives the same objects whatever the chunks (every split, down to one byte)", async () => {
    const whole = JSON.stringify((await decode(configMaps)).items);
    for (const size of [1, 2, 3, 5, 8, 13, 64])
      assert.equal(JSON.stringify((await decode(configMaps, size)).items), whole, `chunks of ${size}`);
  });

  it("reads negative and large numbers, pointers to zero, micro times and a zero creation time", async () => {
    const priority = answer(
      "scheduling.k8s.io/v1",
      "PriorityClassList",
      msg(field(2, msg(field(1, msg(field(1, "low"))), num(2, -5), num(3, 0), field(5, "")))),
    );
    // value is not omitempty: -5 sent as a 10-byte varint; a pointer to "" is kept; creationTimestamp
    // (omitzero) absent is left out.
    assert.deepEqual((await decode(priority)).items, [
      { metadata: { name: "low" }, value: -5, preemptionPolicy: "" },
    ]);
    const lease = answer(
      "coordination.k8s.io/v1",
      "LeaseList",
      msg(
        field(
          2,
          msg(
            field(1, msg(field(1, "l"), num(7, 2 ** 53 - 1))),
            field(2, msg(num(2, 0), field(3, msg(num(1, 1767323045), num(2, 123_456_789))), field(4, msg()))),
          ),
        ),
      ),
    );
    assert.deepEqual((await decode(lease)).items, [
      {
        metadata: { name: "l", generation: 2 ** 53 - 1 },
        spec: { leaseDurationSeconds: 0, acquireTime: "2026-01-02T03:04:05.123456Z", renewTime: null },
      },
    ]);
  });

  it("with freeze, freezes all below each item's top, shares sub-objects whose bytes repeat, and decodes the same", async () => {
    const owner = (uid: string): Buffer =>
      field(13, msg(field(5, "apps/v1"), field(1, "ReplicaSet"), field(3, "web"), field(4, uid), num(6, 1)));
    // Items 1 and 2 have the same owner, item 3 another; every item has a label after it, which must be
    // read right whether or not the owner before it was shared.
    const item = (name: string, uid: string): Buffer =>
      field(2, msg(field(1, meta(name, [owner(uid), field(11, msg(field(1, "app"), field(2, name)))]))));
    const body = answer(
      "v1",
      "ConfigMapList",
      msg(item("a", "u1"), item("b", "u1"), item("c", "u2"), item("d", "u2"), item("e", "u1")),
    );
    const open = (await decode(body)).items as KubeObject[];
    for (const size of [1, 7, body.length]) {
      const frozen = (await decode(body, size, false, true)).items as KubeObject[];
      assert.equal(JSON.stringify(frozen), JSON.stringify(open), `chunks of ${size}`);
      for (const o of frozen) assert.ok(frozenBelowTop(o), `${o.metadata.name} frozen below its top only`);
      const refs = frozen.map((o) => o.metadata.ownerReferences?.[0]);
      assert.equal(refs[0], refs[1], "the same bytes: one object");
      assert.equal(refs[2], refs[3]);
      assert.notEqual(refs[1], refs[2]);
      assert.equal(refs[2]?.uid, "u2");
      assert.equal(refs[4]?.uid, "u1");
      assert.deepEqual(
        frozen.map((o) => o.metadata.labels?.app),
        ["a", "b", "c", "d", "e"],
      );
    }
    // The same bytes as another type at the same place: a Container {name: "a"}, then a Volume {name: "a"}.
    const typed = answer(
      "v1",
      "PodList",
      msg(
        field(2, msg(field(1, meta("p1")), field(2, msg(field(2, msg(field(1, "a"))))))),
        field(2, msg(field(1, meta("p2")), field(2, msg(field(1, msg(field(1, "a"))))))),
      ),
    );
    const pods = (await decode(typed, typed.length, false, true)).items as {
      spec: { containers?: unknown[]; volumes?: unknown[] };
    }[];
    assert.deepEqual(pods[1]?.spec.volumes, [{ name: "a" }]);
    assert.notEqual(pods[1]?.spec.volumes?.[0], pods[0]?.spec.containers?.[0]);
    // Without freeze nothing is shared: the caller may change what it gets.
    assert.notEqual(open[0]?.metadata.ownerReferences?.[0], open[1]?.metadata.ownerReferences?.[0]);
    assert.ok(!Object.isFrozen(open[0]?.metadata));
  });

  it("with freeze, decodes any list as without it (property: repeated, shifted, nested sub-messages, other types with the same bytes)", async () => {
    // Items built from a few parts, so that sub-messages repeat at the same place, at another place, and
    // inside one another (a PodSpec's containers, their env, ports and resources).
    const env = fc.constantFrom(
      msg(field(1, "A"), field(2, "1")),
      msg(field(1, "B"), field(3, msg(field(1, msg(field(2, "metadata.name")))))),
      msg(field(1, "A"), field(2, "2")),
    );
    const port = fc.integer({ min: 1, max: 3 }).map((p) => msg(field(1, `p${p}`), num(3, 8000 + p)));
    const container = fc
      .record({
        name: fc.constantFrom("web", "side", "a"),
        env: fc.array(env, { maxLength: 4 }),
        ports: fc.array(port, { maxLength: 2 }),
        cpu: fc.option(fc.constantFrom("100m", "1")),
        emptySecurityContext: fc.boolean(),
      })
      .map((c) =>
        msg(
          field(1, c.name),
          ...c.ports.map((p) => field(6, p)),
          ...c.env.map((e) => field(7, e)),
          // resources: empty when no cpu (zero bytes, as gogo writes an empty struct)
          field(
            8,
            c.cpu === null ? msg() : msg(field(1, msg(field(1, "cpu"), field(2, msg(field(1, c.cpu)))))),
          ),
          ...(c.emptySecurityContext ? [field(15, msg())] : []),
        ),
      );
    // A Volume {name} has a Container {name}'s bytes, and an empty projected source an empty struct's:
    // other types at the same place must not be taken for one another.
    const volume = fc
      .record({ name: fc.constantFrom("a", "web"), projected: fc.boolean() })
      .map((v) => msg(field(1, v.name), ...(v.projected ? [field(2, msg(field(26, msg())))] : [])));
    const pod = fc
      .record({
        name: fc.constantFrom("a", "b", "c"),
        containers: fc.array(container, { minLength: 1, maxLength: 3 }),
        volumes: fc.array(volume, { maxLength: 2 }),
        volumesFirst: fc.boolean(),
      })
      .map((p) => {
        const volumes = p.volumes.map((v) => field(1, v));
        const containers = p.containers.map((c) => field(2, c));
        const spec = p.volumesFirst ? [...volumes, ...containers] : [...containers, ...volumes];
        return field(2, msg(field(1, meta(p.name)), field(2, msg(...spec))));
      });
    await fc.assert(
      fc.asyncProperty(
        fc.array(pod, { maxLength: 8 }),
        fc.integer({ min: 1, max: 64 }),
        async (pods, size) => {
          const body = answer("v1", "PodList", msg(...pods));
          const open = (await decode(body)).items;
          const frozen = (await decode(body, size, false, true)).items as KubeObject[];
          assert.equal(JSON.stringify(frozen), JSON.stringify(open));
          for (const o of frozen) assert.ok(frozenBelowTop(o));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("leaves managedFields out unread when asked", async () => {
    const entry = msg(field(1, "mgr"), field(2, "Update"));
    const body = answer("v1", "ConfigMapList", msg(field(2, msg(field(1, meta("m", [field(17, entry)]))))));
    const kept = (await decode(body)).items[0] as KubeObject;
    assert.deepEqual(kept.metadata.managedFields, [{ manager: "mgr", operation: "Update" }]);
    const cut = (await decode(body, body.length, true)).items[0] as KubeObject;
    assert.equal(cut.metadata.managedFields, undefined);
  });

  it("refuses what the pinned messages do not describe, and malformed answers", async () => {
    const bad = (list: Buffer, kind = "ConfigMapList"): Promise<unknown> => decode(answer("v1", kind, list));
    // A field number a newer server might add.
    await assert.rejects(bad(msg(field(2, msg(field(99, "new"))))), ProtobufDecodeError);
    // A known field with the wrong wire type.
    await assert.rejects(bad(msg(field(2, msg(num(2, 1))))), ProtobufDecodeError);
    // A kind the table does not have.
    await assert.rejects(bad(msg(), "WidgetList"), ProtobufDecodeError);
    // Embedded lengths that overrun their message.
    await assert.rejects(bad(msg(field(2, Buffer.from([0x0a, 0x05, 0x61])))), ProtobufDecodeError);
    // Truncated anywhere: the list ends early.
    for (const cut of [3, 10, configMaps.length - 1])
      await assert.rejects(decode(configMaps.subarray(0, cut)), ProtobufDecodeError, `cut at ${cut}`);
    await assert.rejects(decode(Buffer.from('{"kind":"ConfigMapList"}')), ProtobufDecodeError);
    // A compressed payload is not read.
    const gz = Buffer.concat([
      Buffer.from("k8s\0", "latin1"),
      field(1, msg(field(1, "v1"), field(2, "ConfigMapList"))),
      field(3, "gzip"),
      field(2, msg()),
    ]);
    await assert.rejects(decode(gz), ProtobufDecodeError);
  });

  it("decodes a failure's Status", () => {
    const status = answer(
      "v1",
      "Status",
      msg(field(1, msg()), field(2, "Failure"), field(3, "gone"), field(4, "Expired"), num(6, 410)),
    );
    assert.deepEqual(decodeProtobufStatus(status), {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "gone",
      reason: "Expired",
      code: 410,
    });
    assert.equal(decodeProtobufStatus(Buffer.from("not protobuf")), undefined);
  });
});

describe("protobuf lists: what Go's JSON gives for the same object", () => {
  it("a time at the Unix epoch is that time, not null (only an empty Time message is the zero time)", async () => {
    // metav1.Time/MicroTime: Marshal writes nothing for the zero time only; the epoch is a non-zero time
    // sent as {seconds: 0, nanos: 0}, which Go's JSON writes as "1970-01-01T00:00:00Z".
    const epoch = msg(num(1, 0), num(2, 0));
    const configMaps = answer(
      "v1",
      "ConfigMapList",
      msg(field(2, msg(field(1, msg(field(1, "e"), field(8, epoch)))))),
    );
    assert.equal(
      JSON.stringify((await decode(configMaps)).items),
      JSON.stringify([{ metadata: { name: "e", creationTimestamp: "1970-01-01T00:00:00Z" } }]),
    );
    const leases = answer(
      "coordination.k8s.io/v1",
      "LeaseList",
      msg(field(2, msg(field(1, msg(field(1, "l"))), field(2, msg(field(4, epoch)))))),
    );
    assert.equal(
      JSON.stringify((await decode(leases)).items),
      JSON.stringify([{ metadata: { name: "l" }, spec: { renewTime: "1970-01-01T00:00:00.000000Z" } }]),
    );
  });

  it("a string with invalid UTF-8 (a Go client may write any bytes) is what Go's JSON makes of it", async () => {
    // encoding/json writes one U+FFFD per invalid byte: e2 82 41 is "\ufffd\ufffdA" (Node's decoder: "\ufffdA").
    const configMaps = answer(
      "v1",
      "ConfigMapList",
      msg(
        field(
          2,
          msg(
            field(1, msg(field(1, "u"))),
            field(2, msg(field(1, "a"), field(2, Buffer.from([0xe2, 0x82, 0x41])))),
            field(2, msg(field(1, "b"), field(2, Buffer.from([0xf0, 0x9f, 0x98])))),
            field(
              2,
              msg(field(1, "c"), field(2, Buffer.from([0xed, 0xa0, 0x80, 0xc0, 0xaf, 0x61, 0xc3, 0xa9]))),
            ),
          ),
        ),
      ),
    );
    // (The values of Go's json.Marshal for these bytes.)
    assert.equal(
      JSON.stringify((await decode(configMaps)).items),
      JSON.stringify([
        {
          metadata: { name: "u" },
          data: { a: "\ufffd\ufffdA", b: "\ufffd\ufffd\ufffd", c: "\ufffd\ufffd\ufffd\ufffd\ufffdaé" },
        },
      ]),
    );
  });

  it("a pointer Go's JSON does not omit (no omitempty) is null when nil: a PVC's dataSource.apiGroup", async () => {
    // TypedLocalObjectReference.APIGroup is `*string json:"apiGroup"`; Probe's grpc.service, a scaleIO
    // source's secretRef and 13 more are alike.
    const claims = answer(
      "v1",
      "PersistentVolumeClaimList",
      msg(
        field(
          2,
          msg(
            field(1, msg(field(1, "c"))),
            field(2, msg(field(7, msg(field(2, "PersistentVolumeClaim"), field(3, "src"))))),
          ),
        ),
      ),
    );
    // (Go's json.Marshal of the object.)
    assert.equal(
      JSON.stringify((await decode(claims)).items),
      '[{"metadata":{"name":"c"},"spec":{"resources":{},"dataSource":{"apiGroup":null,"kind":"PersistentVolumeClaim","name":"src"}},"status":{}}]',
    );
  });

  it("a CSR's extra value is a list even when empty (gogo makes each value ExtraValue{}, never nil)", async () => {
    const csrs = answer(
      "certificates.k8s.io/v1",
      "CertificateSigningRequestList",
      msg(
        field(
          2,
          msg(field(1, msg(field(1, "csr"))), field(2, msg(field(6, msg(field(1, "k"), field(2, msg())))))),
        ),
      ),
    );
    assert.equal(
      JSON.stringify((await decode(csrs)).items),
      '[{"metadata":{"name":"csr"},"spec":{"request":null,"signerName":"","extra":{"k":[]}},"status":{}}]',
    );
  });

  it("a map key __proto__ (a valid ConfigMap key) is an own key, as JSON.parse makes it", async () => {
    const configMaps = answer(
      "v1",
      "ConfigMapList",
      msg(
        field(
          2,
          msg(
            field(1, msg(field(1, "p"))),
            field(2, msg(field(1, "__proto__"), field(2, "x"))),
            field(2, msg(field(1, "a"), field(2, "b"))),
          ),
        ),
      ),
    );
    const [item] = (await decode(configMaps)).items;
    assert.deepStrictEqual(item, JSON.parse('{"metadata":{"name":"p"},"data":{"__proto__":"x","a":"b"}}'));
  });
});

describe("KubeClient with protobuf", () => {
  it("asks for protobuf for item-by-item lists of built-in kinds; after an answer it cannot decode, JSON", async () => {
    const srv = await fakeApiServer((req) => {
      if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
      if (String(req.headers.accept).startsWith("application/vnd.kubernetes.protobuf"))
        return (res) => {
          res.writeHead(200, { "content-type": "application/vnd.kubernetes.protobuf" });
          res.end(answer("v1", "ConfigMapList", msg(field(2, msg(field(99, "a field from the future"))))));
        };
      return {
        status: 200,
        body: { kind: "ConfigMapList", apiVersion: "v1", metadata: {}, items: [{ metadata: { name: "a" } }] },
      };
    });
    const client = await KubeClient.fromConfig(
      { server: srv.url, token: "t" },
      { sleep: async () => undefined },
    );
    try {
      const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
      const items: KubeObject[] = [];
      const onItem = (o: KubeObject): number => items.push(o);
      await assert.rejects(client.list(ConfigMaps, { namespace: "ns", onItem }), ProtobufDecodeError);
      await client.list(ConfigMaps, { namespace: "ns", onItem });
      assert.deepEqual(
        items.map((o) => o.metadata.name),
        ["a"],
      );
      // Whole lists (no onItem) and metadata-only lists are JSON.
      await client.list(ConfigMaps, { namespace: "ns" });
      const accepts = srv.requests.filter((r) => r.url !== "/api/v1").map((r) => String(r.headers.accept));
      assert.deepEqual(accepts, [
        "application/vnd.kubernetes.protobuf, application/json",
        "application/json",
        "application/json",
      ]);
    } finally {
      await client.close();
      await srv.close();
    }
  });

  it("an informer whose first list cannot be decoded lists again at once as JSON and syncs: no error, no loop", async () => {
    // A large answer (the decoder stops while most of it is still on its way) with a field from the future
    // in its second object: the body is cut unread, the kind is read as JSON from then on.
    const item = (name: string): Buffer =>
      field(
        2,
        msg(
          field(1, msg(field(1, name), field(3, "ns"), field(6, "5"))),
          field(2, msg(field(1, "k"), field(2, "v".repeat(2000)))),
        ),
      );
    const protobufList = answer(
      "v1",
      "ConfigMapList",
      msg(
        field(1, msg(field(2, "5"))),
        item("a"),
        field(2, msg(field(1, msg(field(1, "b"))), field(99, "new"))),
        ...Array.from({ length: 500 }, (_, i) => item(`c${i}`)),
      ),
    );
    const srv = await fakeApiServer((req) => {
      if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
      if (req.url.includes("watch=true")) return "hang";
      if (String(req.headers.accept).startsWith("application/vnd.kubernetes.protobuf"))
        return (res) => {
          res.writeHead(200, { "content-type": "application/vnd.kubernetes.protobuf" });
          let at = 0;
          const next = (): void => {
            if (res.destroyed) return;
            if (at >= protobufList.length) return void res.end();
            res.write(protobufList.subarray(at, (at += 16 * 1024)));
            setTimeout(next, 2);
          };
          next();
        };
      return {
        status: 200,
        body: {
          kind: "ConfigMapList",
          apiVersion: "v1",
          metadata: { resourceVersion: "5" },
          items: ["a", "b"].map((name) => ({ metadata: { name, namespace: "ns", resourceVersion: "5" } })),
        },
      };
    });
    const client = await KubeClient.fromConfig(
      { server: srv.url, token: "t" },
      { sleep: async () => undefined },
    );
    const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
    const errors: unknown[] = [];
    const cache = new Cache(client, { namespace: "ns", onError: (err) => void errors.push(err) });
    const informer = cache.informer(ConfigMaps);
    cache.start();
    try {
      await cache.waitForSync(10_000);
      assert.deepEqual(
        informer
          .list()
          .map((o) => o.metadata.name)
          .sort(),
        ["a", "b"],
      );
      assert.deepEqual(errors, []);
      const lists = srv.requests.filter(
        (r) => r.url.startsWith("/api/v1/namespaces/ns/configmaps") && !r.url.includes("watch=true"),
      );
      assert.deepEqual(
        lists.map((r) => String(r.headers.accept)),
        ["application/vnd.kubernetes.protobuf, application/json", "application/json"],
      );
    } finally {
      await cache.stop();
      await client.close();
      await srv.close();
    }
  });

  it("never asks for protobuf with protobuf: false", async () => {
    const srv = await fakeApiServer((req) =>
      req.url === "/api/v1"
        ? CORE_V1_DISCOVERY
        : { status: 200, body: { kind: "ConfigMapList", apiVersion: "v1", metadata: {}, items: [] } },
    );
    const off = await KubeClient.fromConfig({ server: srv.url, token: "t" }, { protobuf: false });
    try {
      await off.list(kindRef<KubeObject>("v1", "ConfigMap"), { namespace: "ns", onItem: () => undefined });
      assert.equal(srv.requests.at(-1)?.headers.accept, "application/json");
    } finally {
      await off.close();
      await srv.close();
    }
  });
});

/** A watch frame: a big-endian length and a WatchEvent whose object is a protobuf body of its own. */
function frame(type: string, apiVersion: string, kind: string, object: Buffer): Buffer {
  const event = msg(field(1, type), field(2, msg(field(1, answer(apiVersion, kind, object)))));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(event.length);
  return Buffer.concat([length, event]);
}

const cmObject = (name: string, rv: string, data: Buffer[] = []): Buffer =>
  msg(
    field(1, msg(field(1, name), field(3, "ns"), field(6, rv), num(7, 0), field(8, msg(num(1, 1767323045))))),
    ...data,
  );

const watchBody = Buffer.concat([
  frame("ADDED", "v1", "ConfigMap", cmObject("one", "10", [field(2, msg(field(1, "a"), field(2, "x")))])),
  frame(
    "MODIFIED",
    "v1",
    "ConfigMap",
    cmObject("one", "11", [field(2, msg(field(1, "a"), field(2, "é😀")))]),
  ),
  // A bookmark: an empty object but for its resourceVersion, as the server writes it.
  frame("BOOKMARK", "v1", "ConfigMap", msg(field(1, msg(field(6, "12"), field(8, msg()))))),
  frame("DELETED", "v1", "ConfigMap", cmObject("one", "13")),
]);

const watchEvents = [
  {
    type: "ADDED",
    object: {
      kind: "ConfigMap",
      apiVersion: "v1",
      metadata: {
        name: "one",
        namespace: "ns",
        resourceVersion: "10",
        creationTimestamp: "2026-01-02T03:04:05Z",
      },
      data: { a: "x" },
    },
  },
  {
    type: "MODIFIED",
    object: {
      kind: "ConfigMap",
      apiVersion: "v1",
      metadata: {
        name: "one",
        namespace: "ns",
        resourceVersion: "11",
        creationTimestamp: "2026-01-02T03:04:05Z",
      },
      data: { a: "é😀" },
    },
  },
  {
    type: "BOOKMARK",
    // creationTimestamp is omitzero (k8s.io/apimachinery 0.36): a zero time is left out, as in the JSON stream.
    object: { kind: "ConfigMap", apiVersion: "v1", metadata: { resourceVersion: "12" } },
  },
  {
    type: "DELETED",
    object: {
      kind: "ConfigMap",
      apiVersion: "v1",
      metadata: {
        name: "one",
        namespace: "ns",
        resourceVersion: "13",
        creationTimestamp: "2026-01-02T03:04:05Z",
      },
    },
  },
];

const REQUEST = { method: "GET" as const, path: "/api/v1/configmaps?watch=true" };

async function watchAll(
  body: Buffer,
  chunkSize = body.length,
): Promise<{ events: unknown[]; error?: unknown }> {
  const chunks: Buffer[] = [];
  for (let i = 0; i < body.length; i += chunkSize) chunks.push(body.subarray(i, i + chunkSize));
  const events: unknown[] = [];
  try {
    for await (const ev of parseProtobufWatchStream(Readable.from(chunks), REQUEST)) events.push(ev);
  } catch (error) {
    return { events, error };
  }
  return { events };
}

describe("protobuf watches", () => {
  it("decodes each frame to the JSON stream's event: kind and apiVersion first, bookmarks as JSON has them", async () => {
    const { events, error } = await watchAll(watchBody);
    assert.equal(error, undefined);
    assert.equal(JSON.stringify(events), JSON.stringify(watchEvents));
  });

  it("gives the same events whatever the chunks (every split, down to one byte)", async () => {
    for (const size of [1, 2, 3, 5, 7, 13, 64]) {
      const { events, error } = await watchAll(watchBody, size);
      assert.equal(error, undefined, `chunks of ${size}`);
      assert.equal(JSON.stringify(events), JSON.stringify(watchEvents), `chunks of ${size}`);
    }
  });

  it("throws the typed error of an ERROR event's Status, after the events before it", async () => {
    // Status: 1 metadata, 2 status, 3 message, 4 reason, 6 code.
    const body = Buffer.concat([
      frame("ADDED", "v1", "ConfigMap", cmObject("one", "10")),
      frame(
        "ERROR",
        "v1",
        "Status",
        msg(
          field(1, msg(field(2, "3"))),
          field(2, "Failure"),
          field(3, "too old resource version: 3 (9)"),
          field(4, "Expired"),
          num(6, 410),
        ),
      ),
    ]);
    const { events, error } = await watchAll(body, 5);
    assert.equal(events.length, 1);
    assert.ok(error instanceof GoneError, String(error));
    assert.match(error.message, /too old resource version: 3 \(9\)/);
  });

  it("a field the tables do not describe is a ProtobufDecodeError after the events before it; a cut frame a ConnectionError", async () => {
    const future = Buffer.concat([
      frame("ADDED", "v1", "ConfigMap", cmObject("one", "10")),
      frame("MODIFIED", "v1", "ConfigMap", cmObject("one", "11", [field(99, "from the future")])),
    ]);
    let r = await watchAll(future);
    assert.equal(r.events.length, 1);
    assert.ok(r.error instanceof ProtobufDecodeError, String(r.error));
    const unknownKind = frame("ADDED", "example.com/v1", "Widget", cmObject("w", "1"));
    r = await watchAll(unknownKind);
    assert.ok(r.error instanceof ProtobufDecodeError && /Widget/.test(r.error.message), String(r.error));
    r = await watchAll(watchBody.subarray(0, watchBody.length - 3), 7);
    assert.equal(r.events.length, 3);
    assert.ok(
      r.error instanceof ConnectionError && /ended inside an event/.test(r.error.message),
      String(r.error),
    );
  });

  it("after the caller's abort hands over nothing more, not even the rest of a chunk's events", async () => {
    const ac = new AbortController();
    const events = parseProtobufWatchStream(Readable.from([watchBody]), REQUEST, ac.signal);
    assert.equal(((await events.next()).value as { type: string }).type, "ADDED");
    ac.abort(new Error("stop"));
    await assert.rejects(events.next(), RequestAbortedError);
  });

  it("an informer whose watch cannot be decoded goes on as JSON: no error, no relist, nothing lost", async () => {
    // Three runs: the undecodable frame after a streaming list's initial events (the watch resumes from their
    // bookmark), within them (the initial events are streamed again, as JSON), and in a plain watch after a
    // list (the watch resumes from the last event before the frame).
    const endBookmark = (rv: string): Buffer =>
      frame(
        "BOOKMARK",
        "v1",
        "ConfigMap",
        msg(
          field(
            1,
            msg(
              field(6, rv),
              field(8, msg()),
              field(12, msg(field(1, "k8s.io/initial-events-end"), field(2, "true"))),
            ),
          ),
        ),
      );
    const future = (name: string, rv: string): Buffer =>
      frame("MODIFIED", "v1", "ConfigMap", cmObject(name, rv, [field(99, "from the future")]));
    const jsonEvent = (
      type: string,
      name: string,
      rv: string,
      annotations?: Record<string, string>,
    ): string =>
      JSON.stringify({
        type,
        object: {
          kind: "ConfigMap",
          apiVersion: "v1",
          metadata: { name, namespace: "ns", resourceVersion: rv, annotations },
        },
      }) + "\n";
    for (const mode of ["after sync", "before sync", "plain watch"] as const) {
      const afterSync = mode === "after sync";
      const srv = await fakeApiServer((req) => {
        if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
        if (!req.url.includes("watch=true"))
          return mode === "plain watch"
            ? {
                status: 200,
                body: {
                  kind: "ConfigMapList",
                  apiVersion: "v1",
                  metadata: { resourceVersion: "5" },
                  items: [{ metadata: { name: "a", namespace: "ns", resourceVersion: "5" } }],
                },
              }
            : { status: 500, body: {} };
        const initial = req.url.includes("sendInitialEvents=true");
        return (res) => {
          if (String(req.headers.accept).startsWith("application/vnd.kubernetes.protobuf")) {
            res.writeHead(200, { "content-type": "application/vnd.kubernetes.protobuf;stream=watch" });
            res.write(
              Buffer.concat(
                mode === "plain watch"
                  ? [frame("ADDED", "v1", "ConfigMap", cmObject("b", "6")), future("a", "7")]
                  : afterSync
                    ? [
                        frame("ADDED", "v1", "ConfigMap", cmObject("a", "5")),
                        endBookmark("6"),
                        future("a", "7"),
                      ]
                    : [frame("ADDED", "v1", "ConfigMap", cmObject("a", "5")), future("b", "6")],
              ),
            );
            return;
          }
          res.writeHead(200, { "content-type": "application/json" });
          if (initial)
            res.write(
              jsonEvent("ADDED", "a", "5") +
                jsonEvent("ADDED", "b", "6") +
                jsonEvent("BOOKMARK", "", "6", { "k8s.io/initial-events-end": "true" }),
            );
          else if (req.url.includes("resourceVersion=6&")) res.write(jsonEvent("MODIFIED", "a", "7"));
        };
      });
      const client = await KubeClient.fromConfig(
        { server: srv.url, token: "t" },
        { sleep: async () => undefined },
      );
      const errors: unknown[] = [];
      const cache = new Cache(client, {
        namespace: "ns",
        streamingList: mode !== "plain watch",
        onError: (err) => void errors.push(err),
      });
      const informer = cache.informer(kindRef<KubeObject>("v1", "ConfigMap"));
      cache.start();
      try {
        await cache.waitForSync(10_000);
        const want =
          mode === "after sync" ? ["a 7"] : mode === "before sync" ? ["a 5", "b 6"] : ["a 7", "b 6"];
        for (let i = 0; i < 100; i++) {
          const got = informer.list().map((o) => `${o.metadata.name} ${o.metadata.resourceVersion}`);
          if (JSON.stringify(got.sort()) === JSON.stringify(want)) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        assert.deepEqual(
          informer
            .list()
            .map((o) => `${o.metadata.name} ${o.metadata.resourceVersion}`)
            .sort(),
          want,
        );
        assert.deepEqual(errors, [], mode);
        const watches = srv.requests
          .filter((r) => r.url !== "/api/v1")
          .map(
            (r) =>
              `${String(r.headers.accept).split(",")[0]} ${/resourceVersion=\d+/.exec(r.url)?.[0] ?? "initial"}`,
          );
        assert.deepEqual(
          watches,
          {
            "after sync": [
              "application/vnd.kubernetes.protobuf initial",
              "application/json resourceVersion=6",
            ],
            "before sync": ["application/vnd.kubernetes.protobuf initial", "application/json initial"],
            // The list, then the watch from it, then the JSON watch from the last event delivered.
            "plain watch": [
              "application/vnd.kubernetes.protobuf initial",
              "application/vnd.kubernetes.protobuf resourceVersion=5",
              "application/json resourceVersion=6",
            ],
          }[mode],
          mode,
        );
      } finally {
        await cache.stop();
        await client.close();
        await srv.close();
      }
    }
  });

  it("ends the watch with a ConnectionError at a frame declared larger than 16 MiB, reading none of it", async () => {
    const huge = Buffer.alloc(4);
    huge.writeUInt32BE(0xffffffff);
    const r = await watchAll(
      Buffer.concat([frame("ADDED", "v1", "ConfigMap", cmObject("one", "10")), huge, Buffer.alloc(64)]),
    );
    assert.equal(r.events.length, 1);
    assert.ok(
      r.error instanceof ConnectionError && /larger than 16777216 bytes/.test(r.error.message),
      String(r.error),
    );
  });

  it("KubeClient asks for protobuf watches of built-in kinds, follows a JSON answer, and reads a kind as JSON after a frame it cannot decode", async () => {
    let served = 0;
    const srv = await fakeApiServer((req) => {
      if (req.url === "/api/v1") return CORE_V1_DISCOVERY;
      if (String(req.headers.accept).startsWith("application/vnd.kubernetes.protobuf") && served++ === 0)
        return (res) => {
          res.writeHead(200, { "content-type": "application/vnd.kubernetes.protobuf;stream=watch" });
          res.end(
            Buffer.concat([
              frame("ADDED", "v1", "ConfigMap", cmObject("one", "10")),
              frame("MODIFIED", "v1", "ConfigMap", cmObject("one", "11", [field(99, "from the future")])),
            ]),
          );
        };
      // Any other request: a JSON stream (as a server without protobuf for the resource answers).
      return (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            type: "MODIFIED",
            object: { kind: "ConfigMap", apiVersion: "v1", metadata: { name: "one", resourceVersion: "11" } },
          }) + "\n",
        );
      };
    });
    const client = await KubeClient.fromConfig(
      { server: srv.url, token: "t" },
      { sleep: async () => undefined },
    );
    try {
      const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
      const seen: string[] = [];
      await assert.rejects(async () => {
        for await (const ev of await client.watch(ConfigMaps, { namespace: "ns" }))
          seen.push(`${ev.type} ${ev.object.metadata.resourceVersion}`);
      }, ProtobufDecodeError);
      assert.deepEqual(seen, ["ADDED 10"]);
      // From then on JSON: asked for, and read.
      for await (const ev of await client.watch(ConfigMaps, { namespace: "ns", resourceVersion: "10" }))
        seen.push(`${ev.type} ${ev.object.metadata.resourceVersion}`);
      assert.deepEqual(seen, ["ADDED 10", "MODIFIED 11"]);
      // Metadata-only watches are never protobuf; a kind the tables lack neither.
      for await (const ev of await client.watch(ConfigMaps, { namespace: "ns", metadataOnly: true })) void ev;
      const accepts = srv.requests.filter((r) => r.url !== "/api/v1").map((r) => String(r.headers.accept));
      assert.deepEqual(accepts, [
        "application/vnd.kubernetes.protobuf, application/json",
        "application/json",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
      ]);
      // A fresh client asks protobuf again and follows the JSON it gets.
      const other = await KubeClient.fromConfig(
        { server: srv.url, token: "t" },
        { sleep: async () => undefined },
      );
      try {
        const got: string[] = [];
        for await (const ev of await other.watch(ConfigMaps, { namespace: "ns" }))
          got.push(ev.object.metadata.name ?? "");
        assert.deepEqual(got, ["one"]);
        assert.equal(
          srv.requests.at(-1)?.headers.accept,
          "application/vnd.kubernetes.protobuf, application/json",
        );
      } finally {
        await other.close();
      }
    } finally {
      await client.close();
      await srv.close();
    }
  });
});
