import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OperationHandler } from '../../../core/index.js';
import { dimensionsOf, imageRequestOf, imageUsage, type ImageInput, type ImageRequest } from '../../formats/openai-chat/images-canonical.js';
import { solidPng } from './png.js';

/** The side of the mock's images when the request asks for no size, `auto`, or more than 512 pixels a side. */
export const MOCK_IMAGE_SIDE = 64;
const MAX_SIDE = 512;

export interface MockImageOptions {
  latencyMs: number;
}

/** What an input image contributes to the colour of an edit: its URL, or the upload's name and size. */
function identity(input: ImageInput): string {
  return input.kind === 'url' ? input.url : `${input.file.filename ?? ''}:${input.file.size ?? ''}`;
}

/** The colour of image `index` of a request: the first bytes of a hash of model, prompt, inputs and index. */
export function mockColour(model: string, request: Pick<ImageRequest, 'prompt' | 'images'>, index: number): [number, number, number] {
  const hash = createHash('sha256').update(model).update('\u0000').update(request.prompt).update('\u0000');
  for (const input of request.images ?? []) hash.update(identity(input)).update('\u0000');
  const digest = hash.update(String(index)).digest();
  return [digest[0]!, digest[1]!, digest[2]!];
}

/** The pixel size the mock draws for a requested size. */
export function mockSize(size: string | undefined): { width: number; height: number } {
  const asked = dimensionsOf(size);
  if (asked && asked.width <= MAX_SIDE && asked.height <= MAX_SIDE) return asked;
  return { width: MOCK_IMAGE_SIDE, height: MOCK_IMAGE_SIDE };
}

/**
 * Images with no network: `n` (default 1) real PNGs of one colour each, the colour taken from a
 * hash of the model, the prompt, the input images (edits) and the image's index, at the asked
 * size when both sides are at most 512 pixels (64x64 otherwise). Base64 (`b64_json`) unless the
 * client asked for `url`, which gets a `data:image/png;base64,` URL. `revised_prompt` echoes the
 * prompt. Usage: the images made.
 */
export function mockImages(options: MockImageOptions): OperationHandler<'image'> & OperationHandler<'image-edit'> {
  return async (upstream, { signal }) => {
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const request = imageRequestOf(upstream.body);
    const n = request.n ?? 1;
    const { width, height } = mockSize(request.size);
    const data = [];
    for (let i = 0; i < n; i++) {
      const b64 = solidPng(width, height, mockColour(upstream.model, request, i)).toString('base64');
      data.push(request.response_format === 'url' ? { url: `data:image/png;base64,${b64}`, revised_prompt: request.prompt } : { b64_json: b64, revised_prompt: request.prompt });
    }
    return { kind: 'json', status: 200, body: { created: Math.floor(Date.now() / 1000), data }, usage: imageUsage(n) };
  };
}
