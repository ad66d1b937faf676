// A complete third-party provider plugin for Switchyard, in plain JavaScript (ESM).
//
// It registers the provider type `shout`: chat completions are answered by upper-casing the
// last user message. It streams word by word, reports token usage and uses no network.
//
// Load it from gateway.config.yaml with a path (resolved against the config file's folder):
//
//   plugins:
//     - ./index.js
//
// This file imports nothing from Switchyard, so it works from any folder. A plugin that lives
// in a project where `switchyard` is installed can import helpers and types from 'switchyard'
// instead (see docs/writing-a-provider.md).

import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

const PLUGIN_NAME = 'shout';

/** The text of a message: a string, or the text parts of a content array. */
function textOf(message) {
  if (!message) return '';
  const { content } = message;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .filter((part) => part && part.type === 'text' && typeof part.text === 'string')
      .map((part) => part.text)
      .join(' ');
  }
  return '';
}

/** This provider's idea of a token: a word with the spaces before it. */
function words(text) {
  return text.match(/\s*\S+/g) ?? [];
}

/** What to answer: the last user message in capitals, cut at max_tokens. */
function answerFor(body, punctuation) {
  const lastUser = [...body.messages].reverse().find((m) => m.role === 'user');
  let tokens = words(textOf(lastUser).toUpperCase());
  let finishReason = 'stop';
  const max = body.max_completion_tokens ?? body.max_tokens;
  if (typeof max === 'number' && tokens.length > max) {
    tokens = tokens.slice(0, max);
    finishReason = 'length';
  } else if (tokens.length > 0) {
    tokens[tokens.length - 1] += punctuation;
  }
  const promptTokens = body.messages.reduce((sum, m) => sum + words(textOf(m)).length, 0);
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: tokens.length,
    total_tokens: promptTokens + tokens.length,
  };
  return { tokens, finishReason, usage };
}

/** The canonical stream: a role chunk, one chunk per word, a finish chunk, a usage chunk. */
async function* streamAnswer(answer, { id, created, model, chunkDelayMs, signal }) {
  const chunk = (choices, usage = null) => ({ id, object: 'chat.completion.chunk', created, model, choices, usage });
  yield chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
  for (const [i, token] of answer.tokens.entries()) {
    // Stop working as soon as the client is gone (sleep rejects when the signal aborts).
    if (chunkDelayMs > 0) await sleep(chunkDelayMs, undefined, { signal });
    signal.throwIfAborted();
    yield chunk([{ index: 0, delta: { content: i === 0 ? token.trimStart() : token }, finish_reason: null }]);
  }
  yield chunk([{ index: 0, delta: {}, finish_reason: answer.finishReason }]);
  // Always end with usage, choices []: the gateway meters it and the wire format shows it
  // only to clients that asked for it (stream_options.include_usage).
  yield chunk([], answer.usage);
  // No upstream connection here. A provider that has one releases it in a finally block:
  // it runs on normal end, on error, and when the gateway stops reading early.
}

/** The handler for the `chat` operation of one provider instance. */
function chatHandler(settings) {
  return async (request, context) => {
    // request: { operation: 'chat', model, stream, body (canonical chat request), clientWantsStreamUsage }
    const { signal } = context;
    signal.throwIfAborted();
    const answer = answerFor(request.body, settings.punctuation);
    const id = `chatcmpl-shout${randomBytes(8).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);

    if (request.stream) {
      return {
        kind: 'stream',
        status: 200,
        chunks: streamAnswer(answer, { id, created, model: request.model, chunkDelayMs: settings.chunkDelayMs, signal }),
      };
    }
    return {
      kind: 'json',
      status: 200,
      body: {
        id,
        object: 'chat.completion',
        created,
        model: request.model,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: answer.tokens.join('').trimStart() },
            finish_reason: answer.finishReason,
          },
        ],
        usage: answer.usage,
      },
    };
  };
}

/** The plugin: a plain object with name, version and apply(). */
export default {
  name: PLUGIN_NAME,
  version: '1.0.0',
  description: 'Answers chat by shouting the last user message back. No network.',
  apply(api) {
    api.registerProviderType({
      type: 'shout',
      // The fields a `providers:` entry of type `shout` may have besides id, type and models.
      // Defaults are filled in before create() is called; unknown fields stop start-up.
      configSchema: {
        type: 'object',
        properties: {
          punctuation: { type: 'string', maxLength: 3, default: '!' },
          chunkDelayMs: { type: 'integer', minimum: 0, maximum: 10000, default: 0 },
        },
      },
      create(config, env) {
        env.logger.debug('shout provider created', { provider: config.id });
        return {
          id: config.id,
          type: config.type,
          models: config.models,
          operations: {
            chat: chatHandler({ punctuation: config.punctuation, chunkDelayMs: config.chunkDelayMs }),
          },
        };
      },
    });
  },
};
