import { describe, expect, it } from "vitest";
import { prng } from "../../support/worker/prng";
import { scopedPrefix } from "../../support/worker/redis";
import { workerWith } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("bypass-fuzz");
const run = crypto.randomUUID().slice(0, 8);
const LIMIT = 3;
const base = `/fz-${run}`;

// "login": per API key, GET and POST (so HEAD too), keyless requests skipped — the rule a
// client would like to escape. "pooled": same path and key, keyless requests share one log — the
// log a spelling of a key must not drain.
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      {
        name: "login",
        match: { path: `${base}/login`, methods: ["GET", "POST"] },
        limit: LIMIT,
        window: "1m",
        key: "header:x-api-key",
        missingKey: "skip",
      },
      {
        name: "pooled",
        match: { path: `${base}/login` },
        limit: 1000,
        window: "1m",
        key: "header:x-api-key",
        missingKey: "shared",
      },
    ],
  }),
});

const SEED = 20_261_201;
const CLIENTS = 120;

type Random = () => number;
const pick = <T>(random: Random, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)] as T;
const chance = (random: Random, p: number) => random() < p;

/** A segment's letters in random case, some percent-encoded (%6C or %6c). */
function respell(random: Random, segment: string): string {
  let out = "";
  for (const char of segment) {
    if (/[A-Za-z0-9-]/.test(char) && chance(random, 0.15)) {
      const hex = char.charCodeAt(0).toString(16);
      out += `%${chance(random, 0.5) ? hex.toUpperCase() : hex}`;
    } else out += chance(random, 0.3) ? char.toUpperCase() : char;
  }
  return out;
}

const SEPARATORS = ["/", "%2F", "%2f", "%5C", "%5c", "\\"];
const DOT_DOTS = ["..", "%2e%2e", ".%2E", "..;x=1", "..;"];
const PARAMS = [";jsessionid=1A2B", ";", ";a=1;b", ";v=2"];
const TRAILING = [".", "..", "%20", ".%20", "%20.", ". "];

/**
 * A spelling of `${base}/login` that common servers route to it: each real segment respelled,
 * maybe with a `;` parameter or trailing dots/spaces, maybe preceded by a detour `junk/..` or
 * `.` joined by an encoded separator, maybe doubled or trailing slashes.
 */
function pathSpelling(random: Random): string {
  const segments = base.slice(1).split("/").concat("login");
  let path = "";
  for (const [index, segment] of segments.entries()) {
    // Not "//" first: "//host/..." is another host to the URL parser.
    path += index > 0 && chance(random, 0.15) ? "//" : "/";
    if (chance(random, 0.35)) {
      path += `${respell(random, "zz")}/${pick(random, DOT_DOTS)}${pick(random, SEPARATORS)}`;
    } else if (chance(random, 0.15)) {
      path += `${pick(random, [".", "%2e"])}${pick(random, SEPARATORS)}`;
    }
    let spelled = respell(random, segment);
    if (chance(random, 0.3)) spelled += pick(random, TRAILING);
    if (chance(random, 0.3)) spelled += pick(random, PARAMS);
    path += spelled;
  }
  if (chance(random, 0.2)) path += "/";
  return path;
}

/** The key header spelled as a client may: repeats, commas, blanks (origins read the first). */
function keyHeaders(random: Random, key: string): Headers {
  const headers = new Headers();
  const junk = `junk-${Math.floor(random() * 1e9)}`;
  switch (Math.floor(random() * 8)) {
    case 0:
      headers.set("x-api-key", key);
      break;
    case 1:
      headers.append("X-API-Key", key);
      headers.append("x-api-key", junk);
      break;
    case 2:
      headers.set("x-api-key", `${key},${junk}`);
      break;
    case 3:
      headers.set("x-api-key", `${key},`);
      break;
    case 4:
      headers.set("x-api-key", `,${key}`);
      break;
    case 5:
      headers.set("x-api-key", ` , ${key} ,, ${junk}`);
      break;
    case 6:
      headers.set("x-api-key", `\t${key}\t`);
      break;
    default:
      headers.append("x-api-key", ` ${key} `);
      headers.append("x-api-key", "");
      headers.append("x-api-key", junk);
  }
  return headers;
}

describe("no spelling escapes a rule (proxy)", () => {
  it(`${CLIENTS} clients × ${LIMIT + 1} spellings of path, method and key each (seed ${SEED}): all counted, the last one is 429`, async () => {
    const random = prng(SEED);
    for (let client = 0; client < CLIENTS; client++) {
      const key = `key-${run}-${client}`;
      const spellings: string[] = [];
      for (let i = 0; i <= LIMIT; i++) {
        const path = pathSpelling(random);
        const method = pick(random, ["GET", "HEAD", "POST"]);
        const headers = keyHeaders(random, key);
        spellings.push(`${method} ${path} x-api-key: ${JSON.stringify(headers.get("x-api-key"))}`);
        const res = await worker(path, {
          method,
          headers,
          ...(method === "POST" ? { body: "x" } : {}),
        });
        await res.body?.cancel();
        const replay = `seed ${SEED}, client ${client}:\n${spellings.join("\n")}`;
        // Counted by "login" under this client's key: its RateLimit item shows what is left.
        expect(res.headers.get("RateLimit") ?? "(not counted)", replay).toContain(
          `"login";r=${Math.max(0, LIMIT - 1 - i)};`,
        );
        expect(res.status, replay).toBe(i < LIMIT ? 200 : 429);
      }
    }
    // No spelling of a key landed in the keyless clients' shared log.
    const keyless = await worker(`${base}/login`);
    expect(keyless.status).toBe(200);
    expect(keyless.headers.get("RateLimit")).toMatch(/^"pooled";r=999;/);
  });
});
