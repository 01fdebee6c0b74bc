/**
 * Incremental parsing of a list answer: each element of the top-level `items` array is cut out of the
 * body as soon as its last byte arrived and parsed on its own, so a large list (an initial list of 10,000
 * Pods is ~40 MB of JSON) is decoded while the server is still sending it, and never held whole as one
 * string. Every other top-level member (kind, apiVersion, metadata) is parsed as usual.
 *
 * The scanner only tracks nesting and strings: the text of each item, and of the rest of the list, still
 * goes through JSON.parse, which rejects anything that is not JSON.
 */
import { StringDecoder } from "node:string_decoder";

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

/** `"items":` (whitespace allowed around the colon): the member whose array is streamed. */
const ITEMS_KEY = /^\s*"items"\s*:\s*$/;

/** How far back the scanner looks for a key before a `{` or `[`: `"managedFields":`. */
const LOOKBACK = 16;

/**
 * Parse a list body given chunk by chunk: `onItem` gets each item in order; the result is the list with
 * an empty `items` array. Throws SyntaxError on a body that is not a JSON object. With `omitManagedFields`,
 * each item's `metadata.managedFields` is cut out of its text before it is parsed (often 40% of an object, and
 * what the cache drops anyway); the cut is only made in compact JSON, as the API server sends it.
 */
export async function parseListBody<L extends { items: unknown[] }>(
  chunks: AsyncIterable<unknown>,
  onItem: (item: L["items"][number]) => void,
  opts: { omitManagedFields?: boolean } = {},
): Promise<L> {
  const decoder = new StringDecoder("utf8");
  const scanner = new ListScanner(onItem, opts.omitManagedFields ?? false);
  for await (const chunk of chunks)
    scanner.push(typeof chunk === "string" ? chunk : decoder.write(chunk as Buffer));
  scanner.push(decoder.end());
  return scanner.end() as L;
}

/**
 * The scanner's state between chunks. Each chunk is scanned once, on its own: offsets (`itemStart`,
 * `memberStart`, `cutFrom`, `cutTo`) are absolute in the body, and the text being captured (an item, or a
 * member of the list) is kept as the chunks' pieces, joined once when it ends. Appending each chunk to one
 * held string instead made V8 copy that string at every chunk: quadratic in an item's size.
 */
class ListScanner {
  /** The chunk being scanned, and the body offset of its first character. */
  private buf = "";
  private pos = 0;
  /** Pieces of the captured text from its start to `pos` (the current chunk's part is added when it ends). */
  private parts: string[] = [];
  /** The last characters before `buf` (for the keys looked back at), and the backslashes that ended them. */
  private tail = "";
  private tailBackslashes = 0;
  private depth = 0;
  private inString = false;
  /** Start of the current top-level member's text; -1 while none is being captured (the items array). */
  private memberStart = -1;
  /** Inside the items array. */
  private inItems = false;
  /** Start of the current item's text; -1 between items. */
  private itemStart = -1;
  private readonly members: string[] = [];
  private done = false;
  private readonly onItem: (item: never) => void;
  private readonly omitManagedFields: boolean;
  /** The object open at depth 4 is the current item's metadata. */
  private inMetadata = false;
  /** The current item's `"managedFields":[...]` text, from its key to after its `]`; -1 when none. */
  private cutFrom = -1;
  private cutTo = -1;

  constructor(onItem: (item: never) => void, omitManagedFields: boolean) {
    this.onItem = onItem;
    this.omitManagedFields = omitManagedFields;
  }

  push(text: string): void {
    if (!text) return;
    if (this.done) {
      if (text.trim() !== "") throw new SyntaxError("trailing data after the list answer");
      return;
    }
    this.buf = text;
    this.scan();
    // Keep the captured part of this chunk, and what the next one may look back at.
    const from = this.captureStart();
    if (from >= 0) this.parts.push(from > this.pos ? text.slice(from - this.pos) : text);
    this.tail = (this.tail + (text.length > LOOKBACK ? text.slice(-LOOKBACK) : text)).slice(-LOOKBACK);
    let run = 0;
    while (run < text.length && text.charCodeAt(text.length - 1 - run) === BACKSLASH) run++;
    this.tailBackslashes = run === text.length ? this.tailBackslashes + run : run;
    this.pos += text.length;
    this.buf = "";
  }

  /** Where the text being captured starts (an item, else a member of the list); -1 when none is. */
  private captureStart(): number {
    return this.itemStart >= 0 ? this.itemStart : this.memberStart;
  }

  /** The captured text from `from` (at or after the capture's start) to `end` (in the current chunk). */
  private captured(from: number, end: number): string {
    const start = this.captureStart();
    const head = start < this.pos ? this.parts.join("") : "";
    const text = head + this.buf.slice(Math.max(start - this.pos, 0), end - this.pos);
    return text.slice(from - start);
  }

  /** A capture started or ended: the pieces held so far are dropped. */
  private resetCapture(): void {
    this.parts = [];
  }

