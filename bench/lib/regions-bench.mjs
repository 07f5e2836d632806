// @ts-check
// Regions (docs/regions.md): three databases, home in eu, each worker 80 ms from the databases
// of other regions and 5 ms from its own (regions-topology.mjs), workers built as they deploy
// and served by workerd alone, pinned with LIMITER_REGION. Side by side in one run:
//   ours with regions   LIMITER_CONFIG `regions`, `"lease": true` in the /check body;
//   ours, home only     no regions: every decision at home (no lease: a key spread over
//                       isolates, which isolate leases do not help);
//   the anchor          @upstash/ratelimit MultiRegionRatelimit (slidingWindow) over the same
//                       three databases, nearest first.
// Loads: one sender at 40/s on a key (near); 4 workers in 3 regions at 25/s each on one key at
// limit 100 per 10 s (exact); a burst of 800 over the 4; the steady load again while a region's
// store hangs, then home hangs (faults); the near load with the region's store slower than home
// (slow region: runSlowRegionBench, alone with `--only=regions-slow`).
import { serveWorker } from "../../tools/infra.mjs";
import { startRegions } from "../../tools/regions-topology.mjs";
import { LIMITER_TOKEN } from "./load.mjs";

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @typedef {object} Answer
 * @property {number} sent ms (this process's clock)
 * @property {number} received ms
 * @property {number} status
 * @property {string} source
 * @property {number} worker index of the worker asked
 */

/** One /check. @param {string} url @param {object} body @param {number} worker @returns {Promise<Answer>} */
async function check(url, body, worker) {
  const sent = Date.now();
  try {
    const response = await fetch(`${url}/check`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
      body: JSON.stringify(body),
    });
    const json = /** @type {{ source?: string }} */ (await response.json().catch(() => ({})));
    return {
      sent,
      received: Date.now(),
      status: response.status,
      source: json.source ?? "",
      worker,
    };
  } catch {
    return { sent, received: Date.now(), status: 0, source: "error", worker };
  }
}

/**
 * Each worker sends `perSecond` a second for `seconds`, on a fixed schedule (not waiting for
 * answers), offset from the others.
 * @param {string[]} urls @param {object} body @param {number} perSecond @param {number} seconds
 * @returns {Promise<Answer[]>}
 */
async function steady(urls, body, perSecond, seconds) {
  const started = Date.now();
  const total = Math.round(perSecond * seconds);
  const answers = await Promise.all(
    urls.map(async (url, worker) => {
      /** @type {Promise<Answer>[]} */
      const calls = [];
      for (let i = 0; i < total; i++) {
        const due = started + ((i + worker / urls.length) * 1000) / perSecond;
        await sleep(Math.max(0, due - Date.now()));
        calls.push(check(url, body, worker));
      }
      return Promise.all(calls);
    }),
  );
  return answers.flat();
}

/** @param {number[]} values @param {number} q */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/**
 * The most admissions in any window of `windowMs`. An admission happened somewhere between its
 * request's send and its answer: "certain" counts only those wholly inside a window (a count
 * over the limit there is a real over-admission); "by answer" places each at its answer.
 * @param {Answer[]} answers @param {number} windowMs
 */
function busiestWindow(answers, windowMs) {
  const admitted = answers.filter((a) => a.status === 200);
  const byAnswer = admitted.map((a) => a.received).sort((a, b) => a - b);
  let most = 0;
  for (let end = 0, start = 0; end < byAnswer.length; end++) {
    while ((byAnswer[end] ?? 0) - (byAnswer[start] ?? 0) >= windowMs) start++;
    most = Math.max(most, end - start + 1);
  }
  // Windows starting at each send: those admitted with sent ≥ a and received < a + window.
  let certain = 0;
  const bySent = [...admitted].sort((a, b) => a.sent - b.sent);
  bySent.forEach((first, i) => {
    let inside = 0;
    for (const later of bySent.slice(i)) {
      if (later.sent >= first.sent + windowMs) break;
      if (later.received < first.sent + windowMs) inside++;
    }
    certain = Math.max(certain, inside);
  });
  return { byAnswer: most, certain };
}

/**
 * What an exact sliding-window log admits of these requests, each decided at its send instant.
 * @param {Answer[]} answers @param {number} limit @param {number} windowMs
 */
