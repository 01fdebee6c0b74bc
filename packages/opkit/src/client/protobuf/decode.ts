/**
 * Kubernetes protobuf → the object the JSON answer would have given, key for key and in the same order.
 *
 * The API server encodes a list of built-in objects as protobuf about twice as fast as JSON, and a third
 * smaller (10,000 Pods: 27 MB in 0.64 s against 40 MB in 1.1–1.5 s); Go's controllers all read it. The
 * messages' fields, their JSON names and JSON's rules (omitempty, pointers, inlined structs, the special
 * forms of times, quantities and int-or-string) come from the Go types themselves (messages.ts, generated
 * by scripts/gen-protobuf), so the decoded object equals JSON.parse of the JSON answer.
 *
 * Each kind gets a decoder compiled from the table when its first object arrives: one closure over the
 * messages the kind reaches, a function per message with a case per field, building the object in JSON
 * order. It decodes a Pod about 1.7x as fast as a loop interpreting the table and its objects share hidden
 * classes; reading the position from an object instead of the closure's locals was ~30% slower, and
 * compiling message by message (direct eval into one scope) twice as slow.
 *
 * Anything the table does not describe (a field a newer server added, a wire type that does not match) is
 * a ProtobufDecodeError rather than a guess: the caller then reads the kind as JSON, which loses nothing.
 */
import { KINDS, LIST_META, MESSAGES } from "./messages.ts";

/** A protobuf answer this decoder cannot turn into the JSON form for certain; read the kind as JSON instead. */
export class ProtobufDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtobufDecodeError";
  }
}

/** One field of a message, parsed from its table entry. */
interface Field {
  num: number;
  name: string;
  /** The kind code; for a map, the code of its values. */
  kind: string;
  map: boolean;
  omitEmpty: boolean;
  omitZero: boolean;
  inline: boolean;
  pointer: boolean;
  repeated: boolean;
  ref: number;
}

const OBJECT_META_MANAGED_FIELDS = "managedFields";

function fields(id: number): Field[] {
  const text = MESSAGES[id];
  if (text === undefined) throw new ProtobufDecodeError(`no protobuf message ${id}`);
  if (text === "") return [];
  return text.split(" ").map((entry) => {
    const [num, name, kind, flags, ref] = entry.split(":") as [string, string, string, string, string?];
    const map = kind.startsWith("M");
    return {
      num: Number(num),
      name,
      kind: map ? kind.slice(1) : kind,
      map,
      omitEmpty: flags.includes("e"),
      omitZero: flags.includes("z"),
      inline: flags.includes("n"),
      pointer: flags.includes("p"),
      repeated: flags.includes("a"),
      ref: ref === undefined ? -1 : Number(ref),
    };
  });
}

/** Wire types: varint, 64-bit, length-delimited. */
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;

const SCALARS = new Set(["b", "i", "l", "u", "d"]);

function wireType(kind: string): number {
  if (kind === "d") return FIXED64;
  return SCALARS.has(kind) ? VARINT : LEN;
}

/** The expression reading one value of `kind` (the tag already read), message `ref` when it is one. */
function readValue(kind: string, ref: number): string {
  switch (kind) {
    case "s":
      return "str()";
    case "b":
      return "varint() !== 0";
    case "i":
      return "int32()";
    case "l":
      return "int64()";
    case "u":
      return "uint64()";
    case "d":
      return "float64()";
    case "y":
      return "bytes()";
    case "t":
      return "time(false)";
    case "T":
      return "time(true)";
    case "q":
      return "quantity()";
    case "x":
      return "intOrString()";
    case "r":
    case "f":
      return "rawJson()";
    case "w":
      return "strings()";
    case "m":
      return `s${ref}()`;
  }
  throw new ProtobufDecodeError(`unknown field kind ${kind}`);
}

/** The JSON value of a field the message did not carry (Go's zero value, as encoding/json writes it). */
function zeroValue(f: Field): string {
  if (f.repeated || f.map) return "null";
  switch (f.kind) {
    case "s":
      return '""';
    case "b":
      return "false";
    case "i":
    case "l":
    case "u":
    case "d":
    case "x":
      return "0";
    case "q":
      return '"0"';
    case "w":
      return "frz([])"; // a map's []string value: ExtraValue{} in gogo
    case "m":
      return `m${f.ref}(pos)`; // an empty message: its own zero values
    default:
      return "null"; // bytes, times, raw JSON: null in Go's JSON when nil or zero
  }
}

