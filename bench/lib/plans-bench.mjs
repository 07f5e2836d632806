// @ts-check
// Plans: what limit overrides and key blocks add to a decision's bill (our `overrides: true`,
// set through the limiter's `overrides` and `blocks`), side by side with @upstash/ratelimit 2.2.0's dynamic limits and
// deny list, same traffic, one run. Library level, in Node: billed commands do not depend on
// the runtime. Our createLimiter and plan changes are bundled from src/ by esbuild; the anchor
// is its Ratelimit; each talks to the project's REST bridge through its real @upstash/redis
// client, and INFO commandstats on the private redis-server counts what Upstash would bill
// (redis-stats.mjs; billed-commands.mjs says what is billed).
import { breakdown, USD_PER_COMMAND } from "./billed-commands.mjs";
import { delay } from "./infra.mjs";
import { bundleForNode } from "./library.mjs";

/** The traffic: KEYS keys, each sent PER_KEY requests (1.5 × LIMIT), interleaved. */
const KEYS = 20;
const LIMIT = 100;
const WINDOW_MS = 60_000;
const PER_KEY = 150;
const REQUESTS = KEYS * PER_KEY;
/** Decisions in flight at once: one isolate with a few concurrent requests. */
const CONCURRENCY = 8;
/** The stored limit: our override of every key, the anchor's (global) dynamic limit. */
const OVERRIDE = 50;
/** Keys 0 … BLOCKED - 1 are blocked: by key or by IP (ours), their IPs on the anchor's deny list. */
const BLOCKED = 2;
/**
 * After the burst, a key held over its limit: more decisions on key HELD_KEY (over its limit in
 * every row, never blocked), one every TAIL_EVERY_MS, for TAIL_SECONDS (quick: 2 s; a store
 * call a second shows ± 1 call over the tail), on the same limiter: what a denied key costs per
 * second once the caches hold it. Caches-on rows only.
 */
const TAIL_SECONDS = { quick: 2, full: 5 };
const TAIL_EVERY_MS = 40;
const HELD_KEY = BLOCKED;
const POLICY = "plans";
const TIMEOUT_MS = 500;
/** The anchor's deny list keys (node_modules/@upstash/ratelimit/dist/index.js, checkDenyList). */
const denyListKey = (/** @type {string} */ prefix) => `${prefix}:denyList:all`;
const denyListStatusKey = (/** @type {string} */ prefix) => `${prefix}:ipDenyListStatus`;
/** How often an isolate refreshes its copy of the network blocks (limiter.networkBlocks()'s default). */
const REFRESH_MS = 1_000;
/**
 * An idle isolate's network blocks: a copy with a short refreshMs (standing in for the default
 * second), one request every gapMs (longer: each finds the copy too old to decide on), each
 * after a block set through another isolate (a fresh IP each time), the request from that IP.
 */
const IDLE = { refreshMs: 100, gapMs: 150, requests: { quick: 10, full: 30 } };

/**
 * One contender configuration. Ours: `overrides` (the policy reads plans), `override` (every
 * key's limit overridden to OVERRIDE), `block` (keys 0 … BLOCKED - 1 blocked), `network` (each
 * request matched against the isolate's copy of the network blocks first, the IPs of keys
 * 0 … BLOCKED - 1 blocked there, as the worker's `"networkBlocks": true` does). The anchor:
 * `dynamic` (dynamicLimits on, setDynamicLimit OVERRIDE), `protection` (enableProtection on,
 * the IPs of keys 0 … BLOCKED - 1 on its deny list).
 * @typedef {{ id: string, side: "ours" | "anchor", name: string, overrides?: boolean,
 *   override?: boolean, block?: boolean, network?: boolean, dynamic?: boolean,
 *   protection?: boolean }} PlanContender
 */

