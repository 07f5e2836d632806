// @ts-check
// Child processes that run in their own process group, so that stopping one also stops
// everything it started (wrangler → workerd, esbuild). Node only; POSIX process groups.
import { spawn } from "node:child_process";

/** @typedef {import("node:child_process").ChildProcess} ChildProcess */

/** Groups still alive; killed with SIGKILL if this process exits without stopping them. */
const live = new Set(/** @type {ChildProcess[]} */ ([]));

process.on("exit", () => {
  for (const child of live) signalGroup(child, "SIGKILL");
});

/**
 * Spawns `command` as the leader of a new process group (detached, not unref'd: this process
 * still waits for it). A terminal's Ctrl-C does not reach the group directly; the caller
 * decides when and how to stop it with {@link stopGroup}.
 * @param {string} command
 * @param {readonly string[]} args
 * @param {import("node:child_process").SpawnOptions} [options]
 * @returns {ChildProcess}
 */
export function spawnGroup(command, args, options = {}) {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid !== undefined) {
    live.add(child);
    child.once("exit", () => {
      // The leader is gone; its group may not be. Sweep it so nothing outlives it.
      signalGroup(child, "SIGKILL");
      live.delete(child);
    });
  }
  return child;
}

/**
 * Whether the child has exited (or never started).
 * @param {ChildProcess} child
 */
export function hasExited(child) {
  return child.pid === undefined || child.exitCode !== null || child.signalCode !== null;
}

/**
 * Sends `signal` to the child's whole process group; ignores groups that are already gone.
 * @param {ChildProcess} child
 * @param {NodeJS.Signals} signal
 */
function signalGroup(child, signal) {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: no such group any more.
  }
}

/**
 * Stops the child's process group: `signal` (default SIGTERM) to the group, then SIGKILL to
 * the group if the leader has not exited after `graceMs`. Resolves once the leader has exited
 * and the group has been swept.
 * @param {ChildProcess} child
 * @param {{ signal?: NodeJS.Signals, graceMs?: number }} [options]
 * @returns {Promise<void>}
 */
export async function stopGroup(child, { signal = "SIGTERM", graceMs = 5000 } = {}) {
  if (child.pid === undefined) return;
  if (!hasExited(child)) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    signalGroup(child, signal);
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(resolve, graceMs, "timeout");
    });
    const outcome = await Promise.race([exited, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") {
      signalGroup(child, "SIGKILL");
      await exited;
    }
  }
  signalGroup(child, "SIGKILL");
  live.delete(child);
}

/**
 * Spawns `command` as {@link spawnGroup} does and waits (up to 10 s) for a line of its output
 * that `ready` matches: how the bridge and the test origins say they listen, and on which port.
 * Stops the group and throws with its output when it exits or never says so.
 * @param {string} what named in the error
 * @param {string} command
 * @param {readonly string[]} args
 * @param {RegExp} ready
 * @param {import("node:child_process").SpawnOptions} [options]
 * @returns {Promise<{ child: ChildProcess, match: RegExpExecArray }>}
 */
export async function spawnUntil(what, command, args, ready, options = {}) {
  const child = spawnGroup(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (d) => {
    output += d;
  });
  child.stderr?.on("data", (d) => {
    output += d;
  });
  for (let i = 0; i < 200; i++) {
    const match = ready.exec(output);
    if (match) return { child, match };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await stopGroup(child);
  throw new Error(`${what} did not start: ${output.trim()}`);
}