/** Whether JSON omits the field when it holds `undefined` (absent) or its kind's empty value. */
function emptyTest(f: Field, v: string): string {
  if (f.repeated || f.map) return `${v} === undefined`;
  if (f.pointer) return `${v} === undefined`;
  switch (f.kind) {
    case "s":
    case "y":
      return `(${v} === undefined || ${v} === "")`;
    case "b":
      return `(${v} === undefined || ${v} === false)`;
    case "i":
    case "l":
    case "u":
    case "d":
      return `(${v} === undefined || ${v} === 0)`;
    case "t":
    case "T":
      // omitempty leaves a struct in; omitzero (creationTimestamp) drops a zero time, decoded as null.
      return f.omitZero ? `(${v} === undefined || ${v} === null)` : "false";
    default:
      return "false"; // structs: encoding/json's omitempty never drops them
  }
}

/** The source of message `id`'s decoder, named m<id>; adds the messages it uses to `todo`. */
function messageSource(id: number, todo: number[]): string {
  // Long on purpose: one template of generated code, read top to bottom as the decoder it emits.
  const fs = fields(id);
  const cases: string[] = [];
  const vars = fs.map((_, i) => `v${i}`);
  fs.forEach((f, i) => {
    const v = vars[i] as string;
    if (f.ref >= 0) todo.push(f.ref);
    if (f.map) {
      const value = readValue(f.kind, f.ref);
      const zero = zeroValue({ ...f, map: false, repeated: false });
      cases.push(
        `case ${(f.num << 3) | LEN}: { const e = lenEnd(); let k = "", x; ` +
          `while (pos < e) { const t = varint(); ` +
          `if (t === 10) k = str(); else if (t === ${(2 << 3) | wireType(f.kind)}) x = ${value}; else unexpected(t, "map entry"); } ` +
          `if (pos !== e) truncated(); ` +
          // JSON.parse makes "__proto__" an own key (a valid ConfigMap key, DRA attribute name...); an
          // assignment would set the map's prototype instead, or be ignored for a string.
          `if (x === undefined) x = ${zero}; ${v} ??= {}; ` +
          `if (k === "__proto__") Object.defineProperty(${v}, k, { value: x, writable: true, enumerable: true, configurable: true }); ` +
          `else ${v}[k] = x; break; }`,
      );
      return;
    }
    const value = readValue(f.kind, f.ref);
    const wt = wireType(f.kind);
    if (f.name === OBJECT_META_MANAGED_FIELDS && f.repeated && fs.some((g) => g.name === "resourceVersion")) {
      // ObjectMeta's managedFields: skipped unread when the caller drops them anyway.
      cases.push(
        `case ${(f.num << 3) | LEN}: if (omitManagedFields) pos = lenEnd(); else (${v} ??= []).push(${value}); break;`,
      );
      return;
    }
    if (f.repeated) {
      cases.push(`case ${(f.num << 3) | wt}: (${v} ??= []).push(${value}); break;`);
      if (wt !== LEN)
        cases.push(
          `case ${(f.num << 3) | LEN}: { const e = lenEnd(); ${v} ??= []; while (pos < e) ${v}.push(${value}); if (pos !== e) truncated(); break; }`,
        );
      return;
    }
    cases.push(`case ${(f.num << 3) | wt}: ${v} = ${value}; break;`);
  });
  const build: string[] = [];
  fs.forEach((f, i) => {
    const v = vars[i] as string;
    if (f.inline) {
      // An inlined struct (a Volume's VolumeSource): its fields at this place in the parent.
      build.push(`{ const s = ${v} ?? m${f.ref}(pos); for (const k in s) o[k] = s[k]; }`);
      return;
    }
    const key = JSON.stringify(f.name);
    if (f.pointer) {
      const present = f.repeated ? `frz(${v}.slice())` : f.map ? `frz(${v})` : v;
      // A nil pointer is null in Go's JSON unless omitempty/omitzero drops it (TypedLocalObjectReference's
      // apiGroup, a gRPC probe's service).
      if (f.omitEmpty || f.omitZero) build.push(`if (${v} !== undefined) o[${key}] = ${present};`);
      else build.push(`o[${key}] = ${v} === undefined ? null : ${present};`);
      return;
    }
    // A field Go holds by value is in its JSON even when the message did not carry it: its zero value.
    // Arrays filled by push have spare capacity; a copy is exactly its length, as JSON.parse's arrays are.
    const present = f.repeated ? `frz(${v}.slice())` : f.map ? `frz(${v})` : v;
    const value = `${v} === undefined ? ${zeroValue(f)} : ${present}`;
    if (f.omitEmpty || f.omitZero) build.push(`if (!(${emptyTest(f, v)})) o[${key}] = ${value};`);
    else build.push(`o[${key}] = ${value};`);
  });
  return (
    // A constructor per message, with Object.prototype as its objects' prototype: they are plain objects
    // (deepStrictEqual to JSON.parse's), while V8 sizes them to their fields (in-object slack tracking)
    // instead of growing a separate property store as it does for objects made by {}.
    `function O${id}() {}\nO${id}.prototype = Object.prototype;\n` +
    // s<id> reads a field holding message id. Frozen, a value can be shared: when its bytes are those
    // of the message read at the same place (the k-th message) in the object before, it is that value,
    // not decoded again, and the counts of what it holds keep the places after it in step. A list's
    // objects mostly come in runs of one shape and content (a ReplicaSet's Pods share their
    // containers, probes, tolerations and status), so this read 10,000 Pods in two thirds of the time
    // and in three quarters of the heap.
    `function s${id}() {\n` +
    `  const e = lenEnd();\n` +
    `  if (!freezing) return m${id}(e);\n` +
    `  const k = mth++, n = e - pos;\n` +
    `  if (shLen[k] === n && shId[k] === ${id} && sameAt(k, n)) { pos = e; mth += shMsgs[k]; nth += shStrs[k]; return shValue[k]; }\n` +
    `  const at = pos, mthAt = mth, nthAt = nth;\n` +
    `  const v = m${id}(e);\n` +
    `  shId[k] = ${id}; shBuf[k] = buf; shAt[k] = at; shLen[k] = n; shValue[k] = v; shMsgs[k] = mth - mthAt; shStrs[k] = nth - nthAt;\n` +
    `  return v;\n}\n` +
    `function m${id}(end) {\n` +
    `  const open = top;\n  top = false;\n` +
    (vars.length ? `  let ${vars.join(", ")};\n` : "") +
    `  while (pos < end) {\n    const tag = varint();\n    switch (tag) {\n` +
    cases.map((c) => `      ${c}\n`).join("") +
    `      default: unexpected(tag, ${JSON.stringify(`message ${id}`)});\n    }\n  }\n` +
    `  if (pos !== end) truncated();\n` +
    `  const o = new O${id}();\n` +
    build.map((b) => `  ${b}\n`).join("") +
    `  if (freezing && !open) Object.freeze(o);\n` +
    `  return o;\n}\n`
  );
}

