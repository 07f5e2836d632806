// @ts-check
// Usage limits (docs/usage.md): what a usage rule charges in every rolling window against its
// limit, with and without a covering reservation; the share of the budget used; time to first
// byte and workerd CPU per streamed response against a plain rate rule; billed commands per
// request, admission and settle apart; a 10 MB event stream without usage in constant memory.
//
//   node bench/usage.mjs [--quick]
//   npm run bench -- --only=usage [--quick]
//
// What runs: bench/lib/usage-bench.mjs (the parts, the scaled time). No assertions: it reports,
// each figure beside the target the brief set for it.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "../tools/infra.mjs";
import { outDir, publishAlone } from "./lib/output.mjs";
import { runUsageBench } from "./lib/usage-bench.mjs";

/** @typedef {Awaited<ReturnType<typeof runUsageBench>> & { command?: string }} UsageResults */

/** @param {number} value @param {number} [digits] */
const fixed = (value, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : "–");
/** @param {number} v */
const pct = (v) => `${fixed(v * 100, 1)} %`;
/** @param {boolean} met */
const verdict = (met) => (met ? "met" : "**NOT met**");
/** @param {Record<string, number>} by */
const commands = (by) =>
  Object.entries(by)
    .filter(([, n]) => n >= 0.005)
    .sort(([, a], [, b]) => b - a)
    .map(([name, n]) => `${name.toUpperCase()} ${fixed(n, 2)}`)
    .join(", ");

/**
 * The section as markdown (no heading of its own but the subsections).
 * @param {UsageResults} r
 */
