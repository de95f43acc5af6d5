"""A client that survives (issue 26): reconnecting after a daemon restart,
fork safety, concurrent.futures and asyncio, bad arguments refused before
anything is sent, and the socket chosen by LOCAL_RANK. Every error path
checks the error and that the daemon still serves."""

import asyncio
import concurrent.futures as cf
import multiprocessing
import os
import signal
import subprocess
import threading
import time
import unittest

import numpy as np

import vkgrad
from daemon import BUILD, Daemon, child_env, wait_listening

D = None  # the shared daemon


def setUpModule():
    global D
    D = Daemon()


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("shared daemon: " + problems)


def job(c, batch=8, n_in=4, n_out=3, **kw):
    """One linear_backward with a known answer: db = batch everywhere."""
    x = np.ones((batch, n_in), np.float32)
    dy = np.ones((batch, n_out), np.float32)
    g = c.linear_backward(x, dy, outputs=["db"], **kw)
    np.testing.assert_array_equal(g["db"], np.full(n_out, batch, np.float32))


def serves(tc, c=None):
    """The daemon still answers, on c and on a new connection."""
    if c is not None:
        job(c)
    with vkgrad.connect(D.sock) as c2:
        job(c2)


def restart(d):
    """SIGTERM the daemon and start a new one on the same socket and cache."""
    d.proc.send_signal(signal.SIGTERM)
    tc = d.proc.wait(60)
    if tc != 0:
        raise AssertionError("daemon exit status %s" % tc)
    os.unlink(d.sock) if os.path.exists(d.sock) else None
    restart_like(d)


class TestReconnect(unittest.TestCase):
    def setUp(self):
        self.d = Daemon()

    def tearDown(self):
        self.d.kill()

    def test_restart_same_client(self):
        c = vkgrad.connect(self.d.sock)
        r = c.region(4096)
        v = r.ndarray((4, 4), np.float32, 0)
        dyv = r.ndarray((4, 2), np.float32, 64)
        dbv = r.ndarray((2,), np.float32, 128)
        v[...], dyv[...] = 1, 3
        c.submit(v, dyv, out={"db": dbv}).result()
        np.testing.assert_array_equal(dbv, 12)
        old_id = r.id
        restart(self.d)
        # the next call connects again: a job on copied arrays, then one on
        # the region (registered again: same memory, a new id)
        job(c)
        self.assertEqual(c.reconnects, 1)
        dbv[...] = 0
        c.submit(v, dyv, out={"db": dbv}).result()
        np.testing.assert_array_equal(dbv, 12)
        self.assertIsNotNone(r.id)
        self.assertIn(r.id, c._regions)
        del old_id
        c.ping()
        c.close()

    def test_job_in_flight_fails_once(self):
        c = vkgrad.connect(self.d.sock)
        x = np.ones((256, 256), np.float32)
        futs = [c.submit(x, x) for _ in range(8)]
        self.d.proc.kill()   # no chance to answer what is left
        self.d.proc.wait()
        restart_done = False
        try:
            failed = 0
            for f in futs:
                try:
                    f.result(timeout=30)
                except vkgrad.Error as e:
                    self.assertIn(e.code, ("io", "device_lost"), e)
                    failed += 1
                    # once: the same outcome again, no new error source
                    with self.assertRaises(vkgrad.Error):
                        f.result()
            self.assertGreaterEqual(failed, 0)
            # nothing listens: a call fails with io (connect refused) ...
            with self.assertRaises(vkgrad.Error) as cm:
                c.ping()
            self.assertEqual(cm.exception.code, "io")
            os.unlink(self.d.sock)
            restart_like(self.d)
            restart_done = True
            # ... and the one after the daemon is back works
            job(c)
            self.assertGreaterEqual(c.reconnects, 1)
        finally:
            c.close()
        self.assertTrue(restart_done)

    def test_pending_at_restart_raise_io_once_then_serves(self):
        c = vkgrad.connect(self.d.sock)
        x = np.ones((512, 512), np.float32)
        futs = [c.submit(x, x) for _ in range(16)]
        restart(self.d)
        outcomes = []
        for f in futs:
            try:
                f.result(timeout=60)
                outcomes.append("ok")
            except vkgrad.Error as e:
                self.assertIn(e.code, ("io", "device_lost"), e)
                outcomes.append(e.code)
        job(c)
        c.close()

    def test_reconnect_false_keeps_the_error(self):
        c = vkgrad.connect(self.d.sock, reconnect=False)
        job(c)
        restart(self.d)
        for _ in range(2):
            with self.assertRaises(vkgrad.Error) as cm:
                job(c)
            self.assertEqual(cm.exception.code, "io")
        c.close()
        with vkgrad.connect(self.d.sock) as c2:
            job(c2)


