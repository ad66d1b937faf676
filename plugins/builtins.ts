import type { Builtins } from '../core/loader.js';

/** The plugins that ship with Switchyard, loaded only when named (or needed by a provider type). */
export const builtins: Builtins = {
  plugins: {
    'request-log': async () => (await import('./request-log/index.js')).default,
    auth: async () => (await import('./auth/index.js')).default,
    'rate-limit': async () => (await import('./rate-limit/index.js')).default,
    metering: async () => (await import('./metering/index.js')).default,
    admin: async () => (await import('./admin/index.js')).default,
    validation: async () => (await import('./validation/index.js')).default,
    routing: async () => (await import('./routing/index.js')).default,
    'openai-chat': async () => (await import('./formats/openai-chat/index.js')).default,
    'anthropic-messages': async () => (await import('./formats/anthropic-messages/index.js')).default,
    gemini: async () => (await import('./formats/gemini/index.js')).default,
    openai: async () => (await import('./providers/openai/index.js')).default,
    anthropic: async () => (await import('./providers/anthropic/index.js')).default,
    'gemini-provider': async () => (await import('./providers/gemini/index.js')).default,
    mock: async () => (await import('./providers/mock/index.js')).default,
    dashscope: async () => (await import('./providers/dashscope/index.js')).default,
    'video-tasks': async () => (await import('./video-tasks/index.js')).default,
    'video-generations': async () => (await import('./formats/video-generations/index.js')).default,
    'video-kling': async () => (await import('./formats/video-kling/index.js')).default,
    kling: async () => (await import('./providers/kling/index.js')).default,
    'video-openai': async () => (await import('./formats/video-openai/index.js')).default,
    'video-jimeng': async () => (await import('./formats/video-jimeng/index.js')).default,
    jimeng: async () => (await import('./providers/jimeng/index.js')).default,
    sora: async () => (await import('./providers/sora/index.js')).default,
  },
  defaultOrder: ['request-log', 'auth', 'rate-limit', 'validation', 'routing', 'metering', 'admin', 'openai-chat', 'anthropic-messages', 'gemini', 'video-generations', 'video-kling', 'video-openai', 'video-jimeng'],
  providerTypes: { openai: 'openai', anthropic: 'anthropic', gemini: 'gemini-provider', mock: 'mock', dashscope: 'dashscope', kling: 'kling', jimeng: 'jimeng', sora: 'sora' },
};