/** @type {PlanContender[]} */
const PLAN_CONTENDERS = [
  { id: "ours", side: "ours", name: "ours, no `overrides` (baseline)" },
  {
    id: "oursOverrides",
    side: "ours",
    name: "ours, `overrides: true`, nothing stored",
    overrides: true,
  },
  {
    id: "oursOverride",
    side: "ours",
    name: `ours, \`overrides: true\`, every key overridden to ${OVERRIDE}`,
    overrides: true,
    override: true,
  },
  {
    id: "oursBlocked",
    side: "ours",
    name: `ours, \`overrides: true\`, ${BLOCKED} of ${KEYS} keys blocked`,
    overrides: true,
    block: true,
  },
  {
    id: "oursBoth",
    side: "ours",
    name: `ours, \`overrides: true\`, every key overridden to ${OVERRIDE}, ${BLOCKED} blocked`,
    overrides: true,
    override: true,
    block: true,
  },
  {
    id: "oursNetwork",
    side: "ours",
    name: `ours, network blocks on, ${BLOCKED} of ${KEYS} keys' IPs blocked (no \`overrides\`)`,
    network: true,
  },
  { id: "anchor", side: "anchor", name: `anchor, slidingWindow(${LIMIT}, "60 s")` },
  {
    id: "anchorDynamic",
    side: "anchor",
    name: `anchor, \`dynamicLimits: true\`, setDynamicLimit({ limit: ${OVERRIDE} }) (global)`,
    dynamic: true,
  },
  {
    id: "anchorProtection",
    side: "anchor",
    name: `anchor, \`enableProtection: true\`, ${BLOCKED} of ${KEYS} keys' IPs on the deny list`,
    protection: true,
  },
  {
    id: "anchorBoth",
    side: "anchor",
    name: `anchor, dynamic limit ${OVERRIDE} and deny list (${BLOCKED} IPs)`,
    dynamic: true,
    protection: true,
  },
];

/**
 * @typedef {object} PlanRow
 * @property {string} contender a PLAN_CONTENDERS id
 * @property {boolean} cache our denial cache / the anchor's ephemeralCache on
 * @property {number} requests
 * @property {number} allowed
 * @property {number} denied every refusal, the blocked included
 * @property {number} blocked refused by a block (ours: source "block", or a network block;
 *   anchor: reason "denyList")
 * @property {number} degraded ours: not decided by the store nor a cache (timeout, fallback);
 *   anchor: reason "timeout" (its script may still have run after the snapshot)
 * @property {Record<string, number>} sources decisions by source (the anchor's `reason`)
 * @property {string} limits the effective limits the store answered with ("50", "50, 100"; a
 *   string: the JSON stays as biome formats it)
 * @property {number} commands billed commands per decision
 * @property {number} storeCalls script calls per decision
 * @property {number} commandsPerCall billed commands per script call
 * @property {number} scriptUsec Redis's time in the script calls per decision
 * @property {number} usdPerMillion
 * @property {Record<string, number>} byCommand
 * @property {number} seconds
 * @property {{ seconds: number, storeCalls: number, commands: number,
 *   byCommand: Record<string, number> } | undefined} held the tail on a key held over its
 *   limit (caches on): script calls and commands per second
 */

/**
 * @typedef {{ traffic: { keys: number, limit: number, windowMs: number, perKey: number,
 *   requests: number, concurrency: number, override: number, blocked: number },
 *   quick: boolean, cacheOff: boolean, contenders: { id: string, name: string }[],
 *   rows: PlanRow[], tail: { decisions: number, everyMs: number, key: number },
 *   idle: IdleNetwork }} PlansResult
 */

/**
 * The idle isolate's requests (IDLE): how many passed a block set elsewhere, what each made of
 * store calls (its refresh), and how long its match took, against a match on the fresh copy
 * right after it.
 * @typedef {{ refreshMs: number, gapMs: number, requests: number, passed: number,
 *   storeCalls: number, commands: number, byCommand: Record<string, number>,
 *   staleMs: { median: number, max: number }, freshMs: { median: number, max: number } }}
 *   IdleNetwork
 */

/**
 * The plans section: every contender with the caches on, then (full run only) off.
 * @param {{ tmp: string, stats: ReturnType<typeof import("./redis-stats.mjs").connectStats>,
 *   bridge: { url: string, token: string }, quick: boolean,
 *   progress?: (message: string) => void }} options
 * @returns {Promise<PlansResult>}
 */
