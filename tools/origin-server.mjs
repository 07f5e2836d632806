// @ts-check
// A small origin for the proxy's tests and the latency measurement: a real HTTP server on
// 127.0.0.1 that the worker forwards to (ORIGIN_URL). Node only.
//
//   /status/<code>     answers <code> (304 and 204 without a body; 201 with a Location)
//   /cookies           two Set-Cookie headers and a custom header
//   /echo/...          200 JSON: method, path, query, headers and the request body as text
//   /digest/...        200 JSON: method, path, the body's byte count and SHA-256 (hex), and the
//                      Expect header it arrived with (for uploads too large to echo)
//   /early-hints/...   a 103 Early Hints interim answer, then 200 "final <path>"
//   /stream/<id>       sends "first\n" at once, then waits for /release/<id> before "rest\n"
//   /release/<id>      lets /stream/<id> finish
//   /slow/<group>/...  200, its body in 5 chunks a few ms apart; counts the requests of <group>
//                      whose answer is still being sent (in flight)
//   /__inflight?group=G  {"now", "most"}: G's requests in flight now, and the most at once
//   /sse/<group>/<n>   an event stream: two delta events, one with usage.total_tokens n, then
//                      [DONE], a few ms apart; n summed per group once the stream is sent whole
//   /sse-endless/<n>   an event with usage.total_tokens n (none when 0), then one every few ms
//                      until the connection goes
//   /sse-bulk/<bytes>  that many bytes of 1 KiB events without usage, as fast as they are read
//   /__usage?group=G   {"streams", "units"}: G's event streams sent whole, and their usage summed
//   /v1/chat/completions  an OpenAI-compatible chat completion (chat-origin.mjs), summed per
//                      request `user` into /__usage
//   /redirect          302 to /echo/redirected
//   /__count?path=P    how many requests for path P it has seen (to prove it was not called)
//   anything else      200 "origin <path>"
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { chatCompletions } from "./chat-origin.mjs";

/**
 * @param {{ host?: string, port?: number }} [options]
 * @returns {Promise<{ url: string, close(): Promise<void> }>}
 */
