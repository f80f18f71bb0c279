// `npm run test:unit`: the inner loop. Every listed file needs no server (PostgreSQL, Redis, RabbitMQ,
// Chromium, radosgw, nginx, a spawned platform): test/support/unit-run.ts refuses their ports and
// binaries, so a listed file that reaches for one fails the run, naming itself. In-process servers
// (node:http on port 0, PGlite, the fake Kubernetes API) are fine. `npm test` runs every file.
//
// Two workers: run one file after another, the run waits on timers (leases, backoffs, polls) half its
// wall time; two workers overlap those waits (and use both cores) for ~10 % more CPU, each loading the
// modules of its own files (hack/bench/measurements.md, branch seams). Root hooks then run around each
// file in its worker: test/support/unit-run.ts and pglite-warmup.ts allow for that.
//
// Also left to the full suite, though they need no server: test/e2e (whole platforms), and these
// server-less files, each 11–38 s of CPU alone (one at a time, branch seams; the whole list ~73 s), most
// of it PGlite's first start (each of the two workers would pay it) or work that is their very subject:
//   test/control-plane/batch-statements.test.ts    31 s: PGlite's first start, then 1 200 rows, as the
//                                                  production batch of 500 needs more than two batches
//   test/data-plane/commit-objects-batch.test.ts   38 s: three PGlite databases, random batches compared
//   test/data-plane/group-commit.test.ts           30 s: PGlite, concurrent commits and their flushes
//   test/image-search/config.test.ts               14 s: the service started whole (CLIP encoder, index)
//   test/image-search/crash.test.ts                21 s: workers spawned and SIGKILLed mid-write, FAISS
//   test/image-search/faiss-binding.test.ts        20 s: FAISS IVF-PQ training (five times)
//   test/image-search/llm.test.ts                  11 s: the service and a model server started whole
//   test/images/dockerfiles.test.ts                12 s: every image's module graph, build script runs
//   test/images/libraries.test.ts                  24 s: ldd and dpkg on every native addon
//   test/service-kit/pglite-fsync.test.ts          32 s: PGlite on disk, restarts, checkpoints
//   test/standalone/pglite-vacuum.test.ts          36 s: PGlite's first start on its thread, a vacuum timer
const base = require('./.mocharc.json');

