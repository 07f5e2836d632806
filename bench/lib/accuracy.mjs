// @ts-check
// Accuracy through the worker: a steady sender above its limit, and bursts either side of a window
// edge. Each request is timed on the client: its decision happened between send and receive.
import { delay } from "../../tools/infra.mjs";
import { check } from "./load.mjs";

/** @typedef {{ send: number, recv: number, allowed: boolean }} Sample */

/**
 * A client sending at a steady `rate` per second for `seconds`, on a fresh key.
 * @param {string} url
 * @param {{ key: string, limit: number, windowMs: number, rate: number, seconds: number }} o
 * @returns {Promise<Sample[]>}
 */
export async function steadySender(url, { key, limit, windowMs, rate, seconds }) {
  const period = 1000 / rate;
  const start = performance.now();
  /** @type {Promise<Sample>[]} */
  const pending = [];
  for (let i = 0; i < rate * seconds; i++) {
    const due = start + i * period;
    const wait = due - performance.now();
    if (wait > 0) await delay(wait);
    pending.push(timed(url, { key, limit, window: windowMs }, start));
  }
  return Promise.all(pending);
}

/**
 * Two bursts of `2 × limit` requests, `gapMs / 2` before and after a window edge (edges are
 * multiples of the window in Unix time, where fixed windows put them), on a fresh key.
 * @param {string} url
 * @param {{ key: string, limit: number, windowMs: number, gapMs: number }} o
 * @returns {Promise<Sample[]>}
 */
export async function edgeBursts(url, { key, limit, windowMs, gapMs }) {
  const now = Date.now();
  let edge = Math.ceil(now / windowMs) * windowMs;
  if (edge - now < gapMs) edge += windowMs;
  const start = performance.now() + (edge - gapMs / 2 - now);
  /** @type {Promise<Sample[]>[]} */
  const bursts = [];
  for (const at of [start, start + gapMs]) {
    const wait = at - performance.now();
    if (wait > 0) await delay(wait);
    bursts.push(
      Promise.all(
        Array.from({ length: 2 * limit }, () =>
          timed(url, { key, limit, window: windowMs }, start),
        ),
      ),
    );
  }
  return (await Promise.all(bursts)).flat();
}

/**
 * @param {string} url
 * @param {object} body
 * @param {number} origin
 * @returns {Promise<Sample>}
 */
async function timed(url, body, origin) {
  const send = performance.now() - origin;
  const { allowed } = await check(url, body);
  return { send, recv: performance.now() - origin, allowed };
}

/**
 * - maxInWindow: the most admissions that certainly fell in one rolling window: for each
 *   admission i, the admissions j sent no earlier than i and answered before send(i) + window
 *   (each was decided between its send and its receive, so all of them within one window).
 *   Client timing jitter can only lower it, never make an exact limiter look over its limit.
 * - ideal: what an exact sliding log would admit for the same send times.
 * - share: admitted / ideal.
 * @param {Sample[]} samples
 * @param {number} limit
 * @param {number} windowMs
 */
export function analyse(samples, limit, windowMs) {
  const sorted = [...samples].sort((a, b) => a.send - b.send);
  const admitted = sorted.filter((s) => s.allowed);
  let maxInWindow = 0;
  for (const first of admitted) {
    const end = first.send + windowMs;
    const count = admitted.filter((o) => o.send >= first.send && o.recv < end).length;
    maxInWindow = Math.max(maxInWindow, count);
  }
  /** @type {number[]} */
  const idealTimes = [];
  for (const s of sorted) {
    const t = (s.send + s.recv) / 2;
    if (idealTimes.filter((x) => x > t - windowMs).length < limit) idealTimes.push(t);
  }
  return {
    requests: sorted.length,
    admitted: admitted.length,
    ideal: idealTimes.length,
    share: admitted.length / idealTimes.length,
    maxInWindow,
  };
}

/**
 * Admissions in the trailing window, sampled every `stepMs` (for the chart).
 * @param {Sample[]} samples
 * @param {number} windowMs
 * @param {number} stepMs
 * @returns {[number, number][]} [ms since start, admissions in (t - window, t]]
 */
export function rollingAdmissions(samples, windowMs, stepMs) {
  const times = samples
    .filter((s) => s.allowed)
    .map((s) => (s.send + s.recv) / 2)
    .sort((a, b) => a - b);
  const end = Math.max(0, ...samples.map((s) => s.recv));
  /** @type {[number, number][]} */
  const points = [];
  for (let t = 0; t <= end; t += stepMs) {
    points.push([t, times.filter((x) => x > t - windowMs && x <= t).length]);
  }
  return points;
}