export async function startOrigin(options = {}) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  /** @type {Map<string, () => void>} */
  const releases = new Map();
  /** @type {Map<string, Promise<void>>} */
  const released = new Map();
  /** @param {string} id */
  const releaseFor = (id) => {
    let promise = released.get(id);
    if (!promise) {
      promise = new Promise((resolve) => releases.set(id, resolve));
      released.set(id, promise);
    }
    return promise;
  };

  /** @type {Map<string, { now: number, most: number }>} */
  const inflight = new Map();
  /** @type {Map<string, { streams: number, units: number }>} */
  const usage = new Map();

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://origin");
    const path = url.pathname;
    if (path !== "/__count") counts.set(path, (counts.get(path) ?? 0) + 1);

    if (path === "/__count") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ count: counts.get(url.searchParams.get("path") ?? "") ?? 0 }));
      return;
    }
    if (path === "/__inflight") {
      const group = inflight.get(url.searchParams.get("group") ?? "") ?? { now: 0, most: 0 };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(group));
      return;
    }
    if (path === "/__usage") {
      const group = usage.get(url.searchParams.get("group") ?? "") ?? { streams: 0, units: 0 };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(group));
      return;
    }
    if (path === "/v1/chat/completions") {
      await chatCompletions(req, res, usage);
      return;
    }
    if (path.startsWith("/sse")) {
      await eventStream(path, res, usage);
      return;
    }
    const slow = /^\/slow\/([^/]+)/.exec(path);
    if (slow) {
      const name = slow[1] ?? "";
      const group = inflight.get(name) ?? { now: 0, most: 0 };
      inflight.set(name, group);
      group.now++;
      group.most = Math.max(group.most, group.now);
      // In flight until the answer is sent, or the connection goes.
      let done = false;
      const finish = () => {
        if (!done) group.now--;
        done = true;
      };
      res.once("close", finish);
      res.writeHead(200, { "content-type": "text/plain" });
      for (let i = 0; i < 5 && !res.destroyed; i++) {
        res.write(`chunk ${i}\n`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      finish();
      res.end();
      return;
    }
    const status = /^\/status\/(\d{3})/.exec(path);
    if (status) {
      const code = Number(status[1]);
      if (code === 304 || code === 204) {
        res.writeHead(code, { etag: '"v1"', "x-origin": "yes" });
        res.end();
      } else {
        res.writeHead(code, { "content-type": "text/plain", location: "/created/1" });
        res.end(`status ${code}`);
      }
      return;
    }
    if (path.startsWith("/cookies")) {
      res.setHeader("set-cookie", ["a=1; Path=/; HttpOnly", "b=2; Path=/; Secure"]);
      res.setHeader("x-custom", "kept");
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("cookies");
      return;
    }
    if (path.startsWith("/echo")) {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          method: req.method,
          path,
          query: url.search,
          headers: req.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      return;
    }
    if (path.startsWith("/digest")) {
      const hash = createHash("sha256");
      let bytes = 0;
      for await (const chunk of req) {
        hash.update(chunk);
        bytes += chunk.length;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          method: req.method,
          path,
          bytes,
          sha256: hash.digest("hex"),
          expect: req.headers.expect ?? null,
        }),
      );
      return;
    }
    if (path.startsWith("/early-hints")) {
      res.writeEarlyHints({ link: "</style.css>; rel=preload; as=style" });
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`final ${path}`);
      return;
    }
    const stream = /^\/stream\/([\w-]+)/.exec(path);
    if (stream?.[1]) {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first\n");
      await releaseFor(stream[1]);
      res.end("rest\n");
      return;
    }
    const release = /^\/release\/([\w-]+)/.exec(path);
    if (release?.[1]) {
      void releaseFor(release[1]);
      releases.get(release[1])?.();
      res.writeHead(204);
      res.end();
      return;
    }
    if (path === "/redirect") {
      res.writeHead(302, { location: "/echo/redirected" });
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`origin ${path}`);
  });
  server.keepAliveTimeout = 30_000;

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve(undefined));
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("origin: no port");
  return {
    url: `http://${options.host ?? "127.0.0.1"}:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        for (const release of releases.values()) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const SSE = { "content-type": "text/event-stream", "cache-control": "no-cache" };
/** @param {number} ms */
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** @param {number} tokens */
const usageEvent = (tokens) =>
  `data: ${JSON.stringify({ choices: [], usage: { total_tokens: tokens } })}\n\n`;
const delta = `data: ${JSON.stringify({ choices: [{ delta: { content: "more" } }] })}\n\n`;

/**
 * The /sse routes, as an OpenAI-compatible origin streams (usage in the last event, with
 * `stream_options.include_usage`).
 * @param {string} path
 * @param {import("node:http").ServerResponse} res
 * @param {Map<string, { streams: number, units: number }>} usage
 */
async function eventStream(path, res, usage) {
  const [, route, first, second] = path.split("/");
  res.writeHead(200, SSE);
  if (route === "sse") {
    const tokens = Number(second);
    for (const event of [delta, delta, usageEvent(tokens), "data: [DONE]\n\n"]) {
      if (res.destroyed) return;
      res.write(event);
      await pause(3);
    }
    const group = usage.get(first ?? "") ?? { streams: 0, units: 0 };
    usage.set(first ?? "", group);
    group.streams++;
    group.units += tokens;
    res.end();
    return;
  }
  if (route === "sse-endless") {
    if (Number(first) > 0) res.write(usageEvent(Number(first)));
    while (!res.destroyed) {
      res.write(delta);
      await pause(3);
    }
    return;
  }
  if (route === "sse-bulk") {
    const event = `data: ${JSON.stringify({ content: "x".repeat(1_000) })}\n\n`;
    // Padded to 1 KiB with a comment line (ASCII: its length is its bytes).
    const padded = `${event}:${" ".repeat(1_024 - event.length - 2)}\n`;
    let left = Number(first);
    while (left > 0 && !res.destroyed) {
      const chunk = padded.slice(0, Math.min(left, padded.length));
      left -= chunk.length;
      // Written as fast as the client reads: the origin holds one event, whatever the total.
      if (!res.write(chunk)) await new Promise((resolve) => res.once("drain", resolve));
    }
    res.end();
    return;
  }
  res.end();
}