export async function runPlansBench({ tmp, stats, bridge, quick, progress = () => {} }) {
  // Its own bundle: the anchor's deny-list cache is module state, not shared with other sections.
  const lib = await bundleForNode(tmp, "plans", [
    `export { createLimiter } from "./src/limiter/create-limiter.ts";`,
    `export { createStoreClient } from "./src/store/upstash-client.ts";`,
    `export { Ratelimit } from "@upstash/ratelimit";`,
    `export { Redis } from "@upstash/redis/cloudflare";`,
  ]);
  const store = lib.createStoreClient({
    url: bridge.url,
    token: bridge.token,
    timeoutMs: TIMEOUT_MS,
  });
  const redis = new lib.Redis({ url: bridge.url, token: bridge.token, enableTelemetry: false });
  const run = Date.now().toString(36);
  // Quick: the caches on (the default of both) only; the full run adds both off.
  const caches = quick ? [true] : [true, false];
  const tailDecisions = ((quick ? TAIL_SECONDS.quick : TAIL_SECONDS.full) * 1000) / TAIL_EVERY_MS;
  /** @type {PlanRow[]} */
  const rows = [];
  let longestMs = 0;
  let index = 0;
  for (const cache of caches) {
    for (const contender of PLAN_CONTENDERS) {
      index++;
      const prefix = `plans-${run}-${index}`;
      const decide = await prepare(lib, { store, redis, prefix, contender, cache, index });
      // Warm-up on a key of its own (KEYS: neither overridden nor blocked): scripts loaded, so a
      // NOSCRIPT → EVAL is not counted as the figure of a decision.
      for (let i = 0; i < 3; i++) await decide(KEYS);
      // The anchor counts in fixed clock minutes: a run crossing one starts fresh counters (its
      // denials change). Wait for the next minute when too little of this one is left.
      if (contender.side === "anchor") {
        const left = WINDOW_MS - (Date.now() % WINDOW_MS);
        const tail = cache ? tailDecisions * TAIL_EVERY_MS : 0;
        if (left < Math.max(3_000, 2 * longestMs) + tail) await delay(left + 50);
      }
      const before = await stats.snapshot();
      const started = performance.now();
      const counts = await drive(decide);
      const ms = performance.now() - started;
      const after = await stats.snapshot();
      longestMs = Math.max(longestMs, ms);
      const work = stats.perDecision(before, after, REQUESTS);
      const held = cache ? await heldTail(stats, decide, after, tailDecisions) : undefined;
      /** @type {PlanRow} */
      const row = {
        contender: contender.id,
        cache,
        requests: REQUESTS,
        ...counts,
        commands: work.commands,
        storeCalls: work.storeCalls,
        commandsPerCall: work.storeCalls > 0 ? work.commands / work.storeCalls : 0,
        scriptUsec: work.scriptUsec,
        usdPerMillion: work.commands * USD_PER_COMMAND * 1e6,
        byCommand: work.byCommand,
        seconds: ms / 1000,
        held,
      };
      rows.push(row);
      progress(
        `plans ${contender.id} (cache ${cache ? "on" : "off"}): ${row.commands.toFixed(3)} ` +
          `commands/decision, ${row.storeCalls.toFixed(3)} script calls, ${row.allowed} allowed, ` +
          `${row.denied} denied (${row.blocked} blocked), limit ${row.limits || "–"}, ` +
          `${(REQUESTS / (ms / 1000)).toFixed(0)}/s` +
          (held
            ? `; held over its limit: ${held.storeCalls.toFixed(1)} script calls/s, ` +
              `${held.commands.toFixed(1)} commands/s`
            : "") +
          (row.degraded ? `, ${row.degraded} NOT decided by the store (timeouts)` : ""),
      );
    }
  }
  const idle = await idleNetwork(lib, store, stats, `plans-${run}-idle`, quick);
  progress(
    `plans idle network blocks: ${idle.passed} of ${idle.requests} passed a block set ` +
      `elsewhere, ${idle.storeCalls.toFixed(2)} script calls and ${idle.commands.toFixed(2)} ` +
      `commands per request, match ${idle.staleMs.median.toFixed(1)} ms median ` +
      `(${idle.staleMs.max.toFixed(1)} max) on a stale copy, ${idle.freshMs.median.toFixed(3)} ms ` +
      "on a fresh one",
  );
  return {
    idle,
    traffic: {
      keys: KEYS,
      limit: LIMIT,
      windowMs: WINDOW_MS,
      perKey: PER_KEY,
      requests: REQUESTS,
      concurrency: CONCURRENCY,
      override: OVERRIDE,
      blocked: BLOCKED,
    },
    quick,
    cacheOff: caches.includes(false),
    contenders: PLAN_CONTENDERS.map(({ id, name }) => ({ id, name })),
    rows,
    tail: { decisions: tailDecisions, everyMs: TAIL_EVERY_MS, key: HELD_KEY },
  };
}

