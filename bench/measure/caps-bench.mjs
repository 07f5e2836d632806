// @ts-check
// What one sliding-log request costs Redis, to set the caps in src/store/caps.ts:
//   - the Redis-side time of one evaluate script admitting `cost` units (SLOWLOG, microseconds:
//     Redis runs nothing else meanwhile), for one policy and for 16 policies in one call;
//   - MEMORY USAGE (SAMPLES 0) of a log full to its limit.
//
//   node bench/measure/caps-bench.mjs
//   node bench/measure/caps-bench.mjs --switch   one key switched between limits
//   node bench/measure/caps-bench.mjs --refund   a ring refund's cost against its admission's
//   node bench/measure/caps-bench.mjs --growth   a ring's MEMORY USAGE as writes grow it
//
// The real composed script (src/store/lua/scripts.ts) on a private redis-server, so the figures
// see only this traffic. Members are shaped like the limiter's (12-char isolate id + counter).
import { measureEnv } from "../../tools/measure-env.mjs";

const env = await measureEnv({ bridge: false });
/** @param {(string | number)[]} args */
const cli = (...args) => env.cli(...args).trim();

try {
  /** @type {any} */
  const { EVALUATE_SCRIPTS, REFUND_SCRIPT } = await env.bundle(
    `export { EVALUATE_SCRIPTS, REFUND_SCRIPT } from "./src/store/lua/scripts";`,
  );
  if (process.argv.includes("--switch")) {
    await measureSwitch(cli, EVALUATE_SCRIPTS);
  } else if (process.argv.includes("--growth")) {
    await measureGrowth(cli, EVALUATE_SCRIPTS);
  } else if (process.argv.includes("--refund")) {
    await measureRefund(cli, EVALUATE_SCRIPTS, REFUND_SCRIPT);
  } else {
    await measureCaps(cli, EVALUATE_SCRIPTS);
  }
} finally {
  await env.close();
}

/**
 * @param {(...args: (string | number)[]) => string} cli
 * @param {any} EVALUATE_SCRIPTS
 */
async function measureCaps(cli, EVALUATE_SCRIPTS) {
  // Stock Redis rejects the Upstash shebang flag (the bridge strips it likewise).
  /** @param {string} algorithm */
  const load = (algorithm) =>
    cli("SCRIPT", "LOAD", String(EVALUATE_SCRIPTS[algorithm]).replace(/^#!lua[^\n]*\n/, "#!lua\n"));
  const sha = load("sliding-log");
  const algorithm = "sliding-log";
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
  console.log(`Redis time of one evaluate (${algorithm}, fresh keys; median of 5), µs:`);
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
        algorithm,
        String(limit),
        "604800000",
        String(perCall),
      );
    }
    const length = cli("STRLEN", key);
    const bytes = cli("MEMORY", "USAGE", key, "SAMPLES", "0");
    console.log(`  limit ${String(limit).padStart(6)}: a ${length}-byte ring, ${bytes} bytes`);
    cli("DEL", key);
  }
}

