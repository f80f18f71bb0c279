import { expect } from 'chai';
import type http from 'node:http';
import { checkRequestTarget } from '../../images/gateway/src/middleware/request-target.js';
import { S3Error } from '../../images/object-model/src/index.js';

/** The edge's check of a request target (request-target.ts): a target found good is remembered, a bad one is refused every time. */
describe('gateway: request target check', () => {
  const outcome = (url: string): string => {
    let seen = 'not answered';
    checkRequestTarget({ url } as http.IncomingMessage, {} as http.ServerResponse, (err?: unknown) => {
      seen = err === undefined ? 'next' : err instanceof S3Error ? err.code : String(err);
    });
    return seen;
  };

  it('passes a target with good escapes, again and again', () => {
    const url = '/b/a%20b?X-Amz-Credential=AK%2F20261205%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00';
    expect(outcome(url)).to.equal('next');
    expect(outcome(url)).to.equal('next');
  });

  it('refuses a bad target every time, whatever was checked before', () => {
    for (let i = 0; i < 2; i++) {
      expect(outcome('/b/%ff')).to.equal('InvalidURI');
      expect(outcome('/b/k?prefix=%ff')).to.equal('InvalidArgument');
      expect(outcome('/b/k?prefix=a%00b')).to.equal('InvalidArgument');
      expect(outcome('/b/k?prefix=a%20b')).to.equal('next');
    }
  });
});
