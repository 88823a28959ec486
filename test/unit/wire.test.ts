/**
 * The SDK's wire types, the API's zod schemas and the OpenAPI document say the same thing.
 * The SDK's types are written out so that the SDK needs no zod; here each is held equal to the
 * schema the API validates a request with, or builds an answer from (src/api/answers.ts).
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type * as answers from '../../src/api/answers.ts';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import type { redriveSchema } from '../../src/api/schemas/calls.ts';
import { enqueueSchema } from '../../src/api/schemas/enqueue.ts';
import type { queueSettingsPatchSchema } from '../../src/core/queue-settings.ts';
// The SDK's types as its users import them (src/protocol/wire.ts and wire-queues.ts).
import type * as wire from '../../src/sdk/index.ts';

type Answer<T extends z.ZodType> = z.output<T>;

describe('the wire format', () => {
  it('has the same enqueue fields in the SDK types as in the schema the API validates with', () => {
    expectTypeOf<keyof wire.EnqueueRequest>().toEqualTypeOf<keyof z.input<typeof enqueueSchema>>();
    expectTypeOf<z.input<typeof enqueueSchema>>().toExtend<wire.EnqueueRequest>();
    expectTypeOf<wire.QueueSettingsPatch>().toEqualTypeOf<z.input<typeof queueSettingsPatchSchema>>();
    expectTypeOf<wire.RedriveRequest>().toEqualTypeOf<z.input<typeof redriveSchema>>();
  });

  it('types every answer the SDK reads exactly as the API builds it', () => {
    expectTypeOf<wire.TaskView>().toEqualTypeOf<Answer<typeof answers.task>>();
    expectTypeOf<wire.TaskDetail>().toEqualTypeOf<Answer<typeof answers.taskDetail>>();
    expectTypeOf<wire.AttemptView>().toEqualTypeOf<Answer<typeof answers.attempt>>();
    expectTypeOf<wire.EnqueuedTask | wire.EnqueuedRef>().toExtend<Answer<typeof answers.enqueued>>();
    expectTypeOf<Answer<typeof answers.enqueued>>().toExtend<wire.EnqueuedTask | wire.EnqueuedRef>();
    expectTypeOf<wire.TaskList>().toEqualTypeOf<Answer<typeof answers.taskList>>();
    expectTypeOf<wire.QueueView>().toEqualTypeOf<Answer<typeof answers.queue>>();
    expectTypeOf<wire.ConcurrencyView>().toEqualTypeOf<Answer<typeof answers.queueConcurrency>>();
    expectTypeOf<wire.ScheduleView>().toEqualTypeOf<Answer<typeof answers.schedule>>();
    expectTypeOf<wire.PulledTask>().toEqualTypeOf<Answer<typeof answers.pulledTask>>();
    expectTypeOf<wire.GroupView>().toEqualTypeOf<Answer<typeof answers.group>>();
    expectTypeOf<wire.GroupList>().toEqualTypeOf<Answer<typeof answers.groupList>>();
    expectTypeOf<wire.EndpointView>().toEqualTypeOf<Answer<typeof answers.endpoint>>();
    expectTypeOf<wire.RedriveResult>().toEqualTypeOf<Answer<typeof answers.redriven>>();
  });

  it('is described by the OpenAPI document, generated from the same schema', () => {
    const doc = openApiDocument() as { openapi: string; components: { schemas: { EnqueueRequest: { properties: object } } } };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.components.schemas.EnqueueRequest.properties).sort()).toEqual(Object.keys(enqueueSchema.shape).sort());
  });
});
