/* vkgrad.h — client library for vkgradd, the shared GPU daemon computing
 * linear-layer backward passes (dW = dYᵀ·X, db = Σ dY, dX = dY·W).
 *
 * Wire protocol: proto/README.md (v1). Link with -lvkgrad.
 *
 * Conventions
 *  - Functions returning int return 0 on success and a negative value on
 *    failure: -errno for local failures (socket, memfd, mmap), or
 *    VKG_EREMOTE when the daemon answered with an error. In both cases the
 *    optional vkg_error *err is filled: code is the protocol's error code
 *    ("bad_request", "limit", ...) or "io" for local failures, and message
 *    says what went wrong (for remote errors, the daemon's own message).
 *    A connection the daemon closed after saying why (an id-0 error frame:
 *    `bad_frame`, or `limit` for a refused connection) reports -ECONNRESET
 *    with that code instead of "io".
 *  - Constructors return NULL on failure and fill err.
 *
 * A growing ABI (man vkgrad(3))
 *  vkg_info, vkg_stats and vkg_job only ever grow at their end. The calls
 *  of 0.1 (vkg_hello, vkg_stats_get, vkg_job_init, vkg_submit,
 *  vkg_linear_backward) read and write the 0.1 part of them only
 *  (VKG_*_SIZE_0_1 bytes), so a program built against an older header
 *  keeps working with a newer library. The _sized forms take the size of
 *  the caller's struct (sizeof, as VKG_HELLO, VKG_STATS_GET and
 *  VKG_JOB_INIT pass it): the library fills or reads that much of what it
 *  knows and zeroes the rest, so they serve an older and a newer caller
 *  alike. vkg_version() says which library runs.
 *
 * Thread-safety
 *  A vkg_client may be shared between threads: every call takes the client's
 *  internal mutex, so calls are serialised. A blocking call (the synchronous
 *  ops, vkg_wait) holds the mutex while it waits, so for concurrency from
 *  many threads use one vkg_client per thread, or the asynchronous form.
 *  Region pointers are plain shared memory: the caller orders its own writes
 *  before submitting and reads outputs only after the job completed.
 */
#ifndef VKGRAD_H
#define VKGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The header's version; vkg_version() gives the library's. */
#define VKGRAD_VERSION_MAJOR 0
#define VKGRAD_VERSION_MINOR 2
#define VKGRAD_VERSION_PATCH 0
#define VKGRAD_VERSION_NUMBER(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define VKGRAD_VERSION \
	VKGRAD_VERSION_NUMBER(VKGRAD_VERSION_MAJOR, VKGRAD_VERSION_MINOR, VKGRAD_VERSION_PATCH)

/* The library's VKGRAD_VERSION_NUMBER (a program built against an older
 * header may run on a newer library; check with it before using a call
 * the library may not have). */
unsigned vkg_version(void);

#define VKG_EREMOTE (-10000) /* the daemon answered with an error */
#define VKG_NONE UINT64_MAX  /* "no tensor" in vkg_tensor.region */

typedef struct vkg_error {
	char code[24];     /* protocol code, or "io" */
	char message[256];
} vkg_error;

typedef struct vkg_client vkg_client;

/* Connect to the daemon. path NULL means vkg_default_socket(): the
 * environment's $VKGRAD_SOCKET when set; else $XDG_RUNTIME_DIR/vkgrad.sock
 * when that socket exists (a daemon of the user's own: systemctl --user);
 * else the system daemon's /run/vkgrad/vkgrad.sock. A failure's message
 * says what to do: the unit to start, the socket's group to join. */
vkg_client *vkg_connect(const char *path, vkg_error *err);
/* Close the connection; the daemon releases its regions, and every mapping
 * vkg_region_create returned that was not destroyed is unmapped. NULL is
 * allowed. */
void vkg_close(vkg_client *c);
/* The socket path the library would use for path == NULL (static buffer). */
const char *vkg_default_socket(void);

