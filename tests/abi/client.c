/* tests/abi/client.c — a client of libvkgrad that uses only the calls of
 * 0.1, built by tests/build/test_abi.sh twice: against the saved 0.1
 * header (tests/abi/v0.1.0/vkgrad.h) and against today's. Run against
 * today's library and a daemon: hello, stats, a region, a job checked
 * against a float64 reference (f32, tolerance 1e-5 relative), an
 * asynchronous one, and guard bytes after every struct the library fills,
 * which must be untouched (a library that writes past the caller's
 * struct breaks every old binary). Built against today's header
 * (-DVKG_ABI_NOW) it also checks vkg_version() and the _sized forms.
 * Exit 0, or 1 with a line saying what was wrong. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkgrad.h"

#define GUARD 512
#define B 8
#define I 6
#define O 5

static int fail(const char *what, const vkg_error *e)
{
	printf("abi client: %s%s%s%s%s\n", what, e ? ": " : "", e ? e->code : "", e ? ": " : "",
	       e ? e->message : "");
	return 1;
}

static int guard_intact(const unsigned char *g)
{
	for (int i = 0; i < GUARD; i++)
		if (g[i] != 0xa5)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return fail("usage: client SOCKET", NULL);
	vkg_error err;
	vkg_client *c = vkg_connect(argv[1], &err);
	if (!c)
		return fail("connect", &err);
	static struct {
		vkg_info info;
		unsigned char guard[GUARD];
	} hi;
	memset(&hi, 0xa5, sizeof(hi));
	if (vkg_hello(c, "abi-client", &hi.info, &err) != 0)
		return fail("hello", &err);
	if (strncmp(hi.info.server, "vkgradd ", 8) != 0 || hi.info.max_frame == 0 ||
	    hi.info.n_kernels == 0)
		return fail("hello: the 0.1 fields are not filled", NULL);
	if (!guard_intact(hi.guard))
		return fail("hello wrote past the caller's vkg_info", NULL);
	struct {
		vkg_stats st;
		unsigned char guard[GUARD];
	} st;
	memset(&st, 0xa5, sizeof(st));
	if (vkg_stats_get(c, &st.st, &err) != 0)
		return fail("stats", &err);
	if (st.st.uptime_s <= 0 || st.st.clients < 1)
		return fail("stats: the 0.1 fields are not filled", NULL);
	if (!guard_intact(st.guard))
		return fail("stats_get wrote past the caller's vkg_stats", NULL);

	/* x [B][I], dy [B][O] -> dw [O][I], db [O], dx [B][I] with w [O][I] */
	const size_t nx = B * I, ndy = B * O, nw = O * I;
	const size_t off_x = 0, off_dy = 256, off_w = 512, off_dw = 768, off_db = 1024, off_dx = 1280;
	uint64_t region;
	float *m = vkg_region_create(c, 4096, &region, &err);
	if (!m)
		return fail("region_create", &err);
	float *x = m + off_x / 4, *dy = m + off_dy / 4, *w = m + off_w / 4;
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)((int)(i * 7 % 13) - 6) / 8.0f;
	for (size_t i = 0; i < ndy; i++)
		dy[i] = (float)((int)(i * 5 % 11) - 5) / 4.0f;
	for (size_t i = 0; i < nw; i++)
		w[i] = (float)((int)(i * 3 % 7) - 3) / 2.0f;
	struct {
		vkg_job j;
		unsigned char guard[GUARD];
	} jb;
	memset(&jb, 0xa5, sizeof(jb));
	jb.j = vkg_job_init();
	if (!guard_intact(jb.guard))
		return fail("job_init wrote past the caller's vkg_job", NULL);
	vkg_job *j = &jb.j;
	j->batch = B, j->in = I, j->out = O;
	j->x = (vkg_tensor){region, off_x};
	j->dy = (vkg_tensor){region, off_dy};
	j->w = (vkg_tensor){region, off_w};
	j->dw = (vkg_tensor){region, off_dw};
	j->db = (vkg_tensor){region, off_db};
	j->dx = (vkg_tensor){region, off_dx};
	vkg_result res;
	for (int pass = 0; pass < 2; pass++) {
		memset((char *)m + off_dw, 0xff, 4096 - off_dw);
		if (pass == 0 && vkg_linear_backward(c, j, &res, &err) != 0)
			return fail("linear_backward", &err);
		if (pass == 1) {
			uint64_t h;
			if (vkg_submit(c, j, &h, &err) != 0 || vkg_wait(c, h, 60000, &res, &err) != 0)
				return fail("submit/wait", &err);
		}
		const float *dw = m + off_dw / 4, *db = m + off_db / 4, *dx = m + off_dx / 4;
		double worst = 0;
		for (int o = 0; o < O; o++) {
			double sb = 0;
			for (int b = 0; b < B; b++)
				sb += dy[b * O + o];
			worst = fmax(worst, fabs(db[o] - sb) / fmax(1.0, fabs(sb)));
			for (int i = 0; i < I; i++) {
				double s = 0;
				for (int b = 0; b < B; b++)
					s += (double)dy[b * O + o] * x[b * I + i];
				worst = fmax(worst, fabs(dw[o * I + i] - s) / fmax(1.0, fabs(s)));
			}
		}
		for (int b = 0; b < B; b++)
			for (int i = 0; i < I; i++) {
				double s = 0;
				for (int o = 0; o < O; o++)
					s += (double)dy[b * O + o] * w[o * I + i];
				worst = fmax(worst, fabs(dx[b * I + i] - s) / fmax(1.0, fabs(s)));
			}
		if (!(worst <= 1e-5)) {
			printf("abi client: pass %d: max relative error %g > 1e-5\n", pass, worst);
			return 1;
		}
	}
