// A stdio MCP server for toolgate's conformance test: it offers what the server scenarios
// of the MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
// tests/package.json) ask of a server under test — tools, resources, resource templates
// and subscriptions, prompts, completions, logging, progress, sampling and elicitation.
// Written for toolgate on the pinned `@modelcontextprotocol/sdk` (its low-level `Server`,
// every handler our own).
//
//   node conformance/target-server.mjs
//
// With CONFORMANCE_RECORD=<file> set, every JSON-RPC message it receives and sends is
// appended to <file>, one JSON line each: {"dir":"in"|"out","msg":...} ("in": toward the
// server). stdout carries protocol frames only; diagnostics go to stderr.
import { appendFileSync } from 'node:fs';
import { deflateSync, crc32 } from 'node:zlib';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  LoggingLevelSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const recordTo = process.env.CONFORMANCE_RECORD;
const record = (dir, msg) => {
  if (recordTo) appendFileSync(recordTo, JSON.stringify({ dir, msg }) + '\n');
};

/** The SDK's stdio transport, noting every message that passes it. */
class RecordingStdio extends StdioServerTransport {
  set onmessage(handler) {
    this._handler = handler;
  }
  get onmessage() {
    const handler = this._handler;
    return (
      handler &&
      ((msg, extra) => {
        record('in', msg);
        handler(msg, extra);
      })
    );
  }
  send(msg, options) {
    record('out', msg);
    return super.send(msg, options);
  }
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// --- media, made here -------------------------------------------------------------------

/** A PNG of `size`×`size` pixels of one RGB colour. */
function png(size, [r, g, b]) {
  const chunk = (type, data) => {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(data.length, 0);
    head.write(type, 4, 'latin1');
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
    return Buffer.concat([head, data, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.writeUInt8(8, 8); // bit depth
  header.writeUInt8(2, 9); // colour type: truecolour
  const row = Buffer.alloc(1 + size * 3); // filter byte 0, then RGB triples
  for (let x = 0; x < size; x++) row.set([r, g, b], 1 + x * 3);
  const pixels = Buffer.concat(Array.from({ length: size }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]).toString('base64');
}

/** A mono 8 kHz 16-bit PCM WAV of `samples` samples of a square wave. */
function wav(samples) {
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(i % 16 < 8 ? 2000 : -2000, i * 2);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8, 'latin1');
  head.writeUInt32LE(16, 16); // fmt chunk size
  head.writeUInt16LE(1, 20); // PCM
  head.writeUInt16LE(1, 22); // channels
  head.writeUInt32LE(8000, 24); // sample rate
  head.writeUInt32LE(16000, 28); // byte rate
  head.writeUInt16LE(2, 32); // block align
  head.writeUInt16LE(16, 34); // bits per sample
  head.write('data', 36, 'latin1');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]).toString('base64');
}

const IMAGE = png(2, [200, 30, 30]);
const AUDIO = wav(400);
const text = (t) => ({ type: 'text', text: t });
const image = () => ({ type: 'image', data: IMAGE, mimeType: 'image/png' });
const noArguments = { type: 'object', properties: {} };

// --- the server -------------------------------------------------------------------------

const server = new Server(
  { name: 'toolgate-conformance-target', version: '1.0.0' },
  {
    capabilities: {
      tools: {},
      resources: { subscribe: true },
      prompts: {},
      completions: {},
      logging: {},
    },
  },
);
server.onerror = (e) => console.error(`target-server: ${e?.stack ?? e}`);

// Logging: notifications below the level the client set are not sent.
const LEVELS = LoggingLevelSchema.options;
let minLevel = 'info';
server.setRequestHandler(SetLevelRequestSchema, async (req) => {
  minLevel = req.params.level;
  return {};
});
const log = (extra, level, data) =>
  LEVELS.indexOf(level) >= LEVELS.indexOf(minLevel)
    ? extra.sendNotification({
        method: 'notifications/message',
        params: { level, logger: 'conformance-target', data },
      })
    : Promise.resolve();

// Elicitation as the client is asked: the reply described back as text.
async function elicit(extra, message, requestedSchema) {
  const answer = await extra.sendRequest(
    { method: 'elicitation/create', params: { message, requestedSchema } },
    ElicitResultSchema,
  );
  return {
    content: [
      text(
        `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
      ),
    ],
  };
}

/** name → { description, inputSchema, run(args, extra, request) } */
const TOOLS = {
  test_simple_text: {
    description: 'Answers with one text block',
    inputSchema: noArguments,
    run: async () => ({ content: [text('This is a simple text response for testing.')] }),
  },
  test_image_content: {
    description: 'Answers with a small PNG image',
    inputSchema: noArguments,
    run: async () => ({ content: [image()] }),
  },
  test_audio_content: {
    description: 'Answers with a short WAV sound',
    inputSchema: noArguments,
    run: async () => ({ content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }] }),
  },
  test_embedded_resource: {
    description: 'Answers with an embedded text resource',
    inputSchema: noArguments,
    run: async () => ({
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    }),
  },
  test_multiple_content_types: {
    description: 'Answers with text, an image and an embedded resource',
    inputSchema: noArguments,
    run: async () => ({
      content: [
        text('Multiple content types test:'),
        image(),
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  },
  test_tool_with_logging: {
    description: 'Logs three info messages while it runs',
    inputSchema: noArguments,
    run: async (_args, extra) => {
      await log(extra, 'info', 'Tool execution started');
      await pause(50);
      await log(extra, 'info', 'Tool processing data');
      await pause(50);
      await log(extra, 'info', 'Tool execution completed');
      return { content: [text('Logged three messages.')] };
    },
  },
  test_tool_with_progress: {
    description: 'Reports progress 0, 50 and 100 of 100 while it runs',
    inputSchema: noArguments,
    run: async (_args, extra, request) => {
      const progressToken = request.params._meta?.progressToken;
      for (const progress of [0, 50, 100]) {
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken, progress, total: 100 },
          });
        }
        if (progress < 100) await pause(50);
      }
      return { content: [text('Done: 100 of 100.')] };
    },
  },
  test_error_handling: {
    description: 'Always fails (a tool error, not a protocol error)',
    inputSchema: noArguments,
    run: async () => ({
      isError: true,
      content: [text('This tool intentionally returns an error for testing')],
    }),
  },
  test_sampling: {
    description: 'Asks the client to sample a completion of the prompt',
    inputSchema: {
      type: 'object',
      properties: { prompt: { type: 'string', description: 'What the model is asked' } },
      required: ['prompt'],
    },
    run: async (args, extra) => {
      const answer = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: {
            messages: [{ role: 'user', content: text(String(args.prompt ?? '')) }],
            maxTokens: 100,
          },
        },
        CreateMessageResultSchema,
      );
      const said = answer.content?.type === 'text' ? answer.content.text : JSON.stringify(answer.content);
      return { content: [text(`LLM response: ${said}`)] };
    },
  },
  test_elicitation: {
    description: 'Asks the user for a user name and an email address',
    inputSchema: {
      type: 'object',
      properties: { message: { type: 'string', description: 'What the user is shown' } },
      required: ['message'],
    },
    run: (args, extra) =>
      elicit(extra, String(args.message ?? ''), {
        type: 'object',
        properties: {
          username: { type: 'string', description: "User's response" },
          email: { type: 'string', description: "User's email address" },
        },
        required: ['username', 'email'],
      }),
  },
  test_elicitation_sep1034_defaults: {
    description: 'Asks the user a form whose every field has a default (SEP-1034)',
    inputSchema: noArguments,
    run: (_args, extra) =>
      elicit(extra, 'Check these details', {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'Name', default: 'John Doe' },
          age: { type: 'integer', description: 'Age', default: 30 },
          score: { type: 'number', description: 'Score', default: 95.5 },
          status: {
            type: 'string',
            description: 'Status',
            enum: ['active', 'inactive', 'pending'],
            default: 'active',
          },
          verified: { type: 'boolean', description: 'Verified', default: true },
        },
      }),
  },
  test_elicitation_sep1330_enums: {
    description: 'Asks the user a form with each kind of enum field (SEP-1330)',
    inputSchema: noArguments,
    run: (_args, extra) =>
      elicit(extra, 'Pick some options', {
        type: 'object',
        properties: {
          untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          titledSingle: {
            type: 'string',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
      }),
  },
  json_schema_2020_12_tool: {
    description: 'Takes arguments described with JSON Schema 2020-12 keywords',
    inputSchema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: {
        address: {
          type: 'object',
          properties: { street: { type: 'string' }, city: { type: 'string' } },
        },
      },
      properties: {
        name: { type: 'string' },
        address: { $ref: '#/$defs/address' },
      },
      additionalProperties: false,
    },
    run: async (args) => ({ content: [text(`Received: ${JSON.stringify(args)}`)] }),
  },
  test_reconnection: {
    // Over HTTP the suite expects the server to close the call's stream and resume it;
    // over stdio there is no stream to close, so it simply answers after a while.
    description: 'Answers after a short delay',
    inputSchema: noArguments,
    run: async () => {
      await pause(100);
      return { content: [text('Reconnection test finished.')] };
    },
  },
};

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: Object.entries(TOOLS).map(([name, { description, inputSchema }]) => ({
    name,
    description,
    inputSchema,
  })),
}));

server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const tool = Object.hasOwn(TOOLS, request.params.name) ? TOOLS[request.params.name] : undefined;
  if (!tool) {
    throw new McpError(ErrorCode.InvalidParams, `unknown tool \`${request.params.name}\``);
  }
  return tool.run(request.params.arguments ?? {}, extra, request);
});

// --- resources --------------------------------------------------------------------------

const RESOURCES = {
  'test://static-text': {
    name: 'static-text',
    description: 'A fixed text',
    mimeType: 'text/plain',
    read: () => ({ text: 'This is the content of the static text resource.' }),
  },
  'test://static-binary': {
    name: 'static-binary',
    description: 'A fixed PNG image',
    mimeType: 'image/png',
    read: () => ({ blob: IMAGE }),
  },
  'test://watched-resource': {
    name: 'watched-resource',
    description: 'A text one may subscribe to',
    mimeType: 'text/plain',
    read: () => ({ text: 'Watched resource content.' }),
  },
};
const TEMPLATE = /^test:\/\/template\/([^/]+)\/data$/;
const subscriptions = new Set();

server.setRequestHandler(ListResourcesRequestSchema, async () => ({
  resources: Object.entries(RESOURCES).map(([uri, { name, description, mimeType }]) => ({
    uri,
    name,
    description,
    mimeType,
  })),
}));

server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
  resourceTemplates: [
    {
      uriTemplate: 'test://template/{id}/data',
      name: 'template-data',
      description: 'Data for one id',
      mimeType: 'application/json',
    },
  ],
}));