/**
 * The reader every compiled decoder shares: the buffer and position live in its closure (locals of the
 * generated function), the fastest state V8 offers.
 */
const RUNTIME = `
// limit: the end of the object being read, which need not be the end of buf (a list's objects are read
// in place, in a buffer that holds their neighbours).
let buf, pos, limit = 0, omitManagedFields = false, interned, order, nth = 0;
// freezing: freeze every object and array below the top one as it is built (see KindDecoder.item); top: the
// next message read is the top one.
let freezing = false, top = false;
// The messages read in the object before, by the order they were read (mth counts this object's): their
// message id (two types can have the same bytes: an empty one, or a Container and a Volume both
// {name: "a"}), the buffer and place of their bytes, the value decoded, and how many messages and
// strings it took to read.
let mth = 0, shId, shBuf, shAt, shLen, shValue, shMsgs, shStrs;
/** Whether the n bytes at pos are those of the k-th message of the object before. */
function sameAt(k, n) {
  const b = shBuf[k], at = shAt[k];
  // Buffer.compare is a call into C++: worth it for longer messages only.
  if (n >= 48) return buf.compare(b, at, at + n, pos, pos + n) === 0;
  for (let i = 0; i < n; i++) if (b[at + i] !== buf[pos + i]) return false;
  return true;
}
function frz(x) { return freezing ? Object.freeze(x) : x; }
function frzDeep(x) {
  if (typeof x !== "object" || x === null) return;
  for (const k in x) frzDeep(x[k]);
  Object.freeze(x);
}
/** Longer strings (uids, long texts) are rarely repeated: not worth a lookup. */
const INTERN_MAX = 64;
// Buffer's utf8Slice: Node's own fast path of toString("utf8", start, end), without its argument checks.
const utf8 = typeof Buffer.prototype.utf8Slice === "function";
function unexpected(tag, where) { throw new ProtobufDecodeError("field " + (tag >>> 3) + " (wire type " + (tag & 7) + ") is not in " + where + " of the pinned API version: read as JSON"); }
function truncated() { throw new ProtobufDecodeError("a message ends inside a field"); }
function varint() {
  let b = buf[pos++];
  if (b < 128) return b;
  if (b === undefined) truncated();
  let v = b & 127, s = 128;
  for (let i = 1; i < 10; i++) {
    b = buf[pos++];
    if (b === undefined) truncated();
    v += (b & 127) * s;
    if (b < 128) return v;
    s *= 128;
  }
  truncated();
}
/** A 64-bit varint as a number: exact below 2^53 in magnitude, as JSON.parse gives it. */
function wide(signed) {
  const start = pos;
  const v = varint();
  if (pos - start < 8) return v;
  let big = 0n;
  for (let i = pos - 1; i >= start; i--) big = (big << 7n) | BigInt(buf[i] & 127);
  return Number(signed ? BigInt.asIntN(64, big) : BigInt.asUintN(64, big));
}
function int64() { return wide(true); }
function uint64() { return wide(false); }
/** An int32 is sent sign-extended to 64 bits: its low 32 bits are the value. */
function int32() {
  const start = pos;
  const v = varint();
  if (pos - start < 5) return v | 0;
  let low = 0;
  for (let i = 0; i < 5; i++) low |= (buf[start + i] & 127) << (7 * i);
  return low | 0;
}
function float64() { if (pos + 8 > limit) truncated(); const v = buf.readDoubleLE(pos); pos += 8; return v; }
function lenEnd() { const n = varint(); const e = pos + n; if (e > limit) truncated(); return e; }
/**
 * Strings, each value stored once per list: JSON.parse shares short strings (V8 internalizes them), and a
 * list repeats most values (image, policies, namespace, label values), so without this a decoded Pod took
 * 5.5 KB of heap against JSON's 3.3 KB. A string seen before is found without decoding it again (decoding
 * then looking up each string was a third of the decode of 10,000 Pods), in two steps:
 * - the string read at the same place (the k-th of its object) in the object before, compared byte for
 *   byte: a list's objects mostly come in runs of one shape and values (a ReplicaSet's Pods), so this
 *   finds ~9 in 10 of a Pod list's strings without hashing them;
 * - else any string of the list, by a hash of its bytes, compared byte for byte.
 */
function str() {
  const e = lenEnd();
  const n = e - pos;
  if (n > INTERN_MAX) { const s = decodeText(pos, e); pos = e; return s; }
  const k = nth++;
  let hit = order[k];
  if (hit !== undefined && hit.b.length === n && same(hit.b, n)) { pos = e; return hit.s; }
  let h = n;
  for (let i = pos; i < e; i++) h = Math.imul(h ^ buf[i], 16777619);
  hit = interned.get(h);
  if (hit === undefined || hit.b.length !== n || !same(hit.b, n)) {
    hit = { b: copyOut(n), s: decodeText(pos, e) };
    interned.set(h, hit);
  }
  order[k] = hit;
  pos = e;
  return hit.s;
}
/**
 * A copy of the n bytes at pos: a plain Uint8Array, where slice on a Buffer would build a Buffer through
 * its species constructor.
 */
function copyOut(n) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = buf[pos + i];
  return b;
}
/** Whether b holds the n bytes at pos. */
function same(b, n) {
  for (let i = 0; i < n; i++) if (b[i] !== buf[pos + i]) return false;
  return true;
}
/**
 * buf[from, to) as text. Invalid UTF-8 (a Go client may write any bytes): Go's JSON makes each invalid byte
 * one U+FFFD, where Node replaces a truncated sequence (e2 82) with one.
 */
function decodeText(from, to) {
  const s = utf8 ? buf.utf8Slice(from, to) : buf.toString("utf8", from, to);
  return s.indexOf("\ufffd") >= 0 ? goUtf8(from, to) : s;
}
/** buf[start, end) as Go's encoding/json writes a string: each byte of an invalid sequence is one U+FFFD. */
function goUtf8(start, end) {
  let out = "", run = start, i = start;
  while (i < end) {
    const b = buf[i];
    if (b < 0x80) { i++; continue; }
    // utf8.DecodeRune's ranges: the second byte's range depends on the first (no overlong forms, no
    // surrogates, nothing past U+10FFFF).
    const n = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    let ok = n > 0 && i + n <= end && buf[i + 1] >= lo && buf[i + 1] <= hi;
    for (let k = 2; ok && k < n; k++) ok = buf[i + k] >= 0x80 && buf[i + k] <= 0xbf;
    if (ok) { i += n; continue; }
    out += buf.toString("utf8", run, i) + "\ufffd";
    run = ++i;
  }
  return out + buf.toString("utf8", run, end);
}
function bytes() { const e = lenEnd(); const s = buf.toString("base64", pos, e); pos = e; return s; }
let lastSeconds = NaN, lastText = "";
/**
 * metav1.Time (RFC 3339 in seconds) or MicroTime (microseconds); a zero time is null in JSON. Go sends the
 * zero time as an empty message and any other as {seconds, nanos}, both always written: {0, 0} is the Unix
 * epoch, "1970-01-01T00:00:00Z" in JSON. (Time drops the nanoseconds, MicroTime truncates them to micros.)
 */
function time(micro) {
  const e = lenEnd();
  if (pos === e) return null;
  let s = 0, n = 0;
  while (pos < e) {
    const t = varint();
    if (t === 8) s = int64(); else if (t === 16) n = int32(); else unexpected(t, "a time");
  }
  if (pos !== e) truncated();
  // time.Unix(s, ...) is Go's zero time (0001-01-01T00:00:00Z) at this second and no microsecond.
  if (s === -62135596800 && (!micro || n < 1000)) return null;
  if (s < -62135596800 || s > 253402300799) throw new ProtobufDecodeError("a time outside the years 1-9999");
  if (micro) return new Date(s * 1000).toISOString().slice(0, 19) + "." + String(Math.floor(n / 1000)).padStart(6, "0") + "Z";
  if (s !== lastSeconds) { lastSeconds = s; lastText = new Date(s * 1000).toISOString().slice(0, 19) + "Z"; }
  return lastText;
}
/** resource.Quantity travels as its canonical string, the one its JSON holds. */
function quantity() {
  const e = lenEnd();
  let q = "0";
  while (pos < e) { const t = varint(); if (t === 10) q = str(); else unexpected(t, "a quantity"); }
  if (pos !== e) truncated();
  return q;
}
function intOrString() {
  const e = lenEnd();
  let type = 0, i = 0, s = "";
  while (pos < e) {
    const t = varint();
    if (t === 8) type = int64(); else if (t === 16) i = int32(); else if (t === 26) s = str(); else unexpected(t, "an int-or-string");
  }
  if (pos !== e) truncated();
  return type === 1 ? s : i;
}
/** RawExtension and FieldsV1 hold JSON text; anything else (an embedded protobuf object) is read as JSON. */
function rawJson() {
  const e = lenEnd();
  let v = null;
  while (pos < e) {
    const t = varint();
    if (t !== 10) unexpected(t, "raw JSON");
    // Raw JSON text reaches a JSON client as Go wrote it, invalid bytes and all: decoded as Node does.
    const e2 = lenEnd();
    const text = buf.toString("utf8", pos, e2);
    pos = e2;
    try { v = JSON.parse(text); } catch { throw new ProtobufDecodeError("an embedded object is not JSON"); }
    if (freezing) frzDeep(v);
  }
  if (pos !== e) truncated();
  return v;
}
/** A map's []string value, wrapped in a message; gogo makes each value ExtraValue{}: [] when empty, never null. */
function strings() {
  const e = lenEnd();
  const a = [];
  while (pos < e) { const t = varint(); if (t === 10) a.push(str()); else unexpected(t, "a string list"); }
  if (pos !== e) truncated();
  return frz(a);
}
`;

