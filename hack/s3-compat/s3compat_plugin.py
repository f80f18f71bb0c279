"""pytest plugin for hack/s3-compat/run.sh: records every test id's outcome and markers as JSON.

Loaded with `-p s3compat_plugin` (PYTHONPATH=hack/s3-compat); writes S3COMPAT_RESULTS at session end.
"""

import json
import os

_results = {}


def pytest_collection_finish(session):
    # session.items: what runs, after -k / -m deselection.
    for item in session.items:
        _results[item.nodeid] = {
            'name': item.name,
            'file': os.path.basename(str(item.fspath)),
            'markers': sorted({m.name for m in item.iter_markers()}),
            'outcome': 'not-run',
            'error': '',
        }


def pytest_runtest_logreport(report):
    entry = _results.get(report.nodeid)
    if entry is None:
        return
    # A failure in setup, call or teardown fails the id; a skip in setup or call skips it.
    if report.failed:
        entry['outcome'] = 'failed'
        if not entry['error']:
            entry['error'] = _first_line(report)
    elif report.skipped and entry['outcome'] != 'failed':
        entry['outcome'] = 'skipped'
    elif report.when == 'call' and report.passed and entry['outcome'] == 'not-run':
        entry['outcome'] = 'passed'


def _first_line(report):
    crash = getattr(report.longrepr, 'reprcrash', None)
    if crash is not None:
        return str(crash.message).splitlines()[0][:300] if crash.message else ''
    return str(report.longrepr).splitlines()[-1][:300] if report.longrepr else ''


def pytest_sessionfinish(session):
    path = os.environ.get('S3COMPAT_RESULTS')
    if path:
        with open(path, 'w') as f:
            json.dump(_results, f, indent=1, sort_keys=True)
