// @ts-check
// Upstash's ceiling on one database: at most N billed commands a second (pay-as-you-go: 10 000).
// The bridge throttles the same way when BRIDGE_MAX_COMMANDS_PER_SECOND is set, so one machine
// can show a database's ceiling and shards lifting it (design.md, "Shards: past one database").
//
// A rolling second: a request is admitted when the commands billed in the last second (the window
// (t − 1 s, t]) plus its own stay within `perSecond`. A request is charged all its billed commands
// (every command of a pipeline or transaction; a script call and the commands it runs,
// script-billing.mjs) at the instant it is admitted. So no span of one second ever holds more
// than `perSecond` admitted commands, the first second included, and the burst is `perSecond` at
// once after a quiet second (the same burst as a token bucket of one second's worth, but no
// second bucketful follows it within the second). The one excess: a script that ran more commands
// than it was charged for on arrival is billed the difference when its answer comes (`settle`),
// which then holds the next requests back for a second.
//
// Excess requests wait, in arrival order (FIFO: a large request at the head holds back smaller
// ones behind it, as one connection's queue would); none is refused. A request costlier than the
// whole cap is admitted alone, once the last second is empty, so it waits rather than never runs.
// A waiting request whose client went away (its signal aborts) leaves the queue uncharged.

/**
 * What the throttle reads time from and waits with: the real clock by default, a fake one in
 * tests (no sleeps, no timing assertions).
 * @typedef {object} ThrottleClock
 * @property {() => number} now milliseconds, never going back
 * @property {(wake: () => void, ms: number) => unknown} setTimer
 * @property {(timer: unknown) => void} clearTimer
 */

/** @type {ThrottleClock} */
export const realClock = {
  now: () => performance.now(),
  setTimer: (wake, ms) => setTimeout(wake, ms),
  clearTimer: (timer) => clearTimeout(/** @type {NodeJS.Timeout} */ (timer)),
};

/** How many one-second intervals of admissions the stats keep. */
const INTERVALS_KEPT = 120;

/** The request waited in vain: the throttle closed, or its client went away. */
export class ThrottleAbortedError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "ThrottleAbortedError";
  }
}

/**
 * @typedef {object} ThrottleStats
 * @property {number} perSecond the cap
 * @property {number} burst what passes at once after a quiet second (the cap)
 * @property {number} commands billed commands charged so far (admissions and settlements)
 * @property {number} requests requests admitted so far
 * @property {number} waiting requests waiting now
 * @property {number} waitingCommands their commands
 * @property {number} lastSecond commands charged in the last second (the rolling window)
 * @property {{ second: number, commands: number }[]} intervals commands charged in each second
 *   since the throttle started (second 0 = its first), the last 120 with any charge
 */

/**
 * @typedef {object} Waiter
 * @property {number} cost
 * @property {() => void} resolve
 * @property {(error: Error) => void} reject
 * @property {() => void} detach removes the abort listener
 */

const WINDOW_MS = 1000;

export class CommandThrottle {
  #cap;
  #clock;
  #start;
  /** @type {{ at: number, cost: number }[]} charges in the window, oldest first, from #head */
  #charges = [];
  #head = 0;
  /** commands in the window */
  #used = 0;
  /** @type {Waiter[]} */
  #queue = [];
  /** @type {unknown} */
  #timer;
  #timerArmed = false;
  #closed = false;
  #commands = 0;
  #requests = 0;
  /** @type {Map<number, number>} second → commands charged in it */
  #intervals = new Map();

  /** @param {{ perSecond: number, clock?: ThrottleClock }} options */
  constructor({ perSecond, clock = realClock }) {
    if (!(Number.isFinite(perSecond) && perSecond > 0)) {
      throw new Error(`the command cap must be a positive number, got ${perSecond}`);
    }
    this.#cap = perSecond;
    this.#clock = clock;
    this.#start = clock.now();
  }

