import { defineProvider } from '../../../core/index.js';
import { configSchema, endpointOf, type OpenAIProviderConfig } from './api.js';
import { chatHandler } from './chat.js';
import { embeddingsHandler } from './embeddings.js';
import { speechHandler, transcriptionHandler, translationHandler } from './audio.js';
import { imageEditHandler, imageHandler } from './images.js';
import { completionHandler } from './completions.js';
import { moderationHandler } from './moderations.js';
import { rerankHandler } from './rerank.js';
import { compactHandler, responsesHandler } from './responses.js';

/** Any OpenAI-compatible back end, through one keep-alive pool per origin. */
export default defineProvider<OpenAIProviderConfig>({
  name: 'openai',
  version: '0.1.0',
  description: 'OpenAI and OpenAI-compatible back ends.',
  type: 'openai',
  configSchema,
  create(config, env) {
    const endpoint = endpointOf(config);
    const pool = env.poolFor(endpoint.origin, config);
    const secrets = [config.apiKey, ...Object.values(config.headers ?? {})];
    return {
      id: config.id,
      type: config.type,
      models: config.models,
      operations: {
        chat: chatHandler(pool, endpoint, secrets),
        embeddings: embeddingsHandler(pool, endpoint, secrets),
        speech: speechHandler(pool, endpoint, secrets),
        transcription: transcriptionHandler(pool, endpoint, secrets),
        translation: translationHandler(pool, endpoint, secrets),
        image: imageHandler(pool, endpoint, secrets),
        'image-edit': imageEditHandler(pool, endpoint, secrets),
        // A chat-only back end (OpenAI's own chat models, many compatible servers): /v1/completions
        // reaches it through chat (the openai-chat format's bridge), as for any chat back end.
        ...(config.completionsApi === false ? {} : { completion: completionHandler(pool, endpoint, secrets) }),
        moderation: moderationHandler(pool, endpoint, secrets),
        rerank: rerankHandler(pool, endpoint, config.rerankPath, secrets),
        // Without responsesApi, /v1/responses reaches this back end through chat (the openai-chat format's bridge).
        ...(config.responsesApi ? { responses: responsesHandler(pool, endpoint, secrets), compact: compactHandler(pool, endpoint, secrets) } : {}),
      },
    };
  },
});
