/**
 * Waits for `promise` at most `ms` on this isolate's own timer: in workerd a promise belongs to
 * the request that started it, and a cancelled request's never settles. Resolves with what the
 * promise gave, or with `onTimeout()` once the time is up; the timer is cleared either way.
 */
export function settleWithin<T>(promise: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), ms);
  });
  return Promise.race([promise, deadline]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}
