import type { RuleConfig } from "../config/limiter-config";

/** A rule with its `match` compiled once per isolate. */
export interface CompiledRule {
  rule: RuleConfig;
  /** Whether the rule applies to this method and path, under any of the path's readings. */
  matches(method: string, path: string): boolean;
  /** The same for a path's readings (pathReadings), computed once for all rules. */
  matchesReadings(method: string, readings: readonly string[]): boolean;
}

/**
 * Compiles path patterns to anchored regular expressions:
 * - literal segments match themselves (case-insensitively unless the rule says `caseSensitive`:
 *   see RuleMatch);
 * - one trailing "/" on the path is tolerated ("/login" matches "/login/"): most origins serve
 *   both, so the slash must not be a way around the limit;
 * - ":name" matches one non-empty segment;
 * - "*" matches anything, "/" included; a trailing "/*" also matches the bare prefix
 *   ("/api/*" matches "/api", "/api/", "/api/v1/users"), as in Hono.
 * A rule listing GET also applies to HEAD: frameworks (Express, Hono, Spring, Rails) answer HEAD
 * with the GET handler, so the origin does the same work.
 */
export function compileRules(rules: readonly RuleConfig[]): CompiledRule[] {
  return rules.map((rule) => {
    const caseSensitive = rule.match?.caseSensitive ?? false;
    const patterns = rule.match?.paths?.map((path) => compilePattern(path, { caseSensitive }));
    const methods = rule.match?.methods ? new Set(rule.match.methods) : undefined;
    if (methods?.has("GET")) methods.add("HEAD");
    const matchesReadings = (method: string, readings: readonly string[]) => {
      if (methods && !methods.has(method.toUpperCase())) return false;
      if (!patterns) return true;
      // Any reading counts, once: the caller keeps or drops the rule, never counts per reading.
      return readings.some((reading) => patterns.some((pattern) => pattern.test(reading)));
    };
    return {
      rule,
      matchesReadings,
      matches: (method, path) => matchesReadings(method, pathReadings(path)),
    };
  });
}

/** The rules that apply to a request: the path's readings are computed once for all of them. */
export function applyingRules(
  rules: readonly CompiledRule[],
  method: string,
  path: string,
): RuleConfig[] {
  const readings = pathReadings(path);
  return rules.filter((r) => r.matchesReadings(method, readings)).map((r) => r.rule);
}

export interface PatternOptions {
  /** @default true (compileRules passes the rule's `match.caseSensitive`, default false) */
  caseSensitive?: boolean;
}

export function compilePattern(pattern: string, options: PatternOptions = {}): RegExp {
  let source = "";
  const prefixOnly = pattern.endsWith("/*");
  let rest = prefixOnly ? pattern.slice(0, -2) : pattern;
  // One trailing slash either way: "/login" and "/login/" name the same route on most origins.
  if (rest.length > 1 && rest.endsWith("/")) rest = rest.slice(0, -1);
  const tail = prefixOnly ? "(?:/.*)?" : "/?";
  for (const segment of rest.split(/(\*|:[A-Za-z0-9_]+)/)) {
    if (segment === "*") source += ".*";
    else if (segment.startsWith(":") && segment.length > 1) source += "[^/]+";
    else source += escapeRegExp(segment);
  }
  return new RegExp(`^${source}${tail}$`, options.caseSensitive === false ? "i" : "");
}

// What can make some server read a path differently from its plain spelling: a percent escape,
// ";", "\\", a blank, "//", or a segment ending in "." (dot segments, IIS trailing dots).
const UNPLAIN = /[%;\\ ]|\/\/|\.(?:\/|$)/;

/**
 * Every path a common origin may route this request path to, deduplicated. A limiter must err
 * toward counting: a rule applies if any reading matches it. Each reading decodes percent-encoded
 * unreserved characters ("/%6Cogin" is "/login", "%2e" is "."), resolves dot segments and drops
 * empty ones ("//"), and applies any combination of:
 * - separators decoded first: "%2F", "%5C" and "\\" read as "/" (and "%3B" as ";") before dot
 *   segments are resolved, as servers that decode before normalising do ("/x/..%2Flogin");
 * - ";" parameters removed from each segment (Tomcat, Jetty, Spring: "/login;jsessionid=1",
 *   "/x/..;/login");
 * - trailing dots and blanks removed from each segment (IIS: "/login.", "/login%20").
 * Empty segments are dropped before dot segments are resolved (nginx's merge_slashes) and after
 * (the URL standard): "/a//../login" is both "/login" and "/a/login".
 * A plain path (the common case) is its only reading, with no parsing.
 */
export function pathReadings(path: string): readonly string[] {
  if (path.startsWith("/") && !UNPLAIN.test(path)) return [path];
  const decoded = path.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return /[A-Za-z0-9\-._~]/.test(char) ? char : encoded.toUpperCase();
  });
  const sources = [decoded];
  const separated = decoded.replace(/%2F|%5C|\\/g, "/").replace(/%3B/g, ";");
  if (separated !== decoded) sources.push(separated);
  const readings = new Set<string>();
  for (const source of sources) {
    const plain = source.split("/");
    const variants = [plain];
    if (source.includes(";")) variants.push(plain.map(withoutParams));
    for (const variant of [...variants]) {
      const stripped = variant.map(withoutTrailingDots);
      if (stripped.some((segment, i) => segment !== variant[i])) variants.push(stripped);
    }
    for (const variant of variants) {
      readings.add(resolveDotSegments(variant, true));
      readings.add(resolveDotSegments(variant, false));
    }
  }
  return [...readings];
}

function withoutParams(segment: string): string {
  const semicolon = segment.indexOf(";");
  return semicolon < 0 ? segment : segment.slice(0, semicolon);
}

function withoutTrailingDots(segment: string): string {
  const stripped = segment.replace(/(?:\.|%20| )+$/, "");
  if (stripped !== "") return stripped;
  // "." and ".." (with trailing blanks) stay dot segments; "..." and the like become empty.
  const dots = segment.replace(/(?:%20| )+$/, "");
  return dots === "." || dots === ".." ? dots : "";
}

/** RFC 3986 remove_dot_segments over "/"-split segments; empty ones dropped before or after. */
function resolveDotSegments(segments: readonly string[], dropEmptyFirst: boolean): string {
  const out: string[] = [];
  for (const segment of segments) {
    if (segment === "." || (segment === "" && dropEmptyFirst)) continue;
    if (segment === "..") out.pop();
    else out.push(segment);
  }
  return `/${out.filter((segment) => segment !== "").join("/")}`;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