/** Stock Redis rejects the Upstash shebang flag (the bridge strips it likewise). @param {string} lua */
function stock(lua) {
  return lua.replace(/^#!lua[^\n]*\n/, "#!lua\n");
}

/**
 * The Redis time (SLOWLOG µs) of the one script `run` sends; slowlog-log-slower-than is 0.
 * @param {(...args: (string | number)[]) => string} cli
 * @param {() => string} run
 */
function slowlogged(cli, run) {
  cli("CONFIG", "SET", "slowlog-log-slower-than", "0");
  cli("SLOWLOG", "RESET");
  const reply = run();
  const log = cli("SLOWLOG", "GET", "20").split("\n");
  for (let i = 0; i + 3 < log.length; i++) {
    if (log[i + 3] === "EVALSHA") return { us: Number(log[i + 2]), reply };
  }
  throw new Error("no EVALSHA in SLOWLOG");
}

/**
 * One key switched between limits (a configured rule's key, whose limit changes): each call's
 * Redis time, and the key's type and size after it.
 * @param {(...args: (string | number)[]) => string} cli
 * @param {any} EVALUATE_SCRIPTS
 */
async function measureSwitch(cli, EVALUATE_SCRIPTS) {
  const shas = { "sliding-log": cli("SCRIPT", "LOAD", stock(EVALUATE_SCRIPTS["sliding-log"])) };
  const WEEK = 604_800_000;
  let now = 1_700_000_000_000;
  let member = 0;
  const key = "victim";
  /** @param {string} algorithm @param {number} limit @param {number} cost */
  const call = (algorithm, limit, cost = 1) => {
    now += 1;
    const { us, reply } = slowlogged(cli, () =>
      cli(
        "EVALSHA",
        /** @type {any} */ (shas)[algorithm],
        "1",
        key,
        String(now),
        `AbCdEfGhIjKl${(member++).toString(36)}`,
        "1",
        "0",
        "0",
        algorithm,
        String(limit),
        String(WEEK),
        String(cost),
      ),
    );
    const type = cli("TYPE", key);
    const bytes = cli("MEMORY", "USAGE", key, "SAMPLES", "0");
    const allowed = reply.split("\n")[0] === "1" ? "allowed" : "denied ";
    console.log(
      `  ${algorithm.padEnd(16)} limit ${String(limit).padStart(6)} cost ${String(cost).padStart(6)}: ${allowed} ${String(us).padStart(7)} µs; then ${type} of ${bytes} B`,
    );
  };
  console.log("Resizing alone (a full 100 000 ring, then other limits; each twice):");
  for (const limit of [99_999, 1, 5_000]) {
    call("sliding-log", 100_000, 100_000);
    call("sliding-log", limit);
    call("sliding-log", limit);
    cli("DEL", key);
  }
  console.log("Nine alternating calls:");
  call("sliding-log", 100_000, 100_000);
  for (let i = 0; i < 8; i++) {
    if (i % 2 === 0) call("sliding-log", 8_000);
    else call("sliding-log", 100_000, 100_000);
  }
  cli("DEL", key);
}

/**
 * A ring refund of cost 1 at limit 100 000 against an admission (commandstats usec: the commands
 * the script ran, and SLOWLOG for the script), over a ring at its limit.
 * @param {(...args: (string | number)[]) => string} cli
 * @param {any} EVALUATE_SCRIPTS
 * @param {string} REFUND_SCRIPT
 */
async function measureRefund(cli, EVALUATE_SCRIPTS, REFUND_SCRIPT) {
  const evaluate = cli("SCRIPT", "LOAD", stock(EVALUATE_SCRIPTS["sliding-log"]));
  const refund = cli("SCRIPT", "LOAD", stock(REFUND_SCRIPT));
  const WINDOW = 3_600_000;
  const L = 100_000;
  const key = "refunded";
  let now = 1_700_000_000_000;
  // Full: 100 000 admissions, 1 000 a call (cost 1 000), 1 ms apart.
  for (let i = 0; i < L / 1_000; i++, now++) {
    cli(
      "EVALSHA",
      evaluate,
      "1",
      key,
      String(now),
      `f${i}`,
      "1",
      "0",
      "0",
      "sliding-log",
      String(L),
      String(WINDOW),
      "1000",
    );
  }
  // Past the window, steady admissions of 1: each frees and takes one slot.
  now += WINDOW;
  const admits = [];
  const refunds = [];
  for (let i = 0; i < 20; i++, now++) {
    const at = now;
    admits.push(
      slowlogged(cli, () =>
        cli(
          "EVALSHA",
          evaluate,
          "1",
          key,
          String(at),
          `a${i}`,
          "1",
          "0",
          "0",
          "sliding-log",
          String(L),
          String(WINDOW),
          "1",
        ),
      ).us,
    );
    // A few admissions between the request and its refund (others' requests meanwhile).
    for (let j = 0; j < 5; j++) {
      now++;
      cli(
        "EVALSHA",
        evaluate,
        "1",
        key,
        String(now),
        `o${i}.${j}`,
        "1",
        "0",
        "0",
        "sliding-log",
        String(L),
        String(WINDOW),
        "1",
      );
    }
    const { us, reply } = slowlogged(cli, () =>
      cli(
        "EVALSHA",
        refund,
        "1",
        key,
        String(now),
        `a${i}`,
        "1",
        "0",
        String(at),
        "sliding-log",
        String(L),
        String(WINDOW),
        "1",
      ),
    );
    if (reply.split("\n")[1] !== "1") throw new Error(`refund gave back ${reply}`);
    refunds.push(us);
  }
  /** @param {number[]} xs */
  const span = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return `median ${s[Math.floor(s.length / 2)]} µs, ${s[0]}–${s[s.length - 1]}`;
  };
  console.log(`ring of limit ${L} at its limit (SLOWLOG, 20 each):`);
  console.log(`  admission of 1: ${span(admits)}`);
  console.log(`  refund of 1 (5 admissions after it): ${span(refunds)}`);
  cli("CONFIG", "RESETSTAT");
  cli(
    "EVALSHA",
    evaluate,
    "1",
    key,
    String(++now),
    "last",
    "1",
    "0",
    "0",
    "sliding-log",
    String(L),
    String(WINDOW),
    "1",
  );
  const at = now;
  now += 5;
  cli(
    "EVALSHA",
    refund,
    "1",
    key,
    String(now),
    "last",
    "1",
    "0",
    String(at),
    "sliding-log",
    String(L),
    String(WINDOW),
    "1",
  );
  console.log("  commands of that admission + refund (INFO commandstats):");
  for (const line of cli("INFO", "commandstats").split("\n")) {
    const m = /^cmdstat_(get|set|getrange|setrange|pexpire|evalsha):(.*)$/.exec(line.trim());
    if (m) console.log(`    ${m[1]}: ${m[2]}`);
  }
  // Old receipts: a full ring of 100 calls of 1 000 units, refunds of calls far from the newest.
  const old = "refunded-old";
  const T0 = now + 10;
  for (let i = 0; i < 100; i++) {
    cli(
      "EVALSHA",
      evaluate,
      "1",
      old,
      String(T0 + i),
      `g${i}`,
      "1",
      "0",
      "0",
      "sliding-log",
      String(L),
      String(WINDOW),
      "1000",
    );
  }
  for (const i of [99, 90, 50, 0]) {
    const { us, reply } = slowlogged(cli, () =>
      cli(
        "EVALSHA",
        refund,
        "1",
        old,
        String(T0 + 100),
        `g${i}`,
        "1",
        "0",
        String(T0 + i),
        "sliding-log",
        String(L),
        String(WINDOW),
        "1000",
      ),
    );
    console.log(
      `  refund of 1 000 admitted ${String((99 - i) * 1_000).padStart(6)} units before the newest: ${us} µs (gave back ${reply.split("\n")[1]})`,
    );
  }
}

