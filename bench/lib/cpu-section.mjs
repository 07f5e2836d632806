// @ts-check
// The workerd-CPU side by side of `npm run bench` (issue 12): each worker in its own workerd
// process, the same mixed load on each in turn (alternated: A B C…, then …C B A), the process's
// CPU time over the decisions it answered; medians and ratios.
//
//   ours           src/worker.ts as deployed, a /check-only config (no rules)
//   anchorMinimal  @upstash/ratelimit slidingWindow behind a minimal /check (anchor-minimal-worker.ts)
//   anchorSliding  the like-for-like anchor: slidingWindow behind our /check code (anchor-worker.ts)
//   oursProxy      src/worker.ts as a proxy: two rules, a local origin, the mixed load as GETs
//   oursForward    the same worker and origin, paths no rule matches: forwarding alone
import { withWorkerdCpu } from "./workerd-cpu.mjs";
import { runLoad, runProxyLoad } from "./load.mjs";

/** @param {number[]} values */
export const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

export const CPU_CONTENDERS = [
  { id: "ours", name: "edge-limiter, src/worker.ts as deployed (/check)" },
  { id: "anchorMinimal", name: "@upstash/ratelimit slidingWindow, minimal /check front" },
  { id: "anchorSliding", name: "@upstash/ratelimit slidingWindow behind our /check code" },
  { id: "oursProxy", name: "edge-limiter proxy, a matching rule, local origin" },
  { id: "oursForward", name: "edge-limiter proxy, no rule matches (forward only)" },
];

/**
 * @typedef {{ url: string, pid: number | undefined }} Served
 * @param {{
 *   workers: Record<string, Served>,
 *   repeats: number,
 *   seconds: number,
 *   connections: number,
 *   progress: (message: string) => void,
 * }} options `workers` by CPU_CONTENDERS id (oursProxy and oursForward are one worker)
 */
export async function measureWorkerdCpu({ workers, repeats, seconds, connections, progress }) {
  const order = CPU_CONTENDERS.map((c) => c.id);
  /** @type {Record<string, any[]>} */
  const runs = {};
  /** @param {string} id @param {string} tag @param {number} s */
  const once = (id, tag, s) => {
    const worker = workers[id];
    if (!worker) throw new Error(`no worker for ${id}`);
    const load =
      id === "oursProxy" || id === "oursForward"
        ? () =>
            runProxyLoad({
              url: worker.url,
              tag,
              seconds: s,
              connections,
              matched: id === "oursProxy",
            })
        : () => runLoad({ url: worker.url, load: "mixed", tag, seconds: s, connections });
    return withWorkerdCpu(worker.pid, load);
  };
  for (const id of order) await once(id, `cpuwarm${Date.now()}`, 1);
  for (let rep = 0; rep < repeats; rep++) {
    const ids = rep % 2 === 0 ? order : [...order].reverse();
    for (const id of ids) {
      const run = await once(id, `cpu${rep}x${Date.now()}`, seconds);
      runs[id] = [...(runs[id] ?? []), run];
      progress(
        `workerd CPU ${id.padEnd(13)} rep ${rep + 1}/${repeats}: ` +
          `${run.cpuUsecPerDecision.toFixed(0)} µs/decision, ${run.perSecond.toFixed(0)} decisions/s, ` +
          `errors ${run.errors}`,
      );
    }
  }
  /** @type {Record<string, any>} */
  const byId = {};
  for (const [id, list] of Object.entries(runs)) {
    byId[id] = {
      cpuUsecPerDecision: median(list.map((r) => r.cpuUsecPerDecision)),
      perSecond: median(list.map((r) => r.perSecond)),
      p50: median(list.map((r) => r.p50)),
      p99: median(list.map((r) => r.p99)),
      errors: list.reduce((sum, r) => sum + r.errors, 0),
      runs: list.map(({ percentiles: _p, ...rest }) => rest),
    };
  }
  /** Per repetition, A's figure over B's (the pairs ran next to each other). @param {string} a @param {string} b @param {string} field */
  const paired = (a, b, field) =>
    (runs[a] ?? []).map((r, i) => r[field] / (runs[b]?.[i]?.[field] ?? Number.NaN));
  const ratios = {
    cpuVsMinimal: median(paired("ours", "anchorMinimal", "cpuUsecPerDecision")),
    throughputVsMinimal: median(paired("ours", "anchorMinimal", "perSecond")),
    cpuVsLikeForLike: median(paired("ours", "anchorSliding", "cpuUsecPerDecision")),
    throughputVsLikeForLike: median(paired("ours", "anchorSliding", "perSecond")),
    cpuVsMinimalRuns: paired("ours", "anchorMinimal", "cpuUsecPerDecision"),
    throughputVsMinimalRuns: paired("ours", "anchorMinimal", "perSecond"),
  };
  const proxy = byId.oursProxy?.cpuUsecPerDecision ?? Number.NaN;
  return {
    repeats,
    seconds,
    connections,
    contenders: CPU_CONTENDERS,
    byId,
    ratios,
    proxy: {
      // What a limited proxied request costs beyond a /check decision, and beyond forwarding.
      beyondCheckUsec: proxy - (byId.ours?.cpuUsecPerDecision ?? Number.NaN),
      beyondForwardUsec: proxy - (byId.oursForward?.cpuUsecPerDecision ?? Number.NaN),
    },
  };
}
