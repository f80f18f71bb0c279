/**
 * Gateway flow control: rate limits, concurrency limits and circuit breakers from a rules file
 * that is re-read on change (see rules.ts and rules.example.yaml for the format).
 *
 * Wiring in the gateway (startGateway):
 * ```ts
 * const flow = await flowControl({
 *   rulesFile: cfg.STRATA_FLOW_RULES_FILE,          // e.g. /etc/strata/flow/rules.yaml (the ConfigMap mount)
 *   logger, registry,
 *   routeOf: (_req, res) => state(res).operation,    // S3 operation names: low cardinality
 *   userOf: (_req, res) => state(res).caller?.username,
 *   redis,                                           // optional ioredis Redis/Cluster: limits shared by replicas
 *   render: (err, _req, _res, next) => next(err),    // the gateway's errorRenderer writes the XML
 * });
 * app.use(nameOperation, auth, flow.middleware, s3Endpoint(deps));   // after auth: it needs the user
 * // breakers around upstream calls, e.g. in InternalHttp: flow.run('data-plane', () => ...)
 * // on shutdown: flow.close()
 * ```
 * Pass the mounted file's own path (not one resolved through `..data`): the directory is watched.
 */
export { flowControl, type FlowControl, type FlowControlOptions } from './flow-control.js';
export { Breakers, type BreakerState } from './breakers.js';
export { parseFlowRules, InvalidRulesError, type FlowRules } from './rules.js';
export { renderS3ErrorXml, type RenderRejection } from './render.js';
