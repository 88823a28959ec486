/** What the generated-client program needs from its test: where Sluice is, keys, and pushes. */
export interface Push {
  taskId: string;
  leaseId: string;
  token: string;
}

export interface Setup {
  baseUrl: string;
  adminKey: string;
  writeKey: string;
  /** Where tasks are pushed; the endpoint keeps every lease (Sluice-Ack: lease). */
  endpointUrl: string;
  /** The next push that arrives, with its lease. */
  nextPush(): Promise<Push>;
  /** The first push to this path of the endpoint (e.g. `/parent`), with its lease. */
  pushTo(path: string): Promise<Push>;
}
