/**
 * Scheduling profiles from the `--config` file (after kube-scheduler's KubeSchedulerConfiguration):
 * each profile names the scheduler it serves (`schedulerName`, what pods put in `spec.schedulerName`),
 * which filter and score plugins it enables or disables against the defaults, the score weights, and
 * plugin arguments. A wrong file is refused as a whole with every problem named by its field path.
 *
 * ```yaml
 * apiVersion: opkit.dev/v1alpha1
 * kind: SchedulerConfiguration
 * profiles:
 *   - schedulerName: opkit-scheduler
 *     plugins:
 *       filter:
 *         enabled: [{ name: LabelPresence }]
 *       score:
 *         enabled: [{ name: LeastAllocated, weight: 5 }]
 *         disabled: [{ name: ImageLocality }]   # or [{ name: "*" }]: none of the defaults
 *     pluginConfig:
 *       - name: LabelPresence
 *         args: { labels: [selectable], presence: true }
 * ```
 */
import { parse } from "yaml";
import {
  labelPresence,
  nodeAffinity,
  nodeReady,
  nodeResourcesFit,
  taintToleration,
  type LabelPresenceArgs,
} from "./plugins/filters.ts";
import { balancedAllocation, imageLocality, leastAllocated, ownerSpread } from "./plugins/scores.ts";
import type { FilterPlugin, ScorePlugin } from "./plugins/types.ts";

/** The scheduler name served when no configuration names one. */
export const DEFAULT_SCHEDULER_NAME = "opkit-scheduler";

/** One scheduler: the filters a pod must pass and the weighted scores that rank the rest. */
export interface Profile {
  schedulerName: string;
  filters: readonly FilterPlugin[];
  scores: readonly { plugin: ScorePlugin; weight: number }[];
}

/** One problem of a configuration, at its field path (e.g. `profiles[0].plugins.score.enabled[1].weight`). */
export interface ConfigIssue {
  field: string;
  message: string;
}