/* How long a wait for a reply (vkg_linear_backward, vkg_wait and the other
 * synchronous calls) polls the socket before it sleeps in the kernel: a
 * synchronous client whose jobs take tens of µs then sees its reply a
 * scheduler wake-up (about 10 µs) sooner, for up to `us` µs of its own CPU
 * per wait. 0 (the default) never polls. vkg_connect takes the initial
 * value from $VKGRAD_WAIT_SPIN_US (it fails, naming the variable, when that
 * is not a number up to the limit). Returns 0, or -EINVAL when `us` is over
 * VKG_MAX_WAIT_SPIN_US. */
#define VKG_MAX_WAIT_SPIN_US 1000000u
int vkg_set_wait_spin(vkg_client *c, unsigned us, vkg_error *err);

/* ---- server information ---- */
typedef struct vkg_kernel_info {
	char name[48], domain[24], variant[24], dtype[8], status[16];
} vkg_kernel_info;

typedef struct vkg_info {
	char server[48];
	char device_name[128], driver[128], api[16], device_type[16];
	uint32_t vendor_id, device_id;
	uint32_t max_frame, max_regions, max_inflight;
	uint64_t max_region_bytes, max_dim, max_tensor_bytes;
	unsigned n_kernels;         /* all of them; kernels[] holds the first 32 */
	vkg_kernel_info kernels[32]; /* every one: vkg_info_kernel */
	/* 0.2 (vkg_hello_sized / VKG_HELLO only) */
	uint64_t max_total_region_bytes, max_region_bytes_per_uid;
	uint32_t max_connections, max_connections_per_uid;
	uint32_t protocol_version;
	/* 0.2, device tensors (sized calls only; 0 from a daemon without
	 * them): device bytes of all tensors, of one uid's, tensors per
	 * connection */
	uint64_t max_device_bytes, max_device_bytes_per_uid;
	uint32_t max_tensors;
} vkg_info;
#define VKG_INFO_SIZE_0_1 offsetof(vkg_info, max_total_region_bytes)

typedef struct vkg_stats {
	double uptime_s, jobs_per_batch_avg;
	uint64_t clients, regions, region_bytes, jobs_done, jobs_failed, batches;
	uint64_t pipelines, pipeline_cache_hits, jobs_queued, jobs_running;
	uint64_t host_imports, staged_regions;
	uint64_t validation_errors;
	/* kernels and memory path: device-local threshold (0: off), jobs run
	 * on device-local copies and the bytes copied, split-K jobs,
	 * dispatches recorded, scratch held now, batches run without scratch */
	uint64_t devlocal_min_bytes, devlocal_min_bytes_16bit; /* f32 jobs, f16/bf16 jobs */
	uint64_t devlocal_jobs, devlocal_copy_bytes, splitk_jobs;
	uint64_t dispatches, scratch_bytes, scratch_failures;
	/* streamed jobs (copies overlapped with kernels): dY bytes per chunk
	 * (0: off), tensor bytes from which a device-local job streams,
	 * transfer queues used (0: the compute queue), jobs and chunks run,
	 * the steps their dW ran in (row blocks, each downloaded while the
	 * next computes; 1 per job whose dW was not cut) */
	uint64_t stream_chunk_bytes, stream_min_bytes, stream_queues;
	uint64_t stream_jobs, stream_chunks;
	uint64_t stream_dw_blocks;
	/* 0.2 (vkg_stats_get_sized / VKG_STATS_GET only): requests answered
	 * with an error at once and connections refused, all codes and
	 * reasons (stats --prometheus splits them), device losses and
	 * recoveries, when the daemon started (seconds since the epoch; 0
	 * from a daemon before 0.2) */
	uint64_t requests_rejected, connections_refused;
	uint64_t device_losses, device_recoveries;
	double started_unix_s;
	/* 0.2, later (sized calls only; 0 from a daemon that does not send
	 * it): of stream_jobs, those that streamed because another
	 * connection's small jobs were about (--stream-shared-min-bytes) */
	uint64_t stream_shared_jobs;
	/* 0.2, device tensors (sized calls only; 0 from a daemon without
	 * them): tensors live now and the device bytes they hold, all
	 * clients; client memory jobs and tensor ops read (host to device)
	 * and wrote (device to host) since the daemon started */
	uint64_t tensors, device_bytes;
	uint64_t host_read_bytes, host_write_bytes;
} vkg_stats;
#define VKG_STATS_SIZE_0_1 offsetof(vkg_stats, requests_rejected)

