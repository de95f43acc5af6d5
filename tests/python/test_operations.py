"""What an operator sees: `promtool check metrics` on the daemon's
exposition (no warning), the metrics unit's own command with one daemon
down, the scrape's connections at debug level only, the counters by code
and per uid, `vkgrad clients`, `info --json` / `stats --json`, the global
--socket after the command, and socket discovery ($VKGRAD_SOCKET, then
$XDG_RUNTIME_DIR/vkgrad.sock if it exists, then /run/vkgrad/vkgrad.sock)
in the library, the CLI and Python, with errors that say what to do."""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import numpy as np

import vkgrad
from daemon import BUILD, ROOT, Daemon, child_env, python_env
from test_metrics import parse, value

D = None
CLI = os.path.join(BUILD, "vkgrad")


def setUpModule():
    global D
    D = Daemon()


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


def cli(*args, env=None, pre=()):
    return subprocess.run(list(pre) + [CLI] + list(args), capture_output=True, text=True,
                          timeout=120, env=child_env(env))


def promtool():
    p = shutil.which("promtool")
    if not p:
        raise AssertionError("promtool is missing: scripts/deps.sh installs Debian's "
                             "prometheus package (run make deps)")
    return p


class TestPromtool(unittest.TestCase):
    def test_promtool_accepts_the_exposition_without_a_warning(self):
        with vkgrad.connect(D.sock) as c:
            x = np.ones((16, 8), np.float32)
            for _ in range(4):
                c.linear_backward(x, x)
        p = cli("stats", "--prometheus", "--socket", D.sock)
        self.assertEqual(p.returncode, 0, p.stderr)
        t = subprocess.run([promtool(), "check", "metrics"], input=p.stdout,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((t.returncode, t.stdout + t.stderr), (0, ""))
        fams = parse(p.stdout)
        self.assertEqual(fams["vkgrad_stage_seconds"]["type"], "summary")
        for name, f in fams.items():
            self.assertNotRegex(name, "micro|milli", name)
        self.assertNotIn("vkgrad_jobs_per_batch_avg", fams)

    def test_promtool_catches_what_the_old_exposition_had(self):
        # the checker is not blind: a gauge with a quantile label and a
        # microseconds unit, as the exposition had before
        bad = ('# HELP vkgrad_poll_microseconds_total x\n'
               '# TYPE vkgrad_poll_microseconds_total counter\n'
               'vkgrad_poll_microseconds_total 3\n'
               '# HELP vkgrad_stage_seconds x\n# TYPE vkgrad_stage_seconds gauge\n'
               'vkgrad_stage_seconds{quantile="0.5"} 1\n')
        t = subprocess.run([promtool(), "check", "metrics"], input=bad, capture_output=True,
                           text=True, timeout=60)
        self.assertNotEqual(t.returncode, 0)
        self.assertIn("seconds", t.stdout + t.stderr)
        self.assertIn("quantile", t.stdout + t.stderr)


class TestMetricsUnit(unittest.TestCase):
    def exec_start(self):
        with open(os.path.join(ROOT, "systemd", "vkgrad-metrics.service.in")) as f:
            line = [l for l in f if l.startswith("ExecStart=")][0]
        argv = shlex.split(line[len("ExecStart="):])
        self.assertEqual(argv[0], "@BINDIR@/vkgrad")
        return argv[1:]

    def test_unit_command_exits_0_with_one_daemon_down(self):
        d2 = Daemon(sock_name="vkgrad-1.sock")
        try:
            # a second socket nobody listens on any more (its daemon died)
            dead = os.path.join(d2.dir, "vkgrad-0.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(dead)
            s.close()
            out = os.path.join(d2.dir, "out", "vkgrad.prom")
            os.mkdir(os.path.dirname(out))
            args = self.exec_start()
            args[args.index("--scan") + 1] = d2.dir
            args[args.index("--output") + 1] = out
            p = cli(*args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("vkgrad-0.sock", p.stderr)
            with open(out) as f:
                text = f.read()
            fams = parse(text)
            self.assertEqual(value(fams, "vkgrad_up", d2.sock), 1)
            self.assertEqual(value(fams, "vkgrad_up", dead), 0)
            self.assertEqual(value(fams, "vkgrad_idle", dead), 0)
            t = subprocess.run([promtool(), "check", "metrics"], input=text,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual((t.returncode, t.stdout + t.stderr), (0, ""))
            # ... and the scrape logged nothing above debug level
            pids = set()
            for line in d2.log_text().splitlines():
                m = re.search(r"client pid (\d+)", line)
                if m and "vkgrad-cli stats --prometheus" in line:
                    pids.add(m.group(1))
            self.assertEqual(len(pids), 1, d2.log_tail())
            pid = pids.pop()
            lines = [l for l in d2.log_text().splitlines() if "client pid %s " % pid in l]
            self.assertGreaterEqual(len(lines), 3, lines)  # connected, hello, closed
            for l in lines:
                self.assertIn(" debug: ", l)
        finally:
            problems = d2.stop()
        self.assertEqual(problems, "")

    def test_stdout_exit_3_only_when_none_answered(self):
        gone = os.path.join(D.dir, "gone.sock")
        p = cli("stats", "--prometheus", gone)
        self.assertEqual(p.returncode, 3)
        self.assertEqual(value(parse(p.stdout), "vkgrad_up", gone), 0)
        p = cli("stats", "--prometheus", gone, D.sock)
        self.assertEqual(p.returncode, 0, p.stderr)


class TestCounters(unittest.TestCase):
    def test_rejections_by_code_and_jobs_per_uid(self):
        def scrape():
            p = cli("stats", "--prometheus", "--socket", D.sock)
            self.assertEqual(p.returncode, 0, p.stderr)
            return parse(p.stdout)
        before = scrape()
        uid = str(os.getuid())
        with vkgrad.connect(D.sock) as c:
            with self.assertRaises(vkgrad.Error) as e:
                c.call("unregister", region=4242)
            self.assertEqual(e.exception.code, "bad_region")
            with self.assertRaises(vkgrad.Error) as e:
                c.call("no_such_op")
            self.assertEqual(e.exception.code, "unknown_op")
            x = np.ones((8, 8), np.float32)
            for _ in range(3):
                c.linear_backward(x, x)
            c.ping()  # still serves
        after = scrape()

        def delta(name, **lab):
            try:
                b = value(before, name, D.sock, **lab)
            except KeyError:
                b = 0
            return value(after, name, D.sock, **lab) - b
        self.assertEqual(delta("vkgrad_requests_rejected_total", code="bad_region"), 1)
        self.assertEqual(delta("vkgrad_requests_rejected_total", code="unknown_op"), 1)
        self.assertEqual(delta("vkgrad_requests_rejected_total", code="limit"), 0)
        self.assertEqual(delta("vkgrad_jobs_failed_total", code="bad_region"), 0)
        self.assertEqual(delta("vkgrad_uid_jobs_done_total", uid=uid), 3)
        self.assertGreater(delta("vkgrad_uid_gpu_seconds_total", uid=uid), 0)
        for r in ("allow_list", "max_connections", "max_connections_per_uid"):
            value(after, "vkgrad_connections_refused_total", D.sock, reason=r)
        for n in ("vkgrad_device_losses_total", "vkgrad_device_recoveries_total",
                  "vkgrad_device_recovery_failures_total", "vkgrad_start_time_seconds"):
            value(after, n, D.sock)

    def test_connections_refused_by_reason(self):
        d = Daemon(args=["--max-connections-per-uid", "1"])
        try:
            # the start-up probe's connection may not be closed yet
            for _ in range(100):
                try:
                    first = vkgrad.connect(d.sock)
                    break
                except vkgrad.Error:
                    time.sleep(0.05)
            with first:
                with self.assertRaises(vkgrad.Error) as e:
                    vkgrad.connect(d.sock).ping()
                self.assertEqual(e.exception.code, "limit")
            # first's close reaches the daemon after it returns: until it
            # has, the scrape's own connection is refused too (vkgrad_up 0)
            for _ in range(100):
                p = cli("stats", "--prometheus", "--socket", d.sock)
                fams = parse(p.stdout)
                if value(fams, "vkgrad_up", d.sock) == 1:
                    break
                time.sleep(0.05)
            self.assertEqual(value(fams, "vkgrad_up", d.sock), 1, p.stdout + p.stderr)
            self.assertGreaterEqual(value(fams, "vkgrad_connections_refused_total", d.sock,
                                          reason="max_connections_per_uid"), 1)
            self.assertEqual(value(fams, "vkgrad_connections_refused_total", d.sock,
                                   reason="max_connections"), 0)
        finally:
            problems = d.stop()
        self.assertEqual(problems, "")


class TestCli(unittest.TestCase):
    def test_clients_lists_a_connection(self):
        with vkgrad.connect(D.sock, name="ops-test-client") as c:
            x = np.ones((8, 4), np.float32)
            c.linear_backward(x, x)
            c.linear_backward(x, x)
            r = c.region(8192)
            p = cli("clients", "--json", "--socket", D.sock)
            self.assertEqual(p.returncode, 0, p.stderr)
            j = json.loads(p.stdout)
            mine = [e for e in j["clients"] if e["name"] == "ops-test-client"]
            self.assertEqual(len(mine), 1, j)
            e = mine[0]
            self.assertEqual(e["pid"], os.getpid())
            self.assertEqual(e["uid"], os.getuid())
            self.assertEqual(e["jobs_done"], 2)
            self.assertGreaterEqual(e["region_bytes"], 8192)
            self.assertGreater(e["gpu_us"], 0)
            p = cli("clients", "--socket", D.sock)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"^PID +UID +NAME +JOBS")
            row = [l for l in p.stdout.splitlines() if "ops-test-client" in l]
            self.assertEqual(len(row), 1, p.stdout)
            self.assertEqual(row[0].split()[0], str(os.getpid()))
            r.close()

    def test_json_info_and_stats(self):
        p = cli("info", "--json", "--socket", D.sock)
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        self.assertEqual(j["socket"], D.sock)
        self.assertTrue(j["server"].startswith("vkgradd "))
        self.assertIn("max_frame", j["limits"])
        self.assertIsInstance(j["kernels"], list)
        p = cli("stats", "--json", "--socket", D.sock)
        self.assertEqual(p.returncode, 0, p.stderr)
        j = json.loads(p.stdout)
        self.assertIn("jobs_done", j)
        self.assertIn("bad_request", j["requests_rejected_by_code"])
        self.assertIn("job_latency", j["histograms"])

    def test_global_socket_after_the_command(self):
        for args in (["ping", "--socket", D.sock], ["stats", "--socket=" + D.sock],
                     ["--socket", D.sock, "info"]):
            p = cli(*args, env={"VKGRAD_SOCKET": "/nonexistent/x.sock"})
            self.assertEqual(p.returncode, 0, (args, p.stderr))
        p = cli("ping", "--socket")
        self.assertEqual(p.returncode, 2)

    def test_help_lists_bench_peak_and_clients(self):
        p = cli("--help")
        self.assertIn("bench --peak", p.stdout)
        self.assertIn("clients", p.stdout)


class TestSocketDiscovery(unittest.TestCase):
    """Each case of the order, through the library (the CLI's ping and
    Python's default_socket, which asks libvkgrad)."""

    def setUp(self):
        self.rt = tempfile.mkdtemp(prefix="vkgrad-rt.")

    def tearDown(self):
        shutil.rmtree(self.rt, ignore_errors=True)

    def py_default(self, env):
        code = "import vkgrad; print(vkgrad.default_socket())"
        e = python_env(env)
        e["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + e.get("PYTHONPATH", "")
        for k in ("VKGRAD_SOCKET", "XDG_RUNTIME_DIR"):
            if k not in env:
                e.pop(k, None)
        p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                           env=e, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.strip()

    def test_vkgrad_socket_first(self):
        os.symlink(D.sock, os.path.join(self.rt, "vkgrad.sock"))
        env = {"VKGRAD_SOCKET": D.sock, "XDG_RUNTIME_DIR": "/nonexistent"}
        self.assertEqual(self.py_default(env), D.sock)
        self.assertEqual(cli("ping", env=env).returncode, 0)
        env = {"VKGRAD_SOCKET": os.path.join(self.rt, "other.sock"), "XDG_RUNTIME_DIR": self.rt}
        self.assertEqual(self.py_default(env), env["VKGRAD_SOCKET"])

    def test_runtime_dir_socket_when_it_exists(self):
        link = os.path.join(self.rt, "vkgrad.sock")
        os.symlink(D.sock, link)
        env = {"XDG_RUNTIME_DIR": self.rt}
        self.assertEqual(self.py_default(env), link)
        p = cli("ping", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(link, p.stdout)

    def test_system_socket_when_the_runtime_dir_has_none(self):
        # XDG_RUNTIME_DIR set but without a socket (every logged-in user):
        # the system daemon's socket, not a path that does not exist
        self.assertEqual(self.py_default({"XDG_RUNTIME_DIR": self.rt}),
                         "/run/vkgrad/vkgrad.sock")
        self.assertEqual(self.py_default({}), "/run/vkgrad/vkgrad.sock")
        # a regular file by the name is not a daemon's socket either
        open(os.path.join(self.rt, "vkgrad.sock"), "w").close()
        self.assertEqual(self.py_default({"XDG_RUNTIME_DIR": self.rt}),
                         "/run/vkgrad/vkgrad.sock")

    def test_errors_say_what_to_do(self):
        gone = os.path.join(self.rt, "gone.sock")
        p = cli("ping", "--socket", gone)
        self.assertEqual(p.returncode, 3)
        self.assertIn("No such file", p.stderr)
        self.assertIn("systemctl --user start vkgradd.socket", p.stderr)
        with self.assertRaises(vkgrad.Error) as e:
            vkgrad.connect(gone)
        self.assertIn("vkgradd --socket", e.exception.message)
        # no permission: the socket's group is named, and how to join it
        d = Daemon()
        try:
            os.chmod(d.sock, 0o660)
            os.chmod(d.dir, 0o755)
            pre = ()
            if os.geteuid() == 0:
                pre = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
            else:
                os.chmod(d.sock, 0)
            p = cli("ping", "--socket", d.sock, pre=pre)
            self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
            self.assertIn("Permission denied", p.stderr)
            import grp
            gname = grp.getgrgid(os.stat(d.sock).st_gid).gr_name
            self.assertIn("group '%s'" % gname, p.stderr)
            self.assertIn("usermod -aG %s" % gname, p.stderr)
            os.chmod(d.sock, 0o660)
            self.assertEqual(cli("ping", "--socket", d.sock).returncode, 0)
        finally:
            problems = d.stop()
        self.assertEqual(problems, "")


if __name__ == "__main__":
    unittest.main()
