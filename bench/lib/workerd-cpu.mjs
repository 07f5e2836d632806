// @ts-check
// Workerd CPU per decision (bench/README.md "Workerd CPU per decision"): the CPU time of a
// worker's own workerd process, read from /proc (its threads' schedstat run time, to the ns)
// before and after a load, over the decisions it answered. That is the whole worker a user pays for (routing, token
// check, body parsing, the limiter, the store client, the answer), plus workerd's own HTTP work,
// which is alike for every contender.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second of utime/stime (USER_HZ; 100 on Linux nearly everywhere). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses).
 * @param {number} pid
 */
function statFields(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/**
 * CPU time (user + system) a process has used so far, in ms (tick resolution: 1000 / CLOCK_TICKS).
 * @param {number} pid
 */
function processCpuTicksMs(pid) {
  const fields = statFields(pid);
  // After ")": state(3) ppid(4) … utime(14) stime(15), 1-based as proc(5) numbers them.
  const utime = Number(fields[14 - 3]);
  const stime = Number(fields[15 - 3]);
  return ((utime + stime) * 1000) / CLOCK_TICKS;
}

/**
 * CPU time a process has used so far, in ms, to the nanosecond: the sum of its threads' run time
 * from /proc/<pid>/task/<tid>/schedstat (the scheduler's own clock), not utime + stime, which
 * count 10 ms ticks (a 2 s slice at 400/s is ~50 of them, so ±1 tick is ±2 % of a figure). A
 * thread that ends takes its time with it: workerd's threads live as long as the process.
 * Falls back to the ticks where schedstat is missing (a kernel without CONFIG_SCHEDSTATS).
 * @param {number} pid
 */
export function processCpuMs(pid) {
  let ns = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        // The thread ended while we looked.
      }
    }
  } catch {
    return processCpuTicksMs(pid);
  }
  return Number.isFinite(ns) && ns > 0 ? ns / 1e6 : processCpuTicksMs(pid);
}

/**
 * Runs `load` and returns its result with the worker's workerd CPU per decision (µs).
 * @template {{ decisions: number }} T
 * @param {number | undefined} pid
 * @param {() => Promise<T>} load
 * @returns {Promise<T & { cpuMs: number, cpuUsecPerDecision: number }>}
 */
export async function withWorkerdCpu(pid, load) {
  if (pid === undefined) throw new Error("no workerd pid for this worker: cannot read its CPU");
  const before = processCpuMs(pid);
  const result = await load();
  const cpuMs = processCpuMs(pid) - before;
  return { ...result, cpuMs, cpuUsecPerDecision: (cpuMs * 1000) / Math.max(1, result.decisions) };
}
