/**
 * A protobuf watch stream decoded as it arrives, into the same events as the JSON stream gives (each
 * object with its kind and apiVersion first, then exactly the members its JSON holds).
 *
 * The stream is a run of frames, each a big-endian uint32 length and a metav1.WatchEvent: field 1 the
 * event type, field 2 a RawExtension whose bytes are the object as a protobuf body of its own (`k8s\0`,
 * then a runtime.Unknown with its apiVersion, kind and the object's message). An ERROR event's object is
 * a Status, thrown as the typed error it carries, as the JSON stream does.
 */
import type { Readable } from "node:stream";
import { ConnectionError, errorFromResponse, type RequestInfo } from "../errors.ts";
import type { KubeObject, WatchEvent } from "../types.ts";
import { MAX_WATCH_EVENT_BYTES, stopIfAborted, tooLarge, typedErrors } from "../watch.ts";
import {
  ProtobufDecodeError,
  kindDecoder,
  protobufMessage,
  decodeTable,
  type KindDecoder,
  type DecodeTable,
} from "./decode.ts";
import { Bytes, MAGIC, decodeProtobufStatus, lengthFields, stringFields } from "./list.ts";

/**
 * The events of a protobuf watch body. Throws ProtobufDecodeError for a frame the pinned messages do not
 * describe (the events before it were handed over: the caller watches again from the last one, as JSON).
 */
export async function* parseProtobufWatchStream<T extends KubeObject>(
  body: Readable,
  request: RequestInfo,
  signal?: AbortSignal,
  opts: { omitManagedFields?: boolean; freeze?: boolean } = {},
): AsyncGenerator<WatchEvent<T>> {
  const omit = opts.omitManagedFields ?? false;
  const freeze = opts.freeze ?? false;
  const bytes = new Bytes();
  const kinds: KindMemo = {};
  for await (const chunk of typedErrors(body, request, signal)) {
    bytes.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string, "latin1"));
    // Strings and objects are shared within a batch of events only, so a long watch holds no table that grows.
    const table = decodeTable();
    for (;;) {
      const length = bytes.peekUint32();
      if (length !== undefined && length > MAX_WATCH_EVENT_BYTES)
        throw tooLarge(request, `a frame of ${length}`);
      if (length === undefined || bytes.available < 4 + length) break;
      stopIfAborted(request, signal);
      bytes.take(4);
      yield decodeFrame<T>(bytes.take(length), request, omit, freeze, table, kinds);
    }
  }
  // A clean end inside a frame is a stream cut short, not a message the tables cannot read.
  if (bytes.available > 0)
    throw new ConnectionError(
      request,
      new Error(`the watch ended inside an event (${bytes.available} bytes)`),
    );
}

/**
 * The type header last read on a stream and what it resolved to: every event of a watch names the same
 * kind, so its strings, message lookup and decoder are found once, not per event.
 */
interface KindMemo {
  last?: { header: Buffer; apiVersion: string; kind: string; decoder: KindDecoder };
}

const EMPTY = Buffer.alloc(0);

function decodeFrame<T extends KubeObject>(
  frame: Buffer,
  request: RequestInfo,
  omit: boolean,
  freeze: boolean,
  table: DecodeTable,
  kinds: KindMemo,
): WatchEvent<T> {
  const event = lengthFields(frame, "a watch event");
  const type = (event.get(1) ?? EMPTY).toString("latin1") as WatchEvent["type"];
  const raw = lengthFields(event.get(2) ?? EMPTY, "a watch event's object").get(1);
  if (!raw) throw new ProtobufDecodeError(`a ${type || "typeless"} watch event without an object`);
  if (type === "ERROR") {
    const status = decodeProtobufStatus(raw);
    if (!status) throw new ProtobufDecodeError("an ERROR watch event whose object is not a Status");
    throw errorFromResponse(typeof status.code === "number" ? status.code : 500, status, request);
  }
  if (raw.length < 4 || !raw.subarray(0, 4).equals(MAGIC))
    throw new ProtobufDecodeError("a watch event's object is not a Kubernetes protobuf object");
  const envelope = lengthFields(raw.subarray(4), "an object's envelope");
  const encoding = envelope.get(3);
  if (encoding && encoding.length > 0)
    throw new ProtobufDecodeError(`content encoding ${encoding.toString()} is not supported`);
  const header = envelope.get(1) ?? EMPTY;
  let known = kinds.last;
  if (!known || !known.header.equals(header)) {
    const typeMeta = stringFields(header);
    const apiVersion = typeMeta.get(1) ?? "";
    const kind = typeMeta.get(2) ?? "";
    const id = protobufMessage(apiVersion, kind);
    if (id === undefined) throw new ProtobufDecodeError(`no protobuf message for ${apiVersion} ${kind}`);
    // A copy: the header is a view into the batch, which must not be held past it.
    known = { header: Buffer.from(header), apiVersion, kind, decoder: kindDecoder(id) };
    kinds.last = known;
  }
  const { kind, apiVersion } = known;
  const message = envelope.get(2) ?? EMPTY;
  const fields = known.decoder.item(message, 0, message.length, omit, table, freeze);
  // The JSON stream's member order: kind and apiVersion (TypeMeta, inlined first), then the object's own.
  return { type, object: { kind, apiVersion, ...fields } as unknown as T };
}
