import { JsonObjectPrefix, promptReportedBy, reportsPrompt, ToolCallPieces, type ChatChunk, type ChatUsage, type FinishReason, type Usage } from '../../../../core/index.js';
import { toolNamesOf, type ToolNames } from './tool-names.js';
import { argumentsText, customInput, customToolCallItem, functionCallItem, logprobsOf, messageItem, newId, reasoningItem, responseShell, responseUsage, statusOf, type TokenLogprob } from './response.js';

/**
 * Canonical chat chunks -> the Responses API event stream, as OpenAI sends it:
 *
 *   response.created, response.in_progress,
 *   per output item: response.output_item.added, then
 *     reasoning: response.reasoning_summary_part.added, response.reasoning_summary_text.delta...,
 *                response.reasoning_summary_text.done, response.reasoning_summary_part.done
 *     message:   response.content_part.added, response.output_text.delta..., response.output_text.done,
 *                response.content_part.done (a refusal: response.refusal.delta / .done)
 *     function call: response.function_call_arguments.delta..., response.function_call_arguments.done
 *   response.output_item.done, and last response.completed (or response.incomplete) with the
 *   whole response, usage included.
 *
 * Every event carries `type` and a `sequence_number` counting from 0. The events are the
 * canonical chunks of the `responses` operation (the format writes each as `event:`/`data:`).
 */

type Json = Record<string, unknown>;

interface OpenItem {
  index: number;
  id: string;
  kind: 'reasoning' | 'message' | 'function_call' | 'custom_tool_call';
  text: string;
  /** message: which content part is open (output_text or refusal) and its index. */
  partType?: 'output_text' | 'refusal';
  partIndex: number;
  refusal?: string;
  /** message: the open output_text's token log probabilities so far, when the back end gave them. */
  logprobs?: TokenLogprob[];
  signature?: string;
  callId?: string;
  name?: string;
  /** A call's arguments as they come, read once: whether they are whole yet, or can never be. */
  json?: JsonObjectPrefix;
}

export class ResponseEventWriter {
  private sequence = 0;
  private readonly output: Json[] = [];
  private current: OpenItem | undefined;
  /** Which function call each streamed piece belongs to (see ToolCallPieces). */
  private readonly calls = new ToolCallPieces<OpenItem>();
  /** Every call, in the order opened (two may have had the same index). */
  private readonly allCalls: OpenItem[] = [];
  private finish: FinishReason | null = null;
  private usage: ChatUsage | null = null;
  private readonly shell: Json;
  /** The request's custom tools: their calls are custom tool calls, their input whole at the end. */
  private readonly customs: ReadonlySet<string>;
  /** The names its tools went up to chat under, and the client's for each (namespaced tools). */
  private readonly names: ToolNames;
  /** A signature that came while the message was being written: an item of its own once the message is done. */
  private lateSignature: string | undefined;
  /**
   * Text (or refusal) pieces that came while a call's arguments were still arriving (a back end
   * that sends a line break between two pieces of them): written once the arguments are whole,
   * or the answer ends, so that no call is done with half its arguments.
   */
  private held: Array<['output_text' | 'refusal', string, TokenLogprob[]]> = [];

  constructor(
    readonly id: string,
    body: Json,
    model: string,
    /** The provider type of the back end answering: its signatures are tagged with it. */
    private readonly maker?: string,
  ) {
    this.shell = responseShell(id, body, model, Math.floor(Date.now() / 1000));
    this.names = toolNamesOf(body);
    this.customs = this.names.customs;
  }