/* Fill the 0.1 part of *out (VKG_INFO_SIZE_0_1 / VKG_STATS_SIZE_0_1
 * bytes; the rest is left alone). */
int vkg_hello(vkg_client *c, const char *client_name, vkg_info *out, vkg_error *err);
int vkg_stats_get(vkg_client *c, vkg_stats *out, vkg_error *err);
/* Fill `size` bytes of *out: what this library knows, zero past it. */
int vkg_hello_sized(vkg_client *c, const char *client_name, vkg_info *out, size_t size,
		    vkg_error *err);
int vkg_stats_get_sized(vkg_client *c, vkg_stats *out, size_t size, vkg_error *err);
#define VKG_HELLO(c, name, out, err) vkg_hello_sized((c), (name), (out), sizeof(*(out)), (err))
#define VKG_STATS_GET(c, out, err) vkg_stats_get_sized((c), (out), sizeof(*(out)), (err))
/* Kernel i (0 .. n_kernels - 1) of the last hello on c, past the 32 that
 * vkg_info holds too. 0, or -ENOENT. */
int vkg_info_kernel(const vkg_client *c, unsigned i, vkg_kernel_info *out);
int vkg_ping(vkg_client *c, vkg_error *err);

/* ---- shared memory regions ----
 * vkg_region_create makes a memfd of `size` bytes sealed against shrinking
 * (F_SEAL_SHRINK), maps it read-write, registers it with the daemon and
 * returns the mapping; *region receives the daemon's region number. */
void *vkg_region_create(vkg_client *c, size_t size, uint64_t *region, vkg_error *err);
/* Unregister (the daemon answers once no job uses the region) and unmap.
 * ptr/size are what vkg_region_create returned/was given; ptr NULL only
 * unregisters (a region from vkg_region_register_fd). */
int vkg_region_destroy(vkg_client *c, uint64_t region, void *ptr, size_t size, vkg_error *err);
/* Register memory the caller owns and maps itself: fd is a memfd of at
 * least `size` bytes carrying F_SEAL_SHRINK (the daemon's checks as for
 * vkg_region_create). A copy of the descriptor travels to the daemon; fd
 * stays the caller's (close it when you like), and so does every mapping of
 * it: neither vkg_region_destroy(c, region, NULL, 0, err) nor vkg_close
 * unmaps anything. For bindings whose arrays must keep their memory alive
 * on their own terms (python/vkgrad maps it with Python's mmap). */
int vkg_region_register_fd(vkg_client *c, int fd, size_t size, uint64_t *region, vkg_error *err);

/* ---- jobs ---- */
typedef struct vkg_tensor {
	uint64_t region; /* VKG_NONE: not given */
	uint64_t offset; /* bytes from the start of the region */
} vkg_tensor;

/* 0.1's vkg_job, field for field: what vkg_job_init returns to a binary
 * built against 0.1 (below). */
typedef struct vkg_job_0_1 {
	const char *dtype;
	uint64_t batch, in, out;
	vkg_tensor x, dy, w, dw, db, dx;
	bool accumulate;
	const char *variant;
} vkg_job_0_1;

