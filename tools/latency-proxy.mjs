// @ts-check
// A distant store: a proxy in front of the bridge that holds every request `delayMs` before
// forwarding it (as a cross-region Upstash would add its round trip) and counts the HTTP round
// trips. Used by the lease benchmark (bench/lib/lease-bench.mjs).
import http from "node:http";

/**
 * @param {string} target the bridge's URL
 * @param {number} delayMs added before each request is forwarded
 */
export async function startLatencyProxy(target, delayMs) {
  const counts = { requests: 0 };
  // `hang`: hold every request from now on without an answer (a store that stopped answering);
  // `delayMs`: settable, for a link that slows down.
  const link = { delayMs, hang: false };
  /** @type {Set<import("node:http").ServerResponse>} */
  const held = new Set();
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    counts.requests++;
    if (link.hang) {
      held.add(res);
      res.once("close", () => held.delete(res));
      return;
    }
    delayMs = link.delayMs;
    /** @type {Record<string, string>} */
    const headers = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === "string" && name !== "host" && name !== "content-length") {
        headers[name] = value;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    try {
      const answer = await fetch(`${target}${req.url}`, {
        method: "POST",
        headers,
        body: Buffer.concat(chunks),
      });
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(Buffer.from(await answer.arrayBuffer()));
    } catch (error) {
      res.writeHead(502).end(JSON.stringify({ error: String(error) }));
    }
  });
  const port = await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : 0);
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    link,
    reset() {
      counts.requests = 0;
    },
    /** Answers again; requests held while hanging are dropped (their callers timed out). */
    resume() {
      link.hang = false;
      for (const res of held) res.destroy();
      held.clear();
    },
    /** @returns {Promise<void>} */
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
