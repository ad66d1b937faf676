import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { loadCompactBpe, parseRankFile } from './bpe.js';
import { BpeTokenizer, countPromptTokens, deliveredText, loadTokenizer, promptSize, promptText, promptTokens } from './tokens.js';
import { keptHistory } from '../../core/index.js';

/** A small deterministic generator, so a failing text can be found again. */
function randomTexts(count: number, seed: number): string[] {
  let state = seed;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
  const alphabet = ['e', 't', 'a', ' ', ' ', '\n', '\t', "'", 's', 'll', 'É', 'ß', 'я', '中', '文', '😀', '🚀', '0', '7', '42', '.', ',', '!', '$', '{', '"', '\r\n', '  ', 'ー', '\u0301'];
  const texts: string[] = [];
  for (let n = 0; n < count; n++) {
    let text = '';
    const length = 1 + Math.floor(next() * 300);
    for (let i = 0; i < length; i++) text += next() < 0.5 ? String.fromCharCode(97 + Math.floor(next() * 26)) : alphabet[Math.floor(next() * alphabet.length)];
    texts.push(text);
  }
  return texts;
}

/** Real and awkward text: this repository's docs and sources, long runs, every script we could think of. */
function corpus(): string[] {
  const files = ['README.md', 'docs/performance.md', 'docs/configuration.md', 'core/gateway.ts', 'plugins/metering/bpe.ts', 'package.json'];
  return [
    ...files.map((file) => readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8')),
    'Grüße, 世界! 🚀 '.repeat(50),
    "don't WE'LL I'm you'VE 1234567 3.14159 $$$ ### ...\n\n\r\n   \t  x",
    'a'.repeat(5000),
    ' '.repeat(3000) + 'x',
    Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 7919) % 256)).toString('base64'),
    'こんにちは、世界。Привет, мир. مرحبا بالعالم. नमस्ते दुनिया. 안녕하세요 세계.',
    '\u{1F468}\u200D\u{1F469}\u200D\u{1F467} family, e\u0301 combining, \uD800 a lone surrogate',
    ...randomTexts(300, 7),
  ];
}

