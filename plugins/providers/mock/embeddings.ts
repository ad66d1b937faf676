import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayError, type OperationHandler } from '../../../core/index.js';
import { tokenize } from './chat.js';

/** The length of the mock's vectors when the request sets no `dimensions`. */
export const MOCK_EMBEDDING_DIMENSIONS = 1536;

export interface MockEmbeddingOptions {
  /** Wait before answering (ms). */
  latencyMs: number;
}

type Input = string | number[];

/** The request's inputs, one per vector: a string, an array of strings, token ids, or arrays of them. */
export function inputsOf(input: unknown): Input[] {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return [];
  if (input.every((item) => typeof item === 'number')) return [input as number[]];
  return input as Input[];
}

/** A small fast generator (sfc32) seeded with 128 bits: deterministic, well spread. */
function generator(seed: Buffer): () => number {
  let a = seed.readUInt32LE(0);
  let b = seed.readUInt32LE(4);
  let c = seed.readUInt32LE(8);
  let d = seed.readUInt32LE(12);
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

/**
 * The mock's vector for one input: unit length, float32 values, the same for the same model and
 * input every time. Like OpenAI's, a shorter `dimensions` gives the first values of the full
 * vector, normalised again.
 */
export function mockVector(model: string, input: Input, dimensions = MOCK_EMBEDDING_DIMENSIONS): number[] {
  const seed = createHash('sha256').update(model).update('\u0000').update(JSON.stringify(input)).digest();
  const next = generator(seed);
  const raw = new Array<number>(dimensions);
  let norm = 0;
  for (let i = 0; i < dimensions; i++) {
    const value = next() * 2 - 1;
    raw[i] = value;
    norm += value * value;
  }
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < dimensions; i++) raw[i] = Math.fround(raw[i]! / norm);
  return raw;
}

/** OpenAI's base64 encoding of a vector: its float32 values, little-endian. */
function base64Of(vector: readonly number[]): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i]!, i * 4);
  return bytes.toString('base64');
}

/** Tokens the mock counts for one input: its words, or its token ids. */
function tokensOf(input: Input): number {
  return Math.max(1, typeof input === 'string' ? tokenize(input).length : input.length);
}

/**
 * Deterministic embeddings with no network: one unit vector per input derived from a hash of
 * the model and the input, `dimensions` honoured (at most 1536), `encoding_format: base64` as
 * OpenAI encodes it, and usage counted in the mock's word tokens.
 */
export function mockEmbeddings(options: MockEmbeddingOptions): OperationHandler<'embeddings'> {
  return async (request, { signal }) => {
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const body = request.body;
    const dimensions = body.dimensions === undefined ? MOCK_EMBEDDING_DIMENSIONS : Number(body.dimensions);
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > MOCK_EMBEDDING_DIMENSIONS) {
      throw new GatewayError('invalid_value', {
        param: 'dimensions',
        params: { detail: `expected an integer from 1 to ${MOCK_EMBEDDING_DIMENSIONS} for this model, but got ${String(body.dimensions)} instead.` },
      });
    }
    const base64 = body.encoding_format === 'base64';
    const inputs = inputsOf(body.input);
    let tokens = 0;
    const data = inputs.map((input, index) => {
      tokens += tokensOf(input);
      const vector = mockVector(request.model, input, dimensions);
      return { object: 'embedding', index, embedding: base64 ? base64Of(vector) : vector };
    });
    return {
      kind: 'json',
      status: 200,
      body: { object: 'list', data, model: request.model, usage: { prompt_tokens: tokens, total_tokens: tokens } },
    };
  };
}
