/**
 * A protobuf list answer parsed as it arrives, as liststream.ts does for JSON: each object is decoded as
 * soon as its last byte is in, never holding the whole body.
 *
 * The body is `k8s\0` and a runtime.Unknown message: its typeMeta (the list's apiVersion and kind), its raw
 * bytes (the list message: field 1 the ListMeta, field 2 each object) and the raw bytes' content type and
 * encoding. The raw field is entered without waiting for its end; every other length-delimited field is
 * read whole.
 */
import {
  ProtobufDecodeError,
  kindDecoder,
  protobufMessage,
  type KindDecoder,
  decodeTable,
} from "./decode.ts";
import { STATUS } from "./messages.ts";

/** The media type of Kubernetes protobuf. */
export const PROTOBUF = "application/vnd.kubernetes.protobuf";

/** What every protobuf object and list begins with. */
export const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"

/**
 * Bytes received and not yet consumed, as the chunks they came in (a watch body hands over batches of the
 * server's 4 KiB writes, joined: see typedErrors). `consume` lets a list's objects be read where they lie,
 * without a Buffer view made for each; only one that straddles two chunks is joined.
 */
export class Bytes {
  private chunks: Buffer[] = [];
  /** The buffer the last `consume` points into. */
  private current: Buffer = Buffer.alloc(0);
  /** Bytes in `chunks`, and how many of the first chunk are consumed. */
  private size = 0;
  private offset = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  get available(): number {
    return this.size - this.offset;
  }

  /** The varint at the head and its length in bytes, without consuming it; undefined when incomplete. */
  peekVarint(skip = 0): { value: number; length: number } | undefined {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.byteAt(skip + i);
      if (b === undefined) return undefined;
      value += (b & 127) * scale;
      if (b < 128) return { value, length: i + 1 };
      scale *= 128;
    }
    throw new ProtobufDecodeError("a varint longer than 10 bytes");
  }

  /** The big-endian uint32 at the head (a watch frame's length), without consuming it; undefined when incomplete. */
  peekUint32(): number | undefined {
    if (this.available < 4) return undefined;
    return (
      (this.byteAt(0) as number) * 0x1000000 +
      (((this.byteAt(1) as number) << 16) | ((this.byteAt(2) as number) << 8) | (this.byteAt(3) as number))
    );
  }

  private byteAt(i: number): number | undefined {
    let at = this.offset + i;
    for (const c of this.chunks) {
      if (at < c.length) return c[at];
      at -= c.length;
    }
    return undefined;
  }

  /** The buffer that the offsets `consume` returns point into. */
  get buffer(): Buffer {
    return this.current;
  }

  /**
   * Consumes the next `n` bytes and returns where they start in `buffer`: in place when they lie in one
   * chunk, else in a buffer joined for them.
   */
  consume(n: number): number {
    const first = this.chunks[0];
    if (first === undefined || this.offset + n > first.length) {
      this.current = this.take(n);
      return 0;
    }
    const at = this.offset;
    this.current = first;
    this.offset += n;
    if (this.offset === first.length) {
      this.chunks.shift();
      this.size -= first.length;
      this.offset = 0;
    }
    return at;
  }

  /** The next `n` bytes, consumed: a view when they lie in one chunk, else joined once. */
  take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    if (n > this.available) throw new RangeError(`${n} bytes asked, ${this.available} available`);
    const first = this.chunks[0] as Buffer;
    let out: Buffer;
    if (this.offset + n <= first.length) {
      out = first.subarray(this.offset, this.offset + n);
      this.offset += n;
    } else {
      const parts: Buffer[] = [first.subarray(this.offset)];
      let have = first.length - this.offset;
      this.chunks.shift();
      this.size -= first.length;
      this.offset = 0;
      while (have < n) {
        const c = this.chunks[0] as Buffer;
        const want = n - have;
        if (c.length <= want) {
          parts.push(c);
          have += c.length;
          this.chunks.shift();
          this.size -= c.length;
        } else {
          parts.push(c.subarray(0, want));
          have += want;
          this.offset = want;
        }
      }
      out = Buffer.concat(parts, n);
    }
    while (this.chunks.length > 0 && this.offset >= (this.chunks[0] as Buffer).length) {
      this.size -= (this.chunks.shift() as Buffer).length;
      this.offset = 0;
    }
    return out;
  }
}

/** The length-delimited fields of a small message held whole (`what` names it in errors): number → bytes. */
export function lengthFields(b: Buffer, what: string): Map<number, Buffer> {
  const bytes = new Bytes();
  bytes.push(b);
  const out = new Map<number, Buffer>();
  while (bytes.available > 0) {
    const tag = bytes.peekVarint();
    const len = tag && bytes.peekVarint(tag.length);
    if (!tag || !len || bytes.available < tag.length + len.length + len.value)
      throw new ProtobufDecodeError(`${what} ends early`);
    if ((tag.value & 7) !== 2) throw new ProtobufDecodeError(`unexpected field in ${what}`);
    bytes.consume(tag.length + len.length);
    out.set(tag.value >>> 3, bytes.take(len.value));
  }
  return out;
}

