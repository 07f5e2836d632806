/**
 * A refund of a request that leases paid for gives back once. Those refunds go into this
 * isolate's lease, or into the store by the lease's stamp, not through the refund script and
 * its once-gate (store/refund.ts): so the isolate remembers, per receipt object, the policies it
 * gave back. A caller retrying a refund with the receipt it was handed (a timeout, a retried
 * handler) gets nothing back twice. A copy of the receipt (a JSON round trip) is another object:
 * not covered (docs/request-ids-and-refunds.md).
 */
import type { CountedReceipt } from "./receipt-state";
import type { RefundOutcome } from "./types";

/** Per receipt, the policies already given back (or being given back) through a lease. */
const givenBack = new WeakMap<CountedReceipt, Set<string>>();

/** A copy the limiter made of a receipt (refundsAs), to the receipt it stands for. */
const copyOf = new WeakMap<CountedReceipt, CountedReceipt>();

/**
 * `copy` gives back as `original` does: what either gave back, neither gives again. For a copy
 * the limiter itself makes (a sharded refund drops a part's request id for a partial refund),
 * so a refund repeated, in part or whole, still finds what was given back.
 */
export function refundsAs(copy: CountedReceipt, original: CountedReceipt): void {
  copyOf.set(copy, copyOf.get(original) ?? original);
}

export async function refundLeasedOnce(
  receipt: CountedReceipt,
  only: readonly string[] | undefined,
  refundVia: (only: readonly string[] | undefined) => Promise<RefundOutcome>,
): Promise<RefundOutcome> {
  const asked = receipt.resolved
    .map((policy) => policy.name)
    .filter((name) => only === undefined || only.includes(name));
  const own = copyOf.get(receipt) ?? receipt;
  let done = givenBack.get(own);
  if (!done) {
    done = new Set();
    givenBack.set(own, done);
  }
  const rest = asked.filter((name) => !done.has(name));
  if (asked.length > 0 && rest.length === 0) {
    return { refunded: false, units: asked.map(() => 0), alreadyRefunded: true };
  }
  // Taken before the call: two refunds at once give back once.
  for (const name of rest) done.add(name);
  const outcome = await refundVia(rest.length === asked.length ? only : rest);
  if (outcome.error !== undefined) {
    for (const name of rest) done.delete(name);
  }
  if (rest.length === asked.length) return outcome;
  // Units in the order asked: 0 for a policy given back before.
  const units = asked.map((name) => {
    const at = rest.indexOf(name);
    return at < 0 ? 0 : (outcome.units[at] ?? 0);
  });
  return { ...outcome, units };
}