  /**
   * Waits until `cost` commands may run, then charges them. Resolves at once when they fit and
   * nobody waits before them.
   * @param {number} cost billed commands of the request (≥ 0)
   * @param {AbortSignal} [signal] aborting it while waiting leaves the queue uncharged
   * @returns {Promise<void>}
   */
  admit(cost, signal) {
    if (this.#closed) return Promise.reject(new ThrottleAbortedError("the bridge is closing"));
    if (signal?.aborted) return Promise.reject(new ThrottleAbortedError("the client went away"));
    const now = this.#expire();
    if (this.#queue.length === 0 && this.#fits(cost)) {
      this.#charge(now, cost, true);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      /** @type {Waiter} */
      const waiter = { cost, resolve, reject, detach: () => {} };
      if (signal) {
        const onAbort = () => {
          const at = this.#queue.indexOf(waiter);
          if (at < 0) return;
          this.#queue.splice(at, 1);
          reject(new ThrottleAbortedError("the client went away"));
          // The head may have changed: those behind it may fit now.
          if (at === 0) this.#pump();
        };
        signal.addEventListener("abort", onAbort, { once: true });
        waiter.detach = () => signal.removeEventListener("abort", onAbort);
      }
      this.#queue.push(waiter);
      if (this.#queue.length === 1) this.#arm(now);
    });
  }

  /**
   * A correction after the fact: `delta` more commands were billed than charged on admission (a
   * script ran more than estimated), charged now; or fewer when negative, taken back from the
   * latest charges, which may let waiting requests in.
   * @param {number} delta
   */
  settle(delta) {
    if (delta === 0 || this.#closed) return;
    const now = this.#expire();
    if (delta > 0) {
      this.#charge(now, delta, false);
      return;
    }
    let refund = -delta;
    for (let i = this.#charges.length - 1; i >= this.#head && refund > 0; i--) {
      const charge = /** @type {{ at: number, cost: number }} */ (this.#charges[i]);
      const back = Math.min(charge.cost, refund);
      charge.cost -= back;
      this.#used -= back;
      refund -= back;
    }
    this.#record(now, delta);
    this.#pump();
  }

  /** @returns {ThrottleStats} */
  stats() {
    this.#expire();
    return {
      perSecond: this.#cap,
      burst: this.#cap,
      commands: this.#commands,
      requests: this.#requests,
      waiting: this.#queue.length,
      waitingCommands: this.#queue.reduce((sum, w) => sum + w.cost, 0),
      lastSecond: this.#used,
      intervals: [...this.#intervals].map(([second, commands]) => ({ second, commands })),
    };
  }

  /** Refuses new requests and rejects the waiting ones. */
  close() {
    this.#closed = true;
    if (this.#timerArmed) this.#clock.clearTimer(this.#timer);
    this.#timerArmed = false;
    for (const waiter of this.#queue.splice(0)) {
      waiter.detach();
      waiter.reject(new ThrottleAbortedError("the bridge is closing"));
    }
  }

  /** Fits in the window; one costlier than the whole cap fits an empty window. */
  /** @param {number} cost */
  #fits(cost) {
    return this.#used + Math.min(cost, this.#cap) <= this.#cap;
  }

  /** Drops charges older than a second; returns now. */
  #expire() {
    const now = this.#clock.now();
    while (this.#head < this.#charges.length) {
      const oldest = /** @type {{ at: number, cost: number }} */ (this.#charges[this.#head]);
      if (oldest.at > now - WINDOW_MS) break;
      this.#used -= oldest.cost;
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#charges.length) {
      this.#charges = this.#charges.slice(this.#head);
      this.#head = 0;
    }
    return now;
  }

  /** @param {number} now @param {number} cost @param {boolean} request */
  #charge(now, cost, request) {
    this.#charges.push({ at: now, cost });
    this.#used += cost;
    if (request) this.#requests++;
    this.#record(now, cost);
  }

  /** @param {number} now @param {number} commands */
  #record(now, commands) {
    this.#commands += commands;
    const second = Math.floor((now - this.#start) / WINDOW_MS);
    this.#intervals.set(second, (this.#intervals.get(second) ?? 0) + commands);
    if (this.#intervals.size > INTERVALS_KEPT) {
      const oldest = this.#intervals.keys().next().value;
      if (oldest !== undefined) this.#intervals.delete(oldest);
    }
  }

  /** Admits waiting requests from the head while they fit, then waits for the next one. */
  #pump() {
    if (this.#closed) return;
    const now = this.#expire();
    for (let head = this.#queue[0]; head && this.#fits(head.cost); head = this.#queue[0]) {
      this.#queue.shift();
      head.detach();
      this.#charge(now, head.cost, true);
      head.resolve();
    }
    this.#arm(now);
  }

  /** One timer, for the instant enough of the window expires for the head to fit. */
  /** @param {number} now */
  #arm(now) {
    if (this.#timerArmed) {
      this.#clock.clearTimer(this.#timer);
      this.#timerArmed = false;
    }
    const head = this.#queue[0];
    if (!head || this.#closed) return;
    let excess = this.#used + Math.min(head.cost, this.#cap) - this.#cap;
    let at = now;
    for (let i = this.#head; i < this.#charges.length && excess > 0; i++) {
      const charge = /** @type {{ at: number, cost: number }} */ (this.#charges[i]);
      excess -= charge.cost;
      at = charge.at + WINDOW_MS;
    }
    this.#timerArmed = true;
    this.#timer = this.#clock.setTimer(
      () => {
        this.#timerArmed = false;
        this.#pump();
      },
      Math.max(1, Math.ceil(at - now)),
    );
  }
}

/**
 * BRIDGE_MAX_COMMANDS_PER_SECOND as the bridge takes it: unset or empty = no cap (undefined);
 * otherwise a positive integer, or an Error saying what is wrong.
 * @param {string | undefined} raw
 * @returns {number | undefined}
 */
export function parseCommandCap(raw) {
  if (raw === undefined || raw.trim() === "") return undefined;
  const text = raw.trim();
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1) {
    throw new Error(
      `BRIDGE_MAX_COMMANDS_PER_SECOND must be a whole number of commands per second ≥ 1 (Upstash pay-as-you-go: 10000), or unset for no cap; got ${JSON.stringify(raw)}`,
    );
  }
  return value;
}