#ifdef VKG_ABI_NOW
	if (vkg_version() != VKGRAD_VERSION)
		return fail("vkg_version() is not the header's VKGRAD_VERSION", NULL);
	vkg_info now;
	memset(&now, 0xa5, sizeof(now));
	if (VKG_HELLO(c, "abi-client", &now, &err) != 0)
		return fail("VKG_HELLO", &err);
	if (now.protocol_version != 1 || now.max_connections == 0)
		return fail("VKG_HELLO: the 0.2 fields are not filled", NULL);
	vkg_kernel_info k;
	if (vkg_info_kernel(c, now.n_kernels - 1, &k) != 0 || !k.name[0] ||
	    vkg_info_kernel(c, now.n_kernels, &k) == 0)
		return fail("vkg_info_kernel", NULL);
	vkg_stats s2;
	if (VKG_STATS_GET(c, &s2, &err) != 0)
		return fail("VKG_STATS_GET", &err);
	if (s2.started_unix_s < 1e9)
		return fail("VKG_STATS_GET: started_unix_s is not filled", NULL);
	/* a larger caller (a newer header) gets zeros past what we know */
	struct {
		vkg_stats st;
		unsigned char more[64];
	} big;
	memset(&big, 0xa5, sizeof(big));
	if (vkg_stats_get_sized(c, &big.st, sizeof(big), &err) != 0)
		return fail("stats_get_sized", &err);
	for (size_t i = 0; i < sizeof(big.more); i++)
		if (big.more[i])
			return fail("stats_get_sized left bytes past its struct unzeroed", NULL);
	struct {
		vkg_job j;
		unsigned char more[16];
	} bj;
	vkg_job_init_sized(&bj.j, sizeof(bj));
	bj.j = *j;
	if (vkg_linear_backward_sized(c, &bj.j, sizeof(bj), &res, &err) != 0)
		return fail("linear_backward_sized", &err);
	bj.more[3] = 1; /* a field this library does not know */
	if (vkg_linear_backward_sized(c, &bj.j, sizeof(bj), &res, &err) != -22 ||
	    !strstr(err.message, "newer libvkgrad"))
		return fail("linear_backward_sized took an unknown field", NULL);
	if (vkg_ping(c, &err) != 0)
		return fail("ping after the refused job", &err);
#endif
	if (vkg_region_destroy(c, region, m, 4096, &err) != 0)
		return fail("region_destroy", &err);
	vkg_close(c);
	printf("abi client: ok\n");
	return 0;
}