/** A configuration file that cannot be used; the message lists every problem with its field. */
export class SchedulerConfigError extends Error {
  readonly source: string;
  readonly issues: readonly ConfigIssue[];
  constructor(source: string, issues: readonly ConfigIssue[]) {
    super(
      `invalid scheduler configuration ${source}: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
    );
    this.name = "SchedulerConfigError";
    this.source = source;
    this.issues = issues;
  }
}

const FILTERS: Readonly<Record<string, { default: boolean; make: (args: unknown) => FilterPlugin }>> = {
  NodeReady: { default: true, make: () => nodeReady },
  NodeAffinity: { default: true, make: () => nodeAffinity },
  TaintToleration: { default: true, make: () => taintToleration },
  NodeResourcesFit: { default: true, make: () => nodeResourcesFit },
  LabelPresence: { default: false, make: (args) => labelPresence(args as LabelPresenceArgs) },
};

const SCORES: Readonly<Record<string, { defaultWeight?: number; plugin: ScorePlugin }>> = {
  LeastAllocated: { defaultWeight: 1, plugin: leastAllocated },
  BalancedAllocation: { defaultWeight: 1, plugin: balancedAllocation },
  ImageLocality: { defaultWeight: 1, plugin: imageLocality },
  OwnerSpread: { defaultWeight: 1, plugin: ownerSpread },
};

/** Plugins that cannot run without arguments in `pluginConfig`. */
const NEEDS_ARGS = new Set(["LabelPresence"]);

const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_KEY_RE =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** The profile used without `--config`: every default plugin, weight 1, serving `schedulerName`. */
export function defaultProfile(schedulerName = DEFAULT_SCHEDULER_NAME): Profile {
  return {
    schedulerName,
    filters: Object.values(FILTERS)
      .filter((f) => f.default)
      .map((f) => f.make(undefined)),
    scores: Object.values(SCORES).map((s) => ({ plugin: s.plugin, weight: s.defaultWeight ?? 1 })),
  };
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Parse and validate a configuration file's text; `source` names it in errors. */
export function parseConfig(text: string, source: string): Profile[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new SchedulerConfigError(source, [
      { field: "(file)", message: `not YAML: ${(err as Error).message}` },
    ]);
  }
  const issues: ConfigIssue[] = [];
  const issue = (field: string, message: string): void => void issues.push({ field, message });
  const unknownKeys = (o: Obj, at: string, known: readonly string[]): void => {
    for (const k of Object.keys(o)) {
      if (!known.includes(k)) issue(at ? `${at}.${k}` : k, `unknown field (known: ${known.join(", ")})`);
    }
  };
  if (!isObj(doc))
    throw new SchedulerConfigError(source, [
      { field: "(file)", message: "must be a YAML mapping with profiles" },
    ]);
  unknownKeys(doc, "", ["apiVersion", "kind", "profiles"]);
  if (doc.apiVersion !== undefined && doc.apiVersion !== "opkit.dev/v1alpha1")
    issue("apiVersion", `must be opkit.dev/v1alpha1, got ${JSON.stringify(doc.apiVersion)}`);
  if (doc.kind !== undefined && doc.kind !== "SchedulerConfiguration")
    issue("kind", `must be SchedulerConfiguration, got ${JSON.stringify(doc.kind)}`);
  if (!Array.isArray(doc.profiles) || doc.profiles.length === 0) {
    issue("profiles", "must be a non-empty list of profiles");
    throw new SchedulerConfigError(source, issues);
  }
  const profiles: Profile[] = [];
  const names = new Set<string>();
  doc.profiles.forEach((raw: unknown, i: number) => {
    const at = `profiles[${i}]`;
    if (!isObj(raw)) return issue(at, "must be a mapping");
    unknownKeys(raw, at, ["schedulerName", "plugins", "pluginConfig"]);
    const name = raw.schedulerName ?? DEFAULT_SCHEDULER_NAME;
    if (typeof name !== "string" || !DNS_SUBDOMAIN_RE.test(name)) {
      issue(
        `${at}.schedulerName`,
        `must be a DNS subdomain (lowercase letters, digits, '-', '.'), got ${JSON.stringify(name)}`,
      );
    } else if (name === "default-scheduler") {
      issue(`${at}.schedulerName`, "default-scheduler is the cluster's own scheduler: pick another name");
    } else if (names.has(name)) {
      issue(`${at}.schedulerName`, `"${name}" is served by an earlier profile already`);
    } else names.add(name);

    // pluginConfig: arguments by plugin name.
    const args = new Map<string, unknown>();
    if (raw.pluginConfig !== undefined && !Array.isArray(raw.pluginConfig)) {
      issue(`${at}.pluginConfig`, "must be a list of { name, args }");
    }
    (Array.isArray(raw.pluginConfig) ? raw.pluginConfig : []).forEach((pc: unknown, j: number) => {
      const pat = `${at}.pluginConfig[${j}]`;
      if (!isObj(pc)) return issue(pat, "must be a mapping { name, args }");
      unknownKeys(pc, pat, ["name", "args"]);
      if (pc.name !== "LabelPresence") {
        return issue(`${pat}.name`, `only LabelPresence takes arguments, got ${JSON.stringify(pc.name)}`);
      }
      if (args.has(pc.name)) return issue(`${pat}.name`, `${pc.name} is configured twice`);
      const a = pc.args;
      if (!isObj(a)) return issue(`${pat}.args`, "must be a mapping { labels, presence }");
      unknownKeys(a, `${pat}.args`, ["labels", "presence"]);
      if (!Array.isArray(a.labels) || a.labels.length === 0) {
        issue(`${pat}.args.labels`, "must be a non-empty list of label keys");
      } else {
        a.labels.forEach((l: unknown, k: number) => {
          if (typeof l !== "string" || !LABEL_KEY_RE.test(l))
            issue(`${pat}.args.labels[${k}]`, `not a label key: ${JSON.stringify(l)}`);
        });
      }
      if (typeof a.presence !== "boolean") issue(`${pat}.args.presence`, "must be true or false");
      args.set(pc.name, a);
    });

    const plugins = raw.plugins ?? {};
    if (!isObj(plugins)) return issue(`${at}.plugins`, "must be a mapping with filter and score");
    unknownKeys(plugins, `${at}.plugins`, ["filter", "score"]);
    const filterNames = resolve(plugins.filter, `${at}.plugins.filter`, FILTERS, false, issue);
    const scoreEntries = resolve(plugins.score, `${at}.plugins.score`, SCORES, true, issue);
    for (const n of filterNames.map((e) => e.name)) {
      if (NEEDS_ARGS.has(n) && !args.has(n))
        issue(`${at}.pluginConfig`, `${n} is enabled but has no arguments: add { name: ${n}, args: {...} }`);
    }
    for (const n of args.keys()) {
      if (!filterNames.some((e) => e.name === n))
        issue(`${at}.pluginConfig`, `${n} has arguments but is not enabled in plugins.filter`);
    }
    if (issues.length) return;
    profiles.push({
      schedulerName: name as string,
      filters: filterNames.map((e) => (FILTERS[e.name] as (typeof FILTERS)[string]).make(args.get(e.name))),
      scores: scoreEntries.map((e) => ({
        plugin: (SCORES[e.name] as (typeof SCORES)[string]).plugin,
        weight: e.weight,
      })),
    });
  });
  if (issues.length) throw new SchedulerConfigError(source, issues);
  return profiles;
}

/**
 * One extension point's plugins: the defaults, minus `disabled` (`*` for all), plus `enabled` (an
 * enabled default keeps its place and takes the new weight).
 */
function resolve(
  raw: unknown,
  at: string,
  known: Readonly<Record<string, { default?: boolean; defaultWeight?: number }>>,
  weighted: boolean,
  issue: (field: string, message: string) => void,
): { name: string; weight: number }[] {
  const defaults = Object.entries(known)
    .filter(([, k]) => (weighted ? k.defaultWeight !== undefined : k.default))
    .map(([name, k]) => ({ name, weight: k.defaultWeight ?? 1 }));
  if (raw === undefined) return defaults;
  if (!isObj(raw)) {
    issue(at, "must be a mapping with enabled and disabled lists");
    return defaults;
  }
  for (const k of Object.keys(raw))
    if (k !== "enabled" && k !== "disabled") issue(`${at}.${k}`, "unknown field (known: enabled, disabled)");
  const list = (key: "enabled" | "disabled"): { name: string; weight?: number }[] => {
    const v = raw[key];
    if (v === undefined) return [];
    if (!Array.isArray(v)) {
      issue(
        `${at}.${key}`,
        "must be a list of { name" + (weighted && key === "enabled" ? ", weight }" : " }"),
      );
      return [];
    }
    const out: { name: string; weight?: number }[] = [];
    const seen = new Set<string>();
    v.forEach((e: unknown, i: number) => {
      const eat = `${at}.${key}[${i}]`;
      if (!isObj(e)) return issue(eat, "must be a mapping { name" + (weighted ? ", weight }" : " }"));
      const allowed = weighted && key === "enabled" ? ["name", "weight"] : ["name"];
      for (const k of Object.keys(e))
        if (!allowed.includes(k)) issue(`${eat}.${k}`, `unknown field (known: ${allowed.join(", ")})`);
      const name = e.name;
      const star = key === "disabled" && name === "*";
      if (typeof name !== "string" || (!star && !Object.hasOwn(known, name))) {
        return issue(
          `${eat}.name`,
          `unknown plugin ${JSON.stringify(name)} (known: ${Object.keys(known).join(", ")}${key === "disabled" ? ", *" : ""})`,
        );
      }
      if (seen.has(name)) return issue(`${eat}.name`, `${name} is listed twice`);
      seen.add(name);
      if (
        e.weight !== undefined &&
        (typeof e.weight !== "number" || !Number.isInteger(e.weight) || e.weight < 1 || e.weight > 100)
      ) {
        return issue(
          `${eat}.weight`,
          `must be a whole number from 1 to 100, got ${JSON.stringify(e.weight)}`,
        );
      }
      out.push({ name, weight: typeof e.weight === "number" ? e.weight : undefined });
    });
    return out;
  };
  const disabled = list("disabled");
  const enabled = list("enabled");
  const off = new Set(disabled.map((d) => d.name));
  const result = off.has("*") ? [] : defaults.filter((d) => !off.has(d.name));
  for (const e of enabled) {
    const existing = result.find((r) => r.name === e.name);
    if (existing) existing.weight = e.weight ?? existing.weight;
    else result.push({ name: e.name, weight: e.weight ?? 1 });
  }
  return result;
}