/**
 * The idle isolate (IDLE): a block through another isolate, a quiet spell, one request.
 * @param {any} lib
 * @param {unknown} store
 * @param {ReturnType<typeof import("./redis-stats.mjs").connectStats>} stats
 * @param {string} prefix
 * @param {boolean} quick
 * @returns {Promise<IdleNetwork>}
 */
async function idleNetwork(lib, store, stats, prefix, quick) {
  // The isolate holding the copy, and another one the blocks are set through (a change made
  // through the copy's own limiter would reload it at once).
  const copy = lib
    .createLimiter({ store, prefix, timeoutMs: TIMEOUT_MS })
    .networkBlocks({ refreshMs: IDLE.refreshMs, timeoutMs: TIMEOUT_MS });
  const admin = lib.createLimiter({ store, prefix, timeoutMs: TIMEOUT_MS });
  // The first load (and its script) before anything is counted.
  await copy.match({ ip: "10.250.1.1" }, [POLICY]);
  const requests = quick ? IDLE.requests.quick : IDLE.requests.full;
  /** @type {number[]} */
  const stale = [];
  /** @type {number[]} */
  const fresh = [];
  let passed = 0;
  let storeCalls = 0;
  let commands = 0;
  /** @type {Record<string, number>} */
  const byCommand = {};
  for (let i = 0; i < requests; i++) {
    const ip = `10.250.0.${i}`;
    const set = await admin.networks.add({ by: "ip", value: ip });
    if (!set.ok) throw new Error(`plans bench: a network block was refused: ${set.detail}`);
    await delay(IDLE.gapMs);
    const before = await stats.snapshot();
    let started = performance.now();
    if (!(await copy.match({ ip }, [POLICY]))) passed++;
    stale.push(performance.now() - started);
    const work = stats.perDecision(before, await stats.snapshot(), requests);
    storeCalls += work.storeCalls;
    commands += work.commands;
    for (const [name, n] of Object.entries(work.byCommand)) {
      byCommand[name] = (byCommand[name] ?? 0) + n;
    }
    started = performance.now();
    await copy.match({ ip }, [POLICY]);
    fresh.push(performance.now() - started);
  }
  const spread = (/** @type {number[]} */ ms) => {
    const sorted = [...ms].sort((a, b) => a - b);
    return { median: sorted[Math.floor(sorted.length / 2)] ?? 0, max: sorted.at(-1) ?? 0 };
  };
  return {
    refreshMs: IDLE.refreshMs,
    gapMs: IDLE.gapMs,
    requests,
    passed,
    storeCalls,
    commands,
    byCommand,
    staleMs: spread(stale),
    freshMs: spread(fresh),
  };
}

/**
 * The tail after a burst: `decisions` on HELD_KEY, one every TAIL_EVERY_MS, per second.
 * @param {ReturnType<typeof import("./redis-stats.mjs").connectStats>} stats
 * @param {Decide} decide
 * @param {import("./redis-stats.mjs").RedisSnapshot} before the burst's last snapshot
 * @param {number} decisions
 */
async function heldTail(stats, decide, before, decisions) {
  const started = performance.now();
  for (let i = 0; i < decisions; i++) {
    await delay(Math.max(0, started + i * TAIL_EVERY_MS - performance.now()));
    await decide(HELD_KEY);
  }
  await delay(Math.max(0, started + decisions * TAIL_EVERY_MS - performance.now()));
  const seconds = (performance.now() - started) / 1000;
  // perDecision over `seconds` "decisions": per second.
  const work = stats.perDecision(before, await stats.snapshot(), seconds);
  return {
    seconds,
    storeCalls: work.storeCalls,
    commands: work.commands,
    byCommand: work.byCommand,
  };
}

/**
 * @typedef {{ allowed: boolean, source: string, limit: number }} PlanDecision
 * @typedef {(k: number) => Promise<PlanDecision>} Decide decides one request of key k
 */

