// @ts-check
// Billed commands: what Upstash would bill per /check decision, per traffic shape and limit, for
// our worker and the anchor in one run. Upstash bills the EVALSHA and every redis.call inside the
// script; INFO commandstats on a private redis-server counts exactly that (redis-stats.mjs: the
// probes excluded). Requests go out with plain `fetch`, a fixed 8 in flight, not autocannon: an
// exact number of requests per run, so commands ÷ requests is exact too.
import { delay } from "./infra.mjs";
import { LIMITER_TOKEN } from "./load.mjs";

/** Requests in flight per run: enough to keep workerd busy, few enough to stay exact and cheap. */
const CONCURRENCY = 8;
/** Upstash pay-as-you-go: $0.20 per 100 000 commands, so $ per million decisions = 2 × commands. */
export const USD_PER_COMMAND = 0.2 / 100_000;
/** Background work (lease calls and give-backs, analytics flushes in ctx.waitUntil) is done when
 * two snapshots this far apart are equal… */
const QUIET_MS = 300;
/** …or after this long (then the row says `settled: false`). */
const SETTLE_MAX_MS = 5_000;
/** A lease ends (and gives back its unspent units) at its deadline, up to one lifetime (1 s for a
 * 1-minute window: src/limiter/leases/lease-sizing.ts) after its grant, in a timer: quiet before that
 * means nothing. */
const LEASE_LIFETIME_MS = 1_000;

/**
 * One traffic shape at one limit: `requests` /check bodies, request i's from `body(tag, i)`.
 * @typedef {{ shape: string, limit: number, keys: number, requests: number,
 *   body: (tag: string, i: number) => { key: string, limit: number, window: string } }} Case
 */

/**
 * A worker behind /check. `extra` joins every body (`{ lease: true }`); `shapes`, when given,
 * limits the contender to those shapes (the lease rows run on the busy shapes only).
 * @typedef {{ id: string, name: string, url: string, extra?: { lease?: boolean }, shapes?: string[] }} BilledContender
 */

/**
 * @typedef {object} BilledRow
 * @property {string} shape
 * @property {number} limit
 * @property {number} keys
 * @property {string} contender
 * @property {number} requests sent (and answered: every answer is a decision)
 * @property {number} allowed 200s
 * @property {number} denied 429s
 * @property {number} commands billed commands per decision (script calls + commands inside)
 * @property {number} storeCalls script calls (EVALSHA, EVAL, SCRIPT LOAD) per decision
 * @property {number} scriptUsec Redis's time inside the script calls per decision
 * @property {number} usdPerMillion $ per million decisions at Upstash pay-as-you-go
 * @property {Record<string, number>} byCommand billed commands per decision, by command
 * @property {boolean} settled background work went quiet before SETTLE_MAX_MS
 * @property {number} seconds driving the shape (not the settling)
 */

/**
 * @typedef {{ concurrency: number, usdPer100kCommands: number, quick: boolean,
 *   contenders: { id: string, name: string, shapes?: string[] }[], rows: BilledRow[] }} BilledResult
 */

const WINDOW = "1m"; // nothing rolls over during a run (a run takes seconds)

/**
 * The shapes at their limits. Quick leaves out the two longest (busy at 10 000: 15 000 requests
 * per contender; sparse at 100 000: a limit far past what the others show).
 * @param {boolean} quick
 * @returns {Case[]}
 */
