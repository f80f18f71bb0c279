import { BucketReconciler } from './bucket/bucket-reconciler.js';
import type { BucketServiceFactory } from './bucket/bucket-service.js';
import type { DatabaseProvisioner } from './bucket/database-provisioner.js';
import type { BrokerProvisioner } from './bucket/broker-provisioner.js';
import { ImageIndexReconciler } from './image-index/image-index-reconciler.js';
import type { IndexWorkerClient } from './image-index/index-worker-client.js';
import type { ReaderKeyServiceFactory } from './image-index/source-reader.js';
import { ModelServerReconciler } from './model-server/model-server-reconciler.js';
import type { EventRecorder, KubeClient } from './support/kube-client.js';
import type { Reconciler } from './support/reconciler.js';
import type { OperatorSettings } from './support/settings.js';

export interface ReconcilerDeps {
  kube: KubeClient;
  events: EventRecorder;
  settings: OperatorSettings;
  /** Override how the Bucket controller reaches a namespace's object store (tests). */
  bucketService?: BucketServiceFactory;
  /** Override how the Bucket controller creates each namespace's database on an external server. */
  databases?: DatabaseProvisioner;
  /** Override how the Bucket controller creates each namespace's user and vhost on an external RabbitMQ. */
  brokers?: BrokerProvisioner;
  /** Override how the ImageIndex controller reads index workers (tests). */
  indexWorker?: IndexWorkerClient;
  /** Override how the ImageIndex controller makes its workers' read-only keys (tests). */
  readerKeys?: ReaderKeyServiceFactory;
}

/** Every Strata controller, wired to its dependencies. */
export function createReconcilers(deps: ReconcilerDeps): Reconciler[] {
  return [
    new BucketReconciler(deps.kube, deps.events, deps.settings, deps.bucketService, deps.databases, deps.brokers),
    new ImageIndexReconciler(deps.kube, deps.events, deps.settings, deps.indexWorker, deps.readerKeys),
    new ModelServerReconciler(deps.kube, deps.events, deps.settings),
  ];
}

export type { Reconciler } from './support/reconciler.js';
export { DEFAULT_SETTINGS, parseLabels, type OperatorSettings } from './support/settings.js';
export { stackSettingsProblems } from './bucket/render-storage-stack.js';
