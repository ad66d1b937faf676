import { expect } from 'chai';
import { jsonOrUndefined } from './json.js';

/** An answer read whole: its status, its headers and its body as text. */
export interface TextReply {
  status: number;
  text: string;
  headers: Headers;
}

/** An answer read whole, its body also parsed: the JSON value, or undefined when it is not JSON. */
export interface JsonReply<T> extends TextReply {
  json: T | undefined;
}

/** POST `body` as JSON to `address`, with `headers` added, and read the whole answer as text. */
export async function sendJson(address: string, body: unknown, headers: Record<string, string> = {}): Promise<TextReply> {
  const res = await fetch(address, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** POST `body` as JSON to `url` + `path` with `key` as the Bearer key, and read the whole answer as text. */
export function postJson(url: string, path: string, body: unknown, key: string, headers: Record<string, string> = {}): Promise<TextReply> {
  return sendJson(`${url}${path}`, body, { authorization: `Bearer ${key}`, ...headers });
}

/** Call `method` `url` + `route` with `key` as the Bearer key and `body` as JSON when there is one; the answer read whole and parsed. */
export async function callJson<T = unknown>(url: string, method: string, route: string, body: unknown, key: string): Promise<JsonReply<T>> {
  const res = await fetch(`${url}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: jsonOrUndefined<T>(text), text, headers: res.headers };
}

/** A streamed chat completion over plain fetch, checked to be a 200 that ends with `[DONE]`: its parsed `data:` events (without [DONE]). */
export async function chatStreamEvents<T = Record<string, unknown>>(url: string, body: Record<string, unknown>, key: string): Promise<T[]> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  expect(response.status).to.equal(200);
  const text = await response.text();
  expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
    .map((e) => JSON.parse(e.slice(6)) as T);
}

/** Ask again (a poll, as a client does, every 25 ms) until `done` holds; every answer seen; fail after `ms`. */
export async function pollUntil<T>(ask: () => Promise<T>, done: (value: T) => boolean, ms = 8000): Promise<T[]> {
  const seen: T[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await ask();
    seen.push(value);
    if (done(value)) return seen;
    if (Date.now() > deadline) throw new Error(`not done after ${ms} ms: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
