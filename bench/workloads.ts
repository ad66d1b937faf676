/**
 * The requests the benchmark sends. Each workload names what the client sends to the gateway and
 * what the bare proxy is sent for the same upstream call (for `messages` the bare proxy cannot
 * translate, so it forwards the OpenAI request the gateway would make: the same upstream work).
 */

export type WorkloadId = 'chat' | 'chat-stream' | 'messages' | 'embeddings';

export interface HttpCall {
  method: 'POST';
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface Workload {
  id: WorkloadId;
  title: string;
  stream: boolean;
  /** The request as sent to Switchyard. */
  gateway: (key: string) => HttpCall;
  /** The request as sent to the bare proxy (which forwards it as it is). */
  bare: () => HttpCall;
}

/** The public model names the benchmark calls (the generated configuration serves them). */
export const CHAT_MODEL = 'gpt-4o-mini';
export const EMBEDDING_MODEL = 'text-embedding-3-small';

const SYSTEM =
  'You are a concise assistant for an online hardware shop. Answer in at most three sentences, ' +
  'cite the product code when you mention a product, and never invent prices.';
const QUESTION =
  'I bought a 12 V cordless drill (code DR-1204) last spring and the battery now lasts about ten ' +
  'minutes. Is a replacement battery covered by the warranty, and which model fits it?';

/** A chat request of about 600 bytes: a system prompt, one exchange, a question. */
export function chatBody(stream: boolean): Record<string, unknown> {
  return {
    model: CHAT_MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Hello, do you sell drill batteries?' },
      { role: 'assistant', content: 'Yes: we stock batteries for most 12 V and 18 V cordless drills.' },
      { role: 'user', content: QUESTION },
    ],
    max_tokens: 256,
    temperature: 0.2,
    user: 'bench-user-42',
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  };
}

/** The same conversation in Anthropic's Messages format. */
function messagesBody(): Record<string, unknown> {
  return {
    model: CHAT_MODEL,
    max_tokens: 256,
    temperature: 0.2,
    system: SYSTEM,
    messages: [
      { role: 'user', content: 'Hello, do you sell drill batteries?' },
      { role: 'assistant', content: 'Yes: we stock batteries for most 12 V and 18 V cordless drills.' },
      { role: 'user', content: QUESTION },
    ],
  };
}

/** One passage to embed, as the OpenAI SDK sends it (base64 is its default encoding). */
function embeddingsBody(): Record<string, unknown> {
  return {
    model: EMBEDDING_MODEL,
    input:
      'DR-1204 replacement battery: 12 V, 2.0 Ah lithium-ion pack, fits every DR-12xx drill and ' +
      'driver, charges in 45 minutes on the CH-12 charger, two-year warranty from the date of purchase.',
    encoding_format: 'base64',
  };
}

const json = (body: Record<string, unknown>) => JSON.stringify(body);
const bearer = (key: string) => ({ 'content-type': 'application/json', authorization: `Bearer ${key}` });
/** The bare proxy replaces the credential with the upstream's; the client still sends one. */
const BARE_HEADERS = { 'content-type': 'application/json', authorization: 'Bearer sk-client-of-the-bare-proxy' };

export const WORKLOADS: readonly Workload[] = [
  {
    id: 'chat',
    title: 'chat, non-streaming',
    stream: false,
    gateway: (key) => ({ method: 'POST', path: '/v1/chat/completions', headers: bearer(key), body: json(chatBody(false)) }),
    bare: () => ({ method: 'POST', path: '/v1/chat/completions', headers: BARE_HEADERS, body: json(chatBody(false)) }),
  },
  {
    id: 'chat-stream',
    title: 'chat, streaming (20 chunks)',
    stream: true,
    gateway: (key) => ({ method: 'POST', path: '/v1/chat/completions', headers: bearer(key), body: json(chatBody(true)) }),
    bare: () => ({ method: 'POST', path: '/v1/chat/completions', headers: BARE_HEADERS, body: json(chatBody(true)) }),
  },
  {
    id: 'messages',
    title: 'messages → OpenAI upstream',
    stream: false,
    gateway: (key) => ({
      method: 'POST',
      path: '/v1/messages',
      // Anthropic clients send x-api-key; Bearer too, so either way of reading the key works.
      headers: { ...bearer(key), 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      body: json(messagesBody()),
    }),
    // The upstream call a translating gateway makes: the OpenAI chat request.
    bare: () => ({ method: 'POST', path: '/v1/chat/completions', headers: BARE_HEADERS, body: json(chatBody(false)) }),
  },
  {
    id: 'embeddings',
    title: 'embeddings',
    stream: false,
    gateway: (key) => ({ method: 'POST', path: '/v1/embeddings', headers: bearer(key), body: json(embeddingsBody()) }),
    bare: () => ({ method: 'POST', path: '/v1/embeddings', headers: BARE_HEADERS, body: json(embeddingsBody()) }),
  },
];
