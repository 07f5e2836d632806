/**
 * Which rules apply to a request: each rule's `match` (paths, methods) compiled once per isolate,
 * tested against every reading of the request path (path-readings.ts).
 */
import type { RuleConfig } from "../config/rule-schema";
import { pathReadings } from "./path-readings";

/**
 * The longest request path that is read and matched (characters, the query excluded). A longer
 * path is junk to every common origin (most refuse 8 KB of request line), but it must not escape
 * a limit by being long: it applies to every rule whose methods fit, path patterns or not.
 * Over-counting a junk path is harmless; under-counting would be a bypass. Below the bound,
 * matching costs at most 16 readings × this many characters × (pattern length / 32) word steps
 * per pattern.
 */
export const MAX_MATCHED_PATH_LENGTH = 8_192;

/** A rule with its `match` compiled once per isolate. */
export interface CompiledRule {
  rule: RuleConfig;
  /**
   * Whether the rule applies to this (upper-case) method and any of the path's readings
   * (pathReadings, computed once for all rules); `undefined` readings: a path too long to read
   * (MAX_MATCHED_PATH_LENGTH), which every path pattern is taken to fit.
   */
  matchesReadings(method: string, readings: readonly string[] | undefined): boolean;
}

/**
 * Compiles each rule's path patterns (compilePattern). A rule listing GET also applies to HEAD:
 * frameworks (Express, Hono, Spring, Rails) answer HEAD with the GET handler, so the origin does
 * the same work.
 */