typedef struct vkg_job {
	const char *dtype; /* storage type of every tensor: "f32", "f16" or
			    * "bf16" (NULL means f32) */
	uint64_t batch, in, out;
	vkg_tensor x, dy, w; /* inputs; w only needed for dx */
	vkg_tensor dw, db, dx; /* outputs; at least one */
	bool accumulate;
	const char *variant; /* NULL or "auto": the daemon picks kernels by
			      * shape; "generic", "tiled", "tiled128",
			      * "splitk", "splitk128", "narrow", "coopmat" (f16),
			      * "coopmat_khr", "coopmat_khr_splitk" or
			      * "coopmat_nv2" (f16, bf16),
			      * "coopmat_khr_f32x3" or
			      * "coopmat_khr_f32_splitk" (f32)
			      * forces a family
			      * (hello lists what this daemon has) */
	/* 0.2 (read by the _sized calls, and so by the macros below) */
	const char *activation; /* NULL or "none"; "relu" or "gelu" (torch's
				 * tanh form): dZ = dY ⊙ act'(·) feeds dw, db
				 * and dx; not with accumulate */
	vkg_tensor y; /* relu: the forward's output act(z) (batch × out, an input) */
	vkg_tensor z; /* gelu: the pre-activation X·Wᵀ + b (batch × out, an input) */
} vkg_job;

#define VKG_JOB_SIZE_0_1 offsetof(vkg_job, activation)

/* A vkg_job with every tensor set to VKG_NONE. The library's vkg_job_init
 * returns 0.1's layout (a vkg_job_0_1, by value: it never grows), for
 * binaries built against 0.1; a program built against this header calls
 * vkg_job_init_sized with its own sizeof through the macro vkg_job_init()
 * (the fields this library does not know are zeroed). */
vkg_job_0_1 vkg_job_init(void);
void vkg_job_init_sized(vkg_job *job, size_t size);
#define VKG_JOB_INIT(job) vkg_job_init_sized((job), sizeof(*(job)))
/* (a name and line form that the export list's sed leaves out: inline,
 * not a library symbol) */
static inline vkg_job
vkg__job_init_now(void)
{
	vkg_job j;
	vkg_job_init_sized(&j, sizeof(j));
	return j;
}
#define vkg_job_init() vkg__job_init_now()

/* What the daemon reports about a finished job (proto/README.md):
 *   queued_us   from the request's arrival to its submission
 *   gpu_us      GPU time of the whole batch (command buffer) that carried it
 *   batch_jobs  jobs in that batch
 *   kernel_us   GPU time of this job's own dispatches alone (timestamps
 *               around them); 0 when the daemon did not measure it — an
 *               older daemon, or a job it does not time that way — so read
 *               gpu_us then. */
typedef struct vkg_result {
	uint64_t queued_us, gpu_us, batch_jobs;
	uint64_t kernel_us;
} vkg_result;

/* Where a job's time went. A daemon that traces (proto/README.md, the
 * reply keys t_recv_ns, stages_ns, t_reply_ns) says when the request
 * arrived, how long each of its stages took and when it wrote the reply;
 * the library adds its own ends. On one host both processes read the same
 * CLOCK_MONOTONIC, so the stages, in order, cover the whole round trip:
 *   request      this process about to send the request -> the daemon has it
 *   decode ... answer   the daemon's (proto/README.md says what each covers;
 *                a daemon without calibrated GPU timestamps sends gpu_wait
 *                instead of launch and complete)
 *   write        the daemon encoded the reply -> wrote it to the socket
 *   client_wake  written -> this process has read and decoded it
 * and add up to t_seen_ns - t_submit_ns. */
#define VKG_TRACE_MAX_STAGES 16
typedef struct vkg_trace_stage {
	char name[16];
	uint64_t ns;
} vkg_trace_stage;

typedef struct vkg_trace {
	/* true: every stage above is here and they add up to the round trip;
	 * false: the clocks disagree (the daemon in another time namespace),
	 * only the daemon's own stages are here */
	bool complete;
	uint64_t t_submit_ns, t_seen_ns;  /* this process's CLOCK_MONOTONIC */
	uint64_t t_recv_ns, t_reply_ns;   /* the daemon's */
	unsigned n_stages;
	vkg_trace_stage stages[VKG_TRACE_MAX_STAGES];
} vkg_trace;

