// @ts-check
// Port helpers for npm start / npm test (Node only).
import net from "node:net";

/**
 * A TCP port that is free on `host` right now (the OS picks it). Another process may take it
 * before the caller binds it, so callers that can should still handle EADDRINUSE.
 * @param {string} [host]
 * @returns {Promise<number>}
 */
export function freePort(host = "127.0.0.1") {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * Whether something accepts TCP connections on host:port.
 * @param {number} port
 * @param {string} [host]
 * @param {number} [timeoutMs]
 * @returns {Promise<boolean>}
 */
export function isPortOpen(port, host = "127.0.0.1", timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (/** @type {boolean} */ open) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * Parses a port from the environment: unset or empty gives `fallback`; 0 means "any free port".
 * @param {string} name environment variable name, for the error message
 * @param {number} fallback
 * @returns {number}
 */
export function portFromEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(
      `${name}=${JSON.stringify(raw)} is not a port number (0-65535; 0 = any free port)`,
    );
  }
  return port;
}
