// @ts-check
// The origin of the usage section (bench/usage.mjs): a Node HTTP server in a process of its own
// (so the load generator's event loop does not delay it) that streams an OpenAI-like event stream
// and records, per customer (the `x-customer` header), each stream's arrival, end and tokens.
//
//   GET /<tag>/…?tokens=T&ms=D   `text/event-stream`: the headers and a first event (the role
//       chunk) at once, then `data: {"choices":[{"delta":{"content":…}}]}` events one every
//       EVENT_MS (the content about 4 characters a token, T tokens over the events), the last event
//       `data: {"choices":[],"usage":{…,"total_tokens":T}}` about D ms after the first, then
//       `data: [DONE]`, as OpenAI streams with `stream_options.include_usage`; T in an
//       `x-usage-tokens` header too.
//   GET /<tag>/…?bytes=N         N bytes of content events (about 1 KB each) as fast as the
//       client takes them, no usage anywhere: the long stream whose reading must stay in
//       constant memory.
// Control (JSON): GET /__records → every stream so far: { key, tag, request, arrival, end,
// tokens, completed } (times: epoch ms with fractions, the clock the bench reads too); GET /__reset.
//
//   startSseOrigin()  spawns it; `node bench/lib/sse-origin.mjs --serve` runs it here.
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";
import { spawnUntil, stopGroup } from "../../tools/process-group.mjs";

/** An event every this many ms: an LLM's tokens arrive as a stream of small events. */
export const EVENT_MS = 20;

/** @param {number} ms */
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Epoch ms with fractions. */
export const now = () => performance.timeOrigin + performance.now();

/**
 * @typedef {object} StreamRecord
 * @property {string} key the customer
 * @property {string} tag the path's first segment (which rule)
 * @property {string} request the client's name for it (`?req=`)
 * @property {number} arrival when the request reached the origin (just after its admission)
 * @property {number} end when its last byte was handed to the socket, or the client went away
 * @property {number} tokens the usage its last event reported (0: a stream without usage)
 * @property {boolean} completed sent in full
 */

/** @param {string} id @param {object} choice */
const chunk = (id, choice) =>
  `data: ${JSON.stringify({ id, object: "chat.completion.chunk", model: "bench", choices: [choice] })}\n\n`;

/**
 * @param {import("node:http").ServerResponse} res
 * @param {string} text
 * @returns {Promise<void>} resolved once the socket takes more (backpressure)
 */
const write = (res, text) =>
  res.write(text) ? Promise.resolve() : new Promise((resolve) => res.once("drain", resolve));

/** Serves the origin on 127.0.0.1 (any free port); resolves with the port. */
async function serveSseOrigin() {
  /** @type {StreamRecord[]} */
  let records = [];
  let served = 0;
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://origin");
    if (url.pathname === "/__records" || url.pathname === "/__reset") {
      const body = url.pathname === "/__records" ? records : { ok: true };
      if (url.pathname === "/__reset") records = [];
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
      return;
    }
    req.resume();
    /** @type {StreamRecord} */
    const record = {
      key: String(req.headers["x-customer"] ?? "-"),
      tag: url.pathname.split("/")[1] ?? "",
      request: url.searchParams.get("req") ?? "",
      arrival: now(),
      end: Number.NaN,
      tokens: 0,
      completed: false,
    };
    records.push(record);
    let open = true;
    res.once("close", () => {
      open = false;
      if (Number.isNaN(record.end)) record.end = now();
    });
    const id = `chatcmpl-${(served++).toString(36)}`;
    const told = url.searchParams.get("tokens");
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      // The usage in a header too (as some APIs send it up front), for a rule that reads it there.
      ...(told ? { "x-usage-tokens": told } : {}),
    });
    await write(res, chunk(id, { index: 0, delta: { role: "assistant", content: "" } }));
    const bytes = Number(url.searchParams.get("bytes") ?? 0);
    if (bytes > 0) {
      const event = chunk(id, { index: 0, delta: { content: "x".repeat(1000) } });
      for (let sent = 0; sent < bytes && open; sent += event.length) await write(res, event);
    } else {
      const tokens = Math.max(1, Number(url.searchParams.get("tokens") ?? 100));
      const ms = Math.max(0, Number(url.searchParams.get("ms") ?? 0));
      const events = Math.max(1, Math.round(ms / EVENT_MS));
      const started = now();
      let given = 0;
      for (let i = 1; i <= events && open; i++) {
        const upTo = Math.round((tokens * i) / events);
        const content = "tok ".repeat(upTo - given);
        given = upTo;
        // Paced against the stream's start, so the timers' lateness does not add up.
        await delay(Math.max(0, started + (ms * i) / events - now()));
        if (open) await write(res, chunk(id, { index: 0, delta: { content } }));
      }
      if (open) {
        const usage = { prompt_tokens: 0, completion_tokens: tokens, total_tokens: tokens };
        await write(res, `data: ${JSON.stringify({ id, choices: [], usage })}\n\n`);
        record.tokens = tokens;
      }
    }
    if (!open) return;
    res.end("data: [DONE]\n\n", () => {
      record.end = now();
      record.completed = true;
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  return typeof address === "object" && address ? address.port : 0;
}

/**
 * The origin in a child process.
 * @returns {Promise<{ url: string, records: () => Promise<StreamRecord[]>, reset: () => Promise<void>, stop: () => Promise<void> }>}
 */
export async function startSseOrigin() {
  const { child, match } = await spawnUntil(
    "the SSE origin",
    process.execPath,
    [import.meta.filename, "--serve"],
    /sse origin on (\d+)/,
  );
  const url = `http://127.0.0.1:${match[1]}`;
  return {
    url,
    records: async () =>
      /** @type {StreamRecord[]} */ (await (await fetch(`${url}/__records`)).json()),
    reset: async () => {
      await (await fetch(`${url}/__reset`)).text();
    },
    stop: () => stopGroup(child),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = await serveSseOrigin();
  console.log(`sse origin on ${port}`);
}