/* The trace of the job whose completion the calling thread was last told of
 * (vkg_linear_backward, vkg_poll, vkg_poll_any or vkg_wait returning 0).
 * Returns 0, or -ENOENT when that job's reply carried none (an older
 * daemon) or none was reported to this thread yet. Thread-local, like
 * errno: cheap enough to ask after every job. */
int vkg_trace_last(vkg_trace *out);

/* A streamed job's GPU timeline (proto/README.md, reply key stream_us):
 * name -> µs from the job's first GPU timestamp, e.g. upload_busy_us,
 * first_compute_start_us, compute_end_us, tail_us, span_us. Only a large
 * job the daemon streamed (copies overlapped with kernels) has one. */
#define VKG_STREAM_MAX_FIELDS 16
typedef struct vkg_stream_field {
	char name[32];
	uint64_t us;
} vkg_stream_field;

typedef struct vkg_stream_timeline {
	unsigned n;
	vkg_stream_field f[VKG_STREAM_MAX_FIELDS];
} vkg_stream_timeline;

/* The timeline of the job whose completion the calling thread was last
 * told of, as vkg_trace_last. 0, or -ENOENT when that job's reply carried
 * none (not streamed, an older daemon, no timestamps). Thread-local. */
int vkg_stream_last(vkg_stream_timeline *out);

/* Synchronous: returns once the outputs are in the region. */
int vkg_linear_backward(vkg_client *c, const vkg_job *job, vkg_result *res, vkg_error *err);

/* A forward pass, Y = X·Wᵀ (+ b) (op linear_forward, proto/README.md):
 * x (batch × in), w (out × in) and y (batch × out) required, b (out)
 * optional; with accumulate y += X·Wᵀ (+ b). Same dtypes, variants, bounds
 * and overlap rules as vkg_job. (0.2's, not in 0.1: it grows at its end
 * while 0.2 is made; vkg_forward_job_init fills the whole of it.) */
typedef struct vkg_forward_job {
	const char *dtype; /* "f32", "f16", "bf16" (NULL: f32) */
	uint64_t batch, in, out;
	vkg_tensor x, w, b; /* inputs; b: VKG_NONE for none */
	vkg_tensor y;       /* output */
	bool accumulate;
	const char *variant; /* as vkg_job's */
	/* fused activation: NULL or "none", "relu", "gelu" (torch's tanh
	 * form): y = act(X·Wᵀ + b); not with accumulate */
	const char *activation;
	vkg_tensor z; /* optional output: the pre-activation X·Wᵀ + b (batch × out) */
} vkg_forward_job;

/* A vkg_forward_job with every tensor set to VKG_NONE. */
vkg_forward_job vkg_forward_job_init(void);
/* Synchronous, as vkg_linear_backward. */
int vkg_linear_forward(vkg_client *c, const vkg_forward_job *job, vkg_result *res, vkg_error *err);
/* Asynchronous, as vkg_submit: the handle goes to vkg_poll / vkg_wait. */
int vkg_submit_forward(vkg_client *c, const vkg_forward_job *job, uint64_t *handle, vkg_error *err);

/* Asynchronous: vkg_submit sends the job and returns a handle at once.
 * vkg_poll returns 0 when the job finished (res filled), -EAGAIN while it
 * runs, or an error. vkg_wait blocks up to timeout_ms (-1: forever); it
 * returns -ETIMEDOUT when the time ran out. Each handle is consumed by the
 * vkg_poll/vkg_wait call that reports its completion. */
int vkg_submit(vkg_client *c, const vkg_job *job, uint64_t *handle, vkg_error *err);
/* vkg_linear_backward / vkg_submit for a job of `size` bytes (sizeof the
 * caller's vkg_job): fields past what this library knows must be zero
 * (VKG_JOB_INIT), else -EINVAL names the first one set. */
int vkg_linear_backward_sized(vkg_client *c, const vkg_job *job, size_t size, vkg_result *res,
			      vkg_error *err);
