import { defineProvider, type ProviderConfig } from '../../../core/index.js';
import { mockChat } from './chat.js';
import { mockEmbeddings } from './embeddings.js';
import { mockSpeech, mockTranscription, mockTranslation } from './audio.js';
import { mockModeration } from './moderations.js';
import { mockRerank } from './rerank.js';
import { mockImages } from './images.js';
import { mockVideo } from './video.js';
import { videoOperation } from '../../../core/video.js';

export interface MockProviderConfig extends ProviderConfig {
  latencyMs: number;
  chunkDelayMs: number;
}

/**
 * A deterministic back end with no network: echoes the last user message, streams it word by
 * word, honours max_tokens and stop, calls the first tool when tools are offered, reports usage;
 * embeds text as unit vectors derived from a hash of the input. For the default configuration,
 * demos and tests.
 */
export default defineProvider<MockProviderConfig>({
  name: 'mock',
  version: '0.1.0',
  description: 'Deterministic echo back end for demos and tests.',
  type: 'mock',
  configSchema: {
    type: 'object',
    properties: {
      latencyMs: { type: 'integer', minimum: 0, maximum: 600000, default: 0 },
      chunkDelayMs: { type: 'integer', minimum: 0, maximum: 60000, default: 0 },
    },
  },
  create(config) {
    return {
      id: config.id,
      type: config.type,
      models: config.models,
      video: mockVideo,
      operations: {
        chat: mockChat({ latencyMs: config.latencyMs, chunkDelayMs: config.chunkDelayMs }),
        embeddings: mockEmbeddings({ latencyMs: config.latencyMs }),
        speech: mockSpeech({ latencyMs: config.latencyMs }),
        transcription: mockTranscription({ latencyMs: config.latencyMs }),
        translation: mockTranslation({ latencyMs: config.latencyMs }),
        moderation: mockModeration({ latencyMs: config.latencyMs }),
        rerank: mockRerank({ latencyMs: config.latencyMs }),
        image: mockImages({ latencyMs: config.latencyMs }),
        'image-edit': mockImages({ latencyMs: config.latencyMs }),
        video: videoOperation(mockVideo),
      },
    };
  },
});
