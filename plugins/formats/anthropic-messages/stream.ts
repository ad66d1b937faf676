import { promptReportedBy, sseEvent, tagSignature, ToolCallPieces, type ChatChunk, type ChatChunkChoice, type ChatUsage, type FinishReason, type Usage } from '../../../core/index.js';
import { clientToolUseId, NATIVE_SIGNER, type Losses } from './request.js';
import { messageUsage, newId, reasoningOf, stopReasonOf } from './response.js';
import { JsonObjectPrefix } from '../../../core/json-prefix.js';

/**
 * Canonical chat chunks -> the messages event stream, event by event (nothing is buffered
 * beyond the chunk at hand):
 *
 *   message_start, ping,
 *   (content_block_start, content_block_delta*, content_block_stop)*   one block at a time,
 *   message_delta (stop_reason, stop_sequence, usage), message_stop
 *
 * Reasoning pieces open a `thinking` block (thinking_delta, then signature_delta when the back
 * end signs it), text opens a `text` block (text_delta), and each canonical tool call (by its
 * `index`) opens its own `tool_use` block whose arguments arrive as input_json_delta pieces.
 * A change of kind closes the open block, so parallel tool calls become consecutive blocks.
 */

type Json = Record<string, unknown>;

export interface StreamOptions {
  /** The stop sequences the client asked for (to recognise a stop_sequence stop). */
  requestedStops: readonly string[];
  /** Where to record what the stream could not carry. */
  losses: Losses;
  /** The provider type of the back end that answered (its signatures are tagged unless Anthropic's). */
  maker?: string;
  /** The model the client asked for: message_start's when the back end's first chunk names none (Azure's is ""). */
  model?: string;
}

function event(type: string, data: Json): string {
  return sseEvent(type, JSON.stringify({ type, ...data }));
}

type OpenBlock = { kind: 'text' | 'thinking' | 'tool'; index: number };

/**
 * A tool_use block of the stream: its block index, and its arguments so far, let through only
 * while they stay a valid beginning of a JSON object.
 */
type ToolBlock = {
  /** Its block's index; -1 while it waits for the call before it to finish (see `waiting`). */
  index: number;
  json: JsonObjectPrefix;
  fed: boolean;
  id: string;
  name: string;
  /** The argument pieces that came while it waited. */
  held: string[];
};