int vkg_submit_sized(vkg_client *c, const vkg_job *job, size_t size, uint64_t *handle,
		     vkg_error *err);
/* vkg_linear_backward and vkg_submit read 0.1's part of the job
 * (VKG_JOB_SIZE_0_1 bytes: a binary built against 0.1 passes no more); a
 * program built against this header calls their _sized forms with its own
 * sizeof through these macros, so the fields after 0.1's count. */
#define vkg_linear_backward(c, job, res, err) \
	vkg_linear_backward_sized((c), (job), sizeof(*(job)), (res), (err))
#define vkg_submit(c, job, handle, err) vkg_submit_sized((c), (job), sizeof(*(job)), (handle), (err))
int vkg_poll(vkg_client *c, uint64_t handle, vkg_result *res, vkg_error *err);
int vkg_wait(vkg_client *c, uint64_t handle, int timeout_ms, vkg_result *res, vkg_error *err);
/* A descriptor that becomes readable when replies arrive: put it in your own
 * poll/epoll loop and call vkg_poll when it fires. Note that vkg_poll and
 * vkg_wait read every reply that has arrived, not only their handle's, so a
 * finished job may sit in the library while the descriptor is quiet: with
 * several jobs in flight, call vkg_poll_any until it returns -EAGAIN before
 * blocking on the descriptor. */
int vkg_fd(const vkg_client *c);
/* Report any one finished job: 0 with *handle and res set (the handle is
 * consumed), VKG_EREMOTE with *handle set when that job failed, -EAGAIN when
 * none has finished yet, -ENOENT when no job is outstanding, or another
 * negative value when the connection failed (*handle then names one of the
 * jobs lost with it). */
int vkg_poll_any(vkg_client *c, uint64_t *handle, vkg_result *res, vkg_error *err);
/* vkg_poll_any that waits up to timeout_ms (-1: forever) for a job to
 * finish, polling first for the wait spin (vkg_set_wait_spin); -ETIMEDOUT
 * when none finished in time. */
int vkg_wait_any(vkg_client *c, uint64_t *handle, int timeout_ms, vkg_result *res,
		 vkg_error *err);

/* ---- device tensors (proto/README.md, "Device tensors") ----
 * A tensor the daemon keeps in the GPU's own memory, rows × cols elements
 * of one dtype, named by an id of this connection (freed when it closes).
 * It reads as zeros when new. Every call below takes effect in the order
 * it was sent with the connection's jobs: a write, a job naming the tensor
 * and a read submitted back to back, without waiting, see each other's
 * results. Errors: `bad_tensor` (an id not this connection's, freed, or
 * of the wrong dtype or shape for where it is named), `limit`
 * (max_tensor_bytes, max_device_bytes, max_device_bytes_per_uid,
 * max_tensors, or the device's memory), `device_lost` (the GPU was lost
 * and recreated since the tensor was made: its contents are gone; free
 * it). */

/* In a vkg_tensor (a vkg_job's or vkg_forward_job's operand): region =
 * VKG_DEVICE_TENSOR names the device tensor whose id is in `offset`
 * (vkg_device_tensor builds one). Its dtype must be the job's, its
 * rows × cols the operand's shape: x batch×in; dy, y batch×out; w, dw
 * out×in; b, db 1×out. A library before 0.2's tensors sends it as a
 * region id the daemon does not know (bad_region). */
#define VKG_DEVICE_TENSOR (UINT64_MAX - 1)
static inline vkg_tensor
vkg_device_tensor(uint64_t tensor) /* (on its own line: not a library symbol) */
{
	vkg_tensor t = {VKG_DEVICE_TENSOR, tensor};
	return t;
}

/* A new tensor: dtype "f32", "f16" or "bf16" (NULL: f32), rows, cols >= 1.
 * *tensor receives its id. */
int vkg_tensor_new(vkg_client *c, const char *dtype, uint64_t rows, uint64_t cols,
		   uint64_t *tensor, vkg_error *err);
