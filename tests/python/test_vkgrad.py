"""python/vkgrad against real daemons (lavapipe here).

Every numeric result is compared with a float64 numpy reference computed
from the stored (already rounded) inputs, at client/ref.h's tolerances:
max|got - want| / max|want| <= 1e-4 (f32), 2e-3 (f16), 1e-2 (bf16).
Every error code of the protocol is raised as vkgrad.Error with that code
and a message naming the key or limit; after each, the daemon still serves
(the same connection, unless the daemon closed it, and a new one). The
shared daemon runs with --max-dim 4096 --max-region-bytes 16 MiB."""

import errno
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

import numpy as np

import vkgrad
import msgpack
from daemon import ROOT, Daemon

MAX_DIM = 4096
MAX_REGION = 16 << 20
NP = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}
D = None  # the shared daemon


def setUpModule():
    global D
    D = Daemon(["--max-dim", str(MAX_DIM), "--max-region-bytes", str(MAX_REGION)])


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("shared daemon: " + problems)


class TestDocs(unittest.TestCase):
    def test_the_python_guide_example_runs(self):
        """docs/python.md's first example, run as written (it must not need
        names it does not define) against the shared daemon."""
        with open(os.path.join(ROOT, "docs", "python.md")) as f:
            text = f.read()
        start = text.index("```python\n") + len("```python\n")
        code = text[start:text.index("```", start)]
        old = os.environ.get("VKGRAD_SOCKET")
        os.environ["VKGRAD_SOCKET"] = D.sock
        try:
            ns = {}
            exec(compile(code, "docs/python.md", "exec"), ns)
        finally:
            if old is None:
                del os.environ["VKGRAD_SOCKET"]
            else:
                os.environ["VKGRAD_SOCKET"] = old
        x, dy, w = (ns[k].astype(np.float64) for k in ("x", "dy", "w"))
        # f32 against float64 at 1e-4 (normwise), as every f32 test here
        for k, want in (("dw", dy.T @ x), ("db", dy.sum(axis=0)), ("dx", dy @ w)):
            err = np.abs(ns["g"][k] - want).max() / max(np.abs(want).max(), 1e-30)
            self.assertLessEqual(err, 1e-4, k)


def rand(shape, dt, rng):
    """Random inputs stored as dt, and their exact float64 values."""
    a = rng.uniform(-1, 1, size=shape).astype(np.float32)
    if dt == "bf16":
        s = vkgrad.to_bf16(a)
        return s, vkgrad.from_bf16(s).astype(np.float64)
    s = a.astype(NP[dt])
    return s, s.astype(np.float64)


def as64(a, dt):
    return (vkgrad.from_bf16(a) if dt == "bf16" else a).astype(np.float64)


def ref(x, dy, w):
    return {"dw": dy.T @ x, "db": dy.sum(axis=0), "dx": dy @ w if w is not None else None}


def rel_err(got, want):
    m = np.abs(want).max()
    d = np.abs(got - want).max()
    return d / m if m > 0 else d


class Case(unittest.TestCase):
    def setUp(self):
        self.c = vkgrad.connect(D.sock, name=self.id())

    def tearDown(self):
        self.c.close()

    def assertClose(self, got, want, dt, what=""):
        e = rel_err(as64(got, dt), want)
        self.assertLessEqual(e, vkgrad.TOLERANCE[dt], "%s %s: error %.3g > %g"
                             % (what, dt, e, vkgrad.TOLERANCE[dt]))

    def assertServes(self, same=True):
        """The daemon still answers: a good job on a new connection, and a
        ping on this one unless it was closed."""
        if same:
            self.c.ping()
        with vkgrad.connect(D.sock) as c2:
            x = np.ones((2, 3), np.float32)
            g = c2.linear_backward(x, np.ones((2, 4), np.float32), outputs=["db"])
            np.testing.assert_array_equal(g["db"], np.full(4, 2, np.float32))


