// @ts-check
// The origin of bench/concurrency.mjs: a Node HTTP server in a process of its own (so the load
// generator's event loop does not delay it), counting per client key (the `x-client` header)
// how many requests it has in flight, the most at once, and how long it spent at each count.
//
// Any path but /__*: answered as the query says, the key's request in flight from its arrival
// until its answer has been sent (`finish`) or the client (the worker) went away (`close`):
//   ?delay=<ms>     wait this long before the status line (default 0)
//   &chunks=<n>     the body in n chunks of 64 bytes (default 1), the first with the headers,
//   &every=<ms>     one every <ms> after it (default 0)
// Control (JSON):
//   GET /__mark?key=K      from now on, K's time at each count and its "window max" start afresh
//   GET /__stats?key=K     K's counters: { now, inFlight, max, windowMax, served, aborted,
//                          timeAt: { "<count>": ms }, windowMs, arrivals: [t…], aborts: [t…] }
// Times are epoch ms with fractions (performance.timeOrigin + performance.now()), the clock the
// bench process reads too.
//
//   startSlowOrigin()  spawns it; `node tools/slow-origin.mjs --serve` runs it here.
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";
import { spawnUntil, stopGroup } from "./process-group.mjs";

/** @param {number} ms */
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Epoch ms with fractions. */
export const now = () => performance.timeOrigin + performance.now();

/**
 * @typedef {object} KeyStats
 * @property {number} inFlight
 * @property {number} max most in flight at once since the key's first request
 * @property {number} windowMax most in flight at once since the last /__mark
 * @property {number} served answers sent in full
 * @property {number} aborted answers the worker went away from before they were sent
 * @property {Record<string, number>} timeAt ms spent at each in-flight count since the mark
 * @property {number} windowMs ms since the mark
 * @property {number[]} arrivals every request's arrival time
 * @property {number[]} aborts when each aborted answer's connection closed
 */

/** Serves the origin on 127.0.0.1:`port` (0: any free one); resolves with the port. */
async function serveSlowOrigin(port = 0) {
  /** @type {Map<string, { inFlight: number, max: number, windowMax: number, served: number, aborted: number, timeAt: Map<number, number>, since: number, changed: number, arrivals: number[], aborts: number[] }>} */
  const keys = new Map();
  /** @param {string} key */
  const entry = (key) => {
    let e = keys.get(key);
    if (!e) {
      const t = now();
      e = {
        inFlight: 0,
        max: 0,
        windowMax: 0,
        served: 0,
        aborted: 0,
        timeAt: new Map(),
        since: t,
        changed: t,
        arrivals: [],
        aborts: [],
      };
      keys.set(key, e);
    }
    return e;
  };
  /** Accrues the time spent at the current count, then applies `delta`. */
  const change = (/** @type {ReturnType<typeof entry>} */ e, /** @type {number} */ delta) => {
    const t = now();
    e.timeAt.set(e.inFlight, (e.timeAt.get(e.inFlight) ?? 0) + (t - e.changed));
    e.changed = t;
    e.inFlight += delta;
    e.max = Math.max(e.max, e.inFlight);
    e.windowMax = Math.max(e.windowMax, e.inFlight);
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://origin");
    const json = (/** @type {unknown} */ body) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === "/__mark") {
      const e = entry(url.searchParams.get("key") ?? "-");
      change(e, 0);
      e.timeAt.clear();
      e.since = e.changed;
      e.windowMax = e.inFlight;
      return json({ ok: true });
    }
    if (url.pathname === "/__stats") {
      const e = entry(url.searchParams.get("key") ?? "-");
      change(e, 0);
      /** @type {KeyStats} */
      const stats = {
        inFlight: e.inFlight,
        max: e.max,
        windowMax: e.windowMax,
        served: e.served,
        aborted: e.aborted,
        timeAt: Object.fromEntries([...e.timeAt].map(([n, ms]) => [String(n), ms])),
        windowMs: e.changed - e.since,
        arrivals: e.arrivals,
        aborts: e.aborts,
      };
      return json(stats);
    }
    const e = entry(String(req.headers["x-client"] ?? "-"));
    e.arrivals.push(now());
    change(e, 1);
    let open = true;
    const end = (/** @type {boolean} */ served) => {
      if (!open) return;
      open = false;
      change(e, -1);
      if (served) e.served++;
      else {
        e.aborted++;
        e.aborts.push(now());
      }
    };
    res.once("finish", () => end(true));
    res.once("close", () => end(false));
    req.resume();
    const wait = Number(url.searchParams.get("delay") ?? 0);
    const chunks = Math.max(1, Number(url.searchParams.get("chunks") ?? 1));
    const every = Number(url.searchParams.get("every") ?? 0);
    const chunk = `${"x".repeat(63)}\n`;
    setTimeout(async () => {
      if (!open) return;
      res.writeHead(200, { "content-type": "text/plain", "cache-control": "no-store" });
      for (let i = 0; i < chunks - 1 && open; i++) {
        res.write(chunk);
        await delay(every);
      }
      if (open) res.end(chunk);
    }, wait);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  return typeof address === "object" && address ? address.port : port;
}

/**
 * The origin in a child process.
 * @returns {Promise<{ url: string, stats: (key: string) => Promise<KeyStats>, mark: (key: string) => Promise<void>, stop: () => Promise<void> }>}
 */
export async function startSlowOrigin() {
  const { child, match } = await spawnUntil(
    "the slow origin",
    process.execPath,
    [import.meta.filename, "--serve"],
    /slow origin on (\d+)/,
  );
  const url = `http://127.0.0.1:${match[1]}`;
  return {
    url,
    stats: async (key) =>
      /** @type {KeyStats} */ (
        await (await fetch(`${url}/__stats?key=${encodeURIComponent(key)}`)).json()
      ),
    mark: async (key) => {
      await (await fetch(`${url}/__mark?key=${encodeURIComponent(key)}`)).text();
    },
    stop: () => stopGroup(child),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = await serveSlowOrigin(Number(process.argv[3] ?? 0));
  console.log(`slow origin on ${port}`);
}