describe('the BPE tokenizer', () => {
  for (const [name, reference] of [
    ['cl100k_base', countTokens],
    ['o200k_base', countO200k],
  ] as const) {
    it(`counts exactly what gpt-tokenizer counts with ${name}, over real and random text`, async () => {
      const bpe = await loadCompactBpe(name);
      const texts = corpus();
      const mismatches = texts.filter((text) => bpe.countNow(text) !== reference(text)).map((text) => text.slice(0, 60));
      expect(mismatches).to.deep.equal([]);
      // The asynchronous count agrees with the immediate one.
      expect(await bpe.count(texts[0]!)).to.equal(reference(texts[0]!));
    });
  }

  it('reads a rank file as JavaScript reads it: escapes, byte arrays, holes, several chunks', () => {
    const chunks = [
      String.raw`[
	"a",
	"\"q\\",
	"\0\v\b\f\n\r\t\x07\xA0",
	"\u2028 \uD83D\uDE80 \uD800!",
	"	raw tab, ${'é'} and 世",
	[
		255,
		0
	],
	,
	"x",
]`,
      String.raw`[
	[161],
	"last"
]`,
    ];
    const file = `//#region test\n${chunks.map((chunk, i) => `const c${i} = ${chunk};`).join('\n')}\nconst bpe = c0.concat(c1);\n`;
    // What a JavaScript engine makes of the same literals (holes kept as holes).
    const expected: Array<string | number[] | undefined> = [];
    for (const chunk of chunks) expected.push(...(new Function(`return ${chunk}`)() as Array<string | number[] | undefined>));
    const { bytes, offsets, count } = parseRankFile(Buffer.from(file, 'utf8'));
    expect(count).to.equal(expected.length);
    for (let rank = 0; rank < count; rank++) {
      const token = expected[rank];
      const want = token === undefined ? Buffer.alloc(0) : typeof token === 'string' ? Buffer.from(token, 'utf8') : Buffer.from(token);
      expect(Buffer.from(bytes.subarray(offsets[rank]!, offsets[rank + 1]!)).toString('hex'), `rank ${rank}`).to.equal(want.toString('hex'));
    }
    expect(() => parseRankFile(Buffer.from('\nconst c0 = ["open'))).to.throw(/ends inside a string/);
  });

  it('counts a special token spelled in the text as the text it is', async () => {
    const bpe = await loadCompactBpe('cl100k_base');
    const text = 'before <|endoftext|> after';
    expect(bpe.countNow(text)).to.equal(countTokens(text, { disallowedSpecial: new Set() }));
  });

  it('lets the event loop run while it counts a long text', async () => {
    const tokenizer = new BpeTokenizer('cl100k_base');
    await tokenizer.count('warm up');
    const text = 'The quick brown fox jumps over the lazy dog; naïvely, 12345 times. '.repeat(40_000);
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    try {
      const tokens = await tokenizer.count(text);
      expect(tokens).to.equal(countTokens(text));
    } finally {
      clearInterval(timer);
    }
    // 2.7 MB of text takes far longer than one slice: other work ran between the slices.
    expect(turns).to.be.greaterThan(1);
  });

  it('gives a count up between two slices once it is moot (the back end reported the usage meanwhile)', async () => {
    const tokenizer = new BpeTokenizer('cl100k_base');
    await tokenizer.count('warm up');
    const text = 'The quick brown fox jumps over the lazy dog; naïvely, 12345 times. '.repeat(40_000);
    let slices = 0;
    // Moot from the second slice on: the count stops there, short of the whole text's.
    const partial = await tokenizer.count(text, () => ++slices >= 1);
    expect(slices).to.equal(1);
    expect(partial).to.be.greaterThan(0).and.lessThan(countTokens(text));
  });

  it('lets the event loop run inside one long run of letters too (a piece of the split with no space), counting it in parts', async () => {
    const tokenizer = new BpeTokenizer('cl100k_base');
    await tokenizer.count('warm up');
    // Letters that do not repeat in a pattern (a repeated part is counted once: see the next test).
    let seed = 7;
    const run = Array.from({ length: 2_000_000 }, () => String.fromCharCode(97 + ((seed = (seed * 1103515245 + 12345) % 2147483648) % 26))).join('');
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    let tokens: number;
    try {
      tokens = await tokenizer.count(run);
    } finally {
      clearInterval(timer);
    }
    // One piece of the split: merged whole it held the event loop for its whole count.
    expect(turns).to.be.greaterThan(1);
    // Counted in parts of 1,024 characters: at most a token more at each cut than counted whole
    // (checked on a shorter run, which the reference counter merges in reasonable time).
    const short = 'x'.repeat(20_000);
    const whole = countTokens(short);
    expect(await tokenizer.count(short)).to.be.within(whole, whole + Math.ceil(short.length / 1024));
    expect(tokens).to.be.within(Math.floor(run.length / 8), run.length);
  });

  it('a run of one letter, cut into parts that repeat, costs one merge a part, and counts as its parts do', async () => {
    const tokenizer = await loadTokenizer('cl100k_base');
    const part = tokenizer.count('x'.repeat(1024));
    // 8 MB with no space: 8,192 parts of 1,024 characters, one piece of the split (merged part by
    // part this took seconds, about 350 ns a character; a repeated part is looked up).
    expect(tokenizer.count('x'.repeat(8 * 1024 * 1024))).to.equal(8192 * part);
    // Short pieces of several tokens are remembered too, and count the same each time.
    const text = 'antidisestablishmentarianism '.repeat(1000);
    expect(tokenizer.count(text)).to.equal(countTokens(text));
    expect(tokenizer.count(text)).to.equal(countTokens(text));
  });

  it('builds each encoding once for every tokenizer that uses it', async () => {
    expect(loadCompactBpe('cl100k_base')).to.equal(loadCompactBpe('cl100k_base'));
    const [a, b] = await Promise.all([new BpeTokenizer('o200k_base').count('shared tables'), new BpeTokenizer('o200k_base').count('shared tables')]);
    expect(a).to.equal(countO200k('shared tables'));
    expect(b).to.equal(a);
  });

  it('counts a prompt as the immediate counter does, framing included', async () => {
    const tokenizer = new BpeTokenizer('cl100k_base');
    const body = { model: 'm', messages: [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Why is the sky blue?' }] };
    expect(await countPromptTokens(tokenizer, body)).to.equal(promptTokens(await loadTokenizer('cl100k_base'), body));
    // Embeddings and completions: each input's (prompt's) own tokens, added up; no framing, nothing between them.
    expect(await countPromptTokens(tokenizer, { model: 'e', input: ['a b c', 'd e'] } as never)).to.equal(countTokens('a b c') + countTokens('d e'));
    expect(await countPromptTokens(tokenizer, { model: 'e', input: ['a b c', 'd e'] } as never, 'embeddings')).to.equal(countTokens('a b c') + countTokens('d e'));
    expect(await countPromptTokens(tokenizer, { model: 'm', prompt: 'Once upon a time' } as never, 'completion')).to.equal(countTokens('Once upon a time'));
    expect(await countPromptTokens(tokenizer, { model: 'm', prompt: ['first', 42, 'second'], suffix: 'end' } as never, 'completion')).to.equal(
      countTokens('first') + 1 + countTokens('second') + countTokens('end'),
    );
    expect(await tokenizer.count('')).to.equal(0);
  });

  it('measures the prompt without building it: the size of the text that would be built, for every shape of body', () => {
    const bodies = [
      { model: 'm', messages: [{ role: 'system', content: 'Réponds en français. 日本語も。' }, { role: 'user', content: 'Why is the sky blue? 🌤️' }] },
      {
        model: 'm',
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: { url: 'data:,' } }, { type: 'text', text: 'ça?' }] },
          { role: 'assistant', content: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'lookup', arguments: '{"q":"é"}' } }] },
          { role: 'tool', tool_call_id: 't', content: 'found' },
        ],
        tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
      },
      { model: 'm', prompt: ['first', 42, 'second ✓'] },
      { model: 'm', prompt: 'Once upon a time' },
      { model: 'm', instructions: 'Be terse.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Ünïcode?' }] }, { type: 'function_call', name: 'f', arguments: '{}' }], tools: [{ type: 'function', name: 'f' }] },
      { model: 'm', input: 'plain question', max_output_tokens: 10 },
      { model: 'e', input: ['one', [1, 2, 3], 'deux é', 7] },
      { model: 'e', input: 'just text' },
      { model: 'x' },
    ];
    for (const body of bodies) {
      const built = promptText(body as never);
      const size = promptSize(body as never);
      expect(size.chars, JSON.stringify(body)).to.equal(built.text.length);
      expect(size.bytes, JSON.stringify(body)).to.equal(Buffer.byteLength(built.text));
      expect(size.messages).to.equal(built.messages);
    }
    expect(promptSize({ model: 'e', input: ['one', [1, 2, 3], 'deux é', 7] } as never).ids).to.equal(4);
    expect(promptSize(undefined)).to.include({ chars: 0, bytes: 0, messages: 0, ids: 0 });
  });

  it('reads a body as it is when it is read: a body changed in place since is read changed', async () => {
    const tokenizer = new BpeTokenizer('cl100k_base');
    const body = { model: 'm', messages: [{ role: 'user' as const, content: 'Why is the sky blue?' }] };
    expect(promptText(body)).to.deep.equal({ text: 'user\nWhy is the sky blue?', messages: 1 });
    // A tap that changes the body in place after the bounds were taken.
    body.messages.push({ role: 'user' as const, content: 'And the sunset red?' });
    expect(promptSize(body)).to.include({ chars: 'user\nWhy is the sky blue?user\nAnd the sunset red?'.length, messages: 2 });
    expect(await countPromptTokens(tokenizer, body)).to.equal(countTokens('user\nWhy is the sky blue?user\nAnd the sunset red?') + 4 * 2 + 3);
  });
});

