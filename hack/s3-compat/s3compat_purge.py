"""pytest plugin for hack/s3-compat/run-radosgw.sh: removes every version the suite's own cleanup leaves behind.

At the measured commit the suite's nuke_bucket() deletes object versions only when it found object-lock retention,
so a versioned bucket on radosgw outlives its test: the suite's own teardown fails the id with BucketNotEmpty, and
every later id fails in setup. Before each id, and again after its body ran but before the suite's teardown, this
deletes, for the main and alt users of S3TEST_CONF, every bucket named with the run's bucket prefix: its ACL back
to private, its uploads in progress, all its versions and delete markers (bypassing governance retention), then the
bucket. An id's outcome is then its body's, not the suite's cleanup's.
Strata keeps no versions, so run.sh does not need it. Loaded with `-p s3compat_purge`.
"""

import configparser
import datetime
import os
import time

import boto3
import pytest
from botocore.client import Config


def _clients():
    cfg = configparser.RawConfigParser()
    cfg.read(os.environ['S3TEST_CONF'])
    endpoint = 'http://%s:%s' % (cfg.get('DEFAULT', 'host'), cfg.get('DEFAULT', 'port'))
    prefix = cfg.get('fixtures', 'bucket prefix', fallback='test-{random}-').split('{')[0]
    for section in ('s3 main', 's3 alt'):
        yield prefix, boto3.client('s3', endpoint_url=endpoint, region_name='us-east-1',
                                   aws_access_key_id=cfg.get(section, 'access_key'),
                                   aws_secret_access_key=cfg.get(section, 'secret_key'),
                                   config=Config(signature_version='s3v4'))


# Compliance retention cannot be bypassed: one this short (the suite's tests set seconds) is waited out, as the
# suite's nuke_bucket() does, so that the next ids do not fail on the bucket it keeps.
MAX_RETENTION_WAIT_S = 60


def _delete_versions(client, bucket, versions):
    response = client.delete_objects(Bucket=bucket, BypassGovernanceRetention=True, Delete={
        'Objects': [{'Key': v['Key'], 'VersionId': v['VersionId']} for v in versions], 'Quiet': True})
    return response.get('Errors', [])


def _wait_out_retention(client, bucket, errors):
    until = []
    for e in errors:
        try:
            until.append(client.get_object_retention(Bucket=bucket, Key=e['Key'], VersionId=e['VersionId'])['Retention']['RetainUntilDate'])
        except Exception:
            pass
    if not until:
        return False
    wait = (max(until) - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    if wait > MAX_RETENTION_WAIT_S:
        return False
    time.sleep(max(wait, 0) + 1)
    return True


def _purge(client, bucket):
    # A test that ends early may leave its bucket's ACL without the owner (x-amz-grant-* on CreateBucket):
    # the owner may always rewrite the ACL.
    client.put_bucket_acl(Bucket=bucket, ACL='private')
    for upload in client.list_multipart_uploads(Bucket=bucket).get('Uploads', []):
        client.abort_multipart_upload(Bucket=bucket, Key=upload['Key'], UploadId=upload['UploadId'])
    for page in client.get_paginator('list_object_versions').paginate(Bucket=bucket):
        versions = page.get('Versions', []) + page.get('DeleteMarkers', [])
        for v in versions:
            try:
                client.put_object_legal_hold(Bucket=bucket, Key=v['Key'], VersionId=v['VersionId'], LegalHold={'Status': 'OFF'})
            except Exception:
                pass
        if versions:
            errors = _delete_versions(client, bucket, versions)
            if errors and _wait_out_retention(client, bucket, errors):
                _delete_versions(client, bucket, errors)
    client.delete_bucket(Bucket=bucket)


def _purge_run_buckets():
    for prefix, client in _clients():
        try:
            buckets = client.list_buckets().get('Buckets', [])
        except Exception:
            continue
        for b in buckets:
            if b['Name'].startswith(prefix):
                try:
                    _purge(client, b['Name'])
                except Exception:
                    pass  # e.g. compliance retention: the suite's own setup reports it


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _purge_run_buckets()


# tryfirst: before pytest's own teardown runs the suite's setup_teardown finalizer (nuke_prefixed_buckets).
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _purge_run_buckets()
