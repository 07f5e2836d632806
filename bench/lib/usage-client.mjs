// @ts-check
// The usage section's client side: a streamed request through a worker, timed to its first body
// byte and read to its end; the bridge's counters; a workerd process's resident memory.
import { readFileSync } from "node:fs";

/**
 * @typedef {object} StreamResult
 * @property {number} status
 * @property {number} sentAt when the request started (epoch ms with fractions, the origin's clock)
 * @property {number} endedAt when its body ended at the client (same clock)
 * @property {number} ttfbMs from the request's start to the first body byte (NaN: no body read)
 * @property {number} totalMs to the body's end
 * @property {number} bytes of body read
 * @property {number} worker which worker answered (its index)
 */

/**
 * One request through the proxy; a 200's event stream read to its end, chunk by chunk, nothing
 * kept but the count of its bytes.
 * @param {string[]} workers
 * @param {number} on the worker's index
 * @param {string} path with its query
 * @param {string} customer
 * @returns {Promise<StreamResult>}
 */
export async function streamThrough(workers, on, path, customer) {
  const started = performance.now();
  const sentAt = performance.timeOrigin + started;
  const at = () => performance.timeOrigin + performance.now();
  let ttfbMs = Number.NaN;
  let bytes = 0;
  try {
    const res = await fetch(`${workers[on]}${path}`, { headers: { "x-customer": customer } });
    if (res.body) {
      const reader = res.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (bytes === 0 && value.byteLength > 0) ttfbMs = performance.now() - started;
        bytes += value.byteLength;
      }
    }
    const endedAt = at();
    return {
      status: res.status,
      sentAt,
      endedAt,
      ttfbMs,
      totalMs: endedAt - sentAt,
      bytes,
      worker: on,
    };
  } catch {
    const endedAt = at();
    return { status: 0, sentAt, endedAt, ttfbMs, totalMs: endedAt - sentAt, bytes, worker: on };
  }
}

/** A process's resident memory now, in kB (VmRSS). @param {number} pid */
export function rssKbOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? Number.NaN);
}
