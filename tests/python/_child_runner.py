"""Cases run in child processes on two heap fills: test_guard_sweep's machinery, for
other test files (test_structured_fuzz.py).

test_guard_sweep.py runs its cases in children that it starts as `test_guard_sweep.py
--worker SPEC RESULTS`, with its own case runner and spec fields; this module is the same
parent and child loop with the script, the case runner and the case fields as parameters.
The outcomes' semantics are test_guard_sweep's own, imported from it (its `_digest` of a
result, its `classify` of a case's runs, its `_excerpt` of a dying child's stderr), so the
two fuzzers judge a run alike:

* a test file's child entry point calls `worker_main(argv, run_case)`; `run_case(case)`
  returns the case's calls, each ['ok', digest, ...] or ['err', type name, clean, message];
* the parent makes a `Runner(script, ...)` and calls `run_all(cases)`, which gives each
  case's runs (one per heap fill, PERTURB) or ('died', 'crash' | 'hang', detail), then
  judges them with `classify`.

A child that dies names the case it was running (the first without a result); the rest of
its batch runs in a new child, the case is rerun alone to confirm it, and a case that only
dies after others ran in the same process is narrowed to the latest earlier case that still
makes it die (heap corruption shows later). Every child's data segment is bounded
(RLIMIT_DATA; ASan's max_allocation_size_mb under the sanitizer build), each case by a
faulthandler timer that ends the child (a hang), the child as a whole by a wall clock.
"""
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time

from test_guard_sweep import PERTURB, _SANITIZER, _digest, _excerpt, _sanitized, classify  # noqa: F401

MARK = '@@child-runner case '


# ---- the child -------------------------------------------------------------------------------

def worker_main(argv, run_case):
    """The child's entry point: `SCRIPT --worker SPEC RESULTS`; one JSON line per case to
    RESULTS (what run_case returned and the seconds it took), a marker per case on stderr."""
    if len(argv) != 4 or argv[1] != '--worker':
        sys.exit(f'usage: {argv[0]} --worker SPEC RESULTS (run by the test, not by hand)')
    import faulthandler
    root = os.environ.get('FXCPP_PACKAGE_ROOT')
    if root and root not in sys.path:
        sys.path.insert(0, root)
    import torch
    torch.set_num_threads(1)
    faulthandler.enable()
    with open(argv[2], 'rb') as f:
        spec = pickle.load(f)
    os.write(2, f'\n{MARK}ready\n'.encode())  # started: a death from here on is a case's
    if spec['mem_bytes'] and not _sanitized(os.environ):
        import resource
        with open('/proc/self/status') as f:
            data = next((int(line.split()[1]) * 1024 for line in f if line.startswith('VmData:')), 0)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        want = data + spec['mem_bytes']
        if hard == resource.RLIM_INFINITY or want < hard:
            resource.setrlimit(resource.RLIMIT_DATA, (want, hard))
    with open(argv[3], 'a', buffering=1) as out:
        for case in spec['cases']:
            os.write(2, f'\n{MARK}{case["id"]}\n'.encode())
            faulthandler.dump_traceback_later(spec['timeout'], exit=True)
            t0 = time.monotonic()
            calls = run_case(case)
            seconds = time.monotonic() - t0
            faulthandler.cancel_dump_traceback_later()
            out.write(json.dumps({'id': case['id'], 'calls': calls, 's': round(seconds, 4)}) + '\n')
            out.flush()
    os.write(2, f'\n{MARK}done\n'.encode())
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: a crash there is no case's


# ---- the parent ------------------------------------------------------------------------------

def child_env(perturb, mem_bytes, env=None):
    """The environment of a child on heap fill `perturb`: MALLOC_PERTURB_ (ASan's
    malloc_fill_byte under the sanitizer build), one thread, glibc's heap messages to stderr."""
    env = dict(os.environ if env is None else env)
    env['MALLOC_PERTURB_'] = str(perturb)
    env['OMP_NUM_THREADS'] = env['MKL_NUM_THREADS'] = '1'
    env['LIBC_FATAL_STDERR_'] = '1'
    if _sanitized(env):
        env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + \
            f':allocator_may_return_null=1:max_allocation_size_mb={mem_bytes >> 20}' \
            f':malloc_fill_byte={perturb}:max_malloc_fill_size={1 << 24}'
    return env