server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
  const { uri } = request.params;
  const fixed = Object.hasOwn(RESOURCES, uri) ? RESOURCES[uri] : undefined;
  if (fixed) return { contents: [{ uri, mimeType: fixed.mimeType, ...fixed.read() }] };
  const templated = TEMPLATE.exec(uri);
  if (templated) {
    const id = decodeURIComponent(templated[1]);
    return {
      contents: [
        { uri, mimeType: 'application/json', text: JSON.stringify({ id, data: `Data for id ${id}` }) },
      ],
    };
  }
  throw new McpError(ErrorCode.InvalidParams, `unknown resource \`${uri}\``);
});

server.setRequestHandler(SubscribeRequestSchema, async (request) => {
  subscriptions.add(request.params.uri);
  return {};
});
server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
  subscriptions.delete(request.params.uri);
  return {};
});

// --- prompts and completions ------------------------------------------------------------

const PROMPTS = {
  test_simple_prompt: {
    description: 'A prompt without arguments',
    arguments: [],
    get: () => [{ role: 'user', content: text('This is a simple prompt for testing.') }],
  },
  test_prompt_with_arguments: {
    description: 'A prompt made of its two arguments',
    arguments: [
      { name: 'arg1', description: 'The first part', required: true },
      { name: 'arg2', description: 'The second part', required: true },
    ],
    get: (args) => [
      { role: 'user', content: text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`) },
    ],
  },
  test_prompt_with_embedded_resource: {
    description: 'A prompt that embeds the resource it is given',
    arguments: [{ name: 'resourceUri', description: 'The resource to embed', required: true }],
    get: (args) => [
      {
        role: 'user',
        content: {
          type: 'resource',
          resource: {
            uri: String(args.resourceUri),
            mimeType: 'text/plain',
            text: 'Embedded resource content for testing.',
          },
        },
      },
      { role: 'user', content: text('Please process the embedded resource above.') },
    ],
  },
  test_prompt_with_image: {
    description: 'A prompt with an image',
    arguments: [],
    get: () => [
      { role: 'user', content: image() },
      { role: 'user', content: text('Please describe this image.') },
    ],
  },
};

server.setRequestHandler(ListPromptsRequestSchema, async () => ({
  prompts: Object.entries(PROMPTS).map(([name, { description, arguments: args }]) => ({
    name,
    description,
    arguments: args,
  })),
}));

server.setRequestHandler(GetPromptRequestSchema, async (request) => {
  const { name } = request.params;
  const prompt = Object.hasOwn(PROMPTS, name) ? PROMPTS[name] : undefined;
  if (!prompt) throw new McpError(ErrorCode.InvalidParams, `unknown prompt \`${name}\``);
  const args = request.params.arguments ?? {};
  for (const a of prompt.arguments) {
    if (a.required && args[a.name] === undefined) {
      throw new McpError(ErrorCode.InvalidParams, `missing argument \`${a.name}\``);
    }
  }
  return { description: prompt.description, messages: prompt.get(args) };
});

// Completions: a few words for prompt arguments, ids for the template; the ones that
// start with what was typed so far.
const WORDS = ['paris', 'park', 'party', 'test', 'testing', 'tested'];
server.setRequestHandler(CompleteRequestSchema, async (request) => {
  const { ref, argument } = request.params;
  const pool = ref.type === 'ref/resource' ? ['1', '2', '3', '123'] : WORDS;
  const values = pool.filter((w) => w.startsWith(argument.value ?? ''));
  return { completion: { values, total: values.length, hasMore: false } };
});

await server.connect(new RecordingStdio());