export async function* messageEvents(chunks: AsyncIterable<ChatChunk>, options: StreamOptions): AsyncGenerator<string> {
  let started = false;
  let open: OpenBlock | undefined;
  let nextIndex = 0;
  const tools = new ToolCallPieces<ToolBlock>(); // which block each tool-call piece belongs to
  const toolBlocks = new Map<number, ToolBlock>(); // block index -> its tool
  let toolCount = 0;
  /**
   * Calls that began while the call before them was still streaming its arguments (a back end
   * that interleaves the pieces of parallel calls): each waits, its pieces held, until the one
   * before it is a whole object or the answer ends, then has its block. Blocks stay consecutive,
   * as Anthropic streams them, and no call is closed before its arguments came.
   */
  const waiting: ToolBlock[] = [];
  let finish: FinishReason | null = null;
  let finishChoice: ChatChunkChoice | undefined;
  let usage: ChatUsage | null | undefined;
  let refused = false;
  /** A signature that came while a text block was open: a thinking block of its own once that text ends. */
  let lateSignature: string | undefined;
  /**
   * Text that came while a call's arguments were still arriving (a back end that sends a line
   * break between two pieces of them): its block waits until the arguments are whole, or the
   * answer ends, rather than close the call with half its arguments.
   */
  let heldText = '';

  const start = (model: string, prompt?: Usage): string => {
    started = true;
    // The prompt's tokens when the back end said them as its stream began (see reportsPrompt), as
    // Anthropic's message_start gives them; the answer's come with message_delta.
    const cached = prompt?.cachedInputTokens ?? 0;
    const written = prompt?.cacheWriteTokens ?? 0;
    const message = {
      id: newId('msg'),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: prompt ? Math.max(0, prompt.inputTokens - cached - written) : 0, output_tokens: 0, cache_creation_input_tokens: written, cache_read_input_tokens: cached },
    };
    return event('message_start', { message }) + event('ping', {});
  };
  const close = (): string => {
    if (!open) return '';
    let text = '';
    const tool = open.kind === 'tool' ? toolBlocks.get(open.index) : undefined;
    if (tool && tool.fed && !tool.json.complete) {
      // Arguments that were not one JSON object (or stopped short): completed into one, as the
      // client's SDK parses them; a non-streamed answer gives `{}` for the same.
      options.losses.add('tool_use.input_not_json_object');
      text += delta(tool.index, { type: 'input_json_delta', partial_json: tool.json.completion() });
      tool.json.broken = true;
    }
    text += event('content_block_stop', { index: open.index });
    const wasText = open.kind === 'text';
    open = undefined;
    if (wasText && lateSignature !== undefined) {
      const index = nextIndex++;
      text += event('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } });
      text += delta(index, { type: 'signature_delta', signature: lateSignature });
      text += event('content_block_stop', { index });
      lateSignature = undefined;
    }
    return text;
  };
  const openBlock = (kind: OpenBlock['kind'], block: Json): string => {
    const text = close() + event('content_block_start', { index: nextIndex, content_block: block });
    open = { kind, index: nextIndex };
    nextIndex++;
    return text;
  };
  const delta = (index: number, data: Json): string => event('content_block_delta', { index, delta: data });
  const feed = (tool: ToolBlock, args: string): string => {
    tool.fed = true;
    const valid = tool.json.feed(args);
    return valid ? delta(tool.index, { type: 'input_json_delta', partial_json: valid }) : '';
  };
  /** Whether the open block is a call whose arguments may still come. */
  const toolStreaming = (): boolean => {
    const tool = open?.kind === 'tool' ? toolBlocks.get(open.index) : undefined;
    return tool !== undefined && !tool.json.complete && !tool.json.broken;
  };
  /** Whether the open call is part way through its arguments: begun, not whole, not broken (text then waits). */
  const argumentsUnderWay = (): boolean => {
    const tool = open?.kind === 'tool' ? toolBlocks.get(open.index) : undefined;
    return tool !== undefined && tool.fed && !tool.json.complete && !tool.json.broken;
  };
  const writeText = (text: string): string => {
    let out = '';
    if (open?.kind !== 'text') out += release(true) + openBlock('text', { type: 'text', text: '' });
    return out + delta(open!.index, { type: 'text_delta', text });
  };
  const writeHeld = (): string => {
    if (heldText === '') return '';
    const text = heldText;
    heldText = '';
    return writeText(text);
  };
  /** The calls that waited get their blocks: those whose turn came, or (`all`) every one. */
  const release = (all: boolean): string => {
    let text = '';
    while (waiting.length > 0 && (all || !toolStreaming())) {
      const tool = waiting.shift()!;
      text += openBlock('tool', { type: 'tool_use', id: tool.id, name: tool.name, input: {} });
      tool.index = open!.index;
      toolBlocks.set(tool.index, tool);
      for (const args of tool.held) text += feed(tool, args);
      tool.held = [];
    }
    return text;
  };

  for await (const chunk of chunks) {
    let out = started ? '' : start(typeof chunk.model === 'string' && chunk.model !== '' ? chunk.model : (options.model ?? ''), promptReportedBy(chunk));
    if (chunk.usage) usage = chunk.usage;
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      // Some OpenAI-compatible back ends leave out `index` when they send one choice.
      if ((choice.index ?? 0) !== 0) {
        options.losses.add('choices.n');
        continue;
      }
      const d = (choice.delta ?? {}) as ChatChunkChoice['delta'];
      const reasoning = reasoningOf(d);
      if (reasoning) {
        if (open?.kind !== 'thinking') out += openBlock('thinking', { type: 'thinking', thinking: '', signature: '' });
        out += delta(open!.index, { type: 'thinking_delta', thinking: reasoning });
      }
      if (typeof d.reasoning_signature === 'string' && d.reasoning_signature) {
        const signature = tagSignature(d.reasoning_signature, options.maker, NATIVE_SIGNER);
        // A back end that signs the answer's last text (Gemini) sends the signature with it or
        // after it: it waits for the text to end rather than cut the text block in two.
        if (open?.kind === 'text' && !d.tool_calls?.length) lateSignature = signature;
        else {
          if (open?.kind !== 'thinking') out += openBlock('thinking', { type: 'thinking', thinking: '', signature: '' });
          out += delta(open!.index, { type: 'signature_delta', signature });
        }
      }
      const text = (typeof d.content === 'string' ? d.content : '') + (typeof d.refusal === 'string' ? d.refusal : '');
      if (typeof d.refusal === 'string' && d.refusal) refused = true;
      // An assistant message holds no images in the Messages API (image output from a back end).
      if (Array.isArray(d.images) && d.images.length > 0) options.losses.add('message.images');
      if (text) {
        if (heldText !== '' || argumentsUnderWay()) heldText += text;
        else out += writeText(text);
      }
      for (const call of d.tool_calls ?? []) {
        // The call a piece belongs to (see ToolCallPieces), or a new one.
        let tool = tools.find(call);
        const args = call.function?.arguments;
        if (!tool) {
          tool = { index: -1, json: new JsonObjectPrefix(), fed: false, id: call.id ? clientToolUseId(call.id) : newId('toolu'), name: call.function?.name ?? '', held: [] };
          tools.opened(call, tool);
          toolCount++;
          if (toolStreaming() || waiting.length > 0) waiting.push(tool);
          else {
            out += openBlock('tool', { type: 'tool_use', id: tool.id, name: tool.name, input: {} });
            tool.index = open!.index;
            toolBlocks.set(tool.index, tool);
          }
        } else if (tool.index !== -1 && (open?.kind !== 'tool' || open.index !== tool.index)) {
          // A piece of a call whose block was closed (by text after it, or its arguments
          // already whole): it has nowhere to go.
          options.losses.add('tool_calls.interleaved');
        }
        if (!args) continue;
        if (tool.index === -1) tool.held.push(args);
        else {
          out += feed(tool, args);
          if (waiting.length > 0) out += release(false);
        }
      }
      if (heldText !== '' && !argumentsUnderWay()) out += writeHeld();
      if (choice.finish_reason) {
        finish = choice.finish_reason;
        finishChoice = choice;
        out += writeHeld() + release(true) + close();
      }
    }
    if (out) yield out;
  }

  let out = started ? '' : start(options.model ?? '');
  out += writeHeld() + release(true) + close();
  const stop = stopReasonOf(finish, finishChoice as Json | undefined, options.requestedStops, toolCount > 0);
  if (refused) stop.stop_reason = 'refusal';
  out += event('message_delta', { delta: stop, usage: messageUsage(usage) });
  out += event('message_stop', {});
  yield out;
}
