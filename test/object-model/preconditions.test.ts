import { expect } from 'chai';
import {
  checkCopySourceConditions,
  checkDeleteConditions,
  checkWriteConditions,
  evaluatePreconditions,
  notModified,
  S3Error,
} from '../../images/object-model/src/index.js';

describe('object model: conditional requests (evaluatePreconditions)', () => {
  const object = { etag: 'abc', lastModified: '2026-03-04T05:06:07.890Z' };
  const before = 'Wed, 04 Mar 2026 05:06:06 GMT';
  const same = 'Wed, 04 Mar 2026 05:06:07 GMT';
  const after = 'Wed, 04 Mar 2026 05:06:08 GMT';
  const outcome = (c: Parameters<typeof evaluatePreconditions>[1]) => evaluatePreconditions(object, c);

  it('serves when there are no conditions or every condition holds', () => {
    expect(outcome(undefined)).to.deep.equal({ status: 200 });
    expect(outcome({ ifMatch: '"abc"', ifUnmodifiedSince: same, ifNoneMatch: '"other"', ifModifiedSince: before })).to.deep.equal({ status: 200 });
  });

  it('If-Match (a list, quoted or weak, or *) failing is 412; when it holds, a failing If-Unmodified-Since is ignored', () => {
    expect(outcome({ ifMatch: '"x", W/"y"' })).to.deep.equal({ status: 412, condition: 'If-Match' });
    expect(outcome({ ifMatch: '"x", W/"abc"' })).to.deep.equal({ status: 200 });
    expect(outcome({ ifMatch: '*', ifUnmodifiedSince: before })).to.deep.equal({ status: 200 });
    expect(outcome({ ifUnmodifiedSince: before })).to.deep.equal({ status: 412, condition: 'If-Unmodified-Since' });
    expect(outcome({ ifUnmodifiedSince: same })).to.deep.equal({ status: 200 });
  });

  it('If-None-Match matching is 304; when it is present, If-Modified-Since is ignored; times compare to the second', () => {
    expect(outcome({ ifNoneMatch: 'abc' })).to.deep.equal({ status: 304, condition: 'If-None-Match' });
    expect(outcome({ ifNoneMatch: '"other"', ifModifiedSince: after })).to.deep.equal({ status: 200 });
    expect(outcome({ ifModifiedSince: same })).to.deep.equal({ status: 304, condition: 'If-Modified-Since' });
    expect(outcome({ ifModifiedSince: before })).to.deep.equal({ status: 200 });
  });

  it('412 wins over 304; a date that does not parse is ignored', () => {
    expect(outcome({ ifMatch: '"x"', ifNoneMatch: '"abc"' })).to.deep.equal({ status: 412, condition: 'If-Match' });
    expect(outcome({ ifUnmodifiedSince: 'yesterday', ifModifiedSince: 'tomorrow' })).to.deep.equal({ status: 200 });
  });

  it('a read throws PreconditionFailed naming the condition; a copy source fails every condition that does not hold', () => {
    const condition = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err instanceof S3Error ? `${err.code} ${err.extra?.Condition}` : String(err);
      }
      return 'held';
    };
    expect(condition(() => notModified(object, { ifMatch: '"x"' }))).to.equal('PreconditionFailed If-Match');
    expect(notModified(object, { ifNoneMatch: '*' })).to.equal(true);
    expect(condition(() => checkCopySourceConditions({ ifNoneMatch: '"abc"' }, object))).to.equal('PreconditionFailed x-amz-copy-source-If-None-Match');
    expect(condition(() => checkCopySourceConditions({ ifModifiedSince: after }, object))).to.equal('PreconditionFailed x-amz-copy-source-If-Modified-Since');
    expect(condition(() => checkCopySourceConditions({ ifMatch: 'abc', ifModifiedSince: before }, object))).to.equal('held');
  });

  it('a write and a delete are checked by the same module: NoSuchKey without an object, PreconditionFailed naming the condition', () => {
    const failure = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err instanceof S3Error ? `${err.code}${err.extra?.Condition ? ` ${err.extra.Condition}` : ''}` : String(err);
      }
      return 'held';
    };
    expect(failure(() => checkWriteConditions({ ifMatch: '"abc"' }, undefined, 'k'))).to.equal('NoSuchKey');
    expect(failure(() => checkWriteConditions({ ifMatch: '"x"' }, 'abc', 'k'))).to.equal('PreconditionFailed If-Match');
    expect(failure(() => checkWriteConditions({ ifNoneMatch: '*' }, 'abc', 'k'))).to.equal('PreconditionFailed If-None-Match');
    expect(failure(() => checkWriteConditions({ ifNoneMatch: '*' }, undefined, 'k'))).to.equal('held');
    const current = { etag: 'abc', size: 3, lastModified: new Date('2026-01-02T03:04:05.678Z') };
    expect(failure(() => checkDeleteConditions({ ifMatch: '*' }, undefined, 'k'))).to.equal('NoSuchKey');
    expect(failure(() => checkDeleteConditions({ ifMatch: '"x"' }, current, 'k'))).to.equal('PreconditionFailed If-Match');
    expect(failure(() => checkDeleteConditions({ size: 4 }, current, 'k'))).to.equal('PreconditionFailed x-amz-if-match-size');
    expect(failure(() => checkDeleteConditions({ lastModifiedTime: '2026-01-02T03:04:06Z' }, current, 'k'))).to.equal(
      'PreconditionFailed x-amz-if-match-last-modified-time',
    );
    // Compared to the second, as S3 does.
    expect(failure(() => checkDeleteConditions({ ifMatch: '"abc"', size: 3, lastModifiedTime: new Date('2026-01-02T03:04:05Z') }, current, 'k'))).to.equal(
      'held',
    );
  });
});