export function compileRules(rules: readonly RuleConfig[]): CompiledRule[] {
  return rules.map((rule) => {
    const caseSensitive = rule.match?.caseSensitive ?? false;
    const patterns = rule.match?.paths?.map((path) => compilePattern(path, { caseSensitive }));
    const methods = rule.match?.methods ? new Set(rule.match.methods) : undefined;
    if (methods?.has("GET")) methods.add("HEAD");
    const matchesReadings = (method: string, readings: readonly string[] | undefined) => {
      if (methods && !methods.has(method)) return false;
      if (!patterns || !readings) return true;
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
  const readings = path.length > MAX_MATCHED_PATH_LENGTH ? undefined : pathReadings(path);
  const upper = method.toUpperCase();
  return rules.filter((r) => r.matchesReadings(upper, readings)).map((r) => r.rule);
}

export interface PatternOptions {
  /** @default true (compileRules passes the rule's `match.caseSensitive`, default false) */
  caseSensitive?: boolean;
}

/** A compiled path pattern: whether a whole path fits it. */
export interface PathMatcher {
  test(path: string): boolean;
}

// The matcher's work so far, in state-set word updates (one per path character per 32 pattern
// positions): what the tests read to show that matching is linear in the path.
let steps = 0;
/** Word updates every matcher made so far (see compilePattern); for tests. */
export const matcherSteps = (): number => steps;

const SLASH = 0x2f;
const LITERAL = 0;
const PARAM = 1;
const STAR = 2;

/**
 * Compiles a path pattern:
 * - literal segments match themselves (case-insensitively unless the rule says `caseSensitive`:
 *   see RuleMatch; ASCII letters only fold, as a non-Unicode `i` regex does);
 * - one trailing "/" on the path is tolerated ("/login" matches "/login/"): most origins serve
 *   both, so the slash must not be a way around the limit;
 * - ":name" ([A-Za-z0-9_]+) matches one non-empty segment;
 * - "*" matches anything, "/" included; a trailing "/*" also matches the bare prefix
 *   ("/api/*" matches "/api", "/api/", "/api/v1/users"), as in Hono.
 *
 * Not a regular expression: a backtracking engine takes time polynomial in the path for a
 * pattern with several "*" ("/a/*\/b/*\/c/*\/d" against 8 KB: seconds). The pattern is a
 * Thompson automaton over its positions, and the path is read once, left to right, with the set
 * of live positions as a bit set (shift-and): each character costs one update per 32 positions,
 * whatever the pattern, so a match is O(path × pattern / 32) with the pattern at most 256
 * characters (MAX_PATH_PATTERN_LENGTH, rule-schema.ts). It stops as soon as no position is live.
 */
export function compilePattern(pattern: string, options: PatternOptions = {}): PathMatcher {
  const prefixOnly = pattern.endsWith("/*");
  let rest = prefixOnly ? pattern.slice(0, -2) : pattern;
  // One trailing slash either way: "/login" and "/login/" name the same route on most origins.
  if (rest.length > 1 && rest.endsWith("/")) rest = rest.slice(0, -1);
  // Token i (1-based) leads from state i - 1 to state i; state 0 is the start.
  const kinds: number[] = [];
  const codes: number[] = [];
  const push = (kind: number, code = -1) => {
    // "**" is "*": two stars in a row would chain two empty moves.
    if (kind === STAR && kinds.at(-1) === STAR) return;
    kinds.push(kind);
    codes.push(code);
  };
  for (const piece of rest.split(/(\*|:[A-Za-z0-9_]+)/)) {
    if (piece === "*") push(STAR);
    else if (/^:[A-Za-z0-9_]+$/.test(piece)) push(PARAM);
    else for (let i = 0; i < piece.length; i++) push(LITERAL, piece.charCodeAt(i));
  }
  const body = kinds.length;
  // The tail: "/" then the end, or (a trailing "/*") "/" then anything; either may be absent.
  push(LITERAL, SLASH);
  if (prefixOnly) push(STAR);
  const finals = [body, kinds.length];
  return new ShiftAndMatcher(kinds, codes, finals, options.caseSensitive !== false);
}

class ShiftAndMatcher implements PathMatcher {
  private readonly words: number;
  /** Row c (an ASCII code; row 128: any other character): the states entered by reading c. */
  private readonly enter: Uint32Array;
  /** The states a character keeps: ":name" and "*" states (row 0: on "/", only "*"). */
  private readonly stay: Uint32Array;
  /** The "*" states, entered without reading (from the state before). */
  private readonly star: Uint32Array;
  private readonly final: Uint32Array;
  /** Non-ASCII literal characters (none from a valid config): code → its enter row. */
  private readonly wide = new Map<number, Uint32Array>();
  private readonly start: Uint32Array;
  private current: Uint32Array;
  private next: Uint32Array;

  constructor(
    kinds: readonly number[],
    codes: readonly number[],
    finals: readonly number[],
    private readonly caseSensitive: boolean,
  ) {
    const words = (kinds.length + 1 + 31) >>> 5;
    this.words = words;
    this.enter = new Uint32Array(129 * words);
    this.stay = new Uint32Array(2 * words);
    this.star = new Uint32Array(words);
    this.final = new Uint32Array(words);
    const set = (into: Uint32Array, row: number, state: number) => {
      const index = row * words + (state >>> 5);
      into[index] = (into[index] as number) | (1 << (state & 31));
    };
    for (let t = 0; t < kinds.length; t++) {
      const state = t + 1;
      const kind = kinds[t];
      const code = codes[t] ?? -1;
      if (kind === LITERAL) {
        if (code < 128) {
          set(this.enter, code, state);
          const other = caseSensitive ? code : otherCase(code);
          if (other !== code) set(this.enter, other, state);
        } else {
          const key = this.fold(code);
          const row = this.wide.get(key) ?? new Uint32Array(words);
          this.wide.set(key, row);
          set(row, 0, state);
        }
        continue;
      }
      // ":name" and "*" read any character, ":name" every one but "/".
      for (let c = 0; c <= 128; c++) if (kind === STAR || c !== SLASH) set(this.enter, c, state);
      set(this.stay, 1, state);
      if (kind === STAR) {
        set(this.stay, 0, state);
        set(this.star, 0, state);
      }
    }
    for (const row of this.wide.values()) {
      for (let w = 0; w < words; w++) {
        row[w] = (row[w] as number) | (this.enter[128 * words + w] as number);
      }
    }
    for (const state of finals) set(this.final, 0, state);
    this.start = new Uint32Array(words);
    set(this.start, 0, 0);
    this.close(this.start);
    this.current = new Uint32Array(words);
    this.next = new Uint32Array(words);
  }

  test(path: string): boolean {
    const { words, enter, stay } = this;
    let current = this.current;
    let next = this.next;
    current.set(this.start);
    let read = 0;
    let live = true;
    for (; read < path.length && live; read++) {
      const code = path.charCodeAt(read);
      let row: Uint32Array = enter;
      let offset: number;
      if (code < 128) offset = code * words;
      else {
        const wide = this.wide.size > 0 ? this.wide.get(this.fold(code)) : undefined;
        if (wide) {
          row = wide;
          offset = 0;
        } else offset = 128 * words;
      }
      const stayOffset = code === SLASH ? 0 : words;
      let carry = 0;
      for (let w = 0; w < words; w++) {
        const d = current[w] as number;
        next[w] =
          (((d << 1) | carry) & (row[offset + w] as number)) |
          (d & (stay[stayOffset + w] as number));
        carry = d >>> 31;
      }
      live = this.close(next);
      const swap = current;
      current = next;
      next = swap;
    }
    steps += read * words;
    this.current = current;
    this.next = next;
    if (!live) return false;
    for (let w = 0; w < words; w++) {
      if (((current[w] as number) & (this.final[w] as number)) !== 0) return true;
    }
    return false;
  }

  /** Adds the "*" states entered without reading (never two in a row); whether any is live. */
  private close(states: Uint32Array): boolean {
    let carry = 0;
    let any = 0;
    for (let w = 0; w < this.words; w++) {
      const d = states[w] as number;
      const all = d | (((d << 1) | carry) & (this.star[w] as number));
      states[w] = all;
      any |= all;
      carry = d >>> 31;
    }
    return any !== 0;
  }

  /** A non-ASCII code as a non-Unicode `i` regex compares it (Canonicalize: its upper case). */
  private fold(code: number): number {
    if (this.caseSensitive) return code;
    const upper = String.fromCharCode(code).toUpperCase();
    const folded = upper.length === 1 ? upper.charCodeAt(0) : code;
    return folded < 128 ? code : folded;
  }
}

/** The other case of an ASCII letter; any other code itself. */
function otherCase(code: number): number {
  if (code >= 0x41 && code <= 0x5a) return code + 0x20;
  if (code >= 0x61 && code <= 0x7a) return code - 0x20;
  return code;
}
