"""The daemon's latency histograms (stats) and `vkgrad stats --prometheus`.

The exposition is parsed line by line and checked as Prometheus' text
format 0.0.4 wants it: every sample belongs to a family announced by one
# HELP and one # TYPE line before its samples, samples of a family are
contiguous, counters end in _total, histogram buckets are cumulative with
rising le ending in +Inf, and the +Inf bucket equals _count. The values are
checked against the jobs the test ran."""

import os
import re
import stat
import subprocess
import unittest

import numpy as np

import vkgrad
from daemon import BUILD, Daemon, child_env

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
D = None


def setUpModule():
    global D
    D = Daemon()


def tearDownModule():
    problems = D.stop()
    if problems:
        raise AssertionError("daemon: " + problems)


def vkgrad_cli(*args):
    return subprocess.run([os.path.join(BUILD, "vkgrad")] + list(args), capture_output=True,
                          text=True, timeout=120, env=child_env())


def parse_labels(s):
    out, pos = {}, 0
    while pos < len(s):
        m = LABEL.match(s, pos)
        if not m:
            raise AssertionError("bad labels at %r" % s[pos:])
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return out


def parse(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}; raises
    AssertionError on any format violation."""
    fams, order, current = {}, [], None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], line.split(" ")[2], line.split(" ", 3)[3]
            f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            key = "help" if kind == "HELP" else "type"
            if f[key] is not None:
                raise AssertionError("line %d: second # %s for %s" % (n, kind, name))
            if f["samples"]:
                raise AssertionError("line %d: # %s for %s after its samples" % (n, kind, name))
            if kind == "TYPE" and rest not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise AssertionError("line %d: type %r" % (n, rest))
            f[key] = rest
            if name not in order:
                order.append(name)
            current = name
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError("line %d is not a sample: %r" % (n, line))
        name, labels, value = m.group(1), parse_labels(m.group(3) or ""), m.group(4)
        fam = name
        if current and fams[current]["type"] in ("histogram", "summary"):
            sufs = ("_bucket", "_sum", "_count") if fams[current]["type"] == "histogram" \
                else ("_sum", "_count")
            for suf in sufs:
                if name == current + suf:
                    fam = current
        if fam not in fams or fams[fam]["type"] is None:
            raise AssertionError("line %d: sample %s without a # TYPE line" % (n, name))
        if fam != current:
            raise AssertionError("line %d: sample of %s outside its family's block" % (n, fam))
        fams[fam]["samples"].append((name, labels, float(value)))
    for name, f in fams.items():
        if f["help"] is None:
            raise AssertionError("%s has no # HELP" % name)
        if f["type"] == "counter" and not name.endswith("_total"):
            raise AssertionError("counter %s does not end in _total" % name)
        if f["type"] == "histogram":
            check_histogram(name, f["samples"])
    return fams


def check_histogram(name, samples):
    series = {}
    for n, labels, v in samples:
        key = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if n == name + "_bucket":
            s["buckets"].append((labels["le"], v))
        elif n == name + "_sum":
            s["sum"] = v
        elif n == name + "_count":
            s["count"] = v
    for key, s in series.items():
        b = s["buckets"]
        if not b or b[-1][0] != "+Inf":
            raise AssertionError("%s%s: buckets do not end with le=\"+Inf\"" % (name, key))
        les = [float(le) for le, _ in b[:-1]]
        if les != sorted(les) or len(set(les)) != len(les):
            raise AssertionError("%s%s: le not rising: %s" % (name, key, les))
        counts = [v for _, v in b]
        if counts != sorted(counts):
            raise AssertionError("%s%s: buckets not cumulative: %s" % (name, key, counts))
        if s["count"] is None or s["sum"] is None:
            raise AssertionError("%s%s: _sum or _count missing" % (name, key))
        if counts[-1] != s["count"]:
            raise AssertionError("%s%s: +Inf bucket %s != _count %s"
                                 % (name, key, counts[-1], s["count"]))


def value(fams, name, sock, **labels):
    fam = name if name in fams else re.sub(r"_(bucket|sum|count)$", "", name)
    for n, lab, v in fams[fam]["samples"]:
        if n == name and lab.get("socket") == sock and \
                all(lab.get(k) == x for k, x in labels.items()):
            return v
    raise KeyError((name, sock, labels))


class TestHistograms(unittest.TestCase):
    def test_stats_histograms_count_the_jobs(self):
        with vkgrad.connect(D.sock) as c:
            before = {k: h["count"] for k, h in c.stats()["histograms"].items()}
            x = np.ones((32, 16), np.float32)
            for _ in range(5):
                c.linear_backward(x, x)
            hs = c.stats()["histograms"]
        self.assertEqual(sorted(hs), ["batch_gpu", "job_latency", "job_queued"])
        self.assertEqual(hs["job_latency"]["count"] - before["job_latency"], 5)
        self.assertEqual(hs["job_queued"]["count"] - before["job_queued"], 5)
        self.assertGreaterEqual(hs["batch_gpu"]["count"] - before["batch_gpu"], 1)
        for name, h in hs.items():
            self.assertEqual(len(h["counts"]), len(h["le_us"]) + 1, name)
            self.assertEqual(sum(h["counts"]), h["count"], name)
            self.assertEqual(h["le_us"], sorted(set(h["le_us"])), name)
        # a job's time in the daemon covers its queueing
        self.assertGreaterEqual(hs["job_latency"]["sum_us"], hs["job_queued"]["sum_us"])


class TestPrometheus(unittest.TestCase):
    def test_exposition_format_and_values(self):
        with vkgrad.connect(D.sock) as c:
            x = np.ones((8, 4), np.float32)
            for _ in range(3):
                c.linear_backward(x, x)
            st = c.stats()
        p = vkgrad_cli("--socket", D.sock, "stats", "--prometheus")
        self.assertEqual(p.returncode, 0, p.stderr)
        fams = parse(p.stdout)
        self.assertEqual(value(fams, "vkgrad_up", D.sock), 1)
        # counters as the daemon reported them (no job ran in between)
        self.assertEqual(value(fams, "vkgrad_jobs_done_total", D.sock), st["jobs_done"])
        self.assertEqual(value(fams, "vkgrad_batches_total", D.sock), st["batches"])
        self.assertEqual(value(fams, "vkgrad_job_latency_seconds_count", D.sock),
                         st["histograms"]["job_latency"]["count"])
        self.assertAlmostEqual(value(fams, "vkgrad_job_latency_seconds_sum", D.sock),
                               st["histograms"]["job_latency"]["sum_us"] / 1e6, places=6)
        self.assertEqual(fams["vkgrad_jobs_done_total"]["type"], "counter")
        self.assertEqual(fams["vkgrad_clients"]["type"], "gauge")
        for h in ("job_latency", "job_queued", "batch_gpu"):
            self.assertEqual(fams["vkgrad_%s_seconds" % h]["type"], "histogram")
        info = [lab for n, lab, v in fams["vkgrad_info"]["samples"]]
        self.assertTrue(info[0]["server"].startswith("vkgradd "))
        self.assertEqual(value(fams, "vkgrad_devlocal_min_bytes", D.sock, dtype="f32"),
                         st["devlocal_min_bytes"])
        # stage medians and p99 over the recent window, as stats reports
        # them, in a summary with the count and sum since start
        self.assertEqual(fams["vkgrad_stage_seconds"]["type"], "summary")
        for name, sv in st["stages"].items():
            self.assertAlmostEqual(value(fams, "vkgrad_stage_seconds", D.sock, stage=name,
                                         quantile="0.5"), sv["p50_us"] / 1e6, places=9)
            self.assertAlmostEqual(value(fams, "vkgrad_stage_seconds", D.sock, stage=name,
                                         quantile="0.99"), sv["p99_us"] / 1e6, places=9)
            self.assertEqual(value(fams, "vkgrad_stage_seconds_count", D.sock, stage=name),
                             sv["total"])
            self.assertAlmostEqual(value(fams, "vkgrad_stage_seconds_sum", D.sock, stage=name),
                                   sv["sum_us"] / 1e6, places=9)
            self.assertGreaterEqual(sv["total"], sv["count"])
        for stage in ("decode", "queue", "record", "submit", "answer", "write"):
            self.assertIn(stage, st["stages"])
        self.assertEqual(value(fams, "vkgrad_batches_seen_polling_total", D.sock) +
                         value(fams, "vkgrad_batches_seen_blocking_total", D.sock),
                         st["spin_hits"] + st["blocking_waits"])
        self.assertGreaterEqual(st["spin_hits"] + st["blocking_waits"], st["batches"])

    def test_several_daemons_one_file_atomically(self):
        d2 = Daemon(sock_name="b.sock")
        try:
            with open(os.path.join(d2.dir, "fake.sock"), "w") as f:
                f.write("not a socket: --scan skips it\n")
            out = os.path.join(d2.dir, "vkgrad.prom")
            down = os.path.join(d2.dir, "gone.sock")
            p = vkgrad_cli("stats", "--prometheus", "--scan", d2.dir, D.sock, down,
                           "--output", out)
            # one daemon down: reported, file written anyway, exit status 0
            # (the metrics service succeeds: test_operations.py)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("gone.sock", p.stderr)
            self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o644)
            self.assertEqual([f for f in os.listdir(d2.dir) if ".tmp." in f], [])
            with open(out) as f:
                fams = parse(f.read())
            b = d2.sock
            self.assertEqual(value(fams, "vkgrad_up", D.sock), 1)
            self.assertEqual(value(fams, "vkgrad_up", b), 1)
            self.assertEqual(value(fams, "vkgrad_up", down), 0)
            socks = {lab["socket"] for _, lab, _ in fams["vkgrad_jobs_done_total"]["samples"]}
            self.assertEqual(socks, {D.sock, b})
            self.assertEqual(value(fams, "vkgrad_job_latency_seconds_count", b), 0)
        finally:
            problems = d2.stop()
        self.assertEqual(problems, "")

    def test_parser_rejects_what_prometheus_would(self):
        good = ('# HELP a_total x\n# TYPE a_total counter\na_total{socket="s"} 1\n'
                '# HELP h_seconds x\n# TYPE h_seconds histogram\n'
                'h_seconds_bucket{le="0.1"} 1\nh_seconds_bucket{le="+Inf"} 2\n'
                'h_seconds_sum 0.3\nh_seconds_count 2\n')
        parse(good)
        for bad in (good.replace("h_seconds_count 2", "h_seconds_count 3"),
                    good.replace('le="0.1"} 1', 'le="0.1"} 3'),
                    good.replace("# TYPE a_total counter\n", ""),
                    good.replace("a_total", "a"),
                    good + 'a_total{socket="t"} 2\n',
                    good.replace('{le="+Inf"}', '{le="9"}')):
            with self.assertRaises(AssertionError):
                parse(bad)

    def test_human_stats_show_latency(self):
        p = vkgrad_cli("--socket", D.sock, "stats")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"job_latency +count \d+")
        p = vkgrad_cli("--socket", D.sock, "stats", "--output", "x")
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()
