/**
 * Redis key layout: `<prefix>:<policy>:{<client key>}`.
 *
 * The client key is percent-encoded (encodeURIComponent), which is injective and leaves no `:`,
 * `{` or `}` in it: no client key can impersonate another key or policy, and the braces around it
 * are the only hash tag, so every policy of one client key lands in one Redis Cluster slot.
 * Policy names are restricted to [A-Za-z0-9_.-] by their validators, so they hold no separator.
 */
export function storageKey(prefix: string, policy: string, clientKey: string): string {
  return `${prefix}:${policy}:{${encodeURIComponent(clientKey)}}`;
}