/**
 * A contender with its plans stored (before any snapshot: setting them is not counted).
 * @param {any} lib
 * @param {{ store: unknown, redis: any, prefix: string, contender: PlanContender,
 *   cache: boolean, index: number }} options
 * @returns {Promise<Decide>}
 */
async function prepare(lib, { store, redis, prefix, contender, cache, index }) {
  const keyOf = (/** @type {number} */ k) => `k${k}`;
  // Each row's IPs its own: the anchor's deny-list cache is one per module, not per Ratelimit.
  const ipOf = (/** @type {number} */ k) => `10.${index}.0.${k}`;
  const blocked = Array.from({ length: BLOCKED }, (_, k) => k);
  if (contender.side === "ours") {
    const limiter = lib.createLimiter({
      store,
      prefix,
      timeoutMs: TIMEOUT_MS,
      ...(cache ? {} : { denialCache: false }),
    });
    /** @param {{ ok: boolean, detail?: string }} change */
    const made = (change) => {
      if (!change.ok) throw new Error(`plans bench: a plan change was refused: ${change.detail}`);
    };
    if (contender.override) {
      for (let k = 0; k < KEYS; k++) {
        made(await limiter.overrides.set(POLICY, keyOf(k), { limit: OVERRIDE }));
      }
    }
    if (contender.block) {
      for (const k of blocked) made(await limiter.blocks.add({ policy: POLICY, key: keyOf(k) }));
    }
    // The isolate's copy (loaded by the warm-up's first match, refreshed every REFRESH_MS while
    // decisions come), matched before the limiter as src/rules/decide.ts does.
    /** @type {{ match: (identity: object, rules: string[]) => Promise<unknown> } | undefined} */
    let networkBlocks;
    if (contender.network) {
      for (const k of blocked) {
        made(await limiter.networks.add({ by: "ip", value: ipOf(k), policy: POLICY }));
      }
      networkBlocks = limiter.networkBlocks({ refreshMs: REFRESH_MS, timeoutMs: TIMEOUT_MS });
    }
    const overrides = contender.overrides === true;
    return async (k) => {
      if (await networkBlocks?.match({ ip: ipOf(k), country: "DE" }, [POLICY])) {
        return { allowed: false, source: "network", limit: 0 };
      }
      const d = await limiter.limit({
        policy: POLICY,
        key: keyOf(k),
        limit: LIMIT,
        windowMs: WINDOW_MS,
        overrides,
      });
      return { allowed: d.allowed, source: d.source, limit: d.limit };
    };
  }
  const ratelimit = new lib.Ratelimit({
    redis,
    limiter: lib.Ratelimit.slidingWindow(LIMIT, `${WINDOW_MS / 1000} s`),
    prefix,
    ephemeralCache: cache ? new Map() : false,
    timeout: TIMEOUT_MS,
    analytics: false,
    dynamicLimits: contender.dynamic === true,
    enableProtection: contender.protection === true,
  });
  if (contender.dynamic) await ratelimit.setDynamicLimit({ limit: OVERRIDE });
  if (contender.protection) {
    // A status with no TTL: its IP list is "disabled". Without a status the first check sets it
    // "pending" and downloads a public IP list from GitHub (once a day in production).
    await redis.set(denyListStatusKey(prefix), "disabled");
    await redis.sadd(denyListKey(prefix), ...blocked.map(ipOf));
  }
  return async (k) => {
    const r = await ratelimit.limit(keyOf(k), { ip: ipOf(k), country: "DE" });
    return { allowed: r.success, source: r.reason ?? "redis", limit: r.limit };
  };
}

/**
 * REQUESTS decisions, request i of key i % KEYS, CONCURRENCY in flight.
 * @param {Decide} decide
 */
async function drive(decide) {
  let next = 0;
  let allowed = 0;
  let denied = 0;
  /** @type {Record<string, number>} */
  const sources = {};
  /** @type {Set<number>} */
  const limits = new Set();
  const caller = async () => {
    while (next < REQUESTS) {
      const d = await decide(next++ % KEYS);
      if (d.allowed) allowed++;
      else denied++;
      sources[d.source] = (sources[d.source] ?? 0) + 1;
      if (d.source === "redis") limits.add(d.limit);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, caller));
  const blocked = (sources.block ?? 0) + (sources.network ?? 0) + (sources.denyList ?? 0);
  const known = ["redis", "cache", "block", "network", "cacheBlock", "denyList"];
  const degraded = Object.entries(sources)
    .filter(([source]) => !known.includes(source))
    .reduce((sum, [, n]) => sum + n, 0);
  return {
    allowed,
    denied,
    blocked,
    degraded,
    sources,
    limits: [...limits].sort((a, b) => a - b).join(", "),
  };
}