describe('what metering counts when a back end reports no usage', () => {
  it('reads the prompt of a completion, a Responses call and an embeddings call', async () => {
    const { promptText } = await import('./tokens.js');
    expect(promptText({ model: 'm', prompt: 'Once upon a time' } as never).text).to.equal('Once upon a time');
    expect(promptText({ model: 'm', prompt: ['first', 'second'] } as never).text).to.equal('first\nsecond');
    const responses = promptText({
      model: 'm',
      instructions: 'Be terse.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'What is 2+2?' }] },
        { type: 'function_call', call_id: 'c1', name: 'add', arguments: '{"a":2,"b":2}' },
        { type: 'function_call_output', call_id: 'c1', output: '4' },
      ],
    } as never);
    expect(responses.text).to.contain('Be terse.').and.contain('What is 2+2?').and.contain('{"a":2,"b":2}').and.contain('4');
    expect(responses.messages).to.equal(3);
    // A string input is the user's one message, as the call sends it.
    expect(promptText({ model: 'm', input: 'plain question', max_output_tokens: 10 } as never)).to.deep.equal({ text: 'user\nplain question', messages: 1 });
    expect(promptText({ model: 'e', input: ['one', 'two'] } as never).text).to.equal('one\ntwo\n');
  });

  it("counts a completion's token-id prompt and its suffix, an embeddings input whatever other fields ride along, and a Responses template call's input", async () => {
    const { promptSize } = await import('./tokens.js');
    expect(promptSize({ model: 'm', prompt: [1, 2, 3], suffix: 'tail' } as never, 'completion')).to.include({ ids: 3, chars: 4 });
    // Counted for the charge of a call whose back end reports no usage too: the ids, a token each.
    const { countPromptTokens } = await import('./tokens.js');
    const counter = { count: async (text: string) => text.length };
    expect(await countPromptTokens(counter, { model: 'm', prompt: Array.from({ length: 500 }, (_, i) => i) } as never, 'completion')).to.be.at.least(500);
    expect(promptSize({ model: 'm', prompt: [[1, 2], [3]] } as never, 'completion')).to.include({ ids: 3 });
    expect(promptSize({ model: 'e', input: [7, 8, 9], instructions: null } as never, 'embeddings')).to.include({ ids: 3 });
    expect(promptSize({ model: 'r', input: 'hello there', prompt: { id: 'pmpt_1' } } as never, 'responses').chars).to.be.greaterThan(10);
  });

  it("measures what a client's body holds: its texts and numbers, inline audio or video at the audio bound", async () => {
    const { clientBodyBytes } = await import('./tokens.js');
    expect(clientBodyBytes({ body: { model: 'm', messages: [{ role: 'user', content: 'héllo' }], max_tokens: 10 } })).to.equal(1 + 4 + 6 + 3);
    const clip = Buffer.alloc(31_992).toString('base64');
    expect(clientBodyBytes({ body: { contents: [{ parts: [{ inlineData: { mimeType: 'audio/mp3', data: clip } }] }] } })).to.equal('audio/mp3'.length + 1000);
  });

  it('reads the output of completion chunks and Responses events, and nothing from other events', async () => {
    const { deliveredText } = await import('./tokens.js');
    expect(deliveredText({ choices: [{ index: 0, text: 'hello' }] } as never)).to.equal('hello');
    expect(deliveredText({ type: 'response.output_text.delta', delta: 'wor' } as never)).to.equal('wor');
    expect(deliveredText({ type: 'response.function_call_arguments.delta', delta: '{"a"' } as never)).to.equal('{"a"');
    expect(deliveredText({ type: 'response.output_text.done', text: 'whole text again' } as never)).to.equal('');
    expect(deliveredText({ type: 'response.completed', response: { output: [] } } as never)).to.equal('');
  });

  it('reads the output of a completion and of a Response object', async () => {
    const { replyText } = await import('./tokens.js');
    expect(replyText({ object: 'text_completion', choices: [{ index: 0, text: 'done.' }] })).to.equal('done.');
    const text = replyText({
      object: 'response',
      output: [
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'answer' }] },
        { type: 'function_call', name: 'lookup', arguments: '{"q":1}' },
      ],
    });
    expect(text).to.contain('thinking').and.contain('answer').and.contain('lookup{"q":1}');
  });
});