/** A string decoded and the bytes it came from. */
interface DecodedString {
  b: Uint8Array;
  s: string;
}

/**
 * What one list's objects (or one batch of watch events) share as they are decoded: strings (see str in
 * RUNTIME), and with `freeze`, messages whose bytes equal those read at the same place in the object
 * before (see s<id> in messageSource).
 */
export interface DecodeTable {
  /** Strings by a hash of their bytes. */
  byHash: Map<number, DecodedString>;
  /** Strings by the order they were read in the object before. */
  byOrder: DecodedString[];
  /** Messages by the order they were read in the object before. */
  messages: {
    id: number[];
    buf: Buffer[];
    at: number[];
    len: number[];
    value: unknown[];
    msgs: number[];
    strs: number[];
  };
}

/** An empty string table. */
export function decodeTable(): DecodeTable {
  return {
    byHash: new Map(),
    byOrder: [],
    messages: { id: [], buf: [], at: [], len: [], value: [], msgs: [], strs: [] },
  };
}

/** A compiled decoder for the objects of one kind, and for the list's metadata. */
export interface KindDecoder {
  /**
   * The object encoded in `buf[start, end)`; `table` keeps one copy of each string (one table per list).
   * With `freeze`, every object and array below the top one is frozen as it is built, for a cache that
   * freezes what it stores (a walk over a fresh object afterwards cost as much again), and a message
   * whose bytes are those read at the same place in the object before is that object's, shared: see
   * s<id> in messageSource. The top object stays open (the cache stamps a list item's kind on it) for
   * the caller to freeze.
   */
  item(
    buf: Buffer,
    start: number,
    end: number,
    omitManagedFields: boolean,
    table: DecodeTable,
    freeze?: boolean,
  ): Record<string, unknown>;
  /** The ListMeta encoded in `buf[start, end)`. */
  listMeta(buf: Buffer, start: number, end: number): Record<string, unknown>;
}