class Runner:
    """Runs cases (dicts with an 'id' and the `fields` run_case reads) in children of
    `script` (`script --worker SPEC RESULTS`), `jobs` at once, at most `batch` per child."""

    START_TRIES = 4  # a child that cannot import fxcpp (the extension being rebuilt) waits and retries

    def __init__(self, script, fields, timeout=10.0, mem_bytes=4096 << 20, jobs=2, batch=20000, folder=None):
        self.script, self.fields, self.timeout = script, tuple(fields), timeout
        self.mem_bytes, self.jobs, self.batch = mem_bytes, max(1, jobs), batch
        self.folder = folder or tempfile.gettempdir()
        self.seconds = {}  # the longest a case took in any child
        self.last_start_error = ''

    def spawn(self, cases, perturb, timeout=None):
        """One child over `cases` (in order): ({id: calls}, died), died None or (id,
        outcome, detail) for the case it was running when it died (or that a sanitizer
        reported in). A child that dies before it started running cases is started again,
        START_TRIES times at most, a minute apart."""
        for attempt in range(self.START_TRIES):
            result = self._spawn_once(cases, perturb, self.timeout if timeout is None else timeout)
            if result is not None:
                return result
            if attempt + 1 < self.START_TRIES:
                time.sleep(60)
        raise RuntimeError(f'{os.path.basename(self.script)}: the worker process did not start '
                           f'{self.START_TRIES} times: {self.last_start_error}')

    def _spawn_once(self, cases, perturb, timeout):
        fd, spec_path = tempfile.mkstemp(dir=self.folder, suffix='.spec')
        with os.fdopen(fd, 'wb') as f:
            pickle.dump({'cases': [{k: c.get(k) for k in ('id',) + self.fields} for c in cases],
                         'timeout': timeout, 'mem_bytes': self.mem_bytes}, f)
        results_path = spec_path[:-5] + '.jsonl'
        proc = subprocess.Popen([sys.executable, self.script, '--worker', spec_path, results_path],
                                env=child_env(perturb, self.mem_bytes), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, err = proc.communicate(timeout=60 + (timeout + 2) * len(cases))
            killed = False
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            killed = True
        err = err.decode(errors='replace')
        if f'{MARK}ready' not in err:
            self.last_start_error = f'exit status {proc.returncode}: ' + err[-2000:]
            for p in (spec_path, results_path):
                if os.path.exists(p):
                    os.unlink(p)
            return None
        done = {}
        if os.path.exists(results_path):
            with open(results_path) as f:
                for line in f:
                    if line.endswith('\n'):
                        rec = json.loads(line)
                        done[rec['id']] = rec['calls']
                        self.seconds[rec['id']] = max(self.seconds.get(rec['id'], 0), rec['s'])
        for p in (spec_path, results_path):
            if os.path.exists(p):
                os.unlink(p)
        segments, current = {}, None  # stderr per case: what follows its marker
        for line in err.splitlines():
            if line.startswith(MARK):
                tag = line[len(MARK):].strip()
                current = int(tag) if tag.isdigit() else None
                continue
            if current is not None:
                segments.setdefault(current, []).append(line)
        for c in cases:  # a sanitizer report from a case the process survived
            text = '\n'.join(segments.get(c['id'], []))
            if c['id'] in done and any(s in text for s in _SANITIZER):
                return done, (c['id'], 'crash', _excerpt(text))
        rc = proc.returncode
        if rc == 0 and not killed and len(done) == len(cases):
            return done, None
        pending = [c['id'] for c in cases if c['id'] not in done]
        victim = pending[0] if pending else cases[-1]['id']
        text = '\n'.join(segments.get(victim, []))
        if killed or 'Timeout (' in text:
            return done, (victim, 'hang', f'ran past {timeout:g} s')
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f'signal {-rc}'
            return done, (victim, 'crash', f'{name}{": " + _excerpt(text) if _excerpt(text) else ""}')
        if any(s in text for s in _SANITIZER):
            return done, (victim, 'crash', _excerpt(text))
        if rc == 0 and not pending:
            return done, None
        return done, (victim, 'crash', f'exit status {rc}: {_excerpt(text) or _excerpt(err)}')

    def _reproduces(self, cases, perturb, timeout):
        _, died = self.spawn(cases, perturb, timeout)
        return died is not None and died[0] == cases[-1]['id'] and died[1] in ('crash', 'hang')

    def _narrow(self, cases, start, idx, perturb, timeout):
        """The latest case s in [start, idx) such that cases s..idx in one process still die
        at idx: the one whose effects kill the process later (heap corruption)."""
        if not self._reproduces(cases[start:idx + 1], perturb, timeout):
            return None
        lo, hi = start, idx - 1  # invariant: [lo..idx] dies
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._reproduces(cases[mid:idx + 1], perturb, timeout):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def run_batch(self, cases, perturb, timeout=None):
        """{id: calls or ('died', outcome, detail)} over `cases` on one heap fill, in as few
        children as it takes."""
        results, start = {}, 0
        while start < len(cases):
            done, died = self.spawn(cases[start:], perturb, timeout)
            results.update(done)
            if died is None:
                break
            idx = next(i for i, c in enumerate(cases) if c['id'] == died[0])
            outcome, detail = died[1], died[2]
            if died[0] not in done and idx > start:  # died after other cases ran in the process: alone?
                if not self._reproduces([cases[idx]], perturb, timeout):
                    lo = self._narrow(cases, start, idx, perturb, timeout)
                    if lo is None:
                        detail += ' (not reproduced in a fresh process)'
                    else:
                        culprit = cases[lo]
                        detail += f' (only after {culprit.get("key", culprit["id"])} ran first in the process)'
                        results[culprit['id']] = ('died', outcome,
                                                  f'{detail}; makes {cases[idx].get("key", idx)} die after it')
            results[died[0]] = ('died', outcome, detail)
            start = idx + 1
        return results

    def run_all(self, cases, timeout=None):
        """Every case on both heap fills: {id: [calls or ('died', ...), one per heap]}."""
        from concurrent.futures import ThreadPoolExecutor
        # one child per heap and jobs // 2 batches: a child's start (importing torch) costs
        # more than hundreds of cases
        per = max(1, min(self.batch, -(-len(cases) // max(1, self.jobs // len(PERTURB)))))
        batches = [cases[i:i + per] for i in range(0, len(cases), per)]
        with ThreadPoolExecutor(self.jobs) as pool:
            futures = [(p, pool.submit(self.run_batch, b, p, timeout)) for b in batches for p in PERTURB]
            by_heap = {p: {} for p in PERTURB}
            for p, fut in futures:
                by_heap[p].update(fut.result())
        return {c['id']: [by_heap[p].get(c['id'], ('died', 'crash', 'no result')) for p in PERTURB] for c in cases}