export function usageMarkdown(r) {
  const { plan, side, billed, big } = r;
  const covering = /** @type {UsageResults["overloads"][string]} */ (r.overloads.covering);
  const small = /** @type {UsageResults["overloads"][string]} */ (r.overloads.small);
  const usageBilled = billed.find((b) => b.rule === "usage");
  const plainBilled = billed.find((b) => b.rule === "plain");
  const MB = 1024 * 1024;
  const bigAt = (/** @type {string} */ rule, /** @type {number} */ bytes) =>
    big.find((b) => b.rule === rule && b.sent === bytes);
  const longest = Math.max(...plan.bigLengths);
  const u10 = bigAt("usage", plan.bigBytes);
  const uLong = bigAt("usage", longest);
  const p10 = bigAt("plain", plan.bigBytes);
  const pLong = bigAt("plain", longest);
  // Constant: every stream passed whole through a heap capped far below its length.
  const constant = big.length > 0 && big.every((b) => b.whole && b.alive);
  const ttfbGap = side.usage.ttfbP50 - side.plain.ttfbP50;
  const load = r.machine.load;
  const overRow = (/** @type {typeof covering} */ o) =>
    `| cost ${o.cost} | ${o.windows.most} (${pct(o.windows.most / plan.limit)} of the limit) | ` +
    `${o.windows.overLimit} of ${o.windows.windows} (${o.windows.customersOver} customers) | ` +
    `${o.windows.worstOverdraw} | ${o.windows.worstBound} | ${o.windows.overBound} (${o.windows.certainlyPast}) | ` +
    `${pct(o.share.mean)} (${pct(o.share.min)}–${pct(o.share.max)}) | ` +
    `${o.statuses.ok} / ${o.statuses.denied}${o.statuses.other ? ` / ${o.statuses.other} other` : ""} | ` +
    `${fixed(o.billedPerOk, 2)} |`;
  const perDenial = (/** @type {typeof covering} */ o) =>
    (o.billed - 7 * o.statuses.ok) / Math.max(1, o.statuses.denied);
  const lines = [
    "The worker as deployed (`wrangler deploy --dry-run`) served by workerd alone, twice (two " +
      "workerd processes, two isolates sharing nothing but the store), on one private redis-server " +
      `behind the REST bridge (capped at ${plan.bridgeCap} commands/s, never reached: the cap makes it ` +
      "bill scripts' inner commands exactly). The origin (`bench/lib/sse-origin.mjs`, its own process) " +
      'streams OpenAI-like events (`data: {"choices":…}`, one every ' +
      `${plan.eventMs} ms, the last carrying \`usage.total_tokens\`, then \`[DONE]\`): ` +
      `${plan.tokens.min}–${plan.tokens.max} tokens (skewed low: median ${fixed(plan.tokens.median)}, ` +
      `mean ${fixed(plan.tokens.mean)}) over ${plan.durationMs.min / 1000}–${plan.durationMs.max / 1000} s, ` +
      "seeded. It records each stream's arrival (just after its admission), end and tokens. " +
      `**Time is scaled**: the rules' window is ${plan.windowSeconds} s where a customer's budget would be ` +
      `per minute, the limit scaled with it (${plan.limit} tokens per ${plan.windowSeconds} s ≙ ` +
      `${plan.limit * (60 / plan.windowSeconds)} a minute). Load average (1 min) ${fixed(load.before[0] ?? Number.NaN, 1)} ` +
      `at the start, ${fixed(load.after[0] ?? Number.NaN, 1)} at the end, on ${r.machine.cpus} cores shared with other work.`,
    "",
    "| target | figure | |",
    "| --- | --- | --- |",
    `| usage charged in any rolling window, covering reservation (cost ${covering.cost}) | most ${covering.windows.most} of ${plan.limit}; windows over: ${covering.windows.overLimit} by the origin's clock, ${covering.windows.certainlyPast} certainly | ${verdict(covering.windows.certainlyPast === 0)} (never over) |`,
    `| overdraw with a small reservation (cost ${small.cost}) | worst ${small.windows.worstOverdraw} (bound there ${small.windows.worstBound}); windows past their bound: ${small.windows.overBound} by the origin's clock, ${small.windows.certainlyPast} certainly | ${verdict(small.windows.certainlyPast === 0)} (within the bound) |`,
    `| time to first byte p50, usage rule − plain rule | ${fixed(ttfbGap, 2)} ms (${fixed(side.usage.ttfbP50, 2)} vs ${fixed(side.plain.ttfbP50, 2)}) | ${verdict(ttfbGap <= 1)} (≤ 1 ms) |`,
    `| event streams without usage up to ${longest / MB} MB through a V8 heap capped at ${plan.heapCapMb} MB | ${big.filter((b) => b.rule === "usage" && b.whole).length} of ${big.filter((b) => b.rule === "usage").length} passed whole; RSS growth ${u10?.growthKb ?? "–"} kB at ${plan.bigBytes / MB} MB, ${uLong?.growthKb ?? "–"} kB at ${longest / MB} MB (plain rule ${p10?.growthKb ?? "–"}, ${pLong?.growthKb ?? "–"} kB) | ${verdict(constant)} (the heap constant); RSS: see below |`,
    `| billed commands per settle | ${fixed(usageBilled?.settle ?? Number.NaN, 2)} (admission ${fixed(usageBilled?.admission ?? Number.NaN, 2)}) | ${verdict((usageBilled?.settle ?? 99) <= 2)} (≤ 2) |`,
    "",
    `### Overload: ${plan.customers} customers at ${plan.overload}× their budget`,
    "",
    `${plan.customers} customers, each sending Poisson arrivals at ${fixed(plan.requestsPerSecondPerCustomer, 2)} ` +
      `requests/s (${plan.overload}× ${plan.limit} tokens per ${plan.windowSeconds} s at the mean response) for ` +
      `${plan.overloadSeconds} s, whatever the answers, through the two workers in turn; the same seed for both ` +
      `rules, so the same offered load. Rule: \`limit ${plan.limit}, window "${plan.windowSeconds}s", ` +
      'usage {"json": "usage.total_tokens"}`, key per customer. The windows: every rolling ' +
      `${plan.windowSeconds} s window (per customer) ending at an admission, each stream counted at its ` +
      "arrival at the origin with the tokens its last event reported. " +
      'The bound (docs/usage.md "How exact"): what the requests in flight when the window\'s last admission was decided used ' +
      `beyond their reservation (a request counts as in flight if its stream ended less than ` +
      `${plan.settleSlackMs} ms before that admission: its settle reaches the store after its end). ` +
      "Certainly past: the same check with no clock to fool it: the store decided each request between " +
      "its sending and its arrival at the origin, so a window counts only the entries certainly in the " +
      "store's window ending at its last admission, and its bound every entry that may have been in it " +
      `and unsettled (its body ended at the client less than ${plan.certainSettleMs} ms before that admission was sent).`,
    "",
    "| reservation | most in any window | windows over the limit | worst overdraw | its bound | windows past their bound (certainly) | budget used, mean (min–max) | 200 / 429 | billed per 200 |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    overRow(covering),
    overRow(small),
    "",
    `Streams the origin served: ${covering.streams} and ${small.streams} (incomplete: ` +
      `${covering.incomplete}, ${small.incomplete}). Billed per 200 counts the whole load (the 429s' ` +
      `denials too) over the 200s: ${covering.billed} and ${small.billed} billed commands; at 7 a 200 ` +
      `(below), that leaves ${fixed(perDenial(covering), 2)} and ${fixed(perDenial(small), 2)} a 429 ` +
      "(a denial the isolate's denial cache answers costs none). Inner commands billed exactly: " +
      `${covering.countedExactly && small.countedExactly ? "yes" : "no"}.`,
    "",
    "The origin sees an admission late: up to " +
      `${fixed(Math.max(covering.mostDelayMs, small.mostDelayMs))} ms from a request's sending to its ` +
      "arrival in this run, so by the origin's clock a window can hold a request the store had already " +
      "let leave it, or miss one it held; the certain counts are the ones no such delay can make.",
    "",
    "### Time to first byte and CPU against the plain proxy",
    "",
    `The same seeded streams through a usage rule (cost ${plan.covering}, every request admitted, ` +
      "usage read from the event stream), the same rule reading its usage from a header the origin " +
      "also sends (`x-usage-tokens`: charged before the answer goes out, the body passed as it is: " +
      "the reservation and the settle without the reading) and a plain rate rule (no usage). " +
      `${plan.rounds} rounds; each round one slice per contender (their order rotated round by round), ` +
      `${plan.perSlice} streams a slice sent at ${plan.sliceRate}/s through both workers in turn. ` +
      "Time to first byte: from the request's start to the first body byte at the client (the " +
      "origin sends its first event at once). CPU: both workerd processes' own (`/proc` schedstat) over " +
      "a slice, until the bridge is quiet (the settles done), per streamed response; the median slice.",
    "",
    "| | usage rule (event stream) | usage rule (header) | plain rule | event stream ÷ plain | header ÷ plain |",
    "| --- | --- | --- | --- | --- | --- |",
    .../** @type {const} */ ([
      ["time to first byte p50 (ms)", "ttfbP50", 2],
      ["time to first byte p99 (ms)", "ttfbP99", 2],
      ["workerd CPU per streamed response (µs)", "cpuUsPerStream", 0],
    ]).map(
      ([label, field, digits]) =>
        `| ${label} | ${fixed(side.usage[field], digits)} | ${fixed(side.header[field], digits)} | ` +
        `${fixed(side.plain[field], digits)} | ${fixed(side.usage[field] / side.plain[field], 2)} | ` +
        `${fixed(side.header[field] / side.plain[field], 2)} |`,
    ),
    `| streams (not 200) | ${side.usage.streams} (${side.usage.failed}) | ${side.header.streams} (${side.header.failed}) | ${side.plain.streams} (${side.plain.failed}) | | |`,
    "",
    "### Billed commands per request",
    "",
    `Batches of ${plan.customers} streams (one per customer, the keys part 2 used), held open ` +
      `${plan.heldMs / 1000} s, ${plan.heldBatches} batches: the bridge's bill read once every answer's ` +
      "headers are in and it is quiet (the admissions), again once the bodies ended and it is quiet " +
      "(the settles); by command from `INFO commandstats`.",
    "",
    "| rule | admission | settle | per request | admission by command | settle by command | apart |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...billed.map(
      (b) =>
        `| ${b.rule} | ${fixed(b.admission, 2)} | ${fixed(b.settle, 2)} | ${fixed(b.admission + b.settle, 2)} | ` +
        `${commands(b.admissionByCommand)} | ${commands(b.settleByCommand) || "–"} | ${b.separated ? "yes" : "no"} |`,
    ),
    "",
    `The usage rule costs ${fixed((usageBilled?.admission ?? 0) + (usageBilled?.settle ?? 0), 2)} billed commands ` +
      `a request against the plain rule's ${fixed((plainBilled?.admission ?? 0) + (plainBilled?.settle ?? 0), 2)}.`,
    "",
    "### Event streams without usage: constant memory",
    "",
    `A third workerd process serving the same worker with its V8 heap capped at ${plan.heapCapMb} MB ` +
      `(\`--max-old-space-size=${plan.heapCapMb}\`; the edge's own cap is 128 MB): event streams without ` +
      "usage, events of about 1 KB as fast as the client reads, through the usage rule and the plain " +
      "rule at each length. V8's heap out of memory is fatal to workerd, so a stream passing whole " +
      `says the heap held at most ${plan.heapCapMb} MB of it (${fixed((100 * plan.heapCapMb * MB) / longest)} % ` +
      `of ${longest / MB} MB), not a share that grows with its length. That process's resident memory ` +
      "(VmRSS) sampled every 10 ms while each " +
      "passes, its growth over the figure before the stream, in the order of the runs. RSS also counts " +
      "what the heap cap does not: ArrayBuffers' backing stores, workerd's own buffers, memory freed " +
      "but not given back to the system.",
    "",
    "| rule | bytes sent / received | whole, isolate alive | ms | RSS before (kB) | growth (kB) |",
    "| --- | --- | --- | --- | --- | --- |",
    ...big.map(
      (b) =>
        `| ${b.rule} | ${b.sent} / ${b.bytes} | ${b.whole ? "yes" : "**no**"}, ${b.alive ? "yes" : "**no**"} | ` +
        `${fixed(b.ms)} | ${b.baseKb} | ${b.growthKb} |`,
    ),
    "",
    `The same ${(4 * plan.bigBytes) / MB} MB stream ${plan.bigRepeats} times in a row through that process, ` +
      "its RSS after each over the figure before the first (kB): plain rule " +
      `${(r.repeated.plain ?? []).map((n) => fixed(n)).join(", ")}; usage rule ` +
      `${(r.repeated.usage ?? []).map((n) => fixed(n)).join(", ")}.`,
    "",
  ];
  return lines.join("\n");
}