/** A compiled closure: a decoder for message `id` and the messages it reaches. */
type Compiled = (
  buf: Buffer,
  start: number,
  end: number,
  omitManagedFields: boolean,
  table: DecodeTable,
  freeze: boolean,
) => Record<string, unknown>;

const compiled = new Map<number, Compiled>();

/** The message id of `apiVersion/kind`'s objects, or undefined when the table has no such kind. */
export function protobufMessage(apiVersion: string, kind: string): number | undefined {
  return KINDS[`${apiVersion}/${kind}`];
}

/**
 * The decoder of message `id` (an object kind). Its closure is compiled when the first object arrives (an
 * empty list compiles only the list's metadata): ~25 ms of CPU for a Deployment's ~150 messages, paid once
 * per kind and process, where decoding a list of 10,000 Pods takes ~0.35 s.
 */
export function kindDecoder(id: number): KindDecoder {
  return {
    item: (buf, start, end, omit, table, freeze = false) => closure(id)(buf, start, end, omit, table, freeze),
    listMeta: (buf, start, end) => closure(LIST_META)(buf, start, end, false, decodeTable(), false),
  };
}

function closure(id: number): Compiled {
  let run = compiled.get(id);
  if (run) return run;
  const done = new Set<number>();
  const todo = [id];
  let source = "";
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    if (done.has(next)) continue;
    done.add(next);
    source += messageSource(next, todo);
  }
  // Generated code (as ajv and fast-json-stringify do): see the module comment for why.
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const make = new Function(
    "ProtobufDecodeError",
    `${RUNTIME}\n${source}\n` +
      `return (b, start, end, omit, table, freeze) => {\n` +
      `  buf = b; pos = start; limit = end; omitManagedFields = omit; interned = table.byHash; order = table.byOrder; nth = 0;\n` +
      `  freezing = freeze; top = true; mth = 0;\n` +
      `  const m = table.messages; shId = m.id; shBuf = m.buf; shAt = m.at; shLen = m.len; shValue = m.value; shMsgs = m.msgs; shStrs = m.strs;\n` +
      // What lies past this object's messages was left by a longer one: let go of its buffers.
      `  try {\n` +
      `    const o = m${id}(end);\n` +
      `    if (shLen.length > mth) shLen.length = shBuf.length = shValue.length = shId.length = mth;\n` +
      `    return o;\n` +
      `  } finally { buf = undefined; interned = undefined; order = undefined; shBuf = shValue = undefined; }\n` +
      `};`,
  ) as (errorClass: typeof ProtobufDecodeError) => Compiled;
  run = make(ProtobufDecodeError);
  compiled.set(id, run);
  return run;
}