/**
 * A ring of limit 100 000 grown by admissions of several shapes: its MEMORY USAGE (SAMPLES 0)
 * against the full ring written at once, and the GET / SET its growth cost (INFO commandstats).
 * @param {(...args: (string | number)[]) => string} cli
 * @param {any} EVALUATE_SCRIPTS
 */
async function measureGrowth(cli, EVALUATE_SCRIPTS) {
  const evaluate = cli("SCRIPT", "LOAD", stock(EVALUATE_SCRIPTS["sliding-log"]));
  const L = 100_000;
  const WINDOW = 3_600_000;
  let now = 1_700_000_000_000;
  /** @param {string} key @param {number} cost */
  const admit = (key, cost) =>
    cli(
      "EVALSHA",
      evaluate,
      "1",
      key,
      String(now++),
      `m${now}`,
      "1",
      "0",
      "0",
      "sliding-log",
      String(L),
      String(WINDOW),
      String(cost),
    );
  /** @param {string} key */
  const usage = (key) => Number(cli("MEMORY", "USAGE", key, "SAMPLES", "0"));
  admit("full", L);
  const full = usage("full");
  console.log(
    `limit ${L}: the full ring written at once: ${full} B (STRLEN ${cli("STRLEN", "full")})`,
  );
  /** @param {string} name @param {number[]} costs */
  const run = (name, costs) => {
    const key = `grow:${name}`;
    cli("CONFIG", "RESETSTAT");
    let most = 0;
    for (const cost of costs) {
      admit(key, cost);
      most = Math.max(most, usage(key));
    }
    const stats = cli("INFO", "commandstats");
    const calls = (/** @type {string} */ cmd) =>
      Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    console.log(
      `  ${name.padEnd(34)} ${String(costs.length).padStart(5)} calls: most ${String(most).padStart(7)} B (${(most / full).toFixed(2)} × full), last ${usage(key)} B; GET ${calls("get")}, SET ${calls("set")}, SETRANGE ${calls("setrange")}`,
    );
  };
  run("1, 1, then 98 300", [1, 1, 98_300]);
  run("1, 1, 30 000, 1, 20 000, 49 000", [1, 1, 30_000, 1, 20_000, 49_000]);
  run("1 000 × 100 (filling it)", Array(100).fill(1_000));
  run("100 × 1 000 (filling it)", Array(1_000).fill(100));
}
