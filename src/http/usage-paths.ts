/**
 * Where a usage figure sits in a JSON document, and what counts as one. Shared by the JSON body
 * and the event-stream readers (usage-reader.ts), so both apply the same rule: each path keeps
 * the last valid value seen for it; the paths' values are summed, a path never seen counting 0,
 * unless no path was ever seen, and then there is no usage at all.
 */

/** The largest usage a response may report: what a usage rule's limit can hold. */
const MAX_USAGE = 1_000_000_000_000;

/** A path split once: its segments, and the text a JSON document must contain to hold it. */
export type UsagePath = {
  readonly segments: readonly string[];
  readonly needle: string | undefined;
};

/**
 * Splits each dot-separated path into its segments. Throws a TypeError on an empty list, an
 * empty path or an empty segment: a spec is validated with its configuration, so this is a
 * programming error, never a property of a response.
 */
export function compilePaths(json: string | readonly string[]): UsagePath[] {
  const list = typeof json === "string" ? [json] : json;
  if (list.length === 0) throw new TypeError("usage.json: at least one path");
  return list.map((path) => {
    const segments = path.split(".");
    if (segments.some((segment) => segment === "")) {
      throw new TypeError(`usage.json: "${path}" has an empty segment`);
    }
    const last = segments[segments.length - 1] as string;
    // A key is found in the text either as it is spelt or with a \u escape (which the caller
    // also looks for). A key holding a character JSON may escape otherwise (", \, /, a control
    // character) gets no needle: every document is then parsed.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are the point
    const needle = /["\\/\u0000-\u001f]/.test(last) ? undefined : last;
    return { segments, needle };
  });
}

/**
 * The keys a document's text must contain (as spelt, or through a \u escape) to hold one of the
 * paths, or undefined when a path's key could be spelt otherwise and every document must be
 * parsed. Lets a stream skip JSON.parse for the events that cannot carry usage (all but one or
 * two of an LLM's).
 */
export function compilePathNeedles(paths: readonly UsagePath[]): string[] | undefined {
  const needles: string[] = [];
  for (const path of paths) {
    if (path.needle === undefined) return undefined;
    needles.push(path.needle);
  }
  return needles;
}

/** A usage figure: a JSON number whose value is an integer in [0, 10¹²]; anything else is not. */
export function usageValue(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= MAX_USAGE
    ? value
    : undefined;
}

/** The value at a path of a parsed document, through own properties of objects only. */
function valueAt(document: unknown, segments: readonly string[]): unknown {
  let at = document;
  for (const segment of segments) {
    if (typeof at !== "object" || at === null || Array.isArray(at)) return undefined;
    if (!Object.hasOwn(at, segment)) return undefined;
    at = (at as Record<string, unknown>)[segment];
  }
  return at;
}

/** The last valid value seen for each path, across the documents recorded. */
export class UsageTally {
  private readonly seen: (number | undefined)[];

  constructor(private readonly paths: readonly UsagePath[]) {
    this.seen = paths.map(() => undefined);
  }

  /**
   * Records the document's values: a path whose value here is valid takes it; one missing or
   * invalid here keeps what an earlier document gave (OpenAI sends `"usage": null` in every
   * chunk but the last).
   */
  record(document: unknown): void {
    if (typeof document !== "object" || document === null || Array.isArray(document)) return;
    for (let i = 0; i < this.paths.length; i++) {
      const value = usageValue(valueAt(document, (this.paths[i] as UsagePath).segments));
      if (value !== undefined) this.seen[i] = value;
    }
  }

  /**
   * The sum of the paths' values (a missing one counting 0), or undefined when none was seen.
   * A sum past 10¹² (several paths, each valid) counts 10¹²: the request used at least what a
   * usage rule's limit can hold, and a settle refuses more, which would leave only the
   * reservation charged.
   */
  total(): number | undefined {
    let any = false;
    let sum = 0;
    for (const value of this.seen) {
      if (value === undefined) continue;
      any = true;
      sum += value;
    }
    return any ? Math.min(sum, MAX_USAGE) : undefined;
  }
}