/** The string fields of a small message read whole (typeMeta: apiVersion 1, kind 2). */
export function stringFields(b: Buffer): Map<number, string> {
  const out = new Map<number, string>();
  for (const [num, value] of lengthFields(b, "a type header")) out.set(num, value.toString("utf8"));
  return out;
}

/**
 * Parse a protobuf list body given chunk by chunk: `onItem` gets each object in order (without apiVersion
 * and kind, as in a JSON list); the result is the list with an empty `items` array. Throws
 * ProtobufDecodeError on anything the pinned messages do not describe.
 */
export async function parseProtobufList<L extends { items: unknown[] }>(
  chunks: AsyncIterable<unknown>,
  onItem: (item: L["items"][number]) => void,
  opts: { omitManagedFields?: boolean; freeze?: boolean } = {},
): Promise<L> {
  const omit = opts.omitManagedFields ?? false;
  const freeze = opts.freeze ?? false;
  const bytes = new Bytes();
  const table = decodeTable();
  let magic = false;
  let apiVersion = "";
  let listKind = "";
  let decoder: KindDecoder | undefined;
  let metadata: Record<string, unknown> = {};
  /** Bytes of the list message (the envelope's raw field) not yet consumed; -1 outside it. */
  let rawLeft = -1;
  let rawDone = false;

  const step = (): boolean => {
    if (!magic) {
      if (bytes.available < 4) return false;
      if (!bytes.take(4).equals(MAGIC)) throw new ProtobufDecodeError("not a Kubernetes protobuf answer");
      magic = true;
    }
    const tag = bytes.peekVarint();
    if (!tag) return false;
    const len = bytes.peekVarint(tag.length);
    if (!len) return false;
    const header = tag.length + len.length;
    if (rawLeft < 0) {
      // A field of the envelope.
      if ((tag.value & 7) !== 2) throw new ProtobufDecodeError("unexpected field in the envelope");
      if (tag.value >>> 3 === 2) {
        if (rawDone) throw new ProtobufDecodeError("two lists in one answer");
        bytes.consume(header);
        rawLeft = len.value;
        rawDone = true;
        decoder = listDecoder(apiVersion, listKind);
        if (rawLeft === 0) rawLeft = -1;
        return true;
      }
      if (bytes.available < header + len.value) return false;
      bytes.consume(header);
      const body = bytes.take(len.value);
      const field = tag.value >>> 3;
      if (field === 1) {
        const typeMeta = stringFields(body);
        apiVersion = typeMeta.get(1) ?? "";
        listKind = typeMeta.get(2) ?? "";
      } else if (field === 3 && body.length > 0) {
        throw new ProtobufDecodeError(`content encoding ${body.toString()} is not supported`);
      }
      return true;
    }
    // A field of the list message.
    if (bytes.available < header + len.value) return false;
    if (header + len.value > rawLeft) throw new ProtobufDecodeError("a list field overruns the list");
    const at = bytes.consume(header + len.value) + header;
    const end = at + len.value;
    rawLeft -= header + len.value;
    if (rawLeft === 0) rawLeft = -1;
    const d = decoder as KindDecoder;
    if (tag.value === ((2 << 3) | 2)) onItem(d.item(bytes.buffer, at, end, omit, table, freeze));
    else if (tag.value === ((1 << 3) | 2)) metadata = d.listMeta(bytes.buffer, at, end);
    else throw new ProtobufDecodeError(`field ${tag.value >>> 3} is not in a list`);
    return true;
  };

  for await (const chunk of chunks) {
    bytes.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, "latin1"));
    while (step());
  }
  if (!rawDone || rawLeft >= 0 || bytes.available > 0)
    throw new ProtobufDecodeError("the list answer ended early");
  return { apiVersion, kind: listKind, metadata, items: [] } as unknown as L;
}

function listDecoder(apiVersion: string, listKind: string): KindDecoder {
  if (!listKind.endsWith("List")) throw new ProtobufDecodeError(`${listKind || "no kind"} is not a list`);
  const id = protobufMessage(apiVersion, listKind.slice(0, -"List".length));
  if (id === undefined) throw new ProtobufDecodeError(`no protobuf message for ${apiVersion} ${listKind}`);
  return kindDecoder(id);
}

/**
 * The Status of a failure answered in protobuf (the server answers errors in the format the request asked
 * for), in its JSON form with its kind and apiVersion; undefined when the body is not one.
 */
export function decodeProtobufStatus(body: Buffer): Record<string, unknown> | undefined {
  try {
    if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) return undefined;
    const envelope = lengthFields(body.subarray(4), "a Status");
    const typeMeta = stringFields(envelope.get(1) ?? Buffer.alloc(0));
    const raw = envelope.get(2);
    if (typeMeta.get(2) !== "Status" || !raw) return undefined;
    const status = kindDecoder(STATUS).item(raw, 0, raw.length, false, decodeTable());
    return { kind: "Status", apiVersion: typeMeta.get(1) ?? "v1", ...status };
  } catch (err) {
    if (err instanceof ProtobufDecodeError) return undefined;
    throw err;
  }
}
