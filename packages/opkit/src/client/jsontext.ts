/**
 * What the two managedFields cuts share (the streamed list's scanner in liststream.ts and the watch event's
 * in watch.ts): JSON's structural character codes, and the removal of one member from compact JSON text.
 */
export const QUOTE = 34;
export const BACKSLASH = 92;
export const COMMA = 44;
export const OPEN_BRACE = 123;
export const CLOSE_BRACE = 125;
export const OPEN_BRACKET = 91;
export const CLOSE_BRACKET = 93;

/**
 * `text` without the member that spans `from` (its key's quote) to `to` (after its value), and one comma
 * with it: the one before it, or the one after it when it came first.
 */
export function withoutMember(text: string, from: number, to: number): string {
  if (text.charCodeAt(from - 1) === COMMA) from--;
  else if (text.charCodeAt(to) === COMMA) to++;
  return text.slice(0, from) + text.slice(to);
}
