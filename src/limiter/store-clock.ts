/**
 * Recognises a store that refuses the Redis clock in scripts. Upstash asks scripts to stay
 * deterministic (no clock inside); a store that enforces it answers a script calling `TIME` with
 * an error, not a timeout. Known wordings: Redis before 5 ("Write commands not allowed after non
 * deterministic commands"), "This Redis command is not allowed from scripts", and any error
 * that names TIME. Our scripts call TIME first (and only with the Redis clock), so such an error
 * means nothing was changed and the call can be made again on the caller's clock.
 */
const REFUSES_CLOCK = /\bTIME\b|non[- ]?deterministic|not allowed (?:from|in) scripts?/i;

export function refusesStoreClock(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  // @upstash/redis appends ", command was: [...]" (the script text, which itself calls TIME):
  // only the store's own words count.
  const [said = ""] = error.message.split(", command was:");
  if (said.includes("NOSCRIPT")) return false;
  return REFUSES_CLOCK.test(said);
}
