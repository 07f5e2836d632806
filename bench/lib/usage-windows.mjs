// @ts-check
// What the usage section computes from the origin's records (bench/lib/sse-origin.mjs): per
// customer, the most usage charged in any rolling window against the limit, and each window's
// overdraw against the bound docs/usage.md "How exact" gives: the units by which the requests in
// flight (admitted, not yet settled) when the window's last admission was decided, that one
// included, used more than their reservations.

/**
 * A stream the origin recorded, as the windows read it, with its client's times: `sent` when the
 * client sent it (before its admission), `clientEnd` when its body ended at the client.
 * @typedef {{ arrival: number, end: number, tokens: number, sent: number, clientEnd: number }} Charged
 */

/**
 * A settle reaches the store after the stream's last byte leaves the origin (through workerd, to
 * the client, then the settle call): a request counts as in flight at an admission when its
 * stream ended less than this before it, so the bound is the documented one or a little looser,
 * never tighter.
 */
export const SETTLE_SLACK_MS = 100;

/**
 * The check that no clock can fool: the store decided k at some instant between k's sending and
 * its arrival at the origin, and each j likewise, so a window counts only the entries certainly in
 * the store's window ending at k (j sent after k's arrival − the window, and arrived before k was
 * sent), and its bound every entry that may have been in it and unsettled (its body ended at the
 * client less than CERTAIN_SETTLE_MS before k was sent). A window past that bound is past the
 * documented one whatever the delays.
 */
export const CERTAIN_SETTLE_MS = 500;

/**
 * @param {Charged[]} streams one customer's, by arrival
 * @param {{ windowMs: number, limit: number, cost: number }} rule
 */
function certainlyPast(streams, { windowMs, limit, cost }) {
  let past = 0;
  let worst = 0;
  for (const k of streams) {
    let sum = k.tokens;
    let bound = Math.max(0, k.tokens - cost);
    for (const j of streams) {
      if (j === k) continue;
      if (j.sent > k.arrival - windowMs && j.arrival < k.sent) sum += j.tokens;
      const mayBeIn = j.arrival > k.sent - windowMs && j.sent <= k.arrival;
      if (mayBeIn && j.clientEnd + CERTAIN_SETTLE_MS > k.sent) {
        bound += Math.max(0, j.tokens - cost);
      }
    }
    if (sum - limit > bound) {
      past++;
      worst = Math.max(worst, sum - limit - bound);
    }
  }
  return { past, worst };
}

/**
 * One customer's windows: every window that ends at an admission (the most in any rolling window
 * is in one of them: a window's entries are all in the window ending at its last one).
 * @param {Charged[]} streams one customer's completed streams
 * @param {{ windowMs: number, limit: number, cost: number }} rule
 */
function customerWindows(streams, { windowMs, limit, cost }) {
  const byArrival = [...streams].sort((a, b) => a.arrival - b.arrival);
  let most = 0;
  let over = 0;
  let worstOverdraw = 0;
  let worstBound = 0;
  let overBound = 0;
  let from = 0;
  let sum = 0;
  for (let k = 0; k < byArrival.length; k++) {
    const last = /** @type {Charged} */ (byArrival[k]);
    sum += last.tokens;
    while (/** @type {Charged} */ (byArrival[from]).arrival <= last.arrival - windowMs) {
      sum -= /** @type {Charged} */ (byArrival[from]).tokens;
      from++;
    }
    most = Math.max(most, sum);
    if (sum <= limit) continue;
    over++;
    let bound = 0;
    // k itself included: it is in flight when it is decided.
    for (let j = from; j <= k; j++) {
      const other = /** @type {Charged} */ (byArrival[j]);
      if (other.end + SETTLE_SLACK_MS > last.arrival) bound += Math.max(0, other.tokens - cost);
    }
    if (sum - limit > bound) overBound++;
    if (sum - limit > worstOverdraw) {
      worstOverdraw = sum - limit;
      worstBound = bound;
    }
  }
  const certain = certainlyPast(byArrival, { windowMs, limit, cost });
  return {
    most,
    over,
    worstOverdraw,
    worstBound,
    overBound,
    certainlyPast: certain.past,
    certainlyPastBy: certain.worst,
    windows: byArrival.length,
  };
}

/**
 * Every customer's windows, summed up.
 * @param {Map<string, Charged[]>} byCustomer
 * @param {{ windowMs: number, limit: number, cost: number }} rule
 */
export function allWindows(byCustomer, rule) {
  const customers = [...byCustomer.values()].map((streams) => customerWindows(streams, rule));
  /** @type {ReturnType<typeof customerWindows> | undefined} */
  let worst;
  for (const c of customers) if (!worst || c.worstOverdraw > worst.worstOverdraw) worst = c;
  return {
    most: Math.max(0, ...customers.map((c) => c.most)),
    windows: customers.reduce((n, c) => n + c.windows, 0),
    overLimit: customers.reduce((n, c) => n + c.over, 0),
    customersOver: customers.filter((c) => c.over > 0).length,
    overBound: customers.reduce((n, c) => n + c.overBound, 0),
    certainlyPast: customers.reduce((n, c) => n + c.certainlyPast, 0),
    certainlyPastBy: Math.max(0, ...customers.map((c) => c.certainlyPastBy)),
    worstOverdraw: worst?.worstOverdraw ?? 0,
    worstBound: worst?.worstBound ?? 0,
  };
}

/** @param {number} seed a 32-bit seed @returns {() => number} uniform in [0, 1) (mulberry32) */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Tokens of a response: 50–2 000, skewed low as an LLM's answers are (median ≈ 537, mean 700). */
export const TOKENS = { min: 50, max: 2000, median: 50 + 1950 / 4, mean: 50 + 1950 / 3 };
/** A response's duration: 0.3–2 s, uniform. */
export const DURATION_MS = { min: 300, max: 2000 };

/**
 * One response's shape from the seeded stream: tokens (the square of a uniform, scaled: median at
 * a quarter of the range) and duration.
 * @param {() => number} random
 */
export function responseShape(random) {
  const u = random();
  const tokens = Math.round(TOKENS.min + (TOKENS.max - TOKENS.min) * u * u);
  const ms = Math.round(DURATION_MS.min + (DURATION_MS.max - DURATION_MS.min) * random());
  return { tokens, ms };
}

/** @param {number[]} values @param {number} q */
export const quantile = (values, q) => {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
};

/** @param {number[]} values */
export const median = (values) => quantile(values, 0.5);
