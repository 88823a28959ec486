/** Sluice's SDK: the API client, the push receiver, and the task handler. Web-standard only. */

export { HEADERS } from '../protocol/headers.ts';
export { type PushClaims, type SignatureCheck, SignatureError, verifyPush } from '../protocol/signature.ts';
export type * from '../protocol/wire.ts';
export type * from '../protocol/wire-queues.ts';
export {
  type FastifyScopeLike,
  type LambdaEvent,
  type LambdaResult,
  type NodeRequestLike,
  type NodeResponseLike,
  sluiceExpress,
  sluiceFastify,
  sluiceLambda,
} from './adapters.ts';
export { type ClientOptions, type ListFilter, SluiceClient } from './client.ts';
export { type FieldIssue, NonRetriableError, RetryAfterError, SluiceApiError } from './errors.ts';
export {
  createHandler,
  type ExecutionContextLike,
  type HandlerOptions,
  type TaskContext,
  type TaskFunction,
  type Waiting,
} from './handler.ts';
export { createReceiver, type Push, type Receiver, type ReceiverOptions } from './receiver.ts';
