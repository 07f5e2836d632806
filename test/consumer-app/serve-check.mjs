// What the runtimes' scripts share: four requests as one client to each limited route of a
// served scratch app, summarised. Plain JavaScript that Node, Bun and Deno all run.

/** @param {Response} res */
export const summary = async (res) => ({
  status: res.status,
  policy: res.headers.get("ratelimit-policy"),
  ratelimit: res.headers.get("ratelimit"),
  retryAfter: res.headers.get("retry-after"),
  body: await res.text(),
});

/**
 * Four requests to /api/hello as user "b" (a key from a header) and four to /ip/hello (keyed by
 * the connection's address, the only client here), against `base`.
 * @param {string} base
 */
export async function fourEach(base) {
  const viaServer = [];
  for (let i = 0; i < 4; i += 1) {
    viaServer.push(
      await summary(await fetch(`${base}/api/hello`, { headers: { "X-User-Id": "b" } })),
    );
  }
  const viaIp = [];
  for (let i = 0; i < 4; i += 1) viaIp.push(await summary(await fetch(`${base}/ip/hello`)));
  return { viaServer, viaIp };
}
