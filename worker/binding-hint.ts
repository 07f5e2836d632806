/**
 * Where a missing binding is set. `wrangler secret put` does nothing for `wrangler dev`, which
 * reads .dev.vars: a message naming only the deploy's way left a local user at a dead end.
 */
export function howToSet(binding: string): string {
  return (
    `set it in .dev.vars for \`wrangler dev\` (cp .dev.vars.example .dev.vars), ` +
    `or with \`wrangler secret put ${binding}\` for a deploy`
  );
}
