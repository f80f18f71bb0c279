export * from './common.js';
export * from './bucket.js';
export * from './image-index.js';
export * from './model-server.js';
export * from './crd-definitions.js';
export * from './render-crd.js';
