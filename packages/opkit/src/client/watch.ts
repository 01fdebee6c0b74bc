/**
 * Incremental parsing of a watch stream: newline-delimited JSON events, decoded chunk by chunk,
 * never buffering the whole response. An ERROR event becomes the typed error it carries (410 → GoneError);
 * a stream cut by the caller's signal throws RequestAbortedError, one cut by the network ConnectionError.
 */
import { StringDecoder } from "node:string_decoder";
import { finished, type Readable } from "node:stream";
import {
  ConnectionError,
  RequestAbortedError,
  errorFromResponse,
  isStatus,
  type RequestInfo,
} from "./errors.ts";
import {
  BACKSLASH,
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COMMA,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  withoutMember,
} from "./jsontext.ts";
import type { KubeObject, WatchEvent } from "./types.ts";

/**
 * The events of a watch response body, decoded as they arrive. With `omitManagedFields`, each object's
 * `metadata.managedFields` is cut out of the event's text before it is parsed (see `withoutManagedFields`).
 */
export async function* parseWatchStream<T extends KubeObject>(
  body: Readable,
  request: RequestInfo,
  signal?: AbortSignal,
  opts: { omitManagedFields?: boolean } = {},
): AsyncGenerator<WatchEvent<T>> {
  const omit = opts.omitManagedFields ?? false;
  const decoder = new StringDecoder("utf8");
  // The start of a line that has not ended yet, as the chunks' pieces: each chunk is searched once and the
  // pieces joined once when the line ends. Appending to one string and searching it from its start at every
  // chunk was quadratic in a line's size (an object of 2 MiB in 16 KiB chunks: 0.3 s per event).
  let pending: string[] = [];
  let pendingLength = 0;
  for await (const chunk of typedErrors(body, request, signal)) {
    const text = typeof chunk === "string" ? chunk : decoder.write(chunk as Buffer);
    // Walk the lines by index: slicing the rest after every line would copy the rest of a large chunk (an
    // initial list of thousands of objects) once per object.
    let start = 0;
    let nl: number;
    while ((nl = text.indexOf("\n", start)) >= 0) {
      const piece = text.slice(start, nl);
      const line = (pending.length > 0 ? pending.join("") + piece : piece).trim();
      pending = [];
      pendingLength = 0;
      start = nl + 1;
      if (!line) continue;
      stopIfAborted(request, signal);
      yield decodeEvent<T>(omit ? withoutManagedFields(line) : line, request);
    }
    if (start < text.length) {
      const piece = start > 0 ? text.slice(start) : text;
      pending.push(piece);
      pendingLength += piece.length;
      if (pendingLength > MAX_WATCH_EVENT_BYTES) throw tooLarge(request, `${pendingLength} characters`);
    }
  }
  pending.push(decoder.end());
  const rest = pending.join("").trim();
  if (!rest) return;
  stopIfAborted(request, signal);
  let last: WatchEvent<T>;
  try {
    last = decodeEvent<T>(omit ? withoutManagedFields(rest) : rest, request);
  } catch (err) {
    // A clean end inside an event is a stream cut short (as a protobuf watch reports it), not bad JSON.
    if (!(err instanceof SyntaxError)) throw err;
    throw new ConnectionError(
      request,
      new Error(`the watch ended inside an event (${rest.length} characters)`),
    );
  }
  yield last;
}

/**
 * The largest watch event read (client-go's limit for a frame, JSON or protobuf). An object is at most
 * etcd's request limit (1.5 MiB by default), so only a broken or hostile server or proxy sends more: the
 * event is not buffered on without bound, the watch ends with a ConnectionError and is started again.
 */
export const MAX_WATCH_EVENT_BYTES = 16 * 1024 * 1024;

/** The error that ends a watch whose event outgrows MAX_WATCH_EVENT_BYTES. */
export function tooLarge(request: RequestInfo, size: string): ConnectionError {
  return new ConnectionError(
    request,
    new Error(`a watch event larger than ${MAX_WATCH_EVENT_BYTES} bytes (${size} read): the watch is ended`),
  );
}

/**
 * Throws RequestAbortedError once the caller's signal fired: the events still held from a chunk are not
 * handed over, as typedErrors hands over no chunk it still holds (a stopped informer gets no late events).
 */
export function stopIfAborted(request: RequestInfo, signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new RequestAbortedError(request, signal.reason);
}

function decodeEvent<T extends KubeObject>(line: string, request: RequestInfo): WatchEvent<T> {
  const event = JSON.parse(line) as { type: WatchEvent["type"]; object: unknown };
  if (event.type === "ERROR") {
    const status = isStatus(event.object) ? event.object : { message: JSON.stringify(event.object) };
    throw errorFromResponse(status.code ?? 500, status, request);
  }
  return event as WatchEvent<T>;
}

const MANAGED_FIELDS = '"managedFields":[';

/**
 * A watch event's text without its object's `metadata.managedFields` member, or the text unchanged when
 * that member is not found where it belongs. managedFields is often 40% of an object's JSON, and the
 * cache's default transform drops it after parsing anyway: not parsing it saves that work and garbage.
 *
 * The first `"managedFields":[` in the text is taken only when it is a member of the event's
 * `object.metadata` (nesting level 3, reached through `"object":{` and `"metadata":{`, outside any string);
 * inside a JSON string every quote is escaped, so the key cannot be matched there by accident. The API
 * server writes metadata before the object's spec, so a field of that name elsewhere (a custom resource's
 * spec) is never cut; the result goes through JSON.parse, which still rejects anything that is not JSON
 * outside the cut. The cut array itself is only checked to be balanced (brackets outside strings): its text is
 * trusted to be JSON, as the API server's encoder writes it, and is never parsed.
 */
