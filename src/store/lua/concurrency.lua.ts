/**
 * Concurrency limits (docs/concurrency.md), as a fragment of the composed scripts (see
 * scripts.ts for the interface every algorithm implements): at most `limit` requests in flight
 * per key, exactly, across every isolate.
 *
 * Key: a sorted set of slots; a slot is a member named by the call's member id (128 random bits
 * per acquire: a release naming it is all a holder proves; a request id's retry is replayed
 * from its record, which keeps the id), scored
 * by its expiry: the time it was taken plus the policy's window, which for this algorithm is the
 * slot's timeout. Expired slots are removed before counting, so a holder that never releases
 * frees its slot at its timeout, and the set holds at most `limit` live members plus those one
 * call removes. The release script (release.lua.ts) removes one slot when its request ends.
 * TTL: the timeout from the last acquire (plus GRACE on the caller's clock), which outlives every
 * slot in the set.
 *
 * A denial says "retry in a second" (CONCURRENCY_RETRY_MS): capacity frees when any holder
 * releases, which no clock predicts, so nothing about a denial may be remembered past that.
 *
 * Redis commands: check = ZREMRANGEBYSCORE, ZCARD; commit = ZADD, PEXPIRE. Allowed: 4; denied: 2.
 * Refund: nothing (a slot is given back by its release, whatever the response's status).
 */
const CONCURRENCY_RETRY_MS = 1_000;

export const CONCURRENCY_LUA = `
ALG['concurrency'] = {
  check = function(p, now)
    -- A slot scored at or before now has lapsed (its holder never released it).
    redis.call('ZREMRANGEBYSCORE', p.key, '-inf', now)
    p.count = redis.call('ZCARD', p.key)
    p.allowed = p.count + 1 <= p.limit
  end,
  commit = function(p, now)
    -- 0 when the member is there already (never, with random ids): counted once.
    p.count = p.count + redis.call('ZADD', p.key, now + p.window, p.member)
    redis.call('PEXPIRE', p.key, p.window + GRACE)
  end,
  report = function(p, now, committed)
    local remaining = math.max(0, p.limit - p.count)
    if p.allowed then return remaining, now, 0 end
    return remaining, now + ${CONCURRENCY_RETRY_MS}, ${CONCURRENCY_RETRY_MS}
  end,
  refund = REFUNDS and function(p, now) return 0 end,
}
`;
