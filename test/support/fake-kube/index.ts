export { FakeKubeServer, type RequestAttributes } from './server.js';
export { ClusterState, ApiError, type KubeObject, type WatchEvent } from './cluster-state.js';
export type { ResourceType } from './resource-types.js';
