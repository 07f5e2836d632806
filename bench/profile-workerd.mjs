// @ts-check
// Where our worker's CPU goes inside workerd itself: worker/worker.ts built as it deploys,
// served by workerd with its V8 inspector on, the mixed /check load (or the proxy load) for a few
// seconds with the CPU profiler running; self time by source file and function of the bundle.
//
//   node bench/profile-workerd.mjs [seconds, default 6] [--proxy] [--minimal] [--bundle=<path>]
//     [--save=<path>] [--rate=N]
//
// --minimal profiles the minimal anchor (bench/anchor-minimal-worker.ts) instead. Profiling slows
// the worker: read the shares, not the µs, and take CPU figures from `npm run bench`.
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { serveWorker, startBridgeProcess, startPrivateRedis, tempDir } from "../tools/infra.mjs";
import { startOrigin } from "../tools/origin-server.mjs";
import { buildWorkers } from "./lib/build-workers.mjs";
import { cpuByPart, profileWorkerd, summariseProfile } from "./lib/cpu-profile.mjs";
import { LIMITER_TOKEN, PROXY_RULES, runLoad, runProxyLoad } from "./lib/load.mjs";

const SECONDS = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 6);
const proxy = process.argv.includes("--proxy");
const minimal = process.argv.includes("--minimal");
// --rate=N: the /check load at N requests/s (as the bench's CPU figure), not flat out.
const rate = Number(process.argv.find((a) => a.startsWith("--rate="))?.slice(7)) || undefined;
const tmp = tempDir();
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));
const bundles = await buildWorkers(tmp);
const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
const origin = await startOrigin();
// --bundle=<path>: a bundle built elsewhere (e.g. an older commit's, for a before/after).
const given = process.argv.find((a) => a.startsWith("--bundle="))?.slice(9);
const scriptPath = given ?? (minimal ? bundles.anchorMinimal : bundles.ours);
const worker = await serveWorker({
  scriptPath,
  inspector: true,
  bindings: {
    UPSTASH_REDIS_REST_URL: bridge.url,
    UPSTASH_REDIS_REST_TOKEN: bridge.token,
    LIMITER_TOKEN,
    LIMITER_CONFIG: JSON.stringify({
      rules: proxy ? PROXY_RULES : [],
      timeoutMs: 500,
      failMode: "open",
    }),
    ORIGIN_URL: origin.url,
  },
});
/** @param {string} tag @param {number} seconds */
const load = (tag, seconds) =>
  proxy
    ? runProxyLoad({ url: worker.url, tag, seconds, connections: 32, matched: true })
    : runLoad({
        url: worker.url,
        load: "mixed",
        tag,
        seconds,
        connections: 32,
        ...(rate ? { rate } : {}),
      });
try {
  await load("warm", 2);
  const { profile, result: run } = await profileWorkerd(Number(worker.inspectorPort), () =>
    load(`p${Date.now()}`, SECONDS),
  );
  console.log(
    `${path.basename(scriptPath)} in workerd${proxy ? " (proxy)" : ""}: ${run.perSecond.toFixed(0)} decisions/s while profiled\n` +
      summariseProfile(profile, scriptPath, run.decisions),
  );
  // --save=<path>: the raw profile (and the bundle beside it, <path>.js) for a closer look,
  // e.g. the positionTicks of one function.
  const save = process.argv.find((a) => a.startsWith("--save="))?.slice(7);
  if (save) {
    writeFileSync(save, JSON.stringify(profile));
    copyFileSync(scriptPath, `${save}.js`);
  }
  console.log("by part:");
  for (const [part, share] of Object.entries(cpuByPart(profile, scriptPath)).sort(
    (a, b) => b[1] - a[1],
  )) {
    console.log(`  ${(share * 100).toFixed(1).padStart(5)} %  ${part}`);
  }
} finally {
  await worker.dispose();
  await origin.close();
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(0);
