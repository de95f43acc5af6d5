/* bench/bench_resident.c — see bench_resident.h. */
#include "bench_resident.h"

/* rows × cols of t's tensor in slot s (vkgrad.h, vkg_device_tensor) */
static void dims(const cli_task *t, int s, uint64_t *rows, uint64_t *cols)
{
	switch (s) {
	case CLI_X:
	case CLI_DX: *rows = t->batch, *cols = t->in; break;
	case CLI_DY: *rows = t->batch, *cols = t->out; break;
	case CLI_W:
	case CLI_DW: *rows = t->out, *cols = t->in; break;
	default: *rows = 1, *cols = t->out; break; /* db */
	}
}

int bench_resident_open(bench_resident *br, vkg_client *c, const cli_task *t, vkg_error *err)
{
	for (int s = 0; s < CLI_NT; s++)
		br->id[s] = VKG_NONE;
	for (int s = 0; s < CLI_NT; s++) {
		if (!t->present[s])
			continue;
		uint64_t rows, cols;
		dims(t, s, &rows, &cols);
		int rc = vkg_tensor_new(c, proto_dtype_name(t->dtype), rows, cols, &br->id[s], err);
		if (rc == 0)
			rc = vkg_tensor_write(c, br->id[s], t->region, t->off[s], err);
		if (rc != 0) {
			bench_resident_close(br, c);
			return rc;
		}
	}
	return 0;
}

vkg_job bench_resident_job(const bench_resident *br, const cli_task *t)
{
	vkg_job j = cli_task_job(t);
	vkg_tensor *slot[CLI_NT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int s = 0; s < CLI_NT; s++)
		if (br->id[s] != VKG_NONE)
			*slot[s] = vkg_device_tensor(br->id[s]);
	return j;
}

int bench_resident_read(const bench_resident *br, vkg_client *c, const cli_task *t, vkg_error *err)
{
	for (int s = CLI_DW; s <= CLI_DX; s++)
		if (br->id[s] != VKG_NONE) {
			const int rc = vkg_tensor_read(c, br->id[s], t->region, t->off[s], err);
			if (rc != 0)
				return rc;
		}
	return 0;
}

void bench_resident_close(bench_resident *br, vkg_client *c)
{
	vkg_error err;
	for (int s = 0; s < CLI_NT; s++)
		if (br->id[s] != VKG_NONE) {
			vkg_tensor_free(c, br->id[s], &err);
			br->id[s] = VKG_NONE;
		}
}
