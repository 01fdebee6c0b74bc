/**
 * Label selectors as the API server understands them (`a=b,c!=d,e in (x,y),f notin (z),g,!h`), parsed
 * once and matched in memory by the cache and by predicates.
 */

/** One expression of a structured label selector (`matchExpressions`). */
export interface LabelSelectorRequirement {
  /** The label key the expression tests. */
  key: string;
  /** In / NotIn compare the value with `values`; Exists / DoesNotExist test only the key. */
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  /** The values for In and NotIn; empty for Exists and DoesNotExist. */
  values?: string[];
}

/** The structured form used in manifests (`spec.selector`). */
export interface LabelSelector {
  /** Labels that must have exactly these values. */
  matchLabels?: Record<string, string>;
  /** Further requirements; all must hold (AND). */
  matchExpressions?: LabelSelectorRequirement[];
}

/** A compiled selector: true when the labels match. Build one once and call it per object. */
export type LabelMatcher = (labels: Record<string, string> | undefined) => boolean;

/**
 * A label selector that does not parse or is not valid; the message quotes the selector and says what is
 * wrong.
 */
export class LabelSelectorError extends Error {
  constructor(selector: string, detail: string) {
    super(`invalid label selector "${selector}": ${detail}`);
    this.name = "LabelSelectorError";
  }
}

/** Parse a selector string into requirements (all must hold). */
export function parseLabelSelector(selector: string): LabelSelectorRequirement[] {
  const reqs: LabelSelectorRequirement[] = [];
  let i = 0;
  const s = selector;
  const skipWs = (): void => {
    while (i < s.length && s[i] === " ") i++;
  };
  const readToken = (): string => {
    skipWs();
    const start = i;
    while (i < s.length && !" ,=!()".includes(s[i] as string)) i++;
    return s.slice(start, i);
  };
  while (true) {
    skipWs();
    if (i >= s.length) break;
    if (s[i] === "!") {
      i++;
      const key = readToken();
      if (!key) throw new LabelSelectorError(selector, `missing key after '!' at ${i}`);
      reqs.push({ key, operator: "DoesNotExist" });
    } else {
      const key = readToken();
      if (!key) throw new LabelSelectorError(selector, `expected a key at ${i}`);
      skipWs();
      if (s.startsWith("!=", i)) {
        i += 2;
        reqs.push({ key, operator: "NotIn", values: [readToken()] });
      } else if (s.startsWith("==", i)) {
        i += 2;
        reqs.push({ key, operator: "In", values: [readToken()] });
      } else if (s[i] === "=") {
        i += 1;
        reqs.push({ key, operator: "In", values: [readToken()] });
      } else if (i >= s.length || s[i] === ",") {
        reqs.push({ key, operator: "Exists" });
      } else {
        const word = readToken();
        if (word !== "in" && word !== "notin")
          throw new LabelSelectorError(selector, `unexpected "${word}" after key "${key}"`);
        skipWs();
        if (s[i] !== "(") throw new LabelSelectorError(selector, `expected '(' after "${word}"`);
        const close = s.indexOf(")", i);
        if (close < 0) throw new LabelSelectorError(selector, "missing ')'");
        const values = s
          .slice(i + 1, close)
          .split(",")
          .map((v) => v.trim())
          .filter((v) => v !== "");
        i = close + 1;
        reqs.push({ key, operator: word === "in" ? "In" : "NotIn", values });
      }
    }
    skipWs();
    if (i < s.length) {
      if (s[i] !== ",") throw new LabelSelectorError(selector, `expected ',' at ${i}`);
      i++;
    }
  }
  return reqs;
}

export function matchRequirements(reqs: LabelSelectorRequirement[]): LabelMatcher {
  return (labels) => {
    const l = labels ?? {};
    return reqs.every((r) => {
      const has = Object.prototype.hasOwnProperty.call(l, r.key);
      switch (r.operator) {
        case "Exists":
          return has;
        case "DoesNotExist":
          return !has;
        case "In":
          return has && (r.values ?? []).includes(l[r.key] as string);
        case "NotIn":
          return !has || !(r.values ?? []).includes(l[r.key] as string);
      }
    });
  };
}

/** A matcher for a selector string ("" matches everything). */
export function labelMatcher(selector: string | undefined): LabelMatcher {
  if (!selector) return () => true;
  return matchRequirements(parseLabelSelector(selector));
}

/** The structured selector as requirements (matchLabels become `In` with one value). */
export function selectorRequirements(sel: LabelSelector): LabelSelectorRequirement[] {
  return [
    ...Object.entries(sel.matchLabels ?? {}).map(([key, v]) => ({
      key,
      operator: "In" as const,
      values: [v],
    })),
    ...(sel.matchExpressions ?? []),
  ];
}

/** The structured selector as the string form the API accepts in `?labelSelector=`. */
export function formatLabelSelector(sel: LabelSelector): string {
  return selectorRequirements(sel)
    .map((r) => {
      switch (r.operator) {
        case "Exists":
          return r.key;
        case "DoesNotExist":
          return `!${r.key}`;
        case "In":
          return r.values?.length === 1
            ? `${r.key}=${r.values[0]}`
            : `${r.key} in (${(r.values ?? []).join(",")})`;
        case "NotIn":
          return `${r.key} notin (${(r.values ?? []).join(",")})`;
      }
    })
    .join(",");
}