  private event(type: string, fields: Json): Json {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  /** response.created and response.in_progress. */
  start(): Json[] {
    return [this.event('response.created', { response: { ...this.shell } }), this.event('response.in_progress', { response: { ...this.shell } })];
  }

  private open(kind: OpenItem['kind'], prefix: string, out: Json[], extra: Partial<OpenItem> = {}): OpenItem {
    this.close(out);
    const item: OpenItem = { index: this.output.length, id: newId(prefix), kind, text: '', partIndex: 0, ...extra };
    this.output.push({});
    let added: Json;
    if (kind === 'reasoning') added = { id: item.id, type: 'reasoning', summary: [] };
    else if (kind === 'message') added = { id: item.id, type: 'message', status: 'in_progress', role: 'assistant', content: [] };
    else {
      const { name, namespace } = this.names.clientName(item.name ?? '');
      if (kind === 'custom_tool_call') added = customToolCallItem(item.id, item.callId ?? '', name, '', 'in_progress', namespace);
      else added = functionCallItem(item.id, item.callId ?? '', name, '', 'in_progress', namespace);
    }
    out.push(this.event('response.output_item.added', { output_index: item.index, item: added }));
    if (kind === 'reasoning') {
      out.push(this.event('response.reasoning_summary_part.added', { item_id: item.id, output_index: item.index, summary_index: 0, part: { type: 'summary_text', text: '' } }));
    }
    if (kind === 'reasoning' || kind === 'message') this.current = item;
    return item;
  }

  /** The open message's content part for `type`, opened (and the other one closed) if need be. */
  private part(item: OpenItem, type: 'output_text' | 'refusal', out: Json[]): void {
    if (item.partType === type) return;
    if (item.partType) {
      this.closePart(item, out);
      item.partIndex++;
    }
    item.partType = type;
    const part = type === 'output_text' ? { type, text: '', annotations: [], logprobs: [] } : { type, refusal: '' };
    out.push(this.event('response.content_part.added', { item_id: item.id, output_index: item.index, content_index: item.partIndex, part }));
  }

  private closePart(item: OpenItem, out: Json[]): void {
    const where = { item_id: item.id, output_index: item.index, content_index: item.partIndex };
    if (item.partType === 'output_text') {
      const logprobs = item.logprobs ?? [];
      out.push(this.event('response.output_text.done', { ...where, text: item.text, logprobs }));
      out.push(this.event('response.content_part.done', { ...where, part: { type: 'output_text', text: item.text, annotations: [], logprobs } }));
    } else if (item.partType === 'refusal') {
      out.push(this.event('response.refusal.done', { ...where, refusal: item.refusal ?? '' }));
      out.push(this.event('response.content_part.done', { ...where, part: { type: 'refusal', refusal: item.refusal ?? '' } }));
    }
  }

  /** Close the open reasoning or message item. */
  private close(out: Json[]): void {
    const item = this.current;
    if (!item) return;
    this.current = undefined;
    let done: Json;
    if (item.kind === 'reasoning') {
      const where = { item_id: item.id, output_index: item.index, summary_index: 0 };
      out.push(this.event('response.reasoning_summary_text.done', { ...where, text: item.text }));
      out.push(this.event('response.reasoning_summary_part.done', { ...where, part: { type: 'summary_text', text: item.text } }));
      done = reasoningItem(item.id, item.text, item.signature, this.maker);
      if (!item.text) done.summary = [{ type: 'summary_text', text: '' }];
    } else {
      this.closePart(item, out);
      const status = statusOf(this.finish).status === 'completed' ? 'completed' : 'incomplete';
      done = messageItem(item.id, item.text !== '' || item.refusal === undefined ? item.text : undefined, item.refusal, status, item.logprobs);
    }
    this.output[item.index] = done;
    out.push(this.event('response.output_item.done', { output_index: item.index, item: done }));
    const late = item.kind === 'message' ? this.lateSignature : undefined;
    if (late !== undefined) {
      this.lateSignature = undefined;
      this.open('reasoning', 'rs', out).signature = late;
      this.close(out);
    }
  }

  /** Close a call; `last`: the last one of an answer, which is incomplete when the answer was cut short. */
  private closeCall(call: OpenItem, out: Json[], last = false): void {
    if (this.output[call.index] && (this.output[call.index] as Json).type) return;
    const status = last && statusOf(this.finish).status !== 'completed' ? 'incomplete' : 'completed';
    const { name, namespace } = this.names.clientName(call.name ?? '');
    if (call.kind === 'custom_tool_call') {
      // Its input is the `input` of the JSON arguments, known whole only now: one delta, then done.
      const input = customInput(call.text);
      const done = customToolCallItem(call.id, call.callId ?? '', name, input, status, namespace);
      this.output[call.index] = done;
      const where = { item_id: call.id, output_index: call.index };
      if (input !== '') out.push(this.event('response.custom_tool_call_input.delta', { ...where, delta: input }));
      out.push(this.event('response.custom_tool_call_input.done', { ...where, input }));
      out.push(this.event('response.output_item.done', { output_index: call.index, item: done }));
      return;
    }
    // A call that took no arguments is `{}`, as OpenAI streams it (one delta, then done).
    const args = argumentsText(call.text);
    if (args !== call.text) out.push(this.event('response.function_call_arguments.delta', { item_id: call.id, output_index: call.index, delta: args }));
    const done = functionCallItem(call.id, call.callId ?? '', name, args, status, namespace);
    this.output[call.index] = done;
    out.push(this.event('response.function_call_arguments.done', { item_id: call.id, output_index: call.index, name, arguments: args }));
    out.push(this.event('response.output_item.done', { output_index: call.index, item: done }));
  }

  private closeCalls(out: Json[]): void {
    const calls = this.allCalls;
    calls.forEach((call, i) => this.closeCall(call, out, i === calls.length - 1));
  }

  /**
   * A reasoning signature. Back ends that sign the whole answer (Gemini) may send it with the
   * answer's text or after it: it then waits for the message to be done and has a reasoning item
   * of its own after it (the message is not cut in two; the item's own done event carries it, and
   * handed back it signs the turn's reasoning: see itemsToMessages). With a call (Gemini signs
   * its first call) it opens the item before the call, as before the answer began.
   */
  private sign(signature: string, withCalls: boolean, out: Json[]): void {
    if (this.current?.kind === 'reasoning') {
      this.current.signature = signature;
      return;
    }
    if (this.current?.kind === 'message' && !withCalls) {
      this.lateSignature = signature;
      return;
    }
    this.closeCalls(out);
    this.open('reasoning', 'rs', out).signature = signature;
  }

  /** The events one chat chunk amounts to. */
  push(chunk: ChatChunk): Json[] {
    const out: Json[] = [];
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.find((c) => c.index === 0) ?? (chunk.choices?.length === 1 ? chunk.choices[0] : undefined);
    if (!choice) return out;
    const delta = choice.delta ?? {};
    if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
      const item = this.current?.kind === 'reasoning' ? this.current : (this.closeCalls(out), this.open('reasoning', 'rs', out));
      item.text += delta.reasoning_content;
      out.push(this.event('response.reasoning_summary_text.delta', { item_id: item.id, output_index: item.index, summary_index: 0, delta: delta.reasoning_content }));
    }
    if (typeof delta.reasoning_signature === 'string' && delta.reasoning_signature !== '') this.sign(delta.reasoning_signature, Boolean(delta.tool_calls?.length), out);
    for (const [field, type] of [
      ['content', 'output_text'],
      ['refusal', 'refusal'],
    ] as const) {
      const piece = delta[field];
      if (typeof piece !== 'string' || piece === '') continue;
      const logprobs = type === 'output_text' ? logprobsOf(choice.logprobs) : [];
      if (this.held.length > 0 || this.callStreaming()) this.held.push([type, piece, logprobs]);
      else this.write(type, piece, logprobs, out);
    }
    this.pushCalls(delta.tool_calls ?? [], out);
    if (this.held.length > 0 && !this.callStreaming()) this.writeHeld(out);
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return out;
  }