/* Copy the tensor's rows × cols × element-size bytes from [region, offset)
 * of client memory into it (write), or out of it into there (read: returns
 * once the bytes are in the region). offset a multiple of the element
 * size; the bytes must lie inside the region. */
int vkg_tensor_write(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
		     vkg_error *err);
int vkg_tensor_read(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
		    vkg_error *err);
/* The id is gone at once (later use: bad_tensor); the memory is freed when
 * the last job already sent that names it ends. */
int vkg_tensor_free(vkg_client *c, uint64_t tensor, vkg_error *err);
/* Asynchronous forms: *handle for vkg_poll / vkg_wait / vkg_poll_any (a
 * read's bytes are in the region once its handle reports 0). */
int vkg_submit_tensor_write(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
			    uint64_t *handle, vkg_error *err);
int vkg_submit_tensor_read(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
			   uint64_t *handle, vkg_error *err);
int vkg_submit_tensor_free(vkg_client *c, uint64_t tensor, uint64_t *handle, vkg_error *err);

/* ---- the optimizer step on the daemon (proto/README.md, "Optimizer steps")
 * torch.optim.SGD / Adam / AdamW on device tensors (vkg_tensor_new), f32
 * math, each stored value rounded once: n parameters (1 .. 256) in one
 * request, param[i] updated in place from grad[i] and its buffers
 * (momentum_buf[i]; m[i], v[i]), each of param[i]'s rows × cols, any
 * dtypes. Ordered with the connection's jobs. The _args_init functions
 * give torch's defaults. (0.2; both structs may grow at their end: always
 * start from _args_init.) */
typedef struct vkg_sgd_args {
	double lr, momentum, dampening, weight_decay;
	bool nesterov;
	/* the momentum buffer's first step: buf = grad (torch's first step;
	 * the buffer's old contents are not read) */
	bool first_step;
} vkg_sgd_args;

typedef struct vkg_adam_args {
	double lr, beta1, beta2, eps, weight_decay;
	uint64_t step;  /* >= 1: the step count after this step (torch's state['step']) */
	bool decoupled; /* AdamW: p *= 1 - lr·weight_decay instead of grad += weight_decay·p */
} vkg_adam_args;

/* lr, the rest torch's defaults (momentum 0, dampening 0, weight_decay 0;
 * betas 0.9, 0.999, eps 1e-8). */
vkg_sgd_args vkg_sgd_args_init(double lr);
vkg_adam_args vkg_adam_args_init(double lr, uint64_t step);
/* momentum_buf NULL: no momentum (args->momentum must be 0). Synchronous
 * (res may be NULL) or submitted for a handle (vkg_wait). */
int vkg_sgd_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
		 const uint64_t *momentum_buf, const vkg_sgd_args *args, vkg_result *res, vkg_error *err);
int vkg_submit_sgd_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
			const uint64_t *momentum_buf, const vkg_sgd_args *args, uint64_t *handle,
			vkg_error *err);
int vkg_adam_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
		  const uint64_t *m, const uint64_t *v, const vkg_adam_args *args, vkg_result *res,
		  vkg_error *err);
int vkg_submit_adam_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
			 const uint64_t *m, const uint64_t *v, const vkg_adam_args *args,
			 uint64_t *handle, vkg_error *err);

/* ---- any request ----
 * Send op with the keys of `args` (the bytes of one msgpack map, without
 * `op` and `id`; NULL/0 for none) and wait for the reply. The reply's whole
 * msgpack body is returned in *reply (malloc'd, free() it) and *reply_len,
 * failed or not. Returns 0 when the reply says ok, VKG_EREMOTE with err
 * filled when it does not, or a local error (then *reply is NULL). For ops
 * and reply keys this header does not wrap (a newer daemon's additions,
 * `stats` histograms) and for bindings that decode msgpack themselves. */
int vkg_call_raw(vkg_client *c, const char *op, const void *args, size_t args_len, void **reply,
		 size_t *reply_len, vkg_error *err);

#ifdef __cplusplus
}
#endif
#endif
