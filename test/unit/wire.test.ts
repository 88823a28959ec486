/** The SDK's wire types, the API's zod schemas and the OpenAPI document say the same thing. */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { openApiDocument } from '../../src/api/openapi.ts';
import { enqueueSchema } from '../../src/api/schemas.ts';
import type { taskView } from '../../src/api/views.ts';
import type { EnqueueRequest, TaskView } from '../../src/sdk/protocol/wire.ts';

describe('the wire format', () => {
  it('has the same enqueue fields in the SDK types as in the schema the API validates with', () => {
    expectTypeOf<keyof EnqueueRequest>().toEqualTypeOf<keyof z.input<typeof enqueueSchema>>();
    expectTypeOf<z.input<typeof enqueueSchema>>().toExtend<EnqueueRequest>();
  });

  it('types every field of the task view the API sends', () => {
    expectTypeOf<ReturnType<typeof taskView>>().toExtend<TaskView>();
  });

  it('is described by the OpenAPI document, generated from the same schema', () => {
    const doc = openApiDocument() as { openapi: string; components: { schemas: { EnqueueRequest: { properties: object } } } };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.components.schemas.EnqueueRequest.properties).sort()).toEqual(Object.keys(enqueueSchema.shape).sort());
  });
});