export function withoutManagedFields(text: string): string {
  const at = text.indexOf(MANAGED_FIELDS);
  if (at < 0) return text;
  // The prefix: nesting level at `at`, and where the level-2 and level-3 objects opened.
  const opened: number[] = [];
  let depth = 0;
  for (let i = 0; i < at;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = afterString(text, i + 1);
      if (i < 0 || i > at) return text;
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) opened[depth++] = i;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
    i++;
  }
  const object = opened[1] ?? -1;
  const metadata = opened[2] ?? -1;
  if (
    depth !== 3 ||
    text.charCodeAt(object) !== OPEN_BRACE ||
    text.charCodeAt(metadata) !== OPEN_BRACE ||
    !isKey(text, object, '"object":') ||
    !isKey(text, metadata, '"metadata":') ||
    !startsMember(text, at)
  ) {
    return text;
  }
  // The array's end: the bracket that closes it, strings skipped.
  let end = at + MANAGED_FIELDS.length;
  for (let level = 1; level > 0;) {
    if (end >= text.length) return text;
    const c = text.charCodeAt(end);
    if (c === QUOTE) {
      end = afterString(text, end + 1);
      if (end < 0) return text;
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) level++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) level--;
    end++;
  }
  const next = text.charCodeAt(end);
  // Compact JSON only (as the API server writes it): the member is followed by `,` or `}`. A second
  // member of that name (a duplicate key, which JSON.parse resolves to the last) is not cut either.
  if ((next !== COMMA && next !== CLOSE_BRACE) || text.includes(MANAGED_FIELDS, end)) return text;
  return withoutMember(text, at, end);
}

/**
 * Whether the value opening at `open` is the member `key` (`"name":`): the key's first quote must start a
 * member (after `{` or `,`), not be an escaped quote inside a longer key such as `"a\"metadata":`.
 */
function isKey(text: string, open: number, key: string): boolean {
  return text.startsWith(key, open - key.length) && startsMember(text, open - key.length);
}

/** Whether the text at `at` starts a member of an object in compact JSON: it comes right after `{` or `,`. */
function startsMember(text: string, at: number): boolean {
  const before = text.charCodeAt(at - 1);
  return before === OPEN_BRACE || before === COMMA;
}

/** The index after the quote that closes the string whose content starts at `i`; -1 when it does not close. */
function afterString(text: string, i: number): number {
  for (;;) {
    const q = text.indexOf('"', i);
    if (q < 0) return -1;
    let b = q - 1;
    while (text.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q + 1;
    i = q + 1;
  }
}

/** Bytes a body may hold for its consumer before the body is paused (flow control for a slow consumer). */
const BATCH_HIGH_WATER = 1 << 20;

/**
 * The chunks of a response body, batched; a cut by `signal` throws RequestAbortedError, one by the network
 * ConnectionError. Each batch is everything that arrived while the consumer was busy, joined: the API server
 * flushes a streamed list every 4 KiB, and each flush reaches JS on its own, so reading chunk by chunk
 * (a stream iterator and a generator step each) cost a promise round trip per 4 KiB, 9,762 of them for an
 * initial list of 10,000 Pods. The wake-up waits for the end of the event loop turn (setImmediate), by which
 * time the TLS records of one socket read have all been delivered.
 */
export async function* typedErrors(
  body: Readable,
  request: RequestInfo,
  signal: AbortSignal | undefined,
): AsyncGenerator<unknown> {
  const held: unknown[] = [];
  let heldBytes = 0;
  let paused = false;
  let ended = false;
  let failure: { err: unknown } | undefined;
  let wake: (() => void) | undefined;
  let scheduled = false;
  const fire = (): void => {
    scheduled = false;
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onData = (chunk: unknown): void => {
    held.push(chunk);
    heldBytes += typeof chunk === "string" ? chunk.length : (chunk as Buffer).length;
    if (heldBytes >= BATCH_HIGH_WATER && !paused) {
      paused = true;
      body.pause();
    }
    if (wake && !scheduled) {
      scheduled = true;
      setImmediate(fire);
    }
  };
  body.on("data", onData);
  const stopWatching = finished(body, (err) => {
    if (err) failure = { err };
    else ended = true;
    fire();
  });
  try {
    for (;;) {
      // A body cut by the caller's signal hands over nothing more, not even what it held (as a stream
      // iterator reads nothing from a destroyed stream): an informer being stopped gets no late events.
      if (signal?.aborted) throw signal.reason;
      if (held.length > 0) {
        const batch = held.splice(0);
        heldBytes = 0;
        if (paused) {
          paused = false;
          body.resume();
        }
        if (batch.every((c) => Buffer.isBuffer(c)))
          yield batch.length === 1 ? batch[0] : Buffer.concat(batch);
        else if (batch.every((c) => typeof c === "string")) yield batch.join("");
        else for (const c of batch) yield c;
        continue;
      }
      if (failure) throw failure.err;
      if (ended) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } catch (err) {
    if (signal?.aborted) throw new RequestAbortedError(request, signal.reason);
    throw new ConnectionError(request, err, false);
  } finally {
    stopWatching();
    body.off("data", onData);
    // A consumer that stopped early (or failed) releases the connection, as a stream iterator does. The
    // body's error for that cut, or for an abort still on its way, finds a listener (none would crash).
    if (!ended) {
      body.on("error", ignore);
      body.destroy();
    }
  }
}

function ignore(): void {}