module.exports = {
  ...base,
  require: ['test/support/pglite-warmup.ts', 'test/support/unit-run.ts'],
  parallel: true,
  jobs: 2,
  spec: [
    'test/charts/first-install.test.ts',
    'test/charts/poem-app-pairing.test.ts',
    'test/control-plane/data-plane-answers.test.ts',
    'test/control-plane/internal-api-input.test.ts',
    'test/controllers/backing-operators.test.ts',
    'test/controllers/backing-probes.test.ts',
    'test/controllers/bucket-deletion.test.ts',
    'test/controllers/bucket-immutable.test.ts',
    'test/controllers/crds.test.ts',
    'test/controllers/image-index.test.ts',
    'test/controllers/model-server.test.ts',
    'test/controllers/names-and-pods.test.ts',
    'test/controllers/pod-resources.test.ts',
    'test/controllers/stack-env.test.ts',
    'test/controllers/status-not-memory.test.ts',
    'test/controllers/wire.test.ts',
    'test/data-plane/entrypoint-config.test.ts',
    'test/data-plane/fs-backend.test.ts',
    'test/data-plane/s3-backend-timeouts.test.ts',
    'test/data-plane/upload-state.test.ts',
    'test/gateway-flow-control/breakers.test.ts',
    'test/gateway-flow-control/control-plane-scopes.test.ts',
    'test/gateway-flow-control/fair-shares.test.ts',
    'test/gateway-flow-control/rules-reload.test.ts',
    'test/gateway/bucket-record-calls.test.ts',
    'test/gateway/checksums.test.ts',
    'test/gateway/client-disconnects.test.ts',
    'test/gateway/config.test.ts',
    'test/gateway/control-plane-client-bucket.test.ts',
    'test/gateway/cors-xml.test.ts',
    'test/gateway/data-plane-client-bucket.test.ts',
    'test/gateway/handlers-buckets.test.ts',
    'test/gateway/handlers-multipart.test.ts',
    'test/gateway/handlers-objects.test.ts',
    'test/gateway/internal-answers.test.ts',
    'test/gateway/internal-http.test.ts',
    'test/gateway/lifecycle-xml.test.ts',
    'test/gateway/login-guard.test.ts',
    'test/gateway/min-rate.test.ts',
    'test/gateway/object-answer-cache.test.ts',
    'test/gateway/post-policy.test.ts',
    'test/gateway/proxy.test.ts',
    'test/gateway/request-target.test.ts',
    'test/gateway/router-queries.test.ts',
    'test/gateway/rule-owners.test.ts',
    'test/gateway/s3-answers.test.ts',
    'test/gateway/s3-protocol.test.ts',
    'test/gateway/sigv4.test.ts',
    'test/gateway/sigv4-presigned-verdicts.test.ts',
    'test/gateway/tagging-xml.test.ts',
    'test/gateway/virtual-host.test.ts',
    'test/hack/config-reference.test.ts',
    'test/hack/release-version.test.ts',
    'test/image-search/access.test.ts',
    'test/image-search/api.test.ts',
    'test/image-search/atomic-file.test.ts',
    'test/image-search/bucket-follow.test.ts',
    'test/image-search/clip.test.ts',
    'test/image-search/exact-index.test.ts',
    'test/image-search/image-index.test.ts',
    'test/image-search/read-access.test.ts',
    'test/image-search/search-service.test.ts',
    'test/model-server/chat-completions-errors.test.ts',
    'test/model-server/chat-completions.test.ts',
    'test/model-server/config.test.ts',
    'test/model-server/configured-server.test.ts',
    'test/model-server/generation-scheduler.test.ts',
    'test/model-server/onnx-graph.test.ts',
    'test/model-server/openai-contract.test.ts',
    'test/model-server/strata-verse.test.ts',
    'test/model-server/tokenizer.test.ts',
    'test/model-server/trained-model.test.ts',
    'test/model-server/worker-engine.test.ts',
    'test/object-model/checksum-algorithms.test.ts',
    'test/object-model/internal-api.test.ts',
    'test/object-model/object-rules.test.ts',
    'test/object-model/preconditions.test.ts',
    'test/object-model/stored-headers.test.ts',
    'test/object-model/wire-bodies.test.ts',
    'test/object-model/wire.test.ts',
    'test/operator/config.test.ts',
    'test/operator/informer-cache.test.ts',
    'test/operator/informer-relist.test.ts',
    'test/operator/leader-election-clock.test.ts',
    'test/operator/leader-election.test.ts',
    'test/operator/operator.test.ts',
    'test/operator/work-queue.test.ts',
    'test/poem-app/api.test.ts',
    'test/poem-app/config.test.ts',
    'test/poem-app/history-and-upstream.test.ts',
    'test/poem-app/upstream.test.ts',
    'test/service-kit/answer-delivery.test.ts',
    'test/service-kit/chain.test.ts',
    'test/service-kit/deferred-counts.test.ts',
    'test/service-kit/heap-growth.test.ts',
    'test/service-kit/ids.test.ts',
    'test/service-kit/in-process-http.test.ts',
    'test/service-kit/last-resort.test.ts',
    'test/service-kit/lookup-cache.test.ts',
    'test/service-kit/loopback-guard.test.ts',
    'test/service-kit/service-kit.test.ts',
    'test/service-kit/streams.test.ts',
    'test/standalone/first-run.test.ts',
    'test/support/eventually.test.ts',
    'test/support/fake-kube/api-rules.test.ts',
    'test/support/fake-kube/apply-lists.test.ts',
    'test/support/fake-kube/fake-kube.test.ts',
    'test/support/pglite-warmup.test.ts',
    'test/support/server-guard.test.ts',
    'test/support/unit-list.test.ts',
  ],
};
