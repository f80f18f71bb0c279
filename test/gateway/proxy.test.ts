import type http from 'node:http';
import { expect } from 'chai';
import { trustedProxies } from '../../images/service-kit/src/trusted-proxies.js';

/** A request as Node hands it over: the peer's address on its socket, the forwarding headers as sent. */
function request(peer: string, headers: http.IncomingHttpHeaders = {}, encrypted = false): http.IncomingMessage {
  return { socket: { remoteAddress: peer, encrypted }, headers } as unknown as http.IncomingMessage;
}

describe('gateway: trusted proxies (client address and scheme)', () => {
  it('by default believes no X-Forwarded-For or -Proto, not even from loopback or private peers', () => {
    const proxies = trustedProxies();
    const forwarded = { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' };
    expect(proxies.clientAddress(request('10.1.2.3', forwarded))).to.equal('10.1.2.3');
    expect(proxies.clientAddress(request('127.0.0.1', forwarded))).to.equal('127.0.0.1');
    expect(proxies.protocol(request('127.0.0.1', forwarded))).to.equal('http');
    expect(trustedProxies('').clientAddress(request('::1', forwarded))).to.equal('::1');
  });

  it('believes X-Forwarded-For and -Proto from the configured peers only', () => {
    const proxies = trustedProxies('loopback, linklocal, uniquelocal');
    const forwarded = { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' };
    expect(proxies.clientAddress(request('10.1.2.3', forwarded))).to.equal('203.0.113.7');
    expect(proxies.protocol(request('127.0.0.1', forwarded))).to.equal('https');
    expect(proxies.clientAddress(request('198.51.100.9', forwarded))).to.equal('198.51.100.9');
    expect(proxies.protocol(request('198.51.100.9', forwarded))).to.equal('http');
    expect(proxies.protocol(request('198.51.100.9', forwarded, true))).to.equal('https');
  });

  it('walks X-Forwarded-For back only through trusted hops, and reads the first X-Forwarded-Proto value', () => {
    const proxies = trustedProxies('loopback, 10.0.0.0/8');
    // The client claims an address; the untrusted hop before the first trusted proxy is what counts.
    const req = request('127.0.0.1', { 'x-forwarded-for': '1.1.1.1, 198.51.100.9, 10.0.0.5', 'x-forwarded-proto': 'https, http' });
    expect(proxies.clientAddress(req)).to.equal('198.51.100.9');
    expect(proxies.protocol(req)).to.equal('https');
  });

  it('takes false (no one), true (everyone) and a hop count', () => {
    const forwarded = { 'x-forwarded-for': '1.1.1.1, 2.2.2.2' };
    expect(trustedProxies('false').clientAddress(request('127.0.0.1', forwarded))).to.equal('127.0.0.1');
    expect(trustedProxies('true').clientAddress(request('198.51.100.9', forwarded))).to.equal('1.1.1.1');
    expect(trustedProxies('1').clientAddress(request('198.51.100.9', forwarded))).to.equal('2.2.2.2');
  });
});
