import type { RuleConfig } from "../config/limiter-config";

/** A rule with its `match` compiled once per isolate. */
export interface CompiledRule {
  rule: RuleConfig;
  matches(method: string, path: string): boolean;
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
 */
export function compileRules(rules: readonly RuleConfig[]): CompiledRule[] {
  return rules.map((rule) => {
    const caseSensitive = rule.match?.caseSensitive ?? false;
    const patterns = rule.match?.paths?.map((path) => compilePattern(path, { caseSensitive }));
    const methods = rule.match?.methods ? new Set(rule.match.methods) : undefined;
    return {
      rule,
      matches(method, path) {
        if (methods && !methods.has(method.toUpperCase())) return false;
        if (!patterns) return true;
        const normalized = normalizePath(path);
        return patterns.some((pattern) => pattern.test(normalized));
      },
    };
  });
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

/**
 * What the origin will most likely see: percent-encoded unreserved characters decoded
 * ("/%61pi" is "/api") and runs of "/" collapsed. Matching the raw path would let a client
 * dodge "/api/*" by spelling it differently while the origin serves the same resource.
 */
export function normalizePath(path: string): string {
  return path
    .replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
      const char = String.fromCharCode(Number.parseInt(hex, 16));
      return /[A-Za-z0-9\-._~]/.test(char) ? char : encoded.toUpperCase();
    })
    .replace(/\/{2,}/g, "/");
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
