// Counting admissions per window from the outside, on real time: the store admits a request
// somewhere between its send and its answer, and on a busy machine that span can be long.

/** One admitted request: when it was sent and when its answer arrived (ms, one clock). */
export interface Admission {
  sentAt: number;
  answeredAt: number;
}

/**
 * The most admissions that certainly fall within one window of `windowMs`: sets whose earliest
 * send and latest answer lie less than a window apart. Each request's own round trip widens only
 * its own span: one slow answer on a busy machine does not blunt the count of all the others, as
 * one slack for every admission (the slowest round trip) would.
 */
export function mostInOneWindow(admissions: readonly Admission[], windowMs: number): number {
  const bySend = [...admissions].sort((a, b) => a.sentAt - b.sentAt);
  let most = 0;
  for (const [i, first] of bySend.entries()) {
    const closes = first.sentAt + windowMs;
    let inside = 0;
    for (let j = i; j < bySend.length && (bySend[j] as Admission).sentAt < closes; j++) {
      if ((bySend[j] as Admission).answeredAt < closes) inside++;
    }
    most = Math.max(most, inside);
  }
  return most;
}
