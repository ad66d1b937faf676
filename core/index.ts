/**
 * Switchyard's public API: what a plugin author imports.
 *
 *   import { defineProvider, GatewayError } from 'switchyard';
 */
export { definePlugin, defineProvider, defineWireFormat, defineBridge, abortOf } from './plugin.js';
export type {
  GatewayPlugin,
  PluginApi,
  ProviderType,
  ProviderInstance,
  ProviderEnv,
  ProviderCallContext,
  ProviderPluginDefinition,
  OperationHandler,
  OperationHandlers,
  OperationBridge,
  WireFormat,
  WireFormatPluginDefinition,
  RouteDefinition,
  CallRoute,
  HandlerRoute,
  RouteInput,
  RouteHelpers,
  ParsedCall,
  FormatReply,
  ModelCatalogView,
  ProviderRegistryView,
  FormatRegistryView,
  CandidateTarget,
  CatalogModel,
  JsonSchema,
  HttpMethod,
} from './plugin.js';
export { GatewayError, ERRORS, isGatewayError, defaultErrorBody } from './errors.js';
export { JsonObjectPrefix } from './json-prefix.js';
export { base64DataUrl, mediaType, type Base64Data } from './data-url.js';
export type { ErrorCode, ErrorSpec, ErrorType, ErrorView, VendorError } from './errors.js';
export type { GatewayHooks, PluginHooks, HookName } from './hooks.js';
export type { RequestContext, Call, CallerKey, Target, Attempt, UpstreamWaits } from './context.js';
export { waitingOnUpstream, countsPrompt, promptCounted } from './context.js';
export * from './operations.js';
export { ToolNames, fitsChatName, CHAT_TOOL_NAMES, MESSAGES_TOOL_NAMES, GEMINI_TOOL_NAMES, type ToolNameRule } from './tool-names.js';
export { toolMediaAfter } from './tool-media.js';
export { printable, UNSAFE_RANGES } from './printable.js';
export { parseInstant } from './instant.js';
export { ToolCallPieces } from './tool-call-pieces.js';
export { functionsAsTools, usesLegacyFunctions, toolCallsAsFunctionCall, toolDeltasAsFunctionCall, UNANSWERED_FUNCTION_RESULT, type LossNotes, type Reshaped } from './chat-functions.js';
export * from './video.js';
export { EVENT_STREAM, readSse, SseParser, sseData, sseEvent, SseLineTooLong, type SseEvent } from './http/sse.js';
export { acceptFor, postJson, readJson, readRelayable, translateEvents, type EventTranslator, type JsonCall } from './http/json.js';
export { fetchImage, openGuardedUrl, classifyAddress, IMAGE_FETCH_DEFAULTS, type GuardedFetchOptions, type GuardedResponse, type FetchedImage, type AddressClass } from './http/guarded-fetch.js';
export { codingsOf } from './http/body.js';
export { sendUpstream, readCapped, UpstreamBody, UpstreamBodyTooLarge, MAX_ANSWER_BYTES, type UpstreamHttpRequest, type UpstreamHttpResponse } from './http/client.js';
export { upstreamError, errorOf as upstreamErrorOf, transportError, scrub, redactSecrets, upstreamHeaders, mergeHeaders, retryAfterHeader, contextTooLong, outOfCredit } from './http/upstream.js';
export { secretsOfConfig } from './loader.js';
export { likeStream, watchAbort, withinAttempt, slowedByClient, DEFAULT_TIMEOUTS, type AbortWatch, type Abortable, type Timeouts } from './attempt.js';
export { mapStream, pollOf, withTail, primeStream, chatChunkAnswers, PRIME_WINDOW_MS, type MapStreamOptions, type PollableIterator } from './stream.js';
export {
  isUploadedFile,
  multipartBody,
  postMultipart,
  coerceFields,
  extensionOf,
  UPLOAD_PREFIX,
  type UploadedFile,
  type MultipartBody,
  type FormPart,
  type EncodedForm,
  type MultipartCall,
} from './http/multipart.js';
export type { GatewayConfig, ProviderConfig } from '../config/types.js';
export { createGateway, type Gateway, type GatewayOptions } from './gateway.js';
export { loadConfig, type LoadedConfig } from '../config/load.js';
export { globMatch, modelAllowed } from './glob.js';
export { usageOf, keptHistory, keptHistoryOf, keptHistoryLater, readKeptHistory, reportsPrompt, promptReportedBy, reportsPromptSent, promptSentBy, reportsSettled, settledBy, sumUsage, reportedUsage, usageAsResponses, type ResponseUsage, failureBilled, billedBy, roundCost } from './usage.js';
export { keepUpstreamBytes, upstreamBytesOf, replyBytesOf, answerUsage, dropUpstreamBytes, markSentAsIs, wasSentAsIs, keepBridgedExchange, bridgedExchangeOf, lossHeaders, printableLosses, LOSSES_HEADER, withMembers, type UpstreamBytes, type BridgedExchange } from './passthrough.js';
export { hiddenSlot, type HiddenSlot } from './hidden.js';