/**
 * bench/out/usage.md and .json (bench/out/quick/ with --quick), and its block of the report.
 * @param {UsageResults} results
 * @param {string} command
 * @param {boolean} quick
 */
export function writeUsageOutput(results, command, quick) {
  const out = outDir(quick);
  mkdirSync(out, { recursive: true });
  const named = { command, ...results };
  writeFileSync(path.join(out, "usage.json"), `${JSON.stringify(named, null, 2)}\n`);
  const head =
    `\`${command}\`, ${named.date}, Node ${named.machine.node}, ` +
    `${named.machine.cpus} cores, ${fixed(named.seconds)} s.\n\n`;
  const md = usageMarkdown(named);
  writeFileSync(path.join(out, "usage.md"), `# edge-limiter usage benchmark\n\n${head}${md}`);
  console.log(`\n${md}\nwritten: ${path.relative(ROOT, path.join(out, "usage.md"))}`);
  console.log(`written: ${publishAlone(quick, "usage")}`);
}

async function main() {
  const argv = process.argv.slice(2);
  const quick = argv.includes("--quick");
  const started = Date.now();
  /** @param {string} line */
  const progress = (line) =>
    console.log(`[usage ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const results = await runUsageBench({ quick, progress });
  writeUsageOutput(results, ["node bench/usage.mjs", ...argv].join(" "), quick);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  process.exit(0);
}