  /** A piece of the message's text or refusal, in the open message (one opened, the calls done, if need be). */
  private write(type: 'output_text' | 'refusal', piece: string, logprobs: TokenLogprob[], out: Json[]): void {
    const item = this.current?.kind === 'message' ? this.current : (this.closeCalls(out), this.open('message', 'msg', out));
    this.part(item, type, out);
    const where = { item_id: item.id, output_index: item.index, content_index: item.partIndex };
    if (type === 'output_text') {
      item.text += piece;
      if (logprobs.length > 0) (item.logprobs ??= []).push(...logprobs);
      out.push(this.event('response.output_text.delta', { ...where, delta: piece, logprobs }));
    } else {
      item.refusal = (item.refusal ?? '') + piece;
      out.push(this.event('response.refusal.delta', { ...where, delta: piece }));
    }
  }

  private writeHeld(out: Json[]): void {
    const held = this.held;
    this.held = [];
    for (const [type, piece, logprobs] of held) this.write(type, piece, logprobs, out);
  }

  /**
   * Whether a call not yet done is part way through its arguments: begun, not yet one whole JSON
   * text, and not broken past mending (text then waits: see `held`). A call given none yet does
   * not hold text back (its arguments are `{}`), nor one whose arguments can never be an object.
   */
  private callStreaming(): boolean {
    for (const call of this.allCalls) {
      if (!(this.output[call.index] as Json).type && call.json !== undefined && !call.json.complete && !call.json.broken) return true;
    }
    return false;
  }

