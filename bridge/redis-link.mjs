// @ts-check
// The Redis connections the bridge uses: one shared, self-healing connection for `/` and
// `/pipeline`, and a small pool of dedicated ones for `/multi-exec`.
//
// While Redis is away, commands fail at once (the HTTP layer answers 503) instead of waiting in a
// queue: a rate limiter in front of the bridge has its own timeout and fallback, and a command
// replayed after a reconnect could count a request twice.

import { RedisUnavailableError, RespConnection, redactUrl } from "./resp-connection.mjs";

/** @typedef {import("./resp-connection.mjs").Reply} Reply */
/** @typedef {(line: string) => void} Log */

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 1000;

export class SharedRedis {
  #url;
  #log;
  /** @type {RespConnection | null} */
  #connection = null;
  /** @type {Error} */
  #lastError;
  /** @type {NodeJS.Timeout | undefined} */
  #reconnectTimer;
  #attempts = 0;
  #closed = false;

  /** @param {string} url @param {Log} log */
  constructor(url, log) {
    this.#url = url;
    this.#log = log;
    this.#lastError = new RedisUnavailableError(`Redis at ${redactUrl(url)} is not connected yet`);
  }

  /** Connects once; rejects (RedisUnavailableError) if Redis cannot be reached now. */
  async start() {
    this.#adopt(await RespConnection.open({ url: this.#url }));
  }

  /**
   * @param {readonly (readonly string[])[]} commands
   * @returns {Promise<Reply>[]}
   */
  sendBatch(commands) {
    if (!this.#connection) {
      const error = this.#lastError;
      return commands.map(() => Promise.reject(error));
    }
    return this.#connection.sendBatch(commands);
  }

  close() {
    this.#closed = true;
    clearTimeout(this.#reconnectTimer);
    this.#connection?.close();
    this.#connection = null;
  }

  /** @param {RespConnection} connection */
  #adopt(connection) {
    this.#connection = connection;
    connection.onClose((error) => {
      if (this.#connection !== connection) return;
      this.#connection = null;
      this.#lastError = error;
      if (this.#closed) return;
      this.#log(`${error.message}; reconnecting in the background`);
      this.#scheduleReconnect();
    });
  }

  #scheduleReconnect() {
    const delay = Math.min(RECONNECT_MIN_MS * 2 ** this.#attempts, RECONNECT_MAX_MS);
    this.#attempts++;
    this.#reconnectTimer = setTimeout(async () => {
      try {
        const connection = await RespConnection.open({ url: this.#url });
        if (this.#closed) {
          connection.close();
          return;
        }
        this.#attempts = 0;
        this.#adopt(connection);
        this.#log(`reconnected to Redis at ${redactUrl(this.#url)}`);
      } catch (error) {
        if (error instanceof Error) this.#lastError = error;
        if (!this.#closed) this.#scheduleReconnect();
      }
    }, delay);
  }
}

const MAX_IDLE_DEDICATED = 4;
/** Transactions in flight at once (each holds a connection of its own): the default cap. */
export const DEFAULT_MAX_TRANSACTIONS = 32;

/** Every dedicated connection is lent: the caller should answer "busy", not open another. */
export class PoolExhaustedError extends Error {
  /** @param {number} max */
  constructor(max) {
    super(
      `too many /multi-exec transactions in flight (at most ${max}, each on a Redis connection of its own): retry shortly`,
    );
    this.name = "PoolExhaustedError";
  }
}

/**
 * Connections lent to one `/multi-exec` at a time, so MULTI…EXEC never interleaves with other
 * requests' commands and a transaction cut short cannot leave the shared connection in MULTI.
 * At most `max` are lent (or being opened) at once: past that, acquire refuses at once rather
 * than open connections without bound (Redis's own maxclients is shared by everyone).
 */
export class DedicatedPool {
  #url;
  #max;
  /** @type {RespConnection[]} */
  #idle = [];
  #lent = 0;
  #closed = false;

  /** @param {string} url @param {number} [max] */
  constructor(url, max = DEFAULT_MAX_TRANSACTIONS) {
    this.#url = url;
    this.#max = max;
  }

  /** Rejects with PoolExhaustedError when `max` are lent. @returns {Promise<RespConnection>} */
  async acquire() {
    if (this.#lent >= this.#max) throw new PoolExhaustedError(this.#max);
    this.#lent++;
    for (let c = this.#idle.pop(); c; c = this.#idle.pop()) {
      if (!c.closed) return c;
    }
    try {
      return await RespConnection.open({ url: this.#url });
    } catch (error) {
      this.#lent--;
      throw error;
    }
  }

  /** Every acquired connection comes back here once. @param {RespConnection} connection @param {boolean} reusable */
  release(connection, reusable) {
    this.#lent--;
    if (reusable && !connection.closed && !this.#closed && this.#idle.length < MAX_IDLE_DEDICATED) {
      this.#idle.push(connection);
    } else {
      connection.close();
    }
  }

  close() {
    this.#closed = true;
    for (const c of this.#idle) c.close();
    this.#idle = [];
  }
}
