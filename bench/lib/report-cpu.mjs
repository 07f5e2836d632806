// @ts-check
// The "Workerd CPU per decision" section of bench/results.md (issue 12), from results.workerdCpu.

/** @param {number | undefined} v @param {number} [digits] */
const n = (v, digits = 0) =>
  v === undefined || Number.isNaN(v)
    ? "–"
    : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
/** @param {number | undefined} v */
const x = (v) => (v === undefined || Number.isNaN(v) ? "–" : `${v.toFixed(2)}×`);

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
  const flags = [
    r.mode === "quick" ? "--quick" : "",
    r.baselineRef ? `--baseline=${r.baselineRef}` : "",
  ];
  const command = `npm run bench${flags.some(Boolean) ? ` -- ${flags.filter(Boolean).join(" ")}` : ""}`;
  L.push("## Workerd CPU per decision (issue 12)", "");
  L.push(
    "What a user pays for is the whole worker's CPU. Each worker below is built as it deploys " +
      "(`wrangler deploy --dry-run`) and served by its own workerd process (Miniflare); the CPU " +
      "time of that process is read from `/proc/<pid>/stat` (utime + stime, 10 ms ticks) before " +
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
    "- **ours**: src/worker.ts as deployed, a /check-only config (no rules).",
    "- **anchorMinimal**: `bench/anchor-minimal-worker.ts`: @upstash/ratelimit slidingWindow " +
      "(ephemeral cache on, module-scope instances) behind the thinnest /check a team would " +
      "write: a plain string compare of the token, `request.json()`, a few typeof checks, JSON " +
      "out, no rate-limit headers, no framework.",
    "- **anchorSliding**: the like-for-like anchor (`bench/anchor-worker.ts`), slidingWindow " +
      "behind our /check code (token check, validation, headers).",
    "- **oursProxy**: src/worker.ts as a proxy in front of a local origin, two rules (the " +
      "mixed load as GETs, the client in a header); **oursForward**: the same worker, paths no " +
      "rule matches (forwarding alone).",
    ...(r.baselineRef
      ? [
          `- **oursBaseline**: src/worker.ts at \`${r.baselineRef}\` (before this issue's cuts), ` +
            "built from `git archive` with the same dependencies.",
        ]
      : []),
    "",
  );
  const cpu = rt.cpuVsMinimal;
  const thr = rt.throughputVsMinimal;
  L.push("| target (issue 12) | measured | met? |", "| --- | --- | --- |");
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
      "per-rotation ratios, which cancels drift.) CPU per decision is higher at a fixed " +
      "rate than flat out: an idle process pays its wake-ups per request. The like-for-like " +
      `pair: ours ÷ anchorSliding ${x(rt.cpuVsLikeForLike)} CPU, ${x(rt.throughputVsLikeForLike)} throughput.` +
      (r.baselineRef
        ? ` Before and after this issue's cuts, same run: ours ÷ oursBaseline ${x(rt.cpuVsBaseline)} CPU; oursBaseline ÷ anchorMinimal was ${x(rt.baselineVsMinimal)}.`
        : ""),
    "",
  );

  const profiles = wc.profiles ?? {};
  const ids = ["oursBaseline", "ours", "anchorMinimal", "oursProxy"].filter((id) => profiles[id]);
  if (ids.length > 0) {
    L.push("### Where the CPU goes", "");
    L.push(
      "A V8 CPU profile of each worker inside workerd (through its inspector, a worker of its " +
        `own, flat out under the same load for ${wc.seconds} s), self time grouped by part: ` +
        "share of the sampled busy time, and ≈ µs per decision (the share × that contender's " +
        "measured CPU per decision flat out). *workerd's own* is native code: the inbound " +
        "request, `fetch` to the store, bodies, `Response`, timers; *V8 (program)* is time V8 " +
        "cannot attribute to a function. A native call a function awaits can be charged to " +
        "that function: most of src/http/'s share is `readBody`, that is `request.text()` " +
        "reading the body (the minimal anchor's `request.json()` shows under workerd's own). " +
        "`node bench/profile-workerd.mjs` prints the same by file and function.",
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
  }
  L.push(
    "What was cut (issue 12), each keeping its guarantee: the bearer token is compared " +
      "synchronously in constant time against the configured token's code units kept per " +
      "isolate (it was a SHA-256 of both sides per request through async Web Crypto; " +
      "`test/worker/http/bearer-token.test.ts` pins no early exit); an exact `POST /check` and " +
      "every path outside /check skip Hono's dispatch and context (`src/worker.ts`; /check/* " +
      "and %-escaped paths still routed by Hono; `check-fast-path.test.ts`); the /check answer " +
      "is one Response built from header entries; a body with a declared length is read " +
      "without touching `request.body`; ORIGIN_URL is parsed once per isolate, not per " +
      "request; `keep_names = false` in wrangler.toml (no `__name()` call per closure made on " +
      "the request path). Kept: constant-time comparison, exactness (one script call per " +
      "allowed decision), the deadline (a timer and an abort signal per store call), and no " +
      "per-request object shared across requests (`check-route.test.ts`).",
    "",
  );
  return L;
}
