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

const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;

/** `"items":` (whitespace allowed around the colon): the member whose array is streamed. */
const ITEMS_KEY = /^\s*"items"\s*:\s*$/;

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

/** The scanner's state between chunks; indexes are into `buf`, which is cut once per chunk. */
class ListScanner {
  private buf = "";
  private i = 0;
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
    this.buf += text;
    this.scan();
    // Keep only what is still needed: the item or member being captured, else nothing already scanned.
    const keep = this.itemStart >= 0 ? this.itemStart : this.memberStart >= 0 ? this.memberStart : this.i;
    if (keep > 0) {
      this.buf = this.buf.slice(keep);
      this.shift(keep);
    }
  }

  private shift(by: number): void {
    this.i -= by;
    if (this.cutFrom >= 0) this.cutFrom -= by;
    if (this.cutTo >= 0) this.cutTo -= by;
    if (this.memberStart >= 0) this.memberStart -= by;
    if (this.itemStart >= 0) this.itemStart -= by;
  }

  private scan(): void {
    // Locals in the loop, written back at the end: this runs once per character outside strings.
    const buf = this.buf;
    const n = buf.length;
    let i = this.i;
    let depth = this.depth;
    let inString = this.inString;
    while (i < n) {
      if (inString) {
        // Strings are most of the text: jump to the next quote and count the backslashes before it.
        const q = buf.indexOf('"', i);
        if (q < 0) {
          i = n;
          break;
        }
        let b = q - 1;
        while (buf.charCodeAt(b) === BACKSLASH) b--;
        i = q + 1;
        if ((q - 1 - b) % 2 === 0) inString = false;
        continue;
      }
      const c = buf.charCodeAt(i++);
      if (c === QUOTE) {
        inString = true;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        depth++;
        if (depth === 3 && this.inItems) this.itemStart = i - 1;
        else if (depth <= 2) this.open(c, depth, i - 1);
        else if ((depth === 4 || depth === 5) && this.omitManagedFields && this.inItems)
          this.openInItem(c, depth, i - 1);
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        depth--;
        if (depth === 2 && this.inItems && this.itemStart >= 0) {
          this.onItem(JSON.parse(this.itemText(i)) as never);
          this.itemStart = -1;
        } else if (depth === 4 && this.cutFrom >= 0 && this.cutTo < 0) {
          this.cutTo = i; // the managedFields array ended
        } else if (depth === 3) {
          this.inMetadata = false;
        } else if (depth <= 1) {
          this.close(depth, i - 1);
          if (this.done) {
            if (buf.slice(i).trim() !== "") throw new SyntaxError("trailing data after the list answer");
            i = n;
          }
        }
      } else if (c === COMMA && depth === 1) {
        if (this.memberStart >= 0) this.members.push(buf.slice(this.memberStart, i - 1));
        this.memberStart = i;
      }
    }
    this.i = i;
    this.depth = depth;
    this.inString = inString;
  }

  /** A `{` or `[` at `at` opened level 4 (a member of an item) or 5 (a member of that): metadata, managedFields. */
  private openInItem(c: number, depth: number, at: number): void {
    const buf = this.buf;
    if (depth === 4) this.inMetadata = c === OPEN_BRACE && buf.startsWith('"metadata":', at - 11);
    else if (this.inMetadata && c === OPEN_BRACKET && buf.startsWith('"managedFields":', at - 16)) {
      this.cutFrom = at - 16;
      this.cutTo = -1;
    }
  }

  /** The text of the item that ends before `end`, without its managedFields member when one was found. */
  private itemText(end: number): string {
    const buf = this.buf;
    let from = this.cutFrom;
    let to = this.cutTo;
    this.cutFrom = this.cutTo = -1;
    this.inMetadata = false;
    if (from < 0 || to < 0) return buf.slice(this.itemStart, end);
    // Drop one comma with the member: the one before it, or after it when it came first.
    if (buf.charCodeAt(from - 1) === COMMA) from--;
    else if (buf.charCodeAt(to) === COMMA) to++;
    return buf.slice(this.itemStart, from) + buf.slice(to, end);
  }

  /** A `{` or `[` at `at` opened nesting level 1 (the list) or 2 (a member's value). */
  private open(c: number, depth: number, at: number): void {
    if (depth === 1) {
      if (c !== OPEN_BRACE) throw new SyntaxError("a list answer must be a JSON object");
      this.memberStart = at + 1;
    } else if (
      c === OPEN_BRACKET &&
      this.memberStart >= 0 &&
      ITEMS_KEY.test(this.buf.slice(this.memberStart, at))
    ) {
      this.inItems = true;
      this.memberStart = -1;
    }
  }

  /** A `}` or `]` at `at` closed back to level 1 (a member's value or the items ended) or 0 (the list). */
  private close(depth: number, at: number): void {
    if (depth === 1) {
      this.inItems = false; // after the items array, the next comma starts a member
    } else if (depth === 0) {
      if (this.memberStart >= 0) this.members.push(this.buf.slice(this.memberStart, at));
      this.memberStart = -1;
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
