/* hello_job.c — the smallest complete vkgrad client: connect to vkgradd,
 * share one region, run one linear-layer backward pass, and check it
 * against a plain CPU computation.
 *
 *   cc hello_job.c $(pkg-config --cflags --libs vkgrad) -o hello_job
 *   ./hello_job [SOCKET]      (default: $VKGRAD_SOCKET, else the system's)
 *
 * Exit status: 0 when the gradients match, 1 on a mismatch, 3 on an error. */
#include <stdio.h>
#include <string.h>

#include <vkgrad.h>

enum { B = 4, I = 3, O = 2 }; /* batch, input features, output features */

/* the larger of worst and |a - b| (no libm needed) */
static double worse(double worst, double a, double b)
{
	double d = a > b ? a - b : b - a;
	return d > worst ? d : worst;
}

int main(int argc, char **argv)
{
	vkg_error err;
	vkg_client *c = vkg_connect(argc > 1 ? argv[1] : NULL, &err);
	if (!c) {
		fprintf(stderr, "hello_job: %s: %s\n", err.code, err.message);
		return 3;
	}
	vkg_info info;
	if (vkg_hello(c, "hello_job", &info, &err) != 0)
		goto fail;
	printf("connected to %s on %s\n", info.server, info.device_name);

	/* one region holding x[B][I], dy[B][O], w[O][I] and the outputs
	 * dw[O][I], db[O], dx[B][I], one after another */
	enum { X = 0, DY = X + B * I, W = DY + B * O, DW = W + O * I, DB = DW + O * I,
	       DX = DB + O, N = DX + B * I };
	uint64_t region;
	float *m = vkg_region_create(c, N * sizeof(float), &region, &err);
	if (!m)
		goto fail;
	for (int k = 0; k < B * I; k++)
		m[X + k] = (float)(k % 5) - 2.0f;
	for (int k = 0; k < B * O; k++)
		m[DY + k] = 0.5f * (float)(k % 3) - 0.25f;
	for (int k = 0; k < O * I; k++)
		m[W + k] = 0.1f * (float)k;

	vkg_job job = vkg_job_init();
	job.batch = B;
	job.in = I;
	job.out = O;
	job.x = (vkg_tensor){region, X * sizeof(float)};
	job.dy = (vkg_tensor){region, DY * sizeof(float)};
	job.w = (vkg_tensor){region, W * sizeof(float)};
	job.dw = (vkg_tensor){region, DW * sizeof(float)};
	job.db = (vkg_tensor){region, DB * sizeof(float)};
	job.dx = (vkg_tensor){region, DX * sizeof(float)};
	vkg_result res;
	if (vkg_linear_backward(c, &job, &res, &err) != 0)
		goto fail;

	/* the reference: dW = dYᵀ·X, db = Σ_b dY, dX = dY·W */
	double worst = 0;
	for (int o = 0; o < O; o++) {
		double db = 0;
		for (int b = 0; b < B; b++)
			db += m[DY + b * O + o];
		worst = worse(worst, db, m[DB + o]);
		for (int i = 0; i < I; i++) {
			double dw = 0;
			for (int b = 0; b < B; b++)
				dw += (double)m[DY + b * O + o] * m[X + b * I + i];
			worst = worse(worst, dw, m[DW + o * I + i]);
		}
	}
	for (int b = 0; b < B; b++)
		for (int i = 0; i < I; i++) {
			double dx = 0;
			for (int o = 0; o < O; o++)
				dx += (double)m[DY + b * O + o] * m[W + o * I + i];
			worst = worse(worst, dx, m[DX + b * I + i]);
		}
	printf("dW =");
	for (int k = 0; k < O * I; k++)
		printf(" %g", m[DW + k]);
	printf("\ndb =");
	for (int k = 0; k < O; k++)
		printf(" %g", m[DB + k]);
	printf("\ndX =");
	for (int k = 0; k < B * I; k++)
		printf(" %g", m[DX + k]);
	printf("\ngpu %llu us, max abs error %.3g: %s\n", (unsigned long long)res.gpu_us, worst,
	       worst <= 1e-5 ? "ok" : "MISMATCH");
	vkg_region_destroy(c, region, m, N * sizeof(float), &err);
	vkg_close(c);
	return worst <= 1e-5 ? 0 : 1;
fail:
	fprintf(stderr, "hello_job: %s: %s\n", err.code, err.message);
	vkg_close(c);
	return 3;
}
