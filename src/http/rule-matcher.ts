import type { RuleConfig } from "../config/limiter-config";

/** A rule with its `match` compiled once per isolate. */
export interface CompiledRule {
  rule: RuleConfig;
  matches(method: string, path: string): boolean;
}

/**
 * Compiles path patterns to anchored regular expressions:
 * - literal segments match themselves (case-sensitive, like paths);
 * - ":name" matches one non-empty segment;
 * - "*" matches anything, "/" included; a trailing "/*" also matches the bare prefix
 *   ("/api/*" matches "/api", "/api/", "/api/v1/users"), as in Hono.
 */
export function compileRules(rules: readonly RuleConfig[]): CompiledRule[] {
  return rules.map((rule) => {
    const patterns = rule.match?.paths?.map(compilePattern);
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

export function compilePattern(pattern: string): RegExp {
  let source = "";
  let rest = pattern;
  if (rest.endsWith("/*")) rest = rest.slice(0, -2);
  const tail = rest === pattern ? "" : "(?:/.*)?";
  for (const segment of rest.split(/(\*|:[A-Za-z0-9_]+)/)) {
    if (segment === "*") source += ".*";
    else if (segment.startsWith(":") && segment.length > 1) source += "[^/]+";
    else source += escapeRegExp(segment);
  }
  return new RegExp(`^${source}${tail}$`);
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
