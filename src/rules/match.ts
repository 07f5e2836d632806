/**
 * Which rules apply to a request: each rule's `match` (paths, methods) compiled once per isolate,
 * tested against every reading of the request path (path-readings.ts).
 */
import type { RuleConfig } from "../config/rule-schema";
import { pathReadings } from "./path-readings";

/** A rule with its `match` compiled once per isolate. */
export interface CompiledRule {
  rule: RuleConfig;
  /**
   * Whether the rule applies to this (upper-case) method and any of the path's readings
   * (pathReadings, computed once for all rules).
   */
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
      if (methods && !methods.has(method)) return false;
      if (!patterns) return true;
      // Any reading counts, once: the caller keeps or drops the rule, never counts per reading.
      return readings.some((reading) => patterns.some((pattern) => pattern.test(reading)));
    };
    return { rule, matchesReadings };
  });
}

/** The rules that apply to a request: the path's readings are computed once for all of them. */
export function applyingRules(
  rules: readonly CompiledRule[],
  method: string,
  path: string,
): RuleConfig[] {
  const readings = pathReadings(path);
  const upper = method.toUpperCase();
  return rules.filter((r) => r.matchesReadings(upper, readings)).map((r) => r.rule);
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

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
