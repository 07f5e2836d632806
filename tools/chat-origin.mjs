// @ts-check
// An OpenAI-compatible `POST /v1/chat/completions` for the LLM gateway's tests
// (examples/llm-gateway/): it answers as OpenAI's API does, a JSON body with `usage`, or with
// `"stream": true` an event stream whose last event carries `usage` when the request asks for it
// (`stream_options.include_usage`). Node only.
//
// What a request uses is its own to say, so a test knows it: the last message's content, when it
// is an integer, is the completion's tokens (capped by `max_tokens`); the prompt is 10 tokens.
// Each answer sent whole is summed per `user` (the request's field), read back at
// /__usage?group=<user> with the /sse routes' sums (origin-server.mjs).

const PROMPT_TOKENS = 10;
const DEFAULT_COMPLETION = 16;

/** @param {import("node:http").IncomingMessage} req */
async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return undefined;
  }
}

/**
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Map<string, { streams: number, units: number }>} usage
 */
export async function chatCompletions(req, res, usage) {
  const body = await readJson(req);
  if (req.method !== "POST" || !body || !Array.isArray(body.messages)) {
    res.writeHead(400, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: "expected a chat completion request" } }));
    return;
  }
  const asked = Number(body.messages.at(-1)?.content);
  const cap = Number.isSafeInteger(body.max_tokens) ? body.max_tokens : Number.MAX_SAFE_INTEGER;
  const completion = Math.min(Number.isSafeInteger(asked) ? asked : DEFAULT_COMPLETION, cap);
  const used = {
    prompt_tokens: PROMPT_TOKENS,
    completion_tokens: completion,
    total_tokens: PROMPT_TOKENS + completion,
  };
  const group = typeof body.user === "string" ? body.user : "";
  const sent = () => {
    const tally = usage.get(group) ?? { streams: 0, units: 0 };
    usage.set(group, tally);
    tally.streams++;
    tally.units += used.total_tokens;
  };
  const id = "chatcmpl-test";
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id,
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content: "hi" } }],
        usage: used,
      }),
    );
    sent();
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const chunk = (/** @type {object} */ fields) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", ...fields })}\n\n`;
  const events = [
    chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "hi" } }] }),
    chunk({ choices: [{ index: 0, delta: { content: " there" }, finish_reason: "stop" }] }),
  ];
  if (body.stream_options?.include_usage) events.push(chunk({ choices: [], usage: used }));
  events.push("data: [DONE]\n\n");
  for (const event of events) {
    if (res.destroyed) return;
    res.write(event);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  res.end();
  sent();
}
