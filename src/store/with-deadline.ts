/**
 * A deadline for one decision's store calls (used by withinDeadline in script-runner.ts): one
 * timer that both aborts the decision's HTTP requests and rejects the decision, and what the
 * calls are told about the time left. Imports nothing.
 */

/** The store did not answer within the decision's deadline. */
/** The longest a decision waits for the store (docs/failure-modes.md "Why 500 ms"). */
export const DEFAULT_STORE_TIMEOUT_MS = 500;

export class StoreTimeoutError extends Error {
  override name = "StoreTimeoutError";
  constructor(timeoutMs: number) {
    super(`store did not answer within ${timeoutMs} ms`);
  }
}

/** What `work` is told about its deadline. */
export interface Deadline {
  /** The deadline has passed: start nothing new. */
  expired(): boolean;
  /** Milliseconds left (≤ 0 once expired): the most a request started now may take. */
  remainingMs(): number;
  /**
   * Aborted at the deadline (its reason a StoreTimeoutError): a request sent with it, the first
   * or a later one, is aborted then, so none can reach Redis after the decision was made
   * without it. Made by this call, for this decision's requests only (workerd ties a signal to
   * the request that made it).
   */
  readonly signal: AbortSignal;
}

/**
 * Runs `work` and rejects with StoreTimeoutError after `timeoutMs`, whatever `work` does. The
 * same timer aborts `deadline.signal`: one timer per decision, not one for the decision and
 * another per HTTP request. `deadline` also tells `work` not to start anything new
 * once it is over, or how long something started now may take.
 */
export function withDeadline<T>(
  timeoutMs: number,
  work: (deadline: Deadline) => Promise<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Date.now, not the limiter's injectable clock: the timer below runs on real time too.
    const endsAt = Date.now() + timeoutMs;
    const controller = new AbortController();
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      const error = new StoreTimeoutError(timeoutMs);
      // Abort first: a request still out is closed before its caller hears of the timeout.
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    const deadline: Deadline = {
      expired: () => expired,
      remainingMs: () => (expired ? 0 : endsAt - Date.now()),
      signal: controller.signal,
    };
    let done: Promise<T>;
    try {
      done = work(deadline);
    } catch (error) {
      // Work that throws synchronously rejects like any other failure, and the timer is still
      // cleared (else it would fire later for a decision already made).
      done = Promise.reject(error);
    }
    done.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
