// @ts-check
// The "Workerd CPU per decision" section of bench/results.md, from results.workerdCpu.

/** @param {number | undefined} v @param {number} [digits] */
const n = (v, digits = 0) =>
  v === undefined || Number.isNaN(v)
    ? "–"
    : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
/** @param {number | undefined} v */
const x = (v) => (v === undefined || Number.isNaN(v) ? "–" : `${v.toFixed(2)}×`);

/**
 * ours ÷ baseline per rotation (the slices are taken in the same order for every contender).
 * @param {any} ours @param {any} baseline
 */
const pairedRatios = (ours, baseline) =>
  (ours?.fixed.runs ?? []).map(
    (/** @type {any} */ run, /** @type {number} */ i) =>
      run.cpuUsecPerDecision / baseline?.fixed.runs[i]?.cpuUsecPerDecision,
  );

/**
 * @param {any} r the results object of bench/run.mjs
 * @returns {string[]} markdown lines
 */
export function cpuSection(r) {
  const wc = r.workerdCpu;
  if (!wc) return [];
  const L = [];
  const by = wc.byId ?? {};
  const rt = wc.ratios ?? {};
  // The pair through Miniflare is measured only when the run served it (Miniflare 5 takes no
  // bare script, so current runs do not).
  const viaMiniflare = Boolean(by.oursMiniflare && by.anchorMinimalMiniflare);
  const flags = [
    r.mode === "quick" ? "--quick" : "",
    r.baselineRef ? `--baseline=${r.baselineRef}` : "",
  ];
  const command = `npm run bench${flags.some(Boolean) ? ` -- ${flags.filter(Boolean).join(" ")}` : ""}`;
  L.push("## Workerd CPU per decision", "");
  L.push(
    "What a user pays for is the whole worker's CPU. Each worker below is built as it deploys " +
      "(`wrangler deploy --dry-run`) and served by its own workerd process, from a config of " +
      "its own (`tools/serve-workerd.mjs`): the bundle, its bindings, one socket, as the " +
      "edge runs it, with nothing around it (Miniflare, which `wrangler dev` uses, adds workers " +
      `of its own to the process${viaMiniflare ? ": the pair is measured that way too, below" : ""}). The CPU ` +
      "time of that process (the sum of its threads' run time in `/proc/<pid>/task/*/schedstat`, " +
      "to the nanosecond; utime + stime count 10 ms ticks) is read before " +
      "and after a load, and divided by the decisions it answered. That includes workerd's own " +
      "HTTP work (the request in, the store subrequest, the answer), which every contender pays. " +
      `**CPU per decision**: each contender alone at the same offered load, ${wc.rate} requests/s ` +
      `(32 connections), in ${wc.sliceSeconds} s slices rotated through the contenders ` +
      `${wc.rotations} times (A B C…, then …C B A), so a busy moment of this shared machine ` +
      "lands on one slice, not on one contender. **Throughput**: each alone, flat out, " +
      `${wc.repeats} × ${wc.seconds} s, alternating. Figures are medians; a ratio is the median ` +
      "of the ratios of neighbouring slices (or runs). " +
      `Load: the mixed /check load (80 % allowed keys, 20 % flooding keys). Command: \`${command}\`.`,
    "",
  );
  L.push(
    "- **ours**: worker/worker.ts as deployed, a /check-only config (no rules).",
    "- **anchorMinimal**: `bench/anchor-minimal-worker.ts`: @upstash/ratelimit slidingWindow " +
      "(ephemeral cache on, module-scope instances) behind the thinnest /check a team would " +
      "write: a plain string compare of the token, `request.json()`, a few typeof checks, JSON " +
      "out, no rate-limit headers, no framework.",
    "- **floor**: `bench/floor-worker.ts`: the store calls a limiter with a denial cache makes " +
      "and nothing else (a plain token compare, the body parsed, a per-isolate map of full " +
      "keys, one timer-bounded `fetch` of one EVAL, JSON out): workerd's own work for the " +
      "request, the subrequest and the answer, which no limiter can cut.",
    "- **anchorSliding**: the like-for-like anchor (`bench/anchor-worker.ts`), slidingWindow " +
      "behind our /check code (token check, validation, headers).",
    "- **oursProxy**: worker/worker.ts as a proxy in front of a local origin, two rules (the " +
      "mixed load as GETs, the client in a header); **oursForward**: the same worker, paths no " +
      "rule matches (forwarding alone).",
    ...(viaMiniflare
      ? [
          "- **oursMiniflare**, **anchorMinimalMiniflare**: ours and anchorMinimal served through " +
            "Miniflare, as this section served every worker before. Miniflare adds two workers of its " +
            "own to the process: its entry worker takes each request first (it copies the request " +
            "twice, parses its URL three times, matches routes, calls the worker through a service " +
            "binding and wraps its answer), and every fetch the worker makes (the store call) goes " +
            "out through another, which copies its headers and fetches again " +
            "(`stripCfConnectingIp`). No deployed worker pays either.",
        ]
      : []),
    ...(r.baselineRef
      ? [
          `- **oursBaseline**: worker/worker.ts at \`${r.baselineRef}\` (before the cuts measured here), ` +
            "built from `git archive` with the same dependencies.",
        ]
      : []),
    "",
  );
  const cpu = rt.cpuVsMinimal;
  const thr = rt.throughputVsMinimal;
  L.push("| target | measured | met? |", "| --- | --- | --- |");
  L.push(
    `| CPU per /check decision, ours ÷ anchorMinimal ≤ 0.9 (reaching for 0.8) | ${x(cpu)} (per rotation: ${(rt.cpuVsMinimalRuns ?? []).map(x).join(", ")}) | ${cpu <= 0.8 ? "yes (≤ 0.8)" : cpu <= 0.9 ? "yes (≤ 0.9, not 0.8)" : "**no**"} |`,
  );
  L.push(
    `| throughput ≥ 1.05× anchorMinimal, same run | ${x(thr)} (per run: ${(rt.throughputVsMinimalRuns ?? []).map(x).join(", ")}) | ${thr >= 1.05 ? "yes" : "**no**"} |`,
  );
  L.push(
    `| the proxy path's CPU reported | ${n(by.oursProxy?.fixed.cpuUsecPerDecision)} µs per decision: ${n(wc.proxy?.beyondCheckUsec)} µs beyond a /check decision, ${n(wc.proxy?.beyondForwardUsec)} µs beyond forwarding alone | yes |`,
  );
  L.push("");
  if (Number.isFinite(rt.floorVsMinimal)) {
    L.push(
      `The floor, same run: floor ÷ anchorMinimal ${x(rt.floorVsMinimal)} CPU at ${wc.rate}/s, ` +
        `${x(rt.floorThroughputVsMinimal)} throughput. Ours above the floor: ` +
        `${n(by.ours?.fixed.cpuUsecPerDecision - by.floor?.fixed.cpuUsecPerDecision)} µs a decision; ` +
        `the anchor above it: ${n(by.anchorMinimal?.fixed.cpuUsecPerDecision - by.floor?.fixed.cpuUsecPerDecision)} µs. ` +
        "A ratio below the floor's needs fewer store calls, not less code.",
      "",
    );
  }
  if (viaMiniflare && Number.isFinite(rt.cpuVsMinimalMiniflare)) {
    L.push(
      "Through Miniflare, same run: oursMiniflare ÷ anchorMinimalMiniflare " +
        `${x(rt.cpuVsMinimalMiniflare)} CPU at ${wc.rate}/s, ${x(rt.throughputVsMinimalMiniflare)} ` +
        "throughput. Miniflare's own workers (the entry worker per request, the outbound one " +
        "per store call) cost " +
        `${n(by.oursMiniflare?.fixed.cpuUsecPerDecision - by.ours?.fixed.cpuUsecPerDecision)} µs ` +
        "a decision to ours and " +
        `${n(by.anchorMinimalMiniflare?.fixed.cpuUsecPerDecision - by.anchorMinimal?.fixed.cpuUsecPerDecision)} µs ` +
        "to the anchor (each served through Miniflare, less served alone): nearly alike for " +
        "this pair, which makes about one store call per decision each, and so a cost that " +
        "pulls their ratio toward 1.",
      "",
    );
  }
  L.push(
    `| contender | CPU µs / decision at ${wc.rate}/s | ours ÷ this | decisions/s flat out | ours ÷ this | CPU µs / decision flat out | p50 ms flat out | errors |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  const ours = by.ours;
  for (const c of wc.contenders ?? []) {
    const v = by[c.id];
    if (!v) continue;
    const self = c.id === "ours";
    L.push(
      `| ${c.id} | ${n(v.fixed.cpuUsecPerDecision)} | ${self ? "" : x(ours?.fixed.cpuUsecPerDecision / v.fixed.cpuUsecPerDecision)} | ${n(v.max.perSecond)} | ${self ? "" : x(ours?.max.perSecond / v.max.perSecond)} | ${n(v.max.cpuUsecPerDecision)} | ${n(v.max.p50, 1)} | ${v.fixed.errors + v.max.errors} |`,
    );
  }
  L.push("");
  L.push(
    "(The ratio columns are of the medians; the targets above use the median of the " +
      "per-rotation ratios, which cancels drift.) CPU per decision at a fixed rate and flat " +
      "out differ: a process that idles between requests pays its wake-ups per request, one " +
      "that is saturated pays for its queues. The like-for-like " +
      `pair: ours ÷ anchorSliding ${x(rt.cpuVsLikeForLike)} CPU, ${x(rt.throughputVsLikeForLike)} throughput.` +
      (r.baselineRef
        ? ` Before and after the cuts since \`${r.baselineRef}\`, same run: ours ÷ oursBaseline ${x(rt.cpuVsBaseline)} CPU (per rotation: ${pairedRatios(by.ours, by.oursBaseline).map(x).join(", ")}); oursBaseline ÷ anchorMinimal was ${x(rt.baselineVsMinimal)}. A difference smaller than the spread of those per-rotation ratios is within this machine's noise.`
        : ""),
    "",
  );

  const profiles = wc.profiles ?? {};
  const ids = ["oursBaseline", "ours", "anchorMinimal", "oursProxy"].filter((id) => profiles[id]);
  if (ids.length > 0) {
    L.push("### Where the CPU goes", "");
    L.push(
      "A V8 CPU profile of each worker inside workerd (through its inspector, a worker of its " +
        "own, served by workerd alone as above with its inspector on; " +
        `flat out under the same load for ${wc.seconds} s), self time grouped by part: ` +
        "share of the sampled busy time, and ≈ µs per decision (the share × that contender's " +
        "measured CPU per decision flat out). *workerd's own* is native code: the inbound " +
        "request, `fetch` to the store, bodies, `Response`, timers; *V8 (program)* is time V8 " +
        "cannot attribute to a function. A native call a function awaits can be charged to " +
        "that function: most of src/http/'s share is `authorizeCheck` resuming after " +
        "`request.text()`, that is reading the body (the minimal anchor's `request.json()` " +
        "shows under workerd's own), and most of @upstash/redis's is its `request` around " +
        "`fetch` and `res.text()`. `node bench/profile-workerd.mjs [--rate=400] [--save=<path>]` " +
        "prints the same by file and function (and keeps the raw profile, lines included).",
      "",
    );
    /** @type {Set<string>} */
    const parts = new Set();
    for (const id of ids) for (const part of Object.keys(profiles[id].parts)) parts.add(part);
    const total = (/** @type {string} */ part) =>
      ids.reduce((sum, id) => sum + (profiles[id].parts[part] ?? 0), 0);
    const sorted = [...parts].sort((a, b) => total(b) - total(a));
    L.push(`| part | ${ids.join(" | ")} |`, `| --- | ${ids.map(() => "---").join(" | ")} |`);
    for (const part of sorted) {
      const cells = ids.map((id) => {
        const share = profiles[id].parts[part];
        if (!share) return "";
        const us = share * (by[id]?.max.cpuUsecPerDecision ?? Number.NaN);
        return `${(share * 100).toFixed(1)} % (≈ ${n(us)} µs)`;
      });
      // Parts under half a percent everywhere are noise at this sampling rate.
      if (ids.every((id) => (profiles[id].parts[part] ?? 0) < 0.005)) continue;
      L.push(`| ${part} | ${cells.join(" | ")} |`);
    }
    L.push("");
    if (profiles.oursBaseline && profiles.ours) {
      // Before → after by part, in this run's profiles (≈ µs per decision, flat out).
      const us = (/** @type {string} */ id, /** @type {string} */ part) =>
        (profiles[id].parts[part] ?? 0) * (by[id]?.max.cpuUsecPerDecision ?? Number.NaN);
      const moves = sorted
        .filter((part) => Math.abs(us("ours", part) - us("oursBaseline", part)) >= 3)
        .map((part) => `${part} ${n(us("oursBaseline", part))} → ${n(us("ours", part))}`);
      L.push(
        `Before → after (oursBaseline → ours, ≈ µs per decision flat out, parts that moved by 3 µs or more): ${moves.join("; ") || "none"}. ` +
          "One profile each: read the larger moves, not the small ones.",
        "",
      );
    }
  }
  L.push(
    "Why workerd alone: the measure changed, not the worker. This section once " +
      "served every worker through Miniflare, whose own workers in the same workerd process take " +
      "each request first (the entry worker) and each fetch the worker makes (the outbound " +
      "one): a cost nearly alike for ours and the minimal anchor, paid by no deployed worker, " +
      "that was about half of what each process spent per decision at 400/s and pulled their " +
      "ratio toward 1. Each worker is now served by workerd alone " +
      "(`tools/serve-workerd.mjs`)" +
      (viaMiniflare
        ? "; the pair through Miniflare stays beside it, in the same run (above)."
        : "."),
    "",
  );
  L.push(
    "Cut from the store requests of a decision: the clients that run only decision scripts " +
      "(`withSignal`'s and `withTimeout`'s in src/store/upstash-client.ts) ask for no base64 " +
      "(`responseEncoding: false`: a script's reply is integers) and no read-your-writes token " +
      "(`readYourWrites: false`: a script runs on the primary and reads only what it writes). " +
      "Each decision's request carried two headers more and read the answer's headers twice, " +
      "a Headers object built by workerd each time: 0.92× workerd CPU per decision without " +
      "them (paired median of 16 alternated 2 s slices at 400/s, CPU read to the ns). The " +
      "client itself keeps both for the analytics and admin reads " +
      "(`test/src/store/upstash-client.test.ts` checks what reaches the store). Measured " +
      "and not cut: the rate-limit headers on the answer (1.02×, no gain), `keepAlive: false` " +
      "(no gain over the above), the decision's timer (a build without it, for the measure " +
      "only, was 0.96×: it is the deadline, a guarantee). The floor contender above shows what " +
      "is left: workerd's own work per request and subrequest.",
    "",
  );
  L.push(
    "Cut from the decision path, " +
      "each measured and each keeping its guarantee: **one timer per decision** — the " +
      "deadline's own timer aborts an AbortController whose signal every store request of the " +
      "decision carries (`withSignal` in src/store/upstash-client.ts; the EVAL after a NOSCRIPT " +
      "included), where each request had its own `AbortSignal.timeout` beside the deadline's " +
      "timer, `Promise.race` and `finally` (`failure.test.ts`, `with-deadline.test.ts`); **no " +
      "auto-pipeline** in the worker's store client: in workerd two requests' decisions never " +
      "share a tick, so it batched nothing and cost a Pipeline (hundreds of closures), a Proxy " +
      "lookup and its promises per decision (`createStoreClient` keeps it on by default for " +
      "Node, where the SCRIPT FLUSH herd test pins it); **the answer's headers as a plain " +
      "object**: workerd walks name/value pairs through the iterator protocol, a call back into " +
      "JS per step (building the Response fell from ~13 % to ~9 % of the isolate's busy time); a " +
      "script's SHA read synchronously once known; the store clock and the body read without " +
      "an extra async layer; the lone-surrogate walk over the body's strings skipped when its " +
      "JSON text holds no surrogate and no escape of one; the bearer scheme checked without a " +
      "regex; no empty-object spreads in the answer and the decision; on the proxy path, a " +
      "header client key's SHA-256 remembered per isolate (1024 values). Left: the body reads " +
      "(`request.text()`, the store's `res.text()`) and `fetch` itself, which every contender " +
      "pays, and workerd's and Miniflare's per-request work outside the isolate, then most of " +
      "the process's CPU at 400/s (a V8 profile of the isolate put ours well below the anchor; " +
      "the process's CPU, much less so: see why workerd alone, above).",
    "",
  );
  L.push(
    "Cut from the request path, each keeping its guarantee: the bearer token is compared " +
      "synchronously in constant time against the configured token's code units kept per " +
      "isolate (it was a SHA-256 of both sides per request through async Web Crypto; " +
      "`test/worker/bearer-token.test.ts` pins no early exit); an exact `POST /check` and " +
      "every path outside /check skip Hono's dispatch and context (`worker/worker.ts`; /check/* " +
      "and %-escaped paths still routed by Hono; `check-fast-path.test.ts`); the /check answer " +
      "is one Response built in one step; a body with a declared length is read " +
      "without touching `request.body`; ORIGIN_URL is parsed once per isolate, not per " +
      "request; `keep_names = false` in wrangler.toml (no `__name()` call per closure made on " +
      "the request path). Kept through all of these: constant-time comparison, exactness (one script " +
      "call per allowed decision), the deadline (one timer per decision that aborts its store " +
      "requests and bounds the decision), no per-request object shared across requests " +
      "(`check-route.test.ts`: the AbortController is made by each decision), and a 4xx with " +
      "a reason for bad input.",
    "",
  );
  return L;
}