/** @param {PlansResult} result */
function contenderName(result, /** @type {string} */ id) {
  return result.contenders.find((c) => c.id === id)?.name ?? id;
}

/**
 * The plain row of the same side and cache: what a plan feature adds is measured from it.
 * @param {PlansResult} result @param {PlanRow} row
 */
function plainOf(result, row) {
  const plain = row.contender.startsWith("ours") ? "ours" : "anchor";
  return result.rows.find((r) => r.contender === plain && r.cache === row.cache);
}

/**
 * A console.table of the result.
 * @param {PlansResult} result
 */
export function plansTable(result) {
  return result.rows.map((row) => {
    const plain = plainOf(result, row);
    return {
      contender: row.contender,
      cache: row.cache ? "on" : "off",
      "cmds/decision": Number(row.commands.toFixed(3)),
      "vs plain": plain ? Number((row.commands - plain.commands).toFixed(3)) : "",
      "calls/decision": Number(row.storeCalls.toFixed(3)),
      "cmds/call": Number(row.commandsPerCall.toFixed(2)),
      allowed: row.allowed,
      denied: row.denied,
      blocked: row.blocked,
      limit: row.limits,
      "held: calls/s": row.held ? Number(row.held.storeCalls.toFixed(2)) : "",
      "held: cmds/s": row.held ? Number(row.held.commands.toFixed(2)) : "",
    };
  });
}

/** @param {number} v */
const signed = (v) => `${v >= 0 ? "+" : "−"}${Math.abs(v).toFixed(2)}`;

/** @param {number | undefined} v @param {number} digits */
const fixed = (v, digits) => (v === undefined ? "–" : v.toFixed(digits));

/**
 * The section (bench/plans.md, and bench/results.md in a full or quick run).
 * @param {PlansResult} result
 */
