// @ts-check
// What one sliding-log request costs Redis, to set the caps in src/store/caps.ts:
//   - the Redis-side time of one evaluate script admitting `cost` units (SLOWLOG, microseconds:
//     Redis runs nothing else meanwhile), for one policy and for 16 policies in one call;
//   - MEMORY USAGE (SAMPLES 0) of a log full to its limit.
//
//   node scripts/measure-caps.mjs
//
// The real composed script (src/store/lua/scripts.ts) on a private redis-server, so the figures
// see only this traffic. Members are shaped like the limiter's (12-char isolate id + counter).
import { measureEnv } from "./lib/measure-env.mjs";

const env = await measureEnv({ bridge: false });
/** @param {(string | number)[]} args */
const cli = (...args) => env.cli(...args).trim();

try {
  /** @type {any} */
  const { EVALUATE_SCRIPTS } = await env.bundle(
    `export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";`,
  );
  // Stock Redis rejects the Upstash shebang flag (the bridge strips it likewise).
  /** @param {string} algorithm */
  const load = (algorithm) =>
    cli("SCRIPT", "LOAD", String(EVALUATE_SCRIPTS[algorithm]).replace(/^#!lua[^\n]*\n/, "#!lua\n"));
  const shas = { "sliding-log-zset": load("sliding-log-zset"), "sliding-log": load("sliding-log") };
  let sha = shas["sliding-log-zset"];
  let algorithm = "sliding-log-zset";
  const T = 1_700_000_000_000;
  let member = 0;
  const memberId = () => `AbCdEfGhIjKl${(member++).toString(36)}`;

  /**
   * One EVALSHA of `policies` sliding-log policies of `cost` on fresh keys: Redis-side µs.
   * @param {number} cost
   * @param {number} policies
   */
  const timeOne = (cost, policies, round = 0) => {
    const keys = Array.from(
      { length: policies },
      (_, i) => `caps:t:${cost}:${policies}:${round}:${i}`,
    );
    // now, member id, n, no request id, no stamp offset, then the policies.
    const args = [String(T), memberId(), String(policies), "0", "0"];
    for (let i = 0; i < policies; i++)
      args.push(algorithm, String(cost), "604800000", String(cost));
    cli("CONFIG", "SET", "slowlog-log-slower-than", "0");
    cli("SLOWLOG", "RESET");
    cli("EVALSHA", sha, String(keys.length), ...keys, ...args);
    const log = cli("SLOWLOG", "GET", "10").split("\n");
    // Entries: id, time, µs, then args; find the EVALSHA one.
    for (let i = 0; i + 3 < log.length; i++) {
      if (log[i + 3] === "EVALSHA") return Number(log[i + 2]);
    }
    throw new Error("no EVALSHA in SLOWLOG");
  };
  for (const layout of /** @type {const} */ (["sliding-log-zset", "sliding-log"])) {
    algorithm = layout;
    sha = shas[layout];
    console.log(`Redis time of one evaluate (${layout}, fresh keys; median of 5), µs:`);
    // 16 policies (the most a /check "rules" names) at cost 62: their sum at the per-call cap.
    for (const [policies, costs] of /** @type {[number, number[]][]} */ ([
      [1, [1, 100, 500, 1_000, 2_000, 8_000, 100_000]],
      [16, [1, 62, 1_000]],
    ])) {
      for (const cost of costs) {
        const runs = Array.from({ length: 5 }, (_, r) => timeOne(cost, policies, r)).sort(
          (a, b) => a - b,
        );
        console.log(
          `  ${policies} polic${policies === 1 ? "y " : "ies"} × cost ${String(cost).padStart(6)}: ${String(runs[2]).padStart(8)} µs`,
        );
        cli("FLUSHALL");
      }
    }
  }
  sha = shas["sliding-log-zset"];

  console.log("MEMORY USAGE of a log full to its limit (admissions of 1000 units):");
  for (const limit of [1_000, 5_000, 8_000, 10_000, 100_000]) {
    const key = `edge-limiter:api:{203.0.113.7}`;
    const perCall = 1000;
    for (let i = 0; i < limit / perCall; i++) {
      cli(
        "EVALSHA",
        sha,
        "1",
        key,
        String(T + i),
        memberId(),
        "1",
        "0",
        "0",
        "sliding-log-zset",
        String(limit),
        "604800000",
        String(perCall),
      );
    }
    const count = cli("ZCARD", key);
    const bytes = cli("MEMORY", "USAGE", key, "SAMPLES", "0");
    console.log(`  limit ${String(limit).padStart(6)}: ${count} members, ${bytes} bytes`);
    cli("DEL", key);
  }
} finally {
  await env.close();
}
