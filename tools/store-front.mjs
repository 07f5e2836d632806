// @ts-check
// Network boundaries in front of the store, for the low-rate phases: a counting proxy (round trips
// and commands per decision, seen on the wire), a store that hangs, and a port that refuses.
import http from "node:http";
import { freePort } from "./ports.mjs";

/**
 * Forwards every request to the bridge and counts HTTP round trips and the commands they carry.
 * @param {string} target the bridge's URL
 */
export async function startCountingProxy(target) {
  const counts = { requests: 0, commands: 0 };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    counts.requests++;
    try {
      const parsed = JSON.parse(body.toString("utf8"));
      counts.commands += Array.isArray(parsed[0]) ? parsed.length : 1;
    } catch {
      counts.commands++;
    }
    await forward(target, req, res, body);
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    reset() {
      counts.requests = 0;
      counts.commands = 0;
    },
    close: () => close(server),
  };
}

/**
 * Sends a REST request on to the store at `target` with its headers (but Host and
 * Content-Length) and `body`, and its answer back; a store that cannot be reached is a 502.
 * @param {string} target
 * @param {http.IncomingMessage} req
 * @param {http.ServerResponse} res
 * @param {Buffer<ArrayBuffer>} body
 */
export async function forward(target, req, res, body) {
  /** @type {Record<string, string>} */
  const headers = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string" && name !== "host" && name !== "content-length") {
      headers[name] = value;
    }
  }
  try {
    const answer = await fetch(`${target}${req.url}`, { method: "POST", headers, body });
    res.writeHead(answer.status, { "content-type": "application/json" });
    res.end(Buffer.from(await answer.arrayBuffer()));
  } catch (error) {
    res.writeHead(502).end(JSON.stringify({ error: String(error) }));
  }
}

/** A store that accepts connections and requests and never answers. */
export async function startHangingStore() {
  const server = http.createServer(() => {
    // never answer
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, close: () => close(server) };
}

/** A URL where nothing listens: every connection is refused. */
export async function refusingStoreUrl() {
  return `http://127.0.0.1:${await freePort()}`;
}

/** @param {http.Server} server @returns {Promise<number>} */
function listen(server) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : 0);
    });
  });
}

/** @param {http.Server} server @returns {Promise<void>} */
function close(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