function exactAdmits(answers, limit, windowMs) {
  const times = answers.map((a) => a.sent).sort((a, b) => a - b);
  /** @type {number[]} */
  const log = [];
  let admitted = 0;
  for (const t of times) {
    while (log.length > 0 && (log[0] ?? 0) <= t - windowMs) log.shift();
    if (log.length < limit) {
      log.push(t);
      admitted++;
    }
  }
  return admitted;
}

/** @param {Answer[]} answers */
function sources(answers) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const a of answers) {
    const name = a.source || String(a.status);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

/**
 * @param {{ bundles: { ours: string, anchor: string }, quick?: boolean, progress?: (message: string) => void }} options
 */
export async function runRegionsBench({ bundles, quick = false, progress = () => {} }) {
  const farMs = 80;
  const nearMs = 5;
  const topology = await startRegions({ farMs, nearMs, token: "bench-regions" });
  /** @type {{ dispose: () => Promise<void> }[]} */
  const served = [];
  const config = (/** @type {boolean} */ withRegions, timeoutMs = 2_000, isolateLeases = true) =>
    JSON.stringify({
      rules: [],
      timeoutMs,
      failMode: "open",
      ...(withRegions ? { regions: topology.regionsConfig } : {}),
      ...(isolateLeases ? {} : { isolateLeases: false }),
    });
  /**
   * @param {"regions" | "regionsOnly" | "home" | "anchor"} kind @param {string} region
   *   regionsOnly: regions with `isolateLeases: false`, every decision a region round trip
   *   (what a key spread over many isolates gets, each asking too rarely for an isolate lease)
   * @param {{ timeoutMs?: number }} [options] 2 s by default: a burst of 800 through the delay
   *   proxies on this 2-core machine must not time out (the fault phases use the default 500)
   */
  const serve = async (kind, region, { timeoutMs = 2_000 } = {}) => {
    const bindings = topology.bindings(region);
    const worker =
      kind === "anchor"
        ? await serveWorker({
            scriptPath: bundles.anchor,
            bindings: {
              UPSTASH_REDIS_REST_URL: bindings.UPSTASH_REDIS_REST_URL ?? "",
              UPSTASH_REDIS_REST_TOKEN: topology.token,
              LIMITER_TOKEN,
              ANCHOR_TIMEOUT_MS: "2000",
              ANCHOR_REGION_URLS: topology.anchorUrls(region),
            },
          })
        : await serveWorker({
            scriptPath: bundles.ours,
            bindings: {
              ...bindings,
              ...(kind === "home" ? { LIMITER_REGION: "" } : {}),
              LIMITER_TOKEN,
              LIMITER_CONFIG: config(kind !== "home", timeoutMs, kind !== "regionsOnly"),
            },
          });
    served.push(worker);
    return worker.url;
  };
  const tag = `regions-${Date.now()}`;
  const KINDS = /** @type {const} */ (["regions", "home", "anchor"]);
  /** @param {string} kind @param {string} name @param {number} limit @param {string} window */
  const body = (kind, name, limit, window) => ({
    key: `${tag}:${kind}:${name}`,
    limit,
    window,
    ...(kind === "regions" || kind === "regionsOnly" ? { lease: true } : {}),
  });
  const results = {
    farMs,
    nearMs,
    /** @type {Record<string, any>} */ near: {},
    /** @type {Record<string, any>} */ exact: {},
    /** @type {Record<string, any>} */ burst: {},
    /** @type {Record<string, any>} */ faults: {},
    /** @type {Record<string, any>} */ nearFaults: {},
    /** @type {Record<string, any> | undefined} */ slowRegion: undefined,
  };
  try {
    // Near: one sender in us at 40/s, limit 100 000 a minute; 2 s of the same load first (the
    // key warms and the region gets its first lease), not measured.
    const nearSeconds = quick ? 8 : 25;
    const usLinks = /** @type {Record<string, { counts: { requests: number }, reset(): void }>} */ (
      /** @type {unknown} */ (topology.links.us)
    );
    for (const kind of /** @type {const} */ (["regions", "regionsOnly", "home", "anchor"])) {
      const url = await serve(kind, "us");
      const nearBody = body(kind, "near", 100_000, "1m");
      await steady([url], nearBody, 40, 2);
      for (const link of Object.values(usLinks)) link.reset();
      const answers = await steady([url], nearBody, 40, nearSeconds);
      await sleep(500);
      const latencies = answers.map((a) => a.received - a.sent);
      const far = (usLinks.eu?.counts.requests ?? 0) + (usLinks.ap?.counts.requests ?? 0);
      results.near[kind] = {
        decisions: answers.length,
        allowed: answers.filter((a) => a.status === 200).length,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
        homePerThousand: ((usLinks.eu?.counts.requests ?? 0) / answers.length) * 1000,
        farPerThousand: (far / answers.length) * 1000,
        sources: sources(answers),
      };
      progress(`regions near ${kind}: ${JSON.stringify(results.near[kind])}`);
    }

    // Exact: 4 workers in 3 regions (eu, us, us, ap), 25/s each, one key, limit 100 per 10 s.
    const places = ["eu", "us", "us", "ap"];
    const exactSeconds = quick ? 12 : 25;
    /** @type {Record<string, string[]>} */
    const fleets = {};
    for (const kind of KINDS) {
      fleets[kind] = await Promise.all(places.map((region) => serve(kind, region)));
    }
    for (const kind of KINDS) {
      const urls = /** @type {string[]} */ (fleets[kind]);
      const answers = await steady(urls, body(kind, "steady", 100, "10s"), 25, exactSeconds);
      const exact = exactAdmits(answers, 100, 10_000);
      const allowed = answers.filter((a) => a.status === 200).length;
      results.exact[kind] = {
        decisions: answers.length,
        allowed,
        exact,
        share: allowed / exact,
        busiest: busiestWindow(answers, 10_000),
        p50: quantile(
          answers.map((a) => a.received - a.sent),
          0.5,
        ),
        sources: sources(answers),
      };
      progress(`regions exact ${kind}: ${JSON.stringify(results.exact[kind])}`);
    }

    // Burst: 800 at once over the 4 workers (200 each) at limit 100, on a key warmed at 5/s each
    // for 2 s (the regions hold leases when it hits).
    for (const kind of KINDS) {
      const urls = /** @type {string[]} */ (fleets[kind]);
      const burstBody = body(kind, "burst", 100, "1m");
      const warm = await steady(urls, burstBody, 5, 2);
      const burst = await Promise.all(
        urls.flatMap((url, worker) =>
          Array.from({ length: 200 }, () => check(url, burstBody, worker)),
        ),
      );
      const admitted = [...warm, ...burst].filter((a) => a.status === 200).length;
      results.burst[kind] = { admitted, sources: sources(burst) };
      progress(`regions burst ${kind}: ${JSON.stringify(results.burst[kind])}`);
    }

    // Faults, ours with regions and home only, under the exact load on one key throughout, with
    // the default timeoutMs (500): normal, then the us store hangs, then (after a normal phase)
    // home hangs on every link, each phase `phaseSeconds`.
    const phaseSeconds = quick ? 5 : 10;
    const usStore = /** @type {{ link: { hang: boolean }, resume(): void }} */ (
      /** @type {unknown} */ (topology.links.us?.store)
    );
    const homeLinks = places.map(
      (region) =>
        /** @type {{ link: { hang: boolean }, resume(): void }} */ (
          /** @type {unknown} */ (topology.links[region]?.home)
        ),
    );
    // Faults on the near load (one sender in us at 40/s, limit 100 000 a minute: every decision
    // allowed, so the latency is the store's, not the denial cache's): normal, the us store
    // hangs, normal again, home hangs.
    for (const kind of /** @type {const} */ (["regions", "home"])) {
      const url = await serve(kind, "us", { timeoutMs: 500 });
      const nearBody = body(kind, "near-faults", 100_000, "1m");
      await steady([url], nearBody, 40, 2);
      /** @type {Record<string, any>} */
      const phases = {};
      for (const phase of ["normal", "region store hangs", "normal again", "home hangs"]) {
        const link =
          phase === "region store hangs"
            ? topology.links.us?.store
            : phase === "home hangs"
              ? topology.links.us?.home
              : undefined;
        const hung = /** @type {{ link: { hang: boolean }, resume(): void } | undefined} */ (
          /** @type {unknown} */ (link)
        );
        if (hung) hung.link.hang = true;
        let answers;
        try {
          answers = await steady([url], nearBody, 40, quick ? 4 : 10);
        } finally {
          hung?.resume();
        }
        phases[phase] = {
          decisions: answers.length,
          answered: answers.filter((a) => a.status === 200 || a.status === 429).length,
          p50: quantile(
            answers.map((a) => a.received - a.sent),
            0.5,
          ),
          p99: quantile(
            answers.map((a) => a.received - a.sent),
            0.99,
          ),
          sources: sources(answers),
        };
        progress(`regions near faults ${kind} ${phase}: ${JSON.stringify(phases[phase])}`);
      }
      results.nearFaults[kind] = phases;
    }

    // The fleets above are done: fewer workerd processes competing for the 2 cores.
    for (const worker of served.splice(0)) await worker.dispose();
    for (const kind of /** @type {const} */ (["regions", "home"])) {
      const urls = await Promise.all(
        places.map((region) => serve(kind, region, { timeoutMs: 500 })),
      );
      // A fresh workerd's first requests compile and load scripts (hundreds of ms here): warm
      // each worker on another key first, so the phases measure the store, not the start.
      await steady(urls, body(kind, "faults-warm", 100_000, "1m"), 10, 2);
      const faultBody = body(kind, "faults", 100, "10s");
      /** @type {Record<string, any>} */
      const phases = {};
      /** @type {Answer[]} */
      const all = [];
      for (const phase of ["normal", "region store hangs", "normal again", "home hangs"]) {
        if (phase === "region store hangs") usStore.link.hang = true;
        if (phase === "home hangs") for (const link of homeLinks) link.link.hang = true;
        let answers;
        try {
          answers = await steady(urls, faultBody, 25, phaseSeconds);
        } finally {
          usStore.resume();
          for (const link of homeLinks) link.resume();
        }
        all.push(...answers);
        const allowed = answers.filter((a) => a.status === 200).length;
        phases[phase] = {
          decisions: answers.length,
          answered: answers.filter((a) => a.status === 200 || a.status === 429).length,
          allowed,
          exact: exactAdmits(answers, 100, 10_000),
          busiest: busiestWindow(answers, 10_000),
          p50: quantile(
            answers.map((a) => a.received - a.sent),
            0.5,
          ),
          sources: sources(answers),
        };
        progress(`regions faults ${kind} ${phase}: ${JSON.stringify(phases[phase])}`);
      }
      // Windows spanning two phases too: the whole run's busiest 10 s.
      phases.whole = { busiest: busiestWindow(all, 10_000) };
      results.faults[kind] = phases;
    }

    // Slow region: the fault fleets are done too.
    for (const worker of served.splice(0)) await worker.dispose();
    results.slowRegion = await runSlowRegionBench({ bundles, quick, progress, topology });
  } finally {
    for (const worker of served) await worker.dispose();
    await topology.close();
  }
  return results;
}

/**
 * Slow region: the near load (one sender in us at 40/s, limit 100 000 a minute, every decision
 * allowed) with the us store `slowMs` away, under the workers' default 500 ms deadline (every
 * region call would succeed), beside home only from the same place. Ours with regions, with
 * `isolateLeases: false`, and home only; each after 2 s of the load with the store near (the
 * region holds leases when it slows).
 * @param {{ bundles: { ours: string }, quick?: boolean, progress?: (message: string) => void, topology?: Awaited<ReturnType<typeof startRegions>> }} options
 */
export async function runSlowRegionBench({
  bundles,
  quick = false,
  progress = () => {},
  topology,
}) {
  const slowMs = 400;
  const nearMs = 5;
  const own = topology === undefined;
  const regions = topology ?? (await startRegions({ farMs: 80, nearMs, token: "bench-regions" }));
  const usStore = /** @type {{ link: { delayMs: number } }} */ (
    /** @type {unknown} */ (regions.links.us?.store)
  );
  /** @type {{ dispose: () => Promise<void> }[]} */
  const served = [];
  const tag = `regions-slow-${Date.now()}`;
  /** @type {Record<string, any>} */
  const results = { slowMs, timeoutMs: 500, seconds: quick ? 6 : 20 };
  try {
    for (const kind of /** @type {const} */ (["regions", "regionsOnly", "home"])) {
      const worker = await serveWorker({
        scriptPath: bundles.ours,
        bindings: {
          ...regions.bindings("us"),
          ...(kind === "home" ? { LIMITER_REGION: "" } : {}),
          LIMITER_TOKEN,
          LIMITER_CONFIG: JSON.stringify({
            rules: [],
            timeoutMs: 500,
            failMode: "open",
            ...(kind === "home" ? {} : { regions: regions.regionsConfig }),
            ...(kind === "regionsOnly" ? { isolateLeases: false } : {}),
          }),
        },
      });
      served.push(worker);
      const body = {
        key: `${tag}:${kind}`,
        limit: 100_000,
        window: "1m",
        ...(kind === "home" ? {} : { lease: true }),
      };
      await steady([worker.url], body, 40, 2);
      usStore.link.delayMs = slowMs;
      let answers;
      try {
        answers = await steady([worker.url], body, 40, results.seconds);
      } finally {
        usStore.link.delayMs = nearMs;
      }
      const latencies = answers.map((a) => a.received - a.sent);
      results[kind] = {
        decisions: answers.length,
        allowed: answers.filter((a) => a.status === 200).length,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
        sources: sources(answers),
      };
      progress(`regions slow region ${kind}: ${JSON.stringify(results[kind])}`);
      await worker.dispose();
      served.pop();
    }
  } finally {
    for (const worker of served) await worker.dispose();
    if (own) await regions.close();
  }
  return results;
}

/** @param {Awaited<ReturnType<typeof runSlowRegionBench>>} r */
export function slowRegionMarkdown(r) {
  const label = {
    regions: "edge-limiter, regions",
    regionsOnly: "edge-limiter, regions, `isolateLeases: false`",
    home: "edge-limiter, home only",
  };
  return [
    "**Slow region**: the near load (one sender in us at 40/s, every decision allowed) for " +
      `${r.seconds} s with the us store ${r.slowMs} ms away, under the workers' ${r.timeoutMs} ms ` +
      "deadline (each region call would succeed), after 2 s with it near. A region whose round " +
      "trip is above home's is not asked on the request path (a spend) but for one probe a " +
      "second, so decisions go home (src/limiter/regions/region-stores.ts); isolate leases still take " +
      "from it off the path. Before that change the same command measured " +
      "`isolateLeases: false` at p50 404 ms, p99 471 ms (2026-12-03): every decision waited.",
    "",
    "| contender | decisions | p50 | p99 | sources |",
    "| --- | --- | --- | --- | --- |",
    .../** @type {const} */ (["regions", "regionsOnly", "home"]).map((name) => {
      const n = r[name];
      return `| ${label[name]} | ${n.decisions} | ${n.p50} ms | ${n.p99} ms | ${JSON.stringify(n.sources)} |`;
    }),
    "",
  ].join("\n");
}

/** @param {Awaited<ReturnType<typeof runRegionsBench>>} r */
export function regionsMarkdown(r) {
  const label = {
    regions: "edge-limiter, regions",
    regionsOnly: "edge-limiter, regions, `isolateLeases: false`",
    home: "edge-limiter, home only",
    anchor: "@upstash/ratelimit MultiRegionRatelimit",
  };
  const names = /** @type {const} */ (["regions", "home", "anchor"]);
  const fmt = (/** @type {number} */ n, digits = 0) =>
    Number.isFinite(n) ? n.toFixed(digits) : "–";
  const lines = [
    "## Regions: near and exact",
    "",
    `Three databases on three private redis-servers, each behind the bridge; home in eu. Every ` +
      `link is a delay proxy: a worker's own region's database ${r.nearMs} ms away, the others ` +
      `${r.farMs} ms. Workers built as deployed, served by workerd alone, pinned with ` +
      "`LIMITER_REGION`. Decisions through `/check`; the anchor is MultiRegionRatelimit " +
      "(slidingWindow) over the same three databases, nearest first.",
    "",
    "**Near**: one sender in us at 40/s, one key, limit 100 000 a minute, after 2 s of the same " +
      "load. Home round trips are the requests the us→eu link saw (decisions, lease grants, " +
      "give-backs); far round trips add us→ap. One sender is one isolate, which asks often " +
      "enough for an isolate lease (taken from the region's); `isolateLeases: false` shows the " +
      "region round trip every decision of a key spread over many isolates pays.",
    "",
    "| contender | decisions | p50 | p99 | home round trips / 1000 | far round trips / 1000 | sources |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    .../** @type {const} */ (["regions", "regionsOnly", "home", "anchor"]).map((name) => {
      const n = r.near[name];
      return `| ${label[name]} | ${n.decisions} | ${n.p50} ms | ${n.p99} ms | ${fmt(n.homePerThousand, 1)} | ${fmt(n.farPerThousand, 1)} | ${JSON.stringify(n.sources)} |`;
    }),
    "",
    "**Exact**: 4 workers (eu, us, us, ap) at 25/s each on one key, limit 100 per 10 s. " +
      "Busiest 10 s: *certain* counts admissions whose request and answer both fall inside the " +
      "window (over 100 is a proven over-admission); *by answer* places each at its answer. " +
      "Exact is what an exact log admits of the same requests at their send instants.",
    "",
    "| contender | decisions | admitted | exact limiter | share | busiest 10 s (certain / by answer) | p50 |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...names.map((name) => {
      const e = r.exact[name];
      return `| ${label[name]} | ${e.decisions} | ${e.allowed} | ${e.exact} | ${fmt(100 * e.share)} % | ${e.busiest.certain} / ${e.busiest.byAnswer} | ${e.p50} ms |`;
    }),
    "",
    "**Burst**: 2 s at 5/s per worker, then 800 at once over the 4 workers, limit 100 a minute.",
    "",
    "| contender | admitted (limit 100) | burst sources |",
    "| --- | --- | --- |",
    ...names.map(
      (name) =>
        `| ${label[name]} | ${r.burst[name].admitted} | ${JSON.stringify(r.burst[name].sources)} |`,
    ),
    "",
    "**Faults** under the exact load on one key throughout, workers with the default " +
      "`timeoutMs` (500): normal, the us store hangs, normal again, home hangs (every link to " +
      "eu); over 100 in the busiest 10 s is over-admission.",
  ];
  lines.push(
    "",
    "**Faults, near load**: the near load (every decision allowed), workers with the default " +
      "`timeoutMs` (500): normal, the us store hangs, normal again, home hangs (the us→eu link).",
    "",
    "| contender | phase | answered / sent | p50 | p99 | sources |",
    "| --- | --- | --- | --- | --- | --- |",
  );
  for (const name of /** @type {const} */ (["regions", "home"])) {
    for (const [phase, p] of Object.entries(r.nearFaults?.[name] ?? {})) {
      lines.push(
        `| ${label[name]} | ${phase} | ${p.answered} / ${p.decisions} | ${p.p50} ms | ${p.p99} ms | ${JSON.stringify(p.sources)} |`,
      );
    }
  }
  lines.push(
    "",
    "**Faults, exact load** (one tight key, so most answers are cached denials; what it shows is over-admission):",
    "",
    "| contender | phase | answered / sent | admitted | exact limiter | busiest 10 s (certain) | p50 | sources |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const name of /** @type {const} */ (["regions", "home"])) {
    for (const [phase, p] of Object.entries(r.faults[name] ?? {})) {
      if (phase === "whole") continue;
      lines.push(
        `| ${label[name]} | ${phase} | ${p.answered} / ${p.decisions} | ${p.allowed} | ${p.exact} | ${p.busiest.certain} | ${p.p50} ms | ${JSON.stringify(p.sources)} |`,
      );
    }
  }
  lines.push(
    "",
    `Busiest 10 s over the whole fault run, windows spanning phases included (certain / by answer): ` +
      ["regions", "home"]
        .map((name) => {
          const whole = r.faults[name]?.whole?.busiest;
          return `${label[/** @type {"regions" | "home"} */ (name)]} ${whole?.certain} / ${whole?.byAnswer}`;
        })
        .join("; ") +
      ".",
    "",
  );
  if (r.slowRegion) lines.push(slowRegionMarkdown(r.slowRegion));
  return lines.join("\n");
}