  private pushCalls(calls: NonNullable<ChatChunk['choices'][number]['delta']['tool_calls']>, out: Json[]): void {
    for (const call of calls) {
      let item = this.calls.find(call);
      if (!item) {
        // A new call: the open message or reasoning is done, and so is each call before it whose
        // arguments are whole (OpenAI closes one call's item before it adds the next: a client
        // may run a tool once its item is done). One whose arguments are not whole yet stays
        // open: a chat stream keys its pieces by index, and they may still come after a later
        // call began (each item's events carry its output_index).
        for (const open of this.allCalls) if (!(this.output[open.index] as Json).type && open.json?.complete) this.closeCall(open, out);
        const name = call.function?.name ?? '';
        const custom = this.customs.has(name);
        item = this.open(custom ? 'custom_tool_call' : 'function_call', custom ? 'ctc' : 'fc', out, { callId: call.id || newId('call'), name });
        this.calls.opened(call, item);
        this.allCalls.push(item);
      } else if (call.function?.name && !item.name) item.name = call.function.name;
      const args = call.function?.arguments;
      if (typeof args === 'string' && args !== '') {
        const before = item.text;
        item.text += args;
        (item.json ??= new JsonObjectPrefix()).feed(args);
        if (!(this.output[item.index] as Json).type) {
          // A custom tool's input is given whole when its call closes (its arguments are JSON around it).
          // Whitespace alone says nothing yet (arguments that stay so are `{}` at the end): it
          // goes with the first piece that says something, so the deltas add up to the arguments.
          const delta = item.text.trim() === '' ? '' : before !== '' && before.trim() === '' ? item.text : args;
          if (item.kind === 'function_call' && delta !== '') out.push(this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: item.index, delta }));
        } else if (item.kind === 'custom_tool_call') {
          (this.output[item.index] as Json).input = customInput(item.text);
        } else {
          // A late piece of a call already closed: the final response carries it.
          (this.output[item.index] as Json).arguments = item.text;
        }
      }
    }
  }

  /** The closing events, and the whole response they end with. */
  end(): { events: Json[]; response: Json } {
    const out: Json[] = [];
    // Text held for arguments that never became whole: written after the calls, not lost.
    this.writeHeld(out);
    this.close(out);
    this.closeCalls(out);
    const { status, incomplete_details } = statusOf(this.finish);
    const response = { ...this.shell, status, incomplete_details, output: this.output.filter((item) => item.type), usage: responseUsage(this.usage) };
    out.push(this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response }));
    return { events: out, response };
  }
}

/** A chat stream as Responses events. */
export async function* responseEvents(chunks: AsyncIterable<ChatChunk>, writer: ResponseEventWriter): AsyncGenerator<Json> {
  yield* writer.start();
  // The prompt's usage a chunk carries (see reportsPrompt) goes with the first event after it:
  // a stream that ends early is charged it, as a chat client's would be.
  let prompt: Usage | undefined;
  for await (const chunk of chunks) {
    prompt ??= promptReportedBy(chunk);
    const events = writer.push(chunk);
    if (prompt && events.length > 0) {
      reportsPrompt(events[0]!, prompt);
      prompt = undefined;
    }
    for (let i = 0; i < events.length; i++) yield events[i]!;
  }
  yield* writer.end().events;
}