def restart_like(d):
    argv = [os.path.join(BUILD, "vkgradd"), "--socket", d.sock, "--cache-dir",
            os.path.join(d.dir, "cache"), "--log-level", "debug"]
    with open(d.log, "ab") as log:
        d.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                  env=child_env({"VKGRAD_VALIDATION": "0"}),
                                  stdin=subprocess.DEVNULL)
    if not wait_listening(d.proc, d.sock):
        raise AssertionError("daemon did not start again:\n" + d.log_tail())


def _child_job(sock_client, q):
    try:
        job(sock_client)
        q.put("ok %d" % sock_client.reconnects)
    except BaseException as e:  # noqa: BLE001
        q.put("error %r" % e)


class TestFork(unittest.TestCase):
    def setUp(self):
        self.c = vkgrad.connect(D.sock)

    def tearDown(self):
        self.c.close()

    def wait_child(self, pid, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p, status = os.waitpid(pid, os.WNOHANG)
            if p:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.fail("the child hung")

    def test_os_fork_child_gets_its_own_connection(self):
        job(self.c)
        r = self.c.region(4096)
        shared = r.ndarray((4,), np.float32, 0)
        shared[...] = 0
        x = np.ones((64, 64), np.float32)
        pending = self.c.submit(x, x)  # in flight at the fork
        pid = os.fork()
        if pid == 0:  # the child: exit status says what went wrong
            code = 0
            try:
                try:
                    pending.result(timeout=10)
                    code = 3  # the parent's job is not the child's
                except vkgrad.Error as e:
                    code = 0 if e.code == "io" else 4
                if code == 0:
                    job(self.c)
                    shared[...] = 7  # region memory is shared with the parent
                    xv = r.ndarray((2, 2), np.float32, 64)
                    dyv = r.ndarray((2, 1), np.float32, 128)
                    dbv = r.ndarray((1,), np.float32, 256)
                    xv[...], dyv[...] = 1, 2
                    self.c.submit(xv, dyv, out={"db": dbv}).result(timeout=30)
                    code = 0 if dbv[0] == 4 and self.c.reconnects == 1 else 5
            except BaseException:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                code = 6
            os._exit(code)
        self.assertEqual(self.wait_child(pid), 0)
        pending.result(timeout=30)  # the parent's job is still the parent's
        np.testing.assert_array_equal(shared, 7)
        self.assertEqual(r.ndarray((1,), np.float32, 256)[0], 4)
        self.assertEqual(self.c.reconnects, 0)
        serves(self, self.c)

    def test_two_forked_children_hogwild(self):
        job(self.c)
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        ps = [ctx.Process(target=_child_job, args=(self.c, q)) for _ in range(2)]
        for p in ps:
            p.start()
        for p in ps:
            p.join(60)
            if p.is_alive():
                p.kill()
                self.fail("a forked child hung")
            self.assertEqual(p.exitcode, 0)
        got = sorted(q.get(timeout=5) for _ in ps)
        self.assertEqual(got, ["ok 1", "ok 1"])
        serves(self, self.c)

    def test_fork_while_another_thread_holds_the_client(self):
        # a thread waits on a job when the process forks: the child's
        # client must not inherit a held lock
        x = np.ones((256, 256), np.float32)
        stop = threading.Event()

        def busy():
            while not stop.is_set():
                self.c.submit(x, x).result()
        t = threading.Thread(target=busy)
        t.start()
        try:
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:
                try:
                    job(self.c)
                    os._exit(0)
                except BaseException:  # noqa: BLE001
                    os._exit(1)
            self.assertEqual(self.wait_child(pid), 0)
        finally:
            stop.set()
            t.join()
        serves(self, self.c)


class TestFutures(unittest.TestCase):
    def setUp(self):
        self.c = vkgrad.connect(D.sock)

    def tearDown(self):
        self.c.close()

    def futs(self, n=6):
        x = np.ones((32, 16), np.float32)
        dy = np.ones((32, 8), np.float32)
        return [self.c.submit(x, dy * (i + 1), outputs=["db"]) for i in range(n)]

    def test_is_a_concurrent_future(self):
        f = self.futs(1)[0]
        self.assertIsInstance(f, cf.Future)
        self.assertFalse(f.cancel())
        np.testing.assert_array_equal(f.result()["db"], 32)
        self.assertIsNone(f.exception())

    def test_wait(self):
        fs = self.futs()
        done, not_done = cf.wait(fs, timeout=60)
        self.assertEqual(len(done), len(fs))
        self.assertFalse(not_done)
        for i, f in enumerate(fs):
            np.testing.assert_array_equal(f.result()["db"], 32 * (i + 1))

    def test_wait_first_completed_and_as_completed(self):
        fs = self.futs()
        done, _ = cf.wait(fs, timeout=60, return_when=cf.FIRST_COMPLETED)
        self.assertGreaterEqual(len(done), 1)
        seen = list(cf.as_completed(fs, timeout=60))
        self.assertEqual(set(seen), set(fs))

    def test_add_done_callback(self):
        fs = self.futs()
        got = []
        ev = threading.Event()

        def cb(f):
            got.append(f)
            if len(got) == len(fs):
                ev.set()
        for f in fs:
            f.add_done_callback(cb)
        self.assertTrue(ev.wait(60), "callbacks: %d of %d" % (len(got), len(fs)))
        self.assertEqual(set(got), set(fs))

    def test_failed_future_in_wait(self):
        r = self.c.region(4096)
        x = r.ndarray((4, 4), np.float32, 0)
        dy = r.ndarray((4, 4), np.float32, 64)
        bad = self.c.submit(x, dy, out={"dw": r.ndarray((4, 4), np.float32, 32)})  # overlap
        done, _ = cf.wait([bad], timeout=60, return_when=cf.FIRST_EXCEPTION)
        self.assertEqual(done, {bad})
        self.assertIsInstance(bad.exception(), vkgrad.Error)
        self.assertEqual(bad.exception().code, "overlap")
        serves(self, self.c)

    def test_asyncio(self):
        x = np.ones((16, 8), np.float32)
        dy = np.ones((16, 4), np.float32)

        async def main():
            g = await self.c.linear_backward_async(x, dy, outputs=["db"])
            y = await self.c.linear_forward_async(x, np.ones((4, 8), np.float32))
            many = await asyncio.gather(*(asyncio.wrap_future(f) for f in self.futs(4)))
            direct = await self.c.submit(x, dy, outputs=["db"])
            return g, y, many, direct
        g, y, many, direct = asyncio.run(main())
        np.testing.assert_array_equal(g["db"], 16)
        np.testing.assert_array_equal(y, 8)
        self.assertEqual(len(many), 4)
        np.testing.assert_array_equal(direct["db"], 16)

    def test_asyncio_error(self):
        x = np.ones((4, 4), np.float32)

        async def main():
            await self.c.linear_backward_async(x, x, variant="coopmat")
        with self.assertRaises(vkgrad.Error) as cm:
            asyncio.run(main())
        self.assertEqual(cm.exception.code, "unsupported")
        serves(self, self.c)


class TestBadArguments(unittest.TestCase):
    """Refused with ValueError/TypeError before anything is sent."""

    def setUp(self):
        self.c = vkgrad.connect(D.sock)
        self.sent = 0
        real = self.c._send

        def counting(*a, **kw):
            self.sent += 1
            return real(*a, **kw)
        self.c._send = counting

    def tearDown(self):
        self.c.close()

    def refused(self, exc, fn, *words):
        with self.assertRaises(exc) as cm:
            fn()
        for w in words:
            self.assertIn(w, str(cm.exception))
        self.assertEqual(self.sent, 0, "sent despite %s" % cm.exception)

    def test_each_bad_argument(self):
        x = np.ones((4, 3), np.float32)
        dy = np.ones((4, 2), np.float32)
        w = np.ones((2, 3), np.float32)
        c = self.c
        self.refused(ValueError, lambda: c.linear_backward(x, dy, variant="bogus"), "bogus",
                     "tiled")
        self.refused(TypeError, lambda: c.linear_backward(x, dy, variant=3), "variant")
        self.refused(TypeError, lambda: c.linear_backward(x, dy, accumulate="yes"), "accumulate")
        self.refused(ValueError, lambda: c.linear_backward(x, dy, dtype="f64"), "f64")
        self.refused(ValueError, lambda: c.linear_backward(x.astype(np.float64), dy), "float64")
        self.refused(TypeError, lambda: c.linear_backward(x, dy.astype(np.int32)), "int32")
        self.refused(TypeError, lambda: c.linear_backward(None, dy), "x")
        self.refused(TypeError, lambda: c.linear_backward(x, None), "dy")
        self.refused(ValueError, lambda: c.linear_backward(x, np.ones((5, 2), np.float32)),
                     "batch")
        self.refused(ValueError, lambda: c.linear_backward(x, dy, np.ones((3, 2), np.float32)),
                     "w must be")
        self.refused(ValueError, lambda: c.linear_backward(x[:0], dy[:0]), "at least 1")
        self.refused(ValueError, lambda: c.linear_backward(x, dy, outputs=["dz"]), "dz")
        self.refused(ValueError, lambda: c.linear_backward(x, dy, out={"dq": x}), "dq")
        self.refused(TypeError, lambda: c.linear_backward(x, dy, out=[x]), "out")
        self.refused(ValueError, lambda: c.linear_forward(x, np.ones((2, 4), np.float32)),
                     "x must be")
        self.refused(ValueError, lambda: c.linear_forward(x, w, np.ones(3, np.float32)),
                     "b must")
        self.refused(ValueError, lambda: c.linear_forward(x, w, variant="bogus"), "bogus")
        self.refused(TypeError, lambda: c.linear_forward(x, w, accumulate=None), "accumulate")
        self.refused(TypeError, lambda: c.region("64"), "int")
        self.refused(TypeError, lambda: c.call(3), "op")
        self.refused(TypeError, lambda: c.call("ping", k=object()), "encoded")
        serves(self, self.c)
        self.assertEqual(self.sent, 1)


class TestSocketChoice(unittest.TestCase):
    def env(self, **kv):
        old = {k: os.environ.get(k) for k in kv}

        def restore():
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.addCleanup(restore)
        for k, v in kv.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def test_local_rank_picks_the_per_gpu_socket(self):
        d = Daemon(sock_name="vkgrad-1.sock")
        try:
            self.env(VKGRAD_SOCKET=None, XDG_RUNTIME_DIR=d.dir, LOCAL_RANK="1")
            self.assertEqual(vkgrad.default_socket(), d.sock)
            with vkgrad.connect() as c:
                self.assertEqual(c.socket, d.sock)
                job(c)
            # $VKGRAD_SOCKET first
            self.env(VKGRAD_SOCKET=D.sock)
            self.assertEqual(vkgrad.default_socket(), D.sock)
            # no per-GPU socket for this rank: libvkgrad's order
            self.env(VKGRAD_SOCKET=None, LOCAL_RANK="5")
            self.assertEqual(vkgrad.default_socket(), "/run/vkgrad/vkgrad.sock")
            self.env(LOCAL_RANK="x")
            self.assertEqual(vkgrad.default_socket(), "/run/vkgrad/vkgrad.sock")
        finally:
            self.assertEqual(d.stop(), "")


if __name__ == "__main__":
    unittest.main()
