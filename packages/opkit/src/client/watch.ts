/**
 * Incremental parsing of a watch stream: newline-delimited JSON events, decoded chunk by chunk,
 * never buffering the whole response. An ERROR event becomes the typed error it carries (410 → GoneError);
 * a stream cut by the caller's signal throws RequestAbortedError, one cut by the network ConnectionError.
 */
import { StringDecoder } from "node:string_decoder";
import type { Readable } from "node:stream";
import {
  ConnectionError,
  RequestAbortedError,
  errorFromResponse,
  isStatus,
  type RequestInfo,
} from "./errors.ts";
import type { KubeObject, WatchEvent } from "./types.ts";

/** The events of a watch response body, decoded as they arrive. */
export async function* parseWatchStream<T extends KubeObject>(
  body: Readable,
  request: RequestInfo,
  signal?: AbortSignal,
): AsyncGenerator<WatchEvent<T>> {
  const decoder = new StringDecoder("utf8");
  let buffered = "";
  for await (const chunk of typedErrors(body, request, signal)) {
    buffered += typeof chunk === "string" ? chunk : decoder.write(chunk as Buffer);
    // Walk the lines by index and cut the buffer once per chunk: slicing after every line would copy the
    // rest of a large chunk (an initial list of thousands of objects) once per object.
    let start = 0;
    let nl: number;
    while ((nl = buffered.indexOf("\n", start)) >= 0) {
      const line = buffered.slice(start, nl).trim();
      start = nl + 1;
      if (line) yield decodeEvent<T>(line, request);
    }
    buffered = buffered.slice(start);
  }
  buffered += decoder.end();
  const rest = buffered.trim();
  if (rest) yield decodeEvent<T>(rest, request);
}

function decodeEvent<T extends KubeObject>(line: string, request: RequestInfo): WatchEvent<T> {
  const event = JSON.parse(line) as { type: WatchEvent["type"]; object: unknown };
  if (event.type === "ERROR") {
    const status = isStatus(event.object) ? event.object : { message: JSON.stringify(event.object) };
    throw errorFromResponse(status.code ?? 500, status, request);
  }
  return event as WatchEvent<T>;
}

/** The chunks of a response body; a cut by `signal` throws RequestAbortedError, one by the network ConnectionError. */
export async function* typedErrors(
  body: Readable,
  request: RequestInfo,
  signal: AbortSignal | undefined,
): AsyncGenerator<unknown> {
  try {
    for await (const chunk of body) yield chunk;
  } catch (err) {
    if (signal?.aborted) throw new RequestAbortedError(request, signal.reason);
    throw new ConnectionError(request, err, false);
  }
}