  /** Whether the body text just before `at` (absolute) ends with `key`. */
  private endsWith(at: number, key: string): boolean {
    const local = at - this.pos;
    if (local >= key.length) return this.buf.startsWith(key, local - key.length);
    return (this.tail + this.buf.slice(0, local)).endsWith(key);
  }

  private scan(): void {
    // Locals in the loop, written back at the end: this runs once per character outside strings.
    const buf = this.buf;
    const pos = this.pos;
    const n = buf.length;
    let i = 0;
    let depth = this.depth;
    let inString = this.inString;
    while (i < n) {
      if (inString) {
        // Strings are most of the text: jump to the next quote and count the backslashes before it.
        const q = buf.indexOf('"', i);
        if (q < 0) break;
        let b = q - 1;
        while (b >= 0 && buf.charCodeAt(b) === BACKSLASH) b--;
        let backslashes = q - 1 - b;
        if (b < 0) backslashes += this.tailBackslashes; // the run began in an earlier chunk
        i = q + 1;
        if (backslashes % 2 === 0) inString = false;
        continue;
      }
      const c = buf.charCodeAt(i++);
      if (c === QUOTE) {
        inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        depth++;
        if (depth === 3 && this.inItems) {
          this.itemStart = pos + i - 1;
          this.resetCapture();
        } else if (depth <= 2) this.open(c, depth, pos + i - 1);
        else if ((depth === 4 || depth === 5) && this.omitManagedFields && this.inItems)
          this.openInItem(c, depth, pos + i - 1);
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        depth--;
        if (depth === 2 && this.inItems && this.itemStart >= 0) {
          this.onItem(JSON.parse(this.itemText(pos + i)) as never);
          this.itemStart = -1;
          this.resetCapture();
        } else if (depth === 4 && this.cutFrom >= 0 && this.cutTo < 0) {
          this.cutTo = pos + i; // the managedFields array ended
        } else if (depth === 3) {
          this.inMetadata = false;
        } else if (depth <= 1) {
          this.close(depth, pos + i - 1);
          if (this.done) {
            if (buf.slice(i).trim() !== "") throw new SyntaxError("trailing data after the list answer");
            i = n;
          }
        }
      } else if (c === COMMA && depth === 1) {
        if (this.memberStart >= 0) this.members.push(this.captured(this.memberStart, pos + i - 1));
        this.memberStart = pos + i;
        this.resetCapture();
      }
    }
    this.depth = depth;
    this.inString = inString;
  }

  /** A `{` or `[` at `at` opened level 4 (a member of an item) or 5 (a member of that): metadata, managedFields. */
  private openInItem(c: number, depth: number, at: number): void {
    // The key must start a member (after `{` or `,`): in `"z\"metadata":` the quote is escaped, and the
    // field is the custom resource's own.
    if (depth === 4)
      this.inMetadata =
        c === OPEN_BRACE && (this.endsWith(at, ',"metadata":') || this.endsWith(at, '{"metadata":'));
    else if (this.inMetadata && c === OPEN_BRACKET && this.endsWith(at, '"managedFields":')) {
      this.cutFrom = at - 16;
      this.cutTo = -1;
    }
  }

  /** The text of the item that ends before `end`, without its managedFields member when one was found. */
  private itemText(end: number): string {
    const text = this.captured(this.itemStart, end);
    const from = this.cutFrom - this.itemStart;
    const to = this.cutTo - this.itemStart;
    const cut = this.cutFrom >= 0 && this.cutTo >= 0;
    this.cutFrom = this.cutTo = -1;
    this.inMetadata = false;
    return cut ? withoutMember(text, from, to) : text;
  }

  /** A `{` or `[` at `at` opened nesting level 1 (the list) or 2 (a member's value). */
  private open(c: number, depth: number, at: number): void {
    if (depth === 1) {
      if (c !== OPEN_BRACE) throw new SyntaxError("a list answer must be a JSON object");
      this.memberStart = at + 1;
      this.resetCapture();
    } else if (
      c === OPEN_BRACKET &&
      this.memberStart >= 0 &&
      ITEMS_KEY.test(this.captured(this.memberStart, at))
    ) {
      this.inItems = true;
      this.memberStart = -1;
      this.resetCapture();
    }
  }

  /** A `}` or `]` at `at` closed back to level 1 (a member's value or the items ended) or 0 (the list). */
  private close(depth: number, at: number): void {
    if (depth === 1) {
      this.inItems = false; // after the items array, the next comma starts a member
    } else if (depth === 0) {
      if (this.memberStart >= 0) this.members.push(this.captured(this.memberStart, at));
      this.memberStart = -1;
      this.resetCapture();
      this.done = true;
    }
  }

  end(): Record<string, unknown> {
    if (!this.done) throw new SyntaxError("the list answer ended early");
    const rest = JSON.parse(`{${this.members.filter((m) => m.trim() !== "").join(",")}}`) as Record<
      string,
      unknown
    >;
    return { ...rest, items: [] };
  }
}