function billedCases(quick) {
  /** @type {Case[]} */
  const cases = [];
  // sparse: 200 keys × 5 requests, interleaved: every decision allowed, each key touched a few
  // times (an API key population far under its limits).
  for (const limit of quick ? [10, 100, 1000, 10_000] : [10, 100, 1000, 10_000, 100_000]) {
    cases.push({
      shape: "sparse",
      limit,
      keys: 200,
      requests: 1000,
      body: (tag, i) => ({ key: `${tag}:k${i % 200}`, limit, window: WINDOW }),
    });
  }
  // busy: each key sent 1.5 × its limit, interleaved: a full log, then a third of the requests
  // denied. At 10 000 one key, not 10: 10 keys would be 150 000 requests per contender (minutes),
  // and a key's commands per decision do not depend on how many other keys there are.
  /** @type {[limit: number, keys: number][]} */
  const busy = [
    [10, 10],
    [100, 10],
    [1000, 10],
    ...(quick ? [] : /** @type {[number, number][]} */ ([[10_000, 1]])),
  ];
  for (const [limit, keys] of busy) {
    cases.push({
      shape: "busy",
      limit,
      keys,
      requests: 1.5 * limit * keys,
      body: (tag, i) => ({ key: `${tag}:k${i % keys}`, limit, window: WINDOW }),
    });
  }
  // flood: one key sent 20 × its limit: what denials cost (denial caches answer most).
  cases.push({
    shape: "flood",
    limit: 50,
    keys: 1,
    requests: 1000,
    body: (tag) => ({ key: `${tag}:flood`, limit: 50, window: WINDOW }),
  });
  // mixed: every 5th request on one flooding key (50/min), the rest at 1000/min spread by
  // (i × 7919) % 400 (i never a multiple of 5 there, so the 320 keys not divisible by 5, ~5 each).
  cases.push({
    shape: "mixed",
    limit: 1000,
    keys: 321,
    requests: 2000,
    body: (tag, i) =>
      i % 5 === 0
        ? { key: `${tag}:flood`, limit: 50, window: WINDOW }
        : { key: `${tag}:k${(i * 7919) % 400}`, limit: 1000, window: WINDOW },
  });
  return cases;
}

/**
 * Sends `requests` bodies to `url`/check, 8 in flight, each body read; counts 200s and 429s and
 * throws on anything else (with the body: a 400 or 500 here is a bench bug, not a figure).
 * @param {string} url
 * @param {number} requests
 * @param {(i: number) => object} bodyOf
 */