class TestLibrary(Case):
    def test_library_of_this_checkout(self):
        want = os.environ.get("VKGRAD_LIBRARY") or os.path.join(ROOT, "build", "libvkgrad.so.0")
        self.assertEqual(os.path.realpath(vkgrad.library_path), os.path.realpath(want))

    def test_vkgrad_library_names_a_missing_file(self):
        env = dict(os.environ, VKGRAD_LIBRARY="/nonexistent/libvkgrad.so.0",
                   PYTHONPATH=os.path.join(ROOT, "python"))
        env.pop("LD_PRELOAD", None)  # test-asan: nothing instrumented is loaded here
        p = subprocess.run([sys.executable, "-c", "import vkgrad"], env=env,
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ImportError", p.stderr)
        self.assertIn("/nonexistent/libvkgrad.so.0", p.stderr)

    def test_hello_and_default_socket(self):
        self.assertEqual(self.c.info["version"], 1)
        self.assertEqual(self.c.info["limits"]["max_dim"], MAX_DIM)
        self.assertTrue(self.c.info["server"].startswith("vkgradd "))
        old = os.environ.get("VKGRAD_SOCKET")
        os.environ["VKGRAD_SOCKET"] = D.sock
        try:
            self.assertEqual(vkgrad.default_socket(), D.sock)
            with vkgrad.connect() as c2:
                c2.ping()
                self.assertEqual(c2.socket, D.sock)
        finally:
            if old is None:
                del os.environ["VKGRAD_SOCKET"]
            else:
                os.environ["VKGRAD_SOCKET"] = old

    def test_connect_to_nothing_is_io_error(self):
        with self.assertRaises(vkgrad.Error) as cm:
            vkgrad.connect(os.path.join(D.dir, "no-such-socket"))
        self.assertEqual(cm.exception.code, "io")
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("no-such-socket", cm.exception.message)


class TestNumerics(Case):
    SHAPES = [(1, 1, 1), (37, 19, 23), (128, 64, 96), (300, 17, 5)]

    def test_copied_arrays_every_dtype(self):
        rng = np.random.default_rng(1)
        for dt in ("f32", "f16", "bf16"):
            for b, i, o in self.SHAPES:
                x, x64 = rand((b, i), dt, rng)
                dy, dy64 = rand((b, o), dt, rng)
                w, w64 = rand((o, i), dt, rng)
                g = self.c.linear_backward(x, dy, w, dtype=dt if dt == "bf16" else None)
                self.assertEqual(sorted(g), ["db", "dw", "dx"])
                want = ref(x64, dy64, w64)
                for k in g:
                    self.assertEqual(g[k].dtype, NP[dt])
                    self.assertClose(g[k], want[k], dt, "%s %dx%dx%d" % (k, b, i, o))

    def test_region_views_are_used_in_place(self):
        rng = np.random.default_rng(2)
        for dt in ("f32", "f16", "bf16"):
            b, i, o = 64, 48, 40
            es = np.dtype(NP[dt]).itemsize
            r = self.c.region(4 << 20)
            offs = np.cumsum([0, b * i, b * o, o * i, o * i, o]) * es
            xv = r.ndarray((b, i), dt if dt == "bf16" else NP[dt], int(offs[0]))
            dyv = r.ndarray((b, o), NP[dt], int(offs[1]))
            wv = r.ndarray((o, i), NP[dt], int(offs[2]))
            dwv = r.ndarray((o, i), NP[dt], int(offs[3]))
            dbv = r.ndarray((o,), NP[dt], int(offs[4]))
            x, x64 = rand((b, i), dt, rng)
            dy, dy64 = rand((b, o), dt, rng)
            w, w64 = rand((o, i), dt, rng)
            xv[...], dyv[...], wv[...] = x, dy, w
            before = self.c.stats()["regions"]
            fut = self.c.submit(xv, dyv, wv, out={"dw": dwv, "db": dbv}, dtype=dt)
            g = fut.result()
            # the outputs are the views themselves, and no pool region was made
            self.assertIs(g["dw"], dwv)
            self.assertIs(g["db"], dbv)
            self.assertEqual(self.c.stats()["regions"], before)
            self.assertEqual(sorted(g), ["db", "dw"])
            want = ref(x64, dy64, w64)
            self.assertClose(dwv, want["dw"], dt, "dw")
            self.assertClose(dbv, want["db"], dt, "db")
            self.assertEqual(set(fut.timing), {"queued_us", "gpu_us", "batch_jobs", "kernel_us"})
            self.assertGreaterEqual(fut.timing["batch_jobs"], 1)
            r.close()

    def test_accumulate_into_views_and_arrays(self):
        rng = np.random.default_rng(3)
        for dt in ("f32", "f16", "bf16"):
            b, i, o = 33, 20, 12
            x, x64 = rand((b, i), dt, rng)
            dy, dy64 = rand((b, o), dt, rng)
            w, w64 = rand((o, i), dt, rng)
            base_dw, base_dw64 = rand((o, i), dt, rng)
            base_dx, base_dx64 = rand((b, i), dt, rng)
            r = self.c.region(1 << 16)
            dwv = r.ndarray((o, i), NP[dt], 0)
            dwv[...] = base_dw
            dx = base_dx.copy()  # an ordinary array: copied in and back
            kw = {"dtype": "bf16"} if dt == "bf16" else {}
            g = self.c.linear_backward(x, dy, w, out={"dw": dwv, "dx": dx}, accumulate=True, **kw)
            self.assertIs(g["dx"], dx)
            want = ref(x64, dy64, w64)
            self.assertClose(dwv, want["dw"] + base_dw64, dt, "dw accumulated")
            self.assertClose(dx, want["dx"] + base_dx64, dt, "dx accumulated")
            r.close()

    def test_output_subsets_and_conversion(self):
        rng = np.random.default_rng(4)
        x, x64 = rand((10, 6), "f32", rng)
        dy, dy64 = rand((10, 3), "f32", rng)
        w, w64 = rand((3, 6), "f32", rng)
        want = ref(x64, dy64, w64)
        g = self.c.linear_backward(x, dy)  # no w: dw and db
        self.assertEqual(sorted(g), ["db", "dw"])
        g = self.c.linear_backward(x, dy, w, outputs=["dx"])
        self.assertEqual(sorted(g), ["dx"])
        self.assertClose(g["dx"], want["dx"], "f32")
        # float64 arrays with an explicit dtype are converted, then rounded
        g = self.c.linear_backward(x64, dy64, w64, outputs=["dw"], dtype="f32")
        self.assertClose(g["dw"], want["dw"], "f32")
        g = self.c.linear_backward(x64, dy64, outputs=["dw"], dtype="bf16")
        self.assertEqual(g["dw"].dtype, np.uint16)
        self.assertClose(g["dw"], want["dw"], "bf16")

    def test_local_misuse_is_value_or_type_error(self):
        x = np.ones((4, 3), np.float32)
        with self.assertRaisesRegex(ValueError, "needs w"):
            self.c.linear_backward(x, x, outputs=["dx"])
        with self.assertRaisesRegex(ValueError, "uint16 is ambiguous"):
            self.c.linear_backward(x.astype(np.uint16), x.astype(np.uint16))
        with self.assertRaisesRegex(TypeError, "float64"):
            self.c.linear_backward(x, x.astype(np.float64))
        with self.assertRaisesRegex(ValueError, "batch"):
            self.c.linear_backward(x, np.ones((5, 2), np.float32))
        with self.assertRaisesRegex(ValueError, "out\\['dw'\\]"):
            self.c.linear_backward(x, x, out={"dw": np.ones((2, 2), np.float32)})
        with self.assertRaisesRegex(ValueError, "outputs"):
            self.c.linear_backward(x, x, outputs=["dq"])
        r = self.c.region(64)
        with self.assertRaisesRegex(ValueError, "multiple of the element size"):
            r.ndarray((2,), np.float32, offset=2)
        with self.assertRaisesRegex(ValueError, "the region has 64"):
            r.ndarray((17,), np.float32)
        self.assertServes()


class TestAsync(Case):
    def test_many_futures_poll_and_fileno(self):
        rng = np.random.default_rng(5)
        jobs = []
        for k in range(12):
            x, x64 = rand((20 + k, 8), "f32", rng)
            dy, dy64 = rand((20 + k, 5), "f32", rng)
            jobs.append((self.c.submit(x, dy, outputs=["dw"]), ref(x64, dy64, None)["dw"]))
        # an event loop's way: wait on the descriptor, then poll()
        pending = {f for f, _ in jobs}
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for f in self.c.poll():
                pending.discard(f)
            if pending:
                select.select([self.c.fileno()], [], [], 0.5)
        self.assertFalse(pending, "jobs not finished within 120 s")
        for f, want in jobs:
            self.assertTrue(f.done())
            self.assertClose(f.result(timeout=0)["dw"], want, "f32")

    def test_result_timeout_and_done(self):
        rng = np.random.default_rng(6)
        x, x64 = rand((512, 256), "f32", rng)
        dy, dy64 = rand((512, 256), "f32", rng)
        f = self.c.submit(x, dy, outputs=["dw"])
        try:
            f.result(timeout=0)
        except TimeoutError:
            pass  # still running: fine; done() must agree later
        g = f.result(timeout=120)
        self.assertTrue(f.done())
        self.assertClose(g["dw"], ref(x64, dy64, None)["dw"], "f32")

    def test_pool_regions_are_reused(self):
        x = np.ones((16, 8), np.float32)
        self.c.linear_backward(x, x)
        n = self.c.stats()["regions"]
        for _ in range(20):
            g = self.c.linear_backward(x, x)
        self.assertEqual(self.c.stats()["regions"], n)
        np.testing.assert_array_equal(g["db"], np.full(8, 16, np.float32))

    def test_unwaited_futures_give_pool_regions_back(self):
        # fire and forget: 100 jobs of copied arrays, no result() called;
        # submit() files finished ones, so the pool stays small (the daemon
        # allows 64 regions per connection)
        x = np.ones((8, 4), np.float32)
        futs = [self.c.submit(x, x, outputs=["db"]) for _ in range(100)]
        self.assertLess(self.c.stats()["regions"], 64)
        for f in futs:
            np.testing.assert_array_equal(f.result(timeout=120)["db"], np.full(4, 8, np.float32))

    def test_submit_waits_for_a_pool_region_at_max_regions(self):
        # a daemon of 3 regions per connection, one held by the caller: the
        # jobs' copies share 2 pool regions, so a submit while both are in
        # use by running jobs waits for the oldest (a loaded machine once
        # made the 64-region case above fail with "limit" instead)
        d = Daemon(["--max-regions", "3"])
        try:
            with vkgrad.connect(d.sock) as c:
                held = c.region(4096)
                rng = np.random.default_rng(11)
                jobs = []
                for k in range(24):
                    x, x64 = rand((2048 + k, 64), "f32", rng)
                    dy, dy64 = rand((2048 + k, 48), "f32", rng)
                    jobs.append((c.submit(x, dy, outputs=["dw", "db"]), ref(x64, dy64, None)))
                    self.assertLessEqual(c.stats()["regions"], 3)
                for f, want in jobs:
                    g = f.result(timeout=120)
                    self.assertClose(g["dw"], want["dw"], "f32")
                    self.assertClose(g["db"], want["db"], "f32")
                # a limit the client cannot wait out still raises
                more = [c.region(4096) for _ in range(3 - c.stats()["regions"])]
                with self.assertRaises(vkgrad.Error) as e:
                    c.region(4096)
                self.assertEqual(e.exception.code, "limit")
                self.assertIn("max_regions", str(e.exception))
                for r in more + [held]:
                    r.close()
                x = np.ones((8, 4), np.float32)
                np.testing.assert_array_equal(c.linear_backward(x, x)["db"], np.full(4, 8, np.float32))
        finally:
            problems = d.stop()
            if problems:
                raise AssertionError("daemon: " + problems)

    def test_threads_share_one_client(self):
        rng = np.random.default_rng(7)
        data = [rand((30, 10), "f32", rng) + rand((30, 7), "f32", rng) for _ in range(4)]
        errs = []

        def work(k):
            x, x64, dy, dy64 = data[k]
            try:
                for _ in range(5):
                    g = self.c.linear_backward(x, dy)
                    self.assertClose(g["dw"], ref(x64, dy64, None)["dw"], "f32")
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(errs, [])

    def test_region_close_keeps_views_readable(self):
        r = self.c.region(4096)
        v = r.ndarray((4,), np.float32)
        v[...] = [1, 2, 3, 4]
        n = self.c.stats()["regions"]
        r.close()
        self.assertEqual(self.c.stats()["regions"], n - 1)
        np.testing.assert_array_equal(v, [1, 2, 3, 4])
        with self.assertRaisesRegex(ValueError, "closed"):
            r.ndarray((1,), np.float32)
        # a view of a closed region is no longer in place: copied instead
        g = self.c.linear_backward(np.ones((1, 4), np.float32), v.reshape(1, 4), outputs=["db"])
        np.testing.assert_array_equal(g["db"], [1, 2, 3, 4])

    def test_close_while_another_thread_waits(self):
        # close() while result() waits in another thread: the waiter ends
        # with Error("io") (or the job's true result, had it just finished),
        # nothing crashes or hangs, and the daemon serves on. That the job
        # is still in the daemon when close() comes is a condition (stats),
        # not a time: a device that finishes it first gets a job four times
        # bigger (about a second each on lavapipe at 2048 rows), up to three
        # tries; past them the race cannot be made here and the test says so.
        for batch in (2048, 8192, 32768):
            if self.close_during_wait(batch):
                return
        self.skipTest("the device finished even a %d-row job before close()" % batch)

    def close_during_wait(self, batch):
        c = vkgrad.connect(D.sock)
        x = np.ones((batch, 1024), np.float32)
        dy = np.ones((batch, 512), np.float32)
        fut = c.submit(x, dy, outputs=["dw"])
        got = []
        waiting = threading.Event()

        def waiter():
            waiting.set()
            got.append(self.outcome_of(fut))
        t = threading.Thread(target=waiter)
        t.start()
        self.assertTrue(waiting.wait(60), "the waiter thread did not start")
        with vkgrad.connect(D.sock) as c2:
            st = c2.stats()
        raced = st["jobs_running"] + st["jobs_queued"] >= 1
        c.close()
        t.join(60)
        self.assertFalse(t.is_alive(), "the waiter hangs after close()")
        if isinstance(got[0], vkgrad.Error):
            self.assertEqual(got[0].code, "io")
        else:
            np.testing.assert_array_equal(got[0]["dw"], np.full((512, 1024), batch, np.float32))
        self.assertServes(same=False)
        return raced

    @staticmethod
    def outcome_of(fut):
        try:
            return fut.result()
        except vkgrad.Error as e:
            return e

    def test_closed_client_raises_io(self):
        c = vkgrad.connect(D.sock)
        r = c.region(4096)
        v = r.ndarray((2,), np.float32)
        c.close()
        with self.assertRaises(vkgrad.Error) as cm:
            c.ping()
        self.assertEqual(cm.exception.code, "io")
        v[0] = 1  # still mapped
        self.assertServes()


class TestErrors(Case):
    """Each code of the protocol as vkgrad.Error."""

    def expect(self, code, fn, *words):
        with self.assertRaises(vkgrad.Error) as cm:
            fn()
        e = cm.exception
        self.assertEqual(e.code, code, e.message)
        for w in words:
            self.assertIn(w, e.message)
        return e

    def test_bad_frame(self):
        # a frame above max_frame (64 KiB): the daemon answers id 0 and closes
        e = self.expect("bad_frame", lambda: self.c.call("ping", pad=b"x" * 70000),
                        "max_frame")
        self.assertEqual(e.errno, errno.ECONNRESET)
        # the next call connects again (the daemon closed this connection)
        self.c.ping()
        self.assertEqual(self.c.reconnects, 1)
        # without reconnect the connection stays closed
        with vkgrad.connect(D.sock, reconnect=False) as c:
            self.expect("bad_frame", lambda: c.call("ping", pad=b"x" * 70000), "max_frame")
            self.expect("bad_frame", c.ping)
            self.assertEqual(c.reconnects, 0)
        self.assertServes(same=False)

    def test_bad_request(self):
        self.expect("bad_request", lambda: self.c.call("linear_backward", dtype="f32"), "batch")
        # a dtype that is not a string is malformed (an unknown string is unsupported)
        self.expect("bad_request", lambda: self.c.call(
            "linear_backward", dtype=64, batch=1, **{"in": 1}, out=1, x=[1, 0], dy=[1, 0],
            dw=[1, 64]), "dtype")
        self.assertServes()

    def test_unknown_op(self):
        self.expect("unknown_op", lambda: self.c.call("frobnicate"), "frobnicate")
        self.assertServes()

    def test_unsupported(self):
        x = np.ones((4, 4), np.float32)
        self.expect("unsupported", lambda: self.c.linear_backward(x, x, variant="coopmat"),
                    "coopmat")
        self.expect("unsupported", lambda: self.c.call("hello", version=2), "version")
        self.expect("unsupported", lambda: self.c.call(
            "linear_backward", dtype="f64", batch=1, **{"in": 1}, out=1, x=[1, 0], dy=[1, 0],
            dw=[1, 64]), "f64")
        self.assertServes()

    def test_bad_region(self):
        self.expect("bad_region", lambda: self.c.call(
            "linear_backward", dtype="f32", batch=1, **{"in": 1}, out=1, x=[99, 0],
            dy=[99, 4], dw=[99, 8]), "99")
        self.assertServes()

    def test_out_of_bounds(self):
        r = self.c.region(4096)
        v = r.ndarray((1024,), np.float32)
        v[...] = 7
        self.expect("out_of_bounds", lambda: self.c.call(
            "linear_backward", dtype="f32", batch=1, **{"in": 1}, out=1, x=[r.id, 0],
            dy=[r.id, 4], dw=[r.id, 4096]), "dw")
        self.expect("out_of_bounds", lambda: self.c.call(
            "linear_backward", dtype="f32", batch=1, **{"in": 1}, out=1, x=[r.id, 2],
            dy=[r.id, 4], dw=[r.id, 8]), "x")
        np.testing.assert_array_equal(v, 7)  # nothing written
        self.assertServes()

    def test_overlap(self):
        r = self.c.region(4096)
        x = r.ndarray((4, 4), np.float32, 0)
        dy = r.ndarray((4, 4), np.float32, 64)
        x[...], dy[...] = 1, 2
        dw_over_x = r.ndarray((4, 4), np.float32, 32)  # shares x's last 8 floats
        # submit() returns at once; the refusal comes with the result
        fut = self.c.submit(x, dy, out={"dw": dw_over_x})
        self.expect("overlap", fut.result, "overlap")
        np.testing.assert_array_equal(x[:2], 1)
        np.testing.assert_array_equal(dy, 2)
        self.assertServes()

    def test_limit(self):
        self.expect("limit", lambda: self.c.region(MAX_REGION + 1), "max_region_bytes")
        # max_dim bounds the features; a batch past it is bounded by bytes alone
        x, dy = np.ones((1, MAX_DIM + 1), np.float32), np.ones((1, 1), np.float32)
        self.expect("limit", lambda: self.c.linear_backward(x, dy), "max_dim")
        x = np.ones((MAX_DIM + 1, 1), np.float32)
        g = self.c.linear_backward(x, x)
        np.testing.assert_array_equal(g["db"], np.full(1, MAX_DIM + 1, np.float32))
        self.assertServes()

    def test_device_lost(self):
        d = Daemon(env={"VKGRAD_FAULT_INJECT": "submit:2"})
        try:
            with vkgrad.connect(d.sock) as c:
                x = np.ones((8, 4), np.float32)
                c.linear_backward(x, x)  # the first submission works
                self.expect_on(c, "device_lost", lambda: c.linear_backward(x, x))
                # recreated: the next job is served (it waits for the device)
                g = c.linear_backward(x, x)
                np.testing.assert_array_equal(g["db"], np.full(4, 8, np.float32))
        finally:
            problems = d.stop()
        self.assertEqual(problems, "")

    def expect_on(self, c, code, fn):
        with self.assertRaises(vkgrad.Error) as cm:
            fn()
        self.assertEqual(cm.exception.code, code, cm.exception.message)
        self.assertIsNone(cm.exception.errno)

    def test_internal_from_a_stand_in_daemon(self):
        # The daemon sends `internal` for out-of-memory and for jobs it drops
        # at shutdown: no request provokes it (test_errors.c says the same).
        # A stand-in speaking the protocol checks that the code arrives.
        with FakeDaemon("internal", "stand-in failure") as fd:
            with self.assertRaises(vkgrad.Error) as cm:
                vkgrad.connect(fd.path)
            self.assertEqual(cm.exception.code, "internal")
            self.assertEqual(cm.exception.message, "stand-in failure")

    def test_every_code_is_known(self):
        self.assertEqual(set(vkgrad.CODES), {
            "bad_frame", "bad_request", "unknown_op", "unsupported", "bad_region",
            "out_of_bounds", "overlap", "limit", "device_lost", "internal", "bad_tensor"})


class FakeDaemon:
    """Answers every request on one connection with one error."""

    def __init__(self, code, message):
        self.dir = D.dir
        self.path = os.path.join(D.dir, "fake.sock")
        self.code, self.message = code, message
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        conn, _ = self.srv.accept()
        with conn:
            buf = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                    n = struct.unpack(">I", buf[:4])[0]
                    req = msgpack.unpackb(buf[4:4 + n])
                    buf = buf[4 + n:]
                    body = msgpack.packb({"id": req["id"], "ok": False, "error": {
                        "code": self.code, "message": self.message}})
                    conn.sendall(struct.pack(">I", len(body)) + body)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.close()
        os.unlink(self.path)


class TestDtypes(unittest.TestCase):
    def test_bf16_rounds_to_nearest_even(self):
        f = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5,
                      np.inf, -np.inf, 0.0, -0.0, 3.0e38], np.float32)
        want = [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x7F62]
        self.assertEqual(vkgrad.to_bf16(f).tolist(), want)
        nan = vkgrad.to_bf16(np.array([np.float32("nan")]))[0]
        self.assertEqual(nan & 0x7F80, 0x7F80)
        self.assertNotEqual(nan & 0x7F, 0)

    def test_bf16_round_trip_of_every_pattern(self):
        bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        f = vkgrad.from_bf16(bits)
        back = vkgrad.to_bf16(f)
        finite = ~np.isnan(f)
        np.testing.assert_array_equal(back[finite], bits[finite])
        self.assertTrue(np.all(np.isnan(vkgrad.from_bf16(back[~finite]))))

    def test_msgpack_is_the_system_package(self):
        # Debian's python3-msgpack, not a hand-written copy (issue 26)
        from vkgrad import client
        self.assertIs(client.msgpack, msgpack)
        self.assertFalse(os.path.exists(os.path.join(ROOT, "python", "vkgrad", "_msgpack.py")))
        o = {"a": [1, -1, 1 << 40, 1.5, None, True], "s": "é", "b": b"\x00" * 3,
             "big": (1 << 64) - 1}
        self.assertEqual(msgpack.unpackb(msgpack.packb(o, use_bin_type=True), raw=False), o)


if __name__ == "__main__":
    unittest.main()
