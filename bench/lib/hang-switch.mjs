// @ts-check
// A store that stops answering and comes back: an HTTP proxy in front of a bridge, in its own
// process (so that its work does not run in the load generator's event loop), switched over IPC.
//
//   "forward": every request is relayed to the target at once (a keep-alive pool).
//   "hang":    connections are accepted and requests read, but nothing is answered: a request that
//              arrives is held before it is relayed, and an answer that comes back from the target
//              for a request already in flight is held too (a store that froze mid-call).
//   back to "forward": new requests go through at once; what was held is released as a stalled
//              server resuming would (held requests relayed, held answers delivered), except
//              where the caller has given up meanwhile (closed its connection: dropped).
//
// Used by the shard fault benchmark (bench/shards.mjs --faults):
//   const proxy = await startHangSwitch(bridgeUrl); proxy.url; await proxy.hang(); await proxy.forward();
import { fork } from "node:child_process";
import http from "node:http";
import { pathToFileURL } from "node:url";

/**
 * @typedef {object} HangSwitchStats
 * @property {"forward" | "hang"} mode
 * @property {number} requests requests read
 * @property {number} answered answers delivered
 * @property {number} heldRequests requests held before they were relayed (in all)
 * @property {number} heldAnswers answers held after the target gave them (in all)
 * @property {number} holding held now
 * @property {number} dropped held requests whose caller closed the connection before the release
 * @property {number} released held requests relayed or answered on the way back to "forward"
 * @property {number} errors the target failed (answered 502)
 */

/**
 * Starts the proxy in a child process.
 * @param {string} target the bridge's URL
 * @returns {Promise<{ url: string, hang: () => Promise<HangSwitchStats>, forward: () => Promise<HangSwitchStats>, stats: () => Promise<HangSwitchStats>, stop: () => Promise<void> }>}
 */
export async function startHangSwitch(target) {
  const child = fork(import.meta.filename, [target], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  /** @type {Map<number, (stats: HangSwitchStats) => void>} */
  const waiting = new Map();
  let next = 0;
  /** @type {number} */
  const port = await new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`the hang switch exited (${code})`)));
    child.once("message", (message) => resolve(/** @type {{ port: number }} */ (message).port));
  });
  child.on("message", (message) => {
    const { id, stats } = /** @type {{ id: number, stats: HangSwitchStats }} */ (message);
    waiting.get(id)?.(stats);
    waiting.delete(id);
  });
  /** @param {"hang" | "forward" | "stats"} command @returns {Promise<HangSwitchStats>} */
  const ask = (command) =>
    new Promise((resolve) => {
      const id = ++next;
      waiting.set(id, resolve);
      child.send({ id, command });
    });
  return {
    url: `http://127.0.0.1:${port}`,
    hang: () => ask("hang"),
    forward: () => ask("forward"),
    stats: () => ask("stats"),
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill();
      }),
  };
}

/**
 * The proxy itself (the child process).
 * @param {string} target
 */
async function serve(target) {
  const base = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  /** @type {HangSwitchStats} */
  const stats = {
    mode: "forward",
    requests: 0,
    answered: 0,
    heldRequests: 0,
    heldAnswers: 0,
    holding: 0,
    dropped: 0,
    released: 0,
    errors: 0,
  };
  /** @type {Set<() => void>} what to do with each held request when the switch goes back */
  const held = new Set();

  /**
   * Holds `release` until the switch goes back; dropped if the caller goes first.
   * @param {http.ServerResponse} res
   * @param {() => void} release
   */
  function hold(res, release) {
    stats.holding++;
    const entry = () => {
      res.off("close", gone);
      stats.holding--;
      stats.released++;
      release();
    };
    const gone = () => {
      if (!held.delete(entry)) return;
      stats.holding--;
      stats.dropped++;
    };
    held.add(entry);
    res.once("close", gone);
  }

  /**
   * @param {http.IncomingMessage} req
   * @param {http.ServerResponse} res
   * @param {Buffer} body
   */
  function relay(req, res, body) {
    /** @type {http.OutgoingHttpHeaders} */
    const headers = { ...req.headers, host: base.host, "content-length": body.length };
    const upstream = http.request(
      { host: base.hostname, port: base.port, path: req.url, method: req.method, headers, agent },
      (answer) => {
        /** @type {Buffer[]} */
        const chunks = [];
        answer.on("data", (chunk) => chunks.push(chunk));
        answer.on("end", () => {
          const deliver = () => {
            if (res.destroyed) return;
            stats.answered++;
            res.writeHead(answer.statusCode ?? 502, {
              "content-type": answer.headers["content-type"] ?? "application/json",
            });
            res.end(Buffer.concat(chunks));
          };
          if (stats.mode === "hang") {
            stats.heldAnswers++;
            hold(res, deliver);
          } else deliver();
        });
      },
    );
    upstream.on("error", (error) => {
      stats.errors++;
      if (!res.destroyed) res.writeHead(502).end(JSON.stringify({ error: String(error) }));
    });
    upstream.end(body);
  }

  const server = http.createServer((req, res) => {
    /** @type {Buffer[]} */
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      stats.requests++;
      const body = Buffer.concat(chunks);
      if (stats.mode === "hang") {
        stats.heldRequests++;
        hold(res, () => relay(req, res, body));
      } else relay(req, res, body);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  process.send?.({ port: typeof address === "object" && address ? address.port : 0 });
  process.on("message", (message) => {
    const { id, command } = /** @type {{ id: number, command: string }} */ (message);
    if (command === "hang") stats.mode = "hang";
    if (command === "forward" && stats.mode === "hang") {
      stats.mode = "forward";
      const release = [...held];
      held.clear();
      for (const entry of release) entry();
    }
    process.send?.({ id, stats: { ...stats } });
  });
  // The parent gone (ended, crashed): so is the proxy.
  process.on("disconnect", () => process.exit(0));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const target = process.argv[2];
  if (!target) throw new Error("usage: node bench/lib/hang-switch.mjs <target URL> (forked)");
  await serve(target);
}