async function drive(url, requests, bodyOf) {
  let next = 0;
  let allowed = 0;
  let denied = 0;
  /** @type {Error | undefined} */
  let failure;
  const sender = async () => {
    while (next < requests && !failure) {
      const body = JSON.stringify(bodyOf(next++));
      const response = await fetch(`${url}/check`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
        body,
      });
      const text = await response.text();
      if (response.status === 200) allowed++;
      else if (response.status === 429) denied++;
      else failure ??= new Error(`/check answered ${response.status} to ${body}: ${text}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, sender));
  if (failure) throw failure;
  return { allowed, denied };
}

/**
 * The snapshot once the contender's background work is done: after `minWaitMs`, polled until two
 * snapshots QUIET_MS apart show no new (non-probe) command, at most SETTLE_MAX_MS.
 * @param {ReturnType<typeof import("./redis-stats.mjs").connectStats>} stats
 * @param {number} minWaitMs
 */
async function settledSnapshot(stats, minWaitMs) {
  if (minWaitMs > 0) await delay(minWaitMs);
  const deadline = Date.now() + SETTLE_MAX_MS;
  let last = await stats.snapshot();
  while (Date.now() < deadline) {
    await delay(QUIET_MS);
    const now = await stats.snapshot();
    // perDecision over 1 "decision": the count of non-probe commands between the two.
    if (stats.perDecision(last, now, 1).commands === 0) return { snapshot: now, settled: true };
    last = now;
  }
  return { snapshot: last, settled: false };
}

/**
 * Every case for every contender, alternating the contenders within a case (A B C, then C B A),
 * each (contender, case) with its own keys.
 * @param {{ stats: ReturnType<typeof import("./redis-stats.mjs").connectStats>,
 *   contenders: BilledContender[], quick: boolean, progress?: (message: string) => void }} options
 * @returns {Promise<BilledResult>}
 */
export async function runBilledCommands({ stats, contenders, quick, progress = () => {} }) {
  const run = `b${Date.now().toString(36)}`;
  const leases = (/** @type {BilledContender} */ c) => c.extra?.lease === true;
  // Warm-up, not measured: each script loaded (the failed EVALSHA and the EVAL a fresh Redis
  // costs once per script, not per decision) and each isolate started. Two keys at limit 1000:
  // hot enough with leases on to lease, and left with unspent units when the warm-up stops, so
  // the lease and give-back scripts are loaded too (at limit 20 they were not: the first busy
  // run with leases paid 15 EVALs).
  for (const c of contenders) {
    const body = { limit: 1000, window: WINDOW, ...c.extra };
    await drive(c.url, 400, (i) => ({ ...body, key: `${run}:warm:${c.id}:${i % 2}` }));
    await settledSnapshot(stats, leases(c) ? LEASE_LIFETIME_MS + 100 : 0);
  }
  /** @type {BilledRow[]} */
  const rows = [];
  const cases = billedCases(quick);
  for (const [index, kase] of cases.entries()) {
    const ordered = index % 2 === 0 ? contenders : [...contenders].reverse();
    for (const c of ordered) {
      if (c.shapes && !c.shapes.includes(kase.shape)) continue;
      const tag = `${run}:${c.id}:${kase.shape}${kase.limit}`;
      const before = (await settledSnapshot(stats, 0)).snapshot;
      const started = performance.now();
      const { allowed, denied } = await drive(c.url, kase.requests, (i) => ({
        ...kase.body(tag, i),
        ...c.extra,
      }));
      const seconds = (performance.now() - started) / 1000;
      const { snapshot: after, settled } = await settledSnapshot(
        stats,
        leases(c) ? LEASE_LIFETIME_MS + 100 : 0,
      );
      const work = stats.perDecision(before, after, kase.requests);
      const row = {
        shape: kase.shape,
        limit: kase.limit,
        keys: kase.keys,
        contender: c.id,
        requests: kase.requests,
        allowed,
        denied,
        commands: work.commands,
        storeCalls: work.storeCalls,
        scriptUsec: work.scriptUsec,
        usdPerMillion: work.commands * USD_PER_COMMAND * 1e6,
        byCommand: work.byCommand,
        settled,
        seconds,
      };
      rows.push(row);
      progress(
        `billed ${kase.shape}@${kase.limit} ${c.id}: ${row.commands.toFixed(3)} commands/decision ` +
          `($${row.usdPerMillion.toFixed(2)} per M), ${allowed} allowed, ${denied} denied, ` +
          `${(kase.requests / seconds).toFixed(0)}/s${settled ? "" : " (did not settle)"}`,
      );
    }
  }
  return {
    concurrency: CONCURRENCY,
    usdPer100kCommands: USD_PER_COMMAND * 100_000,
    quick,
    contenders: contenders.map(({ id, name, shapes }) => ({
      id,
      name,
      ...(shapes ? { shapes } : {}),
    })),
    rows,
  };
}

/** @param {number | undefined} v @param {number} digits */
const fixed = (v, digits) => (v === undefined || Number.isNaN(v) ? "–" : v.toFixed(digits));

/**
 * "EVALSHA 1 + TIME 1 + GET 1 + SET 1": a row's commands per decision, most first.
 * @param {Record<string, number>} byCommand
 * @param {number} [top]
 */
export function breakdown(byCommand, top = 8) {
  // Most first; on a tie the script call first (the one that carries the others).
  const first = (/** @type {string} */ name) => (name.startsWith("eval") ? 0 : 1);
  const entries = Object.entries(byCommand).sort(
    (a, b) => b[1] - a[1] || first(a[0]) - first(b[0]) || a[0].localeCompare(b[0]),
  );
  // Two decimals, or two significant digits below 0.1: a rare command shows as 0.002, not 0.
  const shown = entries
    .slice(0, top)
    .map(
      ([name, v]) => `${name.toUpperCase()} ${Number(v >= 0.1 ? v.toFixed(2) : v.toPrecision(2))}`,
    )
    .join(" + ");
  return entries.length > top ? `${shown} + …` : shown;
}

/**
 * The rows by case, one contender per column.
 * @param {BilledResult} result
 */
function byCase(result) {
  /** @type {Map<string, Record<string, BilledRow>>} */
  const cases = new Map();
  for (const row of result.rows) {
    const id = `${row.shape}@${row.limit}`;
    cases.set(id, { ...cases.get(id), [row.contender]: row });
  }
  return cases;
}

/**
 * A console.table of the result: commands per decision per contender, per shape and limit.
 * @param {BilledResult} result
 */
export function billedTable(result) {
  const ids = result.contenders.map((c) => c.id);
  return [...byCase(result)].map(([id, byId]) => {
    const ours = byId.ours;
    const anchor = byId.anchor;
    return {
      case: id,
      ...Object.fromEntries(
        ids.map((c) => [c, byId[c] ? Number(byId[c].commands.toFixed(3)) : ""]),
      ),
      "ours÷anchor": ours && anchor ? Number((ours.commands / anchor.commands).toFixed(2)) : "",
      "$/M ours": ours ? Number(ours.usdPerMillion.toFixed(2)) : "",
      "$/M anchor": anchor ? Number(anchor.usdPerMillion.toFixed(2)) : "",
      "µs ours": ours ? Number(ours.scriptUsec.toFixed(1)) : "",
      "µs anchor": anchor ? Number(anchor.scriptUsec.toFixed(1)) : "",
      "denied ours/anchor": ours && anchor ? `${ours.denied}/${anchor.denied}` : "",
    };
  });
}

/**
 * The section for bench/results.md.
 * @param {BilledResult} result
 */
export function billedMarkdown(result) {
  const ids = result.contenders.map((c) => c.id);
  const has = (/** @type {string} */ id) => ids.includes(id);
  const lines = [
    "## Billed commands per decision (Upstash pay-as-you-go)",
    "",
    "What Upstash would bill per `/check` decision: the `EVALSHA` and every `redis.call` inside " +
      "the script (and a `SCRIPT LOAD`, or the `EVAL` after a `NOSCRIPT`, where a script is met " +
      "for the first time), " +
      "counted with `INFO commandstats` on the private redis-server from a snapshot before a run " +
      "to one after its background work settled (lease give-backs run in `ctx.waitUntil` after " +
      `the answer: polled until two snapshots ${QUIET_MS} ms apart are equal, ${SETTLE_MAX_MS / 1000} s ` +
      "at most, after a lease lifetime for the lease rows). *$ / M* is dollars per million " +
      `decisions at $${result.usdPer100kCommands.toFixed(2)} per 100 000 commands (= 2 × commands ` +
      "per decision). Requests are sent with `fetch`, " +
      `${result.concurrency} in flight, an exact count per run; each contender and case has its ` +
      "own keys; contenders alternate within a case; a warm-up loads every script first. " +
      "Window 1 minute everywhere (nothing rolls over during a run).",
    "",
    "Contenders: " +
      result.contenders.map((c) => `**${c.id}** = ${c.name}`).join("; ") +
      ". Shapes: **sparse** — 200 keys × 5 requests, interleaved (all allowed); **busy** — each " +
      "key sent 1.5 × its limit, interleaved (10 keys; 1 key at 10 000, which would otherwise " +
      "take 150 000 requests per contender); **flood** — one key sent 20 × its limit of 50; " +
      "**mixed** — 2 000 requests, every 5th on one key flooding its 50/min, the rest over 320 " +
      "keys at 1000/min. The anchor's slidingWindow counts in windows aligned to the minute: " +
      "a run that crosses a minute starts new counters (one more `PEXPIRE` per key), so its " +
      "sparse figure is 4.2 or 4.4 by the clock, not by the limit.",
    "",
  ];
  // The verdicts the table is for: on the Redis clock, never more than the anchor; on the
  // caller's clock, the mixed load at most 0.8 × the anchor's.
  const over = [];
  /** @type {number | undefined} */
  let callerMixed;
  for (const [id, byId] of byCase(result)) {
    if (byId.ours && byId.anchor && byId.ours.commands > byId.anchor.commands) {
      over.push(`${id} (${(byId.ours.commands / byId.anchor.commands).toFixed(2)}×)`);
    }
    if (id.startsWith("mixed") && byId.oursCallerClock && byId.anchor) {
      callerMixed = byId.oursCallerClock.commands / byId.anchor.commands;
    }
  }
  lines.push(
    `- Redis clock, ours ≤ the anchor: ${over.length ? `no, in ${over.join(", ")}` : "yes, in every case"}.`,
    ...(callerMixed === undefined
      ? []
      : [`- Caller clock, mixed: ${callerMixed.toFixed(2)}× the anchor's commands.`]),
    "",
  );
  const head = [
    "shape",
    "limit",
    "requests (keys)",
    "denied: ours / anchor",
    "commands: ours",
    ...(has("oursCallerClock") ? ["ours, caller clock"] : []),
    "anchor",
    "ours ÷ anchor",
    ...(has("oursLease") ? ["ours, lease"] : []),
    ...(has("oursAnalytics") ? ["ours, analytics on"] : []),
    "$ / M: ours",
    ...(has("oursCallerClock") ? ["ours, caller clock"] : []),
    "anchor",
    ...(has("oursLease") ? ["ours, lease"] : []),
    "script µs: ours",
    "anchor",
    "ours, per decision",
  ];
  lines.push(`| ${head.join(" | ")} |`, `| ${head.map(() => "---").join(" | ")} |`);
  for (const byId of byCase(result).values()) {
    const first = /** @type {BilledRow} */ (Object.values(byId)[0]);
    const ours = byId.ours;
    const anchor = byId.anchor;
    /** @param {string} id */
    const cmds = (id) => fixed(byId[id]?.commands, 2);
    /** @param {string} id */
    const usd = (id) => (byId[id] ? `$${fixed(byId[id]?.usdPerMillion, 2)}` : "–");
    const cells = [
      first.shape,
      String(first.limit),
      `${first.requests} (${first.keys})`,
      `${ours?.denied ?? "–"} / ${anchor?.denied ?? "–"}`,
      cmds("ours"),
      ...(has("oursCallerClock") ? [cmds("oursCallerClock")] : []),
      cmds("anchor"),
      ours && anchor ? `${(ours.commands / anchor.commands).toFixed(2)}×` : "–",
      ...(has("oursLease") ? [cmds("oursLease")] : []),
      ...(has("oursAnalytics") ? [cmds("oursAnalytics")] : []),
      usd("ours"),
      ...(has("oursCallerClock") ? [usd("oursCallerClock")] : []),
      usd("anchor"),
      ...(has("oursLease") ? [usd("oursLease")] : []),
      fixed(ours?.scriptUsec, 1),
      fixed(anchor?.scriptUsec, 1),
      ours ? breakdown(ours.byCommand) : "–",
    ];
    lines.push(`| ${cells.join(" | ")} |`);
  }
  const unsettled = result.rows.filter((r) => !r.settled);
  if (unsettled.length) {
    lines.push(
      "",
      `Did not settle within ${SETTLE_MAX_MS / 1000} s (background commands may be missing): ` +
        unsettled.map((r) => `${r.shape}@${r.limit} ${r.contender}`).join(", "),
    );
  }
  lines.push(
    "",
    "The anchor's per-decision breakdown, for comparison: " +
      [...byCase(result)]
        .filter(([, byId]) => byId.anchor)
        .map(
          ([id, byId]) => `${id}: ${breakdown(/** @type {BilledRow} */ (byId.anchor).byCommand)}`,
        )
        .join("; ") +
      ".",
    "",
  );
  return `${lines.join("\n")}\n`;
}