export function plansMarkdown(result) {
  const t = result.traffic;
  const tail = result.tail;
  const row = (/** @type {string} */ id, cache = true) =>
    result.rows.find((r) => r.contender === id && r.cache === cache);
  /** Commands per decision of these rows, "caches on / off". */
  const bill = (/** @type {string} */ id) =>
    [true, ...(result.cacheOff ? [false] : [])]
      .map((cache) => fixed(row(id, cache)?.commands, 2))
      .join(" / ");
  /** What `b` adds to each script call over `a` (caches on). */
  const perCall = (/** @type {string} */ a, /** @type {string} */ b) => {
    const x = row(a);
    const y = row(b);
    return x && y ? signed(y.commandsPerCall - x.commandsPerCall) : "–";
  };
  /** The held key's script calls (or commands) per second (caches on). */
  const held = (/** @type {string} */ id, commands = false) =>
    fixed(commands ? row(id)?.held?.commands : row(id)?.held?.storeCalls, 1);
  const tailRate = 1000 / tail.everyMs;
  const lines = [
    "## Plans: overrides and blocks, billed commands per decision",
    "",
    `Traffic, the same for every row: ${t.keys} keys × ${t.perKey} requests = ${t.requests} ` +
      `decisions, interleaved (request i on key i mod ${t.keys}), ${t.concurrency} in flight, ` +
      `as fast as they are answered, limit ${t.limit} per ${t.windowMs / 1000} s: a third of ` +
      `each key's requests are over its limit. Stored plans: a limit of ${t.override} (ours: ` +
      "an override of every key; the anchor: its dynamic limit, one for all keys); " +
      `${t.blocked} of the ${t.keys} keys blocked (ours: \`limiter.blocks.add\`, no end, or their IPs ` +
      "blocked in the network blocks; the anchor: their IPs on its deny list; every request " +
      "passes its key's IP and a country). Then, with the caches on, the **held** key: " +
      `${tail.decisions} more decisions on key ${tail.key} (over its limit, not blocked), ` +
      `${tailRate} a second, on the same limiter: what a key kept over its limit costs per ` +
      "second once the caches hold its denial. Library level in Node (billed commands do not " +
      "depend on the runtime): each row a fresh limiter (an isolate) with its own prefix, after " +
      "a warm-up on another key (scripts loaded); counted with `INFO commandstats` on a private " +
      "redis-server: what Upstash bills, the script calls and every command inside. Ours: the " +
      "exact sliding log on the Redis clock; the anchor: @upstash/ratelimit 2.2.0 " +
      "`slidingWindow` (two fixed-minute counters; each anchor row runs within one clock " +
      "minute). *Cache*: ours' denial cache and the anchor's `ephemeralCache`, both on by " +
      "default" +
      (result.cacheOff ? ", then both off." : " (this run: on only)."),
    "",
    "| cache | contender | allowed | denied (blocked) | limit answered | billed commands / decision | vs plain | script calls / decision | commands / script call | $ / M decisions | by command, per decision | held key: script calls / s | commands / s |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of result.rows) {
    const plain = plainOf(result, r);
    lines.push(
      `| ${r.cache ? "on" : "off"} | ${contenderName(result, r.contender)} | ${r.allowed} | ` +
        `${r.denied} (${r.blocked}) | ${r.limits || "–"} | ${r.commands.toFixed(2)} | ` +
        `${plain && plain !== r ? signed(r.commands - plain.commands) : "–"} | ` +
        `${r.storeCalls.toFixed(3)} | ${r.commandsPerCall.toFixed(2)} | ` +
        `$${r.usdPerMillion.toFixed(2)} | ${breakdown(r.byCommand)} | ` +
        `${fixed(r.held?.storeCalls, 1)} | ${fixed(r.held?.commands, 1)} |`,
    );
  }
  const degraded = result.rows.filter((r) => r.degraded > 0);
  if (degraded.length) {
    lines.push(
      "",
      "Not decided by the store (timeouts; their scripts may have run after the snapshot): " +
        degraded
          .map((r) => `${r.contender} (cache ${r.cache ? "on" : "off"}) ${r.degraded}`)
          .join(", "),
    );
  }
  const network = row("oursNetwork")?.held;
  const plainHeld = row("ours")?.held;
  const idle = result.idle;
  const plainRow = row("ours");
  const readsRow = row("oursOverrides");
  /** What reading a hash in every decision script adds per decision (caches on). */
  const readsAdd = plainRow && readsRow ? signed(readsRow.commands - plainRow.commands) : "–";
  lines.push(
    "",
    "*limit answered*: the limits the store's answers named (the override, the dynamic limit). " +
      "*vs plain*: billed commands per decision over the same side's plain row with the same " +
      "cache (a limit of 50 denies more, and denials are cheaper, so it can be negative). " +
      "*$ / M*: at $0.20 per 100 000 commands (Upstash pay-as-you-go).",
    "",
    `Side by side, billed commands per decision (caches on${result.cacheOff ? " / off" : ""}):`,
    "",
    `- A limit of ${t.override} stored: ours, per key, ${bill("oursOverride")}; the anchor, ` +
      `global, ${bill("anchorDynamic")}.`,
    `- ${t.blocked} of ${t.keys} keys blocked: ours by key ${bill("oursBlocked")}, ours by IP ` +
      `(network blocks) ${bill("oursNetwork")}; the anchor's deny list ${bill("anchorProtection")}.`,
    `- Both: ours (overrides and key blocks) ${bill("oursBoth")}; the anchor (dynamic limit and ` +
      `deny list) ${bill("anchorBoth")}.`,
    `- Neither: ours ${bill("ours")}, the anchor ${bill("anchor")}; ours reading plans with ` +
      `nothing stored ${bill("oursOverrides")}.`,
    "",
    `- **Ours, \`overrides: true\`**: one \`HMGET\` of \`<prefix>:plans\` inside the decision ` +
      "script reads the key's override and block together " +
      `(${perCall("ours", "oursOverrides")} command per script call here), nothing when a ` +
      "cache answers. Overrides and key blocks are per key and per policy. A blocked key is " +
      "refused by the store without reading or counting its log. A cached denial of such a " +
      "policy, or a cached block, holds **at most 1 s**, so a stored change applies everywhere " +
      "within a second: the held key costs " +
      `${held("oursOverrides")} script calls / s (${held("oursOverrides", true)} commands) ` +
      `with \`overrides\`, ${held("ours")} without (a denial then holds until the log frees ` +
      "capacity): about one script call per second per isolate for each key kept over its limit.",
    `- **Ours, network blocks** (IP / CIDR, country, ASN; \`"networkBlocks": true\`): matched in ` +
      "the isolate before any key or limiter, from a copy each isolate refreshes with one " +
      "script call (`TIME` + `HGETALL <prefix>:blocks`). No decision is made on a copy whose " +
      `load started ${REFRESH_MS / 1000} s (\`refreshMs\`) ago or more: a request that finds ` +
      "it older waits for the refresh (one for all who arrive meanwhile); an isolate with " +
      "steady traffic refreshes in the last tenth of that, off the request path: nothing per " +
      "decision, about " +
      (network && plainHeld
        ? `${fixed(network.storeCalls - plainHeld.storeCalls, 1)} script call and ` +
          `${fixed(network.commands - plainHeld.commands, 1)} commands per second per isolate ` +
          `(the held key's rates over ours plain), `
        : "1 script call and 3 commands per second per isolate, ") +
      "whatever the request rate. A blocked network's requests make no store call at all.",
    `- **Ours, network blocks on an idle isolate**: ${idle.requests} requests, each ` +
      `${idle.gapMs} ms after the one before (refreshMs ${idle.refreshMs} ms here, standing in ` +
      "for the default second) and after a block of its own IP set through another isolate: " +
      `**${idle.passed} passed** the block; each made ${fixed(idle.storeCalls, 2)} script ` +
      `call (${fixed(idle.commands, 2)} commands: ${breakdown(idle.byCommand)}), the refresh ` +
      "a quiet spell costs whichever way it is made, and waited for it: its match took " +
      `${fixed(idle.staleMs.median, 1)} ms median (${fixed(idle.staleMs.max, 1)} max) against ` +
      `${fixed(idle.freshMs.median, 3)} ms on the fresh copy just after (local store; add the ` +
      "round trip to yours). The other way to the same freshness, the decision script reading " +
      "the blocks' version, is one more read in every script call (as `overrides`' `HMGET`: " +
      `${perCall("ours", "oursOverrides")} command per script call, ` +
      `${readsAdd} ` +
      "per decision here) and still leaves the decisions no script makes (a cached denial, a " +
      "lease) on the old copy: the wait is the cheaper.",
    `- **Anchor, \`dynamicLimits: true\`**: one \`GET\` of \`<prefix>:dynamic:global\` in every ` +
      `limit script (${perCall("anchor", "anchorDynamic")} command per script call here). ` +
      "That limit is **global**: one value for every identifier of the Ratelimit, not per key " +
      "(a per-key limit there means one Ratelimit, and one prefix, per plan). Its ephemeral " +
      "cache still holds a denial to the end of the fixed minute (an answer from it names the " +
      "constructor's limit, not the dynamic one).",
    "- **Anchor, `enableProtection: true`**: a second script beside the limit script, sent " +
      "with `EVAL` (its whole text, never `EVALSHA`) on every decision its deny-list cache does " +
      "not answer, the ones its ephemeral cache denies included: `SMISMEMBER " +
      "<prefix>:denyList:all` of the identifier and the `ip`, `userAgent` and `country` given, " +
      "and `TTL <prefix>:ipDenyListStatus` (+ `SETEX` when that status has expired, and then a " +
      "download of a public IP list from GitHub into a 6-command `MULTI`, once a day; this " +
      "bench sets the status to `disabled`, so neither happens). The held key costs " +
      `${held("anchorProtection")} script calls / s (${held("anchorProtection", true)} commands) ` +
      `at ${tailRate} decisions / s, against ${held("anchor")} without protection: one per ` +
      "decision. A value found on the list: its first decision still runs the limit script " +
      "too (and counts the request), then that value is refused from a module-level cache for " +
      "60 s per isolate with no call (that cache has no off switch: `ephemeralCache: false` " +
      "leaves it on).",
    "",
  );
  return `${lines.join("\n")}\n`;
}
