export * from './config.js';
export * from './logger.js';
export * from './metrics.js';
export * from './service.js';
export * from './s3-errors.js';
export * from './sql.js';
export * from './amqp-connection.js';
export * from './sql-routing.js';
