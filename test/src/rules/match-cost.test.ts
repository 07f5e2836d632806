// What matching a request path may cost, for any path a client sends and any pattern the config
// accepts: linear in the path (counted in matcher steps, not timed), the path read up to
// MAX_MATCHED_PATH_LENGTH and a longer one applying to every rule (never escaping one).
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";
import { MAX_PATH_PATTERN_LENGTH } from "../../../src/config/rule-schema";
import {
  applyingRules,
  compilePattern,
  compileRules,
  MAX_MATCHED_PATH_LENGTH,
  matcherSteps,
} from "../../../src/rules/match";
import { pathReadings } from "../../../src/rules/path-readings";
import { scopedPrefix } from "../../support/worker/redis";
import { originCount, workerWith } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("match-cost");
const run = crypto.randomUUID().slice(0, 8);

/**
 * About `length` characters that every "*" of `/a/*\/b/*\/c/*\/d`-like patterns can stretch over
 * without a match (the last literal never comes), ending in what gives a path many readings.
 */
function hostilePath(length: number, tail = "/p//..;x/a.%2F..;y//../b."): string {
  let path = "/a";
  while (path.length + 4 + tail.length <= length) path += "/b/c";
  return path + tail;
}

/** A pattern's steps (word updates) over one path: its cost, whatever the clock says. */
function stepsOf(pattern: string, path: string): number {
  const matcher = compilePattern(pattern, { caseSensitive: false });
  const before = matcherSteps();
  matcher.test(path);
  return matcherSteps() - before;
}

describe("path matching cost", () => {
  const patterns = [
    "/a/*/b/*/c/*/d",
    "/a/*/b/*/c/*/d/*/e/*/f",
    "/api/*/items/*/edit",
    "/*/*/*/*/*/*/*/*/zz",
    "/:x/*/:y/*/:z/*/q",
    "/a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q*r*s*t*u*v*w*x*y*z*0*1*2*3*4*5*6*7*8*9",
    // The longest pattern the config takes: 256 characters, 85 stars (9 words of state).
    `/${"*x/".repeat(85)}`.slice(0, MAX_PATH_PATTERN_LENGTH),
  ];

  it("the config takes patterns of up to 256 characters and names a longer one's cap", () => {
    const withPath = (path: string) =>
      parseConfig({ rules: [{ name: "r", limit: 1, window: "1m", match: { path } }] });
    expect(withPath(`/${"*x/".repeat(85)}`.slice(0, MAX_PATH_PATTERN_LENGTH)).ok).toBe(true);
    const long = withPath(`/${"a".repeat(MAX_PATH_PATTERN_LENGTH)}`);
    expect(long).toMatchObject({
      ok: false,
      field: "rules[0].match.path",
      detail: expect.stringContaining(`at most ${MAX_PATH_PATTERN_LENGTH} characters`),
    });
  });

  it("takes at most one step per character per 32 pattern positions, for every pattern", () => {
    for (const pattern of patterns) {
      expect(pattern.length, pattern).toBeLessThanOrEqual(MAX_PATH_PATTERN_LENGTH);
      const words = Math.ceil((pattern.length + 3) / 32);
      for (const length of [1_024, 4_096, MAX_MATCHED_PATH_LENGTH]) {
        const path = hostilePath(length);
        const steps = stepsOf(pattern, path);
        expect(steps, `${pattern} over ${length}`).toBeLessThanOrEqual(path.length * words);
      }
      // Twice the path, at most twice the steps: linear, not polynomial.
      const short = stepsOf(pattern, hostilePath(4_096));
      const long = stepsOf(pattern, hostilePath(8_192));
      expect(long, pattern).toBeLessThanOrEqual(2 * short + 64);
    }
  });

  it("matches every reading of a hostile path at the bound in a bounded number of steps", () => {
    const parsed = parseConfig({
      rules: patterns.map((path, i) => ({
        name: `r${i}`,
        limit: 1,
        window: "1m",
        match: { path },
      })),
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const rules = compileRules(parsed.value.rules);
    const path = hostilePath(MAX_MATCHED_PATH_LENGTH);
    const readings = pathReadings(path);
    expect(readings.length).toBeGreaterThan(8);
    expect(readings.length).toBeLessThanOrEqual(16);
    for (const reading of readings) expect(reading.length).toBeLessThanOrEqual(path.length);
    const before = matcherSteps();
    expect(applyingRules(rules, "GET", path)).toEqual([]);
    const steps = matcherSteps() - before;
    // 16 readings × the bound × the patterns' words (1, 1, 1, 1, 1, 3, 9): 2.2 M at most; the old
    // regex needed seconds of CPU for the first pattern alone.
    expect(steps).toBeLessThanOrEqual(16 * MAX_MATCHED_PATH_LENGTH * 17);
  });

  it("a path longer than the bound applies to every rule whose methods fit", () => {
    const parsed = parseConfig({
      rules: [
        { name: "login", limit: 1, window: "1m", match: { path: "/login", methods: ["POST"] } },
        { name: "api", limit: 1, window: "1m", match: { path: "/api/*" } },
        { name: "all", limit: 1, window: "1m" },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const rules = compileRules(parsed.value.rules);
    const names = (method: string, path: string) =>
      applyingRules(rules, method, path).map((rule) => rule.name);
    const long = `/static/${"x".repeat(MAX_MATCHED_PATH_LENGTH)}`;
    expect(names("POST", long)).toEqual(["login", "api", "all"]);
    expect(names("GET", long)).toEqual(["api", "all"]);
    // At the bound the path is still read as it is.
    const atBound = `/static/${"x".repeat(MAX_MATCHED_PATH_LENGTH - 8)}`;
    expect(atBound).toHaveLength(MAX_MATCHED_PATH_LENGTH);
    expect(names("POST", atBound)).toEqual(["all"]);
  });

  it("reads a long run of dots or blanks in a segment in linear time", () => {
    // Trailing-dot stripping was a regex retried from every start: quadratic, ~20 s for these
    // 100 000 dots before a letter. Linear, it takes milliseconds (the timeout is coarse).
    for (const blank of [".", " ", "%20"]) {
      const segment = `${blank.repeat(100_000 / blank.length)}x`;
      expect(pathReadings(`/${segment}/%41`)).toContain(`/${segment}/A`);
    }
  }, 5_000);

  it("through the proxy, a path over the bound is counted by a path rule", async () => {
    const worker = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [{ name: "login", match: { path: `/login-${run}` }, limit: 1, window: "1m" }],
      }),
    });
    const long = `/junk-${run}/${"y".repeat(MAX_MATCHED_PATH_LENGTH)}`;
    const headers = { "CF-Connecting-IP": "192.0.2.41" };
    const first = await worker(long, { headers });
    await first.body?.cancel();
    expect(first.status).toBe(200);
    // The same client's login is now over its limit: the junk path was counted under "login".
    const login = await worker(`/login-${run}`, { headers });
    await login.body?.cancel();
    expect(login.status).toBe(429);
    expect(await originCount(`/login-${run}`)).toBe(0);
  });
});