describe('the prompt of a Responses call whose back end keeps the earlier turns', () => {
  it('counts the kept turns (keptHistory) as part of the prompt', () => {
    const body = { model: 'm', input: 'next question' };
    const alone = promptSize(body as never);
    const kept = { ...body };
    keptHistory(kept, [
      { role: 'user', content: 'a long first question '.repeat(20) },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'a long first answer '.repeat(20) }] },
    ]);
    const withHistory = promptSize(kept as never);
    expect(withHistory.bytes).to.be.greaterThan(alone.bytes + 2 * 20 * 'a long first answer '.length - 1);
  });
});

describe('what a Codex-style Responses call holds, as metering reads it', () => {
  it('reads a custom tool call input, a shell command, a tool output of parts, tools beside a string input, and custom tool input deltas', () => {
    const patch = '*** Begin Patch\n*** Update File: a.ts\n+const added = 1;\n*** End Patch';
    const { text } = promptText({
      model: 'm',
      input: [
        { role: 'user', content: 'fix it' },
        { type: 'custom_tool_call', call_id: 'c1', name: 'apply_patch', input: patch },
        { type: 'custom_tool_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'Done!' }] },
        { type: 'local_shell_call', call_id: 'c2', action: { type: 'exec', command: ['ls', '-la'] } },
      ],
    } as never);
    expect(text).to.include(patch).and.include('Done!').and.include('"command":["ls","-la"]');
    const withTools = promptSize({ model: 'm', input: 'hi', tools: [{ type: 'function', name: 'lookup_the_weather_in_a_city' }] } as never);
    expect(withTools.chars).to.be.greaterThan('hi'.length + 'lookup_the_weather_in_a_city'.length);
    expect(deliveredText({ type: 'response.custom_tool_call_input.delta', delta: '+line' } as never)).to.equal('+line');
  });
});
