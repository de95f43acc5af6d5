/* proto/msg.h — protocol v1 messages: requests and replies as C structs,
 * encoded to and decoded from msgpack frames. No I/O. Shared by the daemon
 * (decode requests, encode replies) and the client (the other way round).
 *
 * Every decode function bounds the body with proto_mpcheck() before msgpack-c
 * sees it. Errors are values: a proto_err with a protocol code and a message
 * naming the key and the limit.
 */
#ifndef VKG_PROTO_MSG_H
#define VKG_PROTO_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#define PROTO_VERSION 1

typedef enum proto_code {
	PROTO_OK = 0,
	PROTO_BAD_FRAME,
	PROTO_BAD_REQUEST,
	PROTO_UNKNOWN_OP,
	PROTO_UNSUPPORTED,
	PROTO_BAD_REGION,
	PROTO_OUT_OF_BOUNDS,
	PROTO_OVERLAP,
	PROTO_LIMIT,
	PROTO_DEVICE_LOST,
	PROTO_INTERNAL,
	PROTO_BAD_TENSOR, /* addition: a device tensor id this connection may not use here */
	PROTO_CODE_COUNT
} proto_code;

/* The code's wire name (codes.c). */
const char *proto_code_name(proto_code c);
/* Returns the code for a wire name, or PROTO_INTERNAL when unknown. */
proto_code proto_code_from_name(const char *s, size_t n);

typedef struct proto_err {
	proto_code code;
	/* (512: an unknown variant's message names every variant of the
	 * dtype and those this device cannot run, past 256 on a device that
	 * lacks tiled128, narrow and the cooperative matrices; a client's
	 * vkg_error keeps its first 255 bytes) */
	char message[512];
} proto_err;

/* Sets err and returns -(int)code (so callers can `return proto_fail(...)`).
 * A message longer than err->message is cut on a character boundary; text
 * a client sent goes in escaped (proto/text.h), so the message is UTF-8. */
int proto_fail(proto_err *err, proto_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Append to err->message, cut the same way. Returns -(int)err->code. */
int proto_err_append(proto_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef enum proto_op {
	PROTO_OP_HELLO,
	PROTO_OP_REGISTER,
	PROTO_OP_UNREGISTER,
	PROTO_OP_LINEAR_BACKWARD,
	PROTO_OP_STATS,
	PROTO_OP_PING,
	PROTO_OP_CLIENTS, /* addition: the connections open now (proto/clients.h) */
	PROTO_OP_LINEAR_FORWARD, /* addition: Y = X·Wᵀ (+ b), proto/README.md */
	/* additions: device tensors (proto/README.md, "Device tensors") */
	PROTO_OP_TENSOR_NEW,   /* {dtype, rows, cols} -> {tensor} */
	PROTO_OP_TENSOR_WRITE, /* {tensor, src: [region, offset]} */
	PROTO_OP_TENSOR_READ,  /* {tensor, dst: [region, offset]} */
	PROTO_OP_TENSOR_FREE,  /* {tensor} */
	/* additions: the optimizer step on device tensors (proto/optim.h) */
	PROTO_OP_SGD_STEP,
	PROTO_OP_ADAM_STEP,
	PROTO_OP_COUNT
} proto_op;

const char *proto_op_name(proto_op op);
/* The op named by the n bytes at s, or -1. */
int proto_op_parse(const char *s, size_t n);

typedef enum proto_dtype { PROTO_F32, PROTO_F16, PROTO_BF16, PROTO_DTYPE_COUNT } proto_dtype;
const char *proto_dtype_name(proto_dtype d);
unsigned proto_dtype_size(proto_dtype d);

/* Kernel families a linear_backward request may force (key `variant`);
 * AUTO lets the daemon choose by shape and device. Each has one name, on
 * the wire and in hello's kernel list alike: auto, generic, tiled (64x64
 * tiles), tiled128, splitk, splitk128 (split-K on the 128 tile), narrow
 * (row blocks for layers of few features), coopmat, coopmat_khr,
 * coopmat_khr_splitk (split-K on the tensor cores: narrow, long dW/db),
 * coopmat_nv2, coopmat_khr_f32x3, coopmat_khr_f32_splitk (split-K of f32
 * narrow, long dW/db on the bf16 tensor cores; forced only). */
typedef enum proto_variant { PROTO_VARIANT_AUTO, PROTO_VARIANT_GENERIC, PROTO_VARIANT_TILED, PROTO_VARIANT_SPLITK,
			     PROTO_VARIANT_COOPMAT, PROTO_VARIANT_TILED128, PROTO_VARIANT_COOPMAT_KHR,
			     PROTO_VARIANT_COOPMAT_NV2, PROTO_VARIANT_COOPMAT_KHR_F32X3, PROTO_VARIANT_NARROW,
			     PROTO_VARIANT_SPLITK128, PROTO_VARIANT_COOPMAT_KHR_SPLITK,
			     PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK,
			     PROTO_VARIANT_COUNT } proto_variant;
const char *proto_variant_name(proto_variant v);
/* Returns the variant for a name, or -1. */
int proto_variant_parse(const char *s);
/* May a request of dtype d name variant v? (coopmat: f16 only;
 * coopmat_khr, coopmat_khr_splitk, coopmat_nv2: f16 and bf16 only;
 * coopmat_khr_f32x3, coopmat_khr_f32_splitk: f32 only) */
bool proto_variant_fits(proto_variant v, proto_dtype d);
/* Write into buf (cap bytes) the names of the variants a request of dtype
 * d may name (d < 0: of any dtype), in the order auto, generic, tiled,
 * tiled128, splitk, coopmat, joined by ", ", leaving out those for which
 * keep (when not NULL) returns false. Returns how many it named. */
unsigned proto_variant_list(char *buf, size_t cap, int d,
			    bool (*keep)(void *ctx, proto_variant v), void *ctx);

/* Tensor slots of linear_backward, in wire-key order, then linear_forward's
 * own: b (its bias, an input of out elements) and y (its output, batch ×
 * out), then z (addition, the fused activations: batch × out, the
 * pre-activation X·Wᵀ + b). linear_forward names x, w, b, y, z (y and z
 * outputs); linear_backward x, dy, w, dw, db, dx and, with an activation,
 * y (relu) or z (gelu) as inputs: a linear_backward request never has b
 * present, nor y or z without the activation that reads it. */
enum { PROTO_T_X, PROTO_T_DY, PROTO_T_W, PROTO_T_DW, PROTO_T_DB, PROTO_T_DX, PROTO_T_B, PROTO_T_Y,
       PROTO_T_Z, PROTO_T_COUNT };
/* linear_backward's slots are the first ones: x, dy, w, dw, db, dx */
#define PROTO_T_BACKWARD_COUNT (PROTO_T_DX + 1)
extern const char *const proto_tensor_key[PROTO_T_COUNT];

/* Fused activations (addition, key `activation` of linear_forward and
 * linear_backward): none, relu, gelu (torch's tanh form). */
typedef enum proto_activation { PROTO_ACT_NONE, PROTO_ACT_RELU, PROTO_ACT_GELU, PROTO_ACT_COUNT } proto_activation;
const char *proto_activation_name(proto_activation a);
/* The activation of the n bytes at s, or -1. */
int proto_activation_parse(const char *s, size_t n);

/* One operand: [region, byte_offset] in the client's memory, or (an
 * addition) {"tensor": T}, a device tensor of the connection (is_tensor:
 * `tensor` holds T; region and offset are unused and 0). */
typedef struct proto_tensor {
	bool present;
	uint64_t region;
	uint64_t offset; /* bytes */
	bool is_tensor;  /* (after the older fields: {present, region, offset} still reads right) */
	uint64_t tensor;
} proto_tensor;


typedef struct proto_request {
	proto_op op;
	uint64_t id;
	/* hello */
	uint64_t version;
	char client[64];
	/* addition: a monitor (a metrics scrape) only looks: the daemon logs
	 * its connection at debug level */
	bool monitor;
	/* register */
	uint64_t size;
	/* unregister */
	uint64_t region;
	/* linear_backward, linear_forward */
	proto_dtype dtype;
	uint64_t batch, in, out;
	proto_tensor t[PROTO_T_COUNT];
	bool accumulate;
	proto_variant variant; /* optional key `variant`: kernel family to force */
	/* optional key `activation` (addition): forward y = act(z); backward
	 * dZ = dY ⊙ act'(y or z) feeds dW, db, dX */
	proto_activation activation;
	/* set when decoding failed (bad_request) because `variant` names no
	 * family of the request's dtype: the daemon then adds which of them
	 * its device cannot run */
	bool variant_unknown;
	/* additions, device tensors: tensor_new's dtype (above), rows and
	 * cols; tensor_write/read/free's `tensor`; tensor_write's `src` and
	 * tensor_read's `dst` in io ([region, offset], never is_tensor) */
	uint64_t rows, cols;
	uint64_t tensor;
	proto_tensor io;
	/* addition: sgd_step, adam_step (proto/optim.h) */
	struct proto_optim *optim;
} proto_request;

/* Decode one request body. Returns 0, or a negative value with err set:
 * PROTO_BAD_FRAME when the body is not one msgpack map with a valid op and id
 * (*id_out is then 0), otherwise the request's id is in *id_out and the code
 * is bad_request / unknown_op / unsupported. Only the shape of the request is
 * checked here; sizes against regions are proto_job_check()'s job. */
int proto_request_decode(const uint8_t *body, size_t len, proto_request *req,
			 uint64_t *id_out, proto_err *err);

/* A request decoder's memory, kept from one frame to the next so that
 * decoding costs no malloc: one msgpack zone of MSGPACK_ZONE_CHUNK_SIZE
 * bytes, emptied after each frame. A frame that outgrew it (more chunks)
 * has them freed and the zone rebuilt at its first size, so it never
 * keeps more than one chunk. One thread at a time. */
typedef struct proto_decoder {
	msgpack_zone zone;
	bool ready;          /* zone initialised (a failed init retries) */
	uint64_t rebuilds;   /* frames that outgrew the zone (tests) */
	/* A frame of one map of scalars and short arrays of scalars (every
	 * request vkgrad's clients send) is read straight from its bytes; any
	 * other goes the general way (proto_mpcheck, msgpack_unpack into the
	 * zone). Both give the same outcome, message included. */
	uint64_t general;    /* frames decoded the general way (tests) */
	bool general_only;   /* tests: every frame the general way */
} proto_decoder;

void proto_decoder_init(proto_decoder *d);
void proto_decoder_free(proto_decoder *d);
/* proto_request_decode with d's memory. */
int proto_request_decode_with(proto_decoder *d, const uint8_t *body, size_t len,
			      proto_request *req, uint64_t *id_out, proto_err *err);

/* Append one framed request (length prefix included) to sb. Keys whose
 * tensor is not present are left out. Returns 0 or -ENOMEM. */
int proto_request_encode(msgpack_sbuffer *sb, const proto_request *req);

/* ---- replies ---------------------------------------------------------- */

typedef struct proto_limits {
	uint32_t max_frame;
	uint32_t max_regions;       /* per connection */
	uint64_t max_region_bytes;  /* one region */
	uint32_t max_inflight;      /* queued+running jobs per connection */
	uint64_t max_dim;           /* in and out each (batch: the byte limits alone) */
	uint64_t max_tensor_bytes;  /* one tensor (device storage-buffer range) */
	/* additions (hello.limits keys of the same names) */
	uint64_t max_total_region_bytes;  /* registered bytes, all connections */
	uint64_t max_region_bytes_per_uid; /* registered bytes, all connections of one peer uid */
	uint32_t max_connections;         /* connections at once, all users */
	uint32_t max_connections_per_uid; /* connections at once of one peer uid */
	uint32_t max_fds_per_message;     /* descriptors in one sendmsg */
	uint32_t max_fds_held;            /* descriptors held awaiting their frame */
	uint64_t max_outbound_bytes;      /* unread reply bytes before a drop */
	/* additions, device tensors (0 in a reply from an older daemon) */
	uint64_t max_device_bytes;         /* tensor bytes, all connections */
	uint64_t max_device_bytes_per_uid; /* tensor bytes, all connections of one peer uid */
	uint32_t max_tensors;              /* tensors per connection */
} proto_limits;

#define PROTO_MAX_KERNELS 128

typedef struct proto_kernel_info {
	char name[48], domain[24], variant[24], dtype[8], status[16];
} proto_kernel_info;

typedef struct proto_device_info {
	char name[128];
	uint32_t vendor_id, device_id;
	char driver[128];
	char api[16];
	char type[16];
} proto_device_info;

typedef struct proto_hello {
	uint64_t version;
	char server[48];
	proto_device_info device;
	proto_limits limits;
	unsigned n_kernels;
	proto_kernel_info kernels[PROTO_MAX_KERNELS];
} proto_hello;

/* A latency histogram of `stats` (addition): counts[i] observations with
 * value <= le_us[i] and > le_us[i-1] (not cumulative), counts[n_le] those
 * above the last bound; sum_us and count over all of them. */
#define PROTO_MAX_HIST 4
#define PROTO_HIST_MAX_LE 32
typedef struct proto_histogram {
	char name[24];
	unsigned n_le;
	uint64_t le_us[PROTO_HIST_MAX_LE];
	uint64_t counts[PROTO_HIST_MAX_LE + 1];
	uint64_t sum_us, count;
} proto_histogram;

/* Where a job's time went (additions: the linear_backward reply's
 * t_recv_ns, stages_ns and t_reply_ns; stats' `stages`). A job's round trip
 * is cut into consecutive stages, each named once; proto/README.md says
 * what each covers. The daemon measures DECODE..ANSWER and WRITE; a client
 * on the same host (CLOCK_MONOTONIC is shared) adds REQUEST and
 * CLIENT_WAKE. LAUNCH and COMPLETE need timestamps the daemon can put on
 * the host's clock (VK_EXT_calibrated_timestamps); without them GPU_WAIT
 * holds what the stages of the GPU do not account for. */
typedef enum proto_stage_id {
	PROTO_STAGE_REQUEST,     /* client submit -> daemon has the whole frame */
	PROTO_STAGE_DECODE,      /* frame -> job queued (decode, checks) */
	PROTO_STAGE_QUEUE,       /* queued -> its batch starts forming */
	PROTO_STAGE_RECORD,      /* batch forming, staging copies in, recording */
	PROTO_STAGE_SUBMIT,      /* vkQueueSubmit */
	PROTO_STAGE_LAUNCH,      /* submitted -> GPU starts the batch */
	PROTO_STAGE_GPU,         /* the batch on the GPU (timestamps) */
	PROTO_STAGE_COMPLETE,    /* GPU done -> the daemon sees it */
	PROTO_STAGE_GPU_WAIT,    /* submitted -> seen, less what the above tell */
	PROTO_STAGE_HANDOFF,     /* seen -> answering the batch begins */
	PROTO_STAGE_ANSWER,      /* staged copies out, replies encoded */
	PROTO_STAGE_WRITE,       /* reply encoded -> written to the socket */
	PROTO_STAGE_CLIENT_WAKE, /* written -> the client has decoded it */
	PROTO_STAGE_COUNT
} proto_stage_id;
#define PROTO_MAX_STAGES 16
const char *proto_stage_name(proto_stage_id s);
/* The id of a stage name, or -1. */
int proto_stage_parse(const char *s, size_t n);

typedef struct proto_stage {
	char name[16];
	uint64_t ns;
} proto_stage;

/* st->name = proto_stage_name(s), a fixed-size copy (per job, cheap) */
void proto_stage_copy_name(proto_stage *st, proto_stage_id s);

/* A linear_backward reply's trace (encoded when present). */
typedef struct proto_trace {
	bool present;
	uint64_t t_recv_ns;   /* daemon's CLOCK_MONOTONIC: the request's frame was whole */
	uint64_t t_reply_ns;  /* ... the reply was written (filled in at the send) */
	unsigned n;           /* stages_ns: the daemon's stages up to the reply's encoding */
	proto_stage st[PROTO_MAX_STAGES];
} proto_trace;

/* The last 8 bytes of a job reply carrying a trace are t_reply_ns, big
 * endian (a fixed-width uint64, the map's last value): the daemon writes
 * the time there just before the send. Writes ns into the frame ending at
 * end. */
void proto_reply_put_time(uint8_t *end, uint64_t ns);

/* A streamed job's GPU timeline (addition: the linear_backward reply's
 * `stream_us`, a map of name -> µs, encoded before the trace and only when
 * n > 0; proto/README.md lists the names). */
#define PROTO_MAX_STREAM_FIELDS 16
typedef struct proto_stream_field {
	char name[32];
	uint64_t us;
} proto_stream_field;

typedef struct proto_stream_tl {
	unsigned n;
	proto_stream_field f[PROTO_MAX_STREAM_FIELDS];
} proto_stream_tl;

/* A stage's recent times (stats `stages`). */
typedef struct proto_stage_stat {
	char name[16];
	double p50_us, p99_us;
	uint64_t count;       /* jobs in the window */
	/* addition: jobs ever measured and the sum of their times (a
	 * Prometheus summary's _count and _sum); has_total when sent */
	uint64_t total;
	double sum_us;
	bool has_total;
} proto_stage_stat;

/* Why a connection was refused (stats `connections_refused`, addition):
 * the allow lists (--allow-uid/--allow-gid), max_connections,
 * max_connections_per_uid. */
typedef enum proto_refusal {
	PROTO_REFUSED_ALLOW_LIST,
	PROTO_REFUSED_MAX_CONNECTIONS,
	PROTO_REFUSED_MAX_CONNECTIONS_PER_UID,
	PROTO_REFUSED_COUNT
} proto_refusal;
const char *proto_refusal_name(proto_refusal r);

/* One uid's totals since the daemon started (stats `uids`, addition):
 * jobs finished and failed, GPU µs charged to them (proto/README.md). The
 * daemon keeps PROTO_MAX_UIDS uids; later ones add to the entry with uid
 * PROTO_UID_OTHER. */
#define PROTO_MAX_UIDS 64
#define PROTO_UID_OTHER UINT32_MAX
typedef struct proto_uid_stat {
	uint32_t uid;
	uint64_t jobs_done, jobs_failed, gpu_us;
} proto_uid_stat;

/* One uid's device-tensor bytes now (stats `device_bytes_by_uid`, an
 * addition): uids holding none are left out. */
typedef struct proto_uid_bytes {
	uint32_t uid;
	uint64_t bytes;
} proto_uid_bytes;

typedef struct proto_stats {
	double uptime_s;
	uint64_t clients, regions, region_bytes, jobs_done, jobs_failed, batches;
	double jobs_per_batch_avg;
	uint64_t pipelines, pipeline_cache_hits;
	uint64_t jobs_queued, jobs_running;
	uint64_t host_imports, staged_regions;
	uint64_t validation_errors;
	/* kernels and memory path (daemon/engine.h) */
	uint64_t devlocal_min_bytes;  /* device-local path threshold, f32 jobs; 0: off */
	uint64_t devlocal_min_bytes_16bit; /* the same for f16/bf16 jobs */
	uint64_t devlocal_jobs, devlocal_copy_bytes, splitk_jobs, dispatches;
	uint64_t scratch_bytes;       /* device memory held as scratch now */
	uint64_t scratch_failures;    /* batches run without scratch */
	/* streamed jobs (daemon/stream.h): dY bytes per chunk (0: off), the
	 * tensor bytes from which a device-local job streams, the transfer
	 * queues its copies use (0: the compute queue), jobs and chunks */
	uint64_t stream_chunk_bytes, stream_min_bytes, stream_queues;
	uint64_t stream_jobs, stream_chunks;
	uint64_t stream_dw_blocks; /* addition: dW row blocks of streamed jobs */
	/* addition: of the streamed jobs, those under stream_min_bytes that
	 * streamed because another connection's small jobs were about */
	uint64_t stream_shared_jobs;
	/* latency histograms (daemon/metrics.h); encoded as the map
	 * `histograms` when n_hist > 0 */
	unsigned n_hist;
	proto_histogram hist[PROTO_MAX_HIST];
	/* stage times over the recent window (daemon/metrics.h); encoded as
	 * the map `stages` when n_stages > 0 */
	unsigned n_stages;
	proto_stage_stat stages[PROTO_MAX_STAGES];
	/* the completion wait (daemon/engine.h): its current spin budget,
	 * CPU time spent spinning, waits a spin ended, waits that blocked */
	uint64_t spin_budget_us, spin_us, spin_hits, blocking_waits;
	uint64_t spin_expected; /* batches given an expected end (daemon/spin.h) */
	/* job classes (daemon/engine.h): jobs run as small and as large, and
	 * the submissions (slices) the large ones took */
	uint64_t sched_small_jobs, sched_large_jobs, sched_slices;
	/* additions for operators (proto/README.md, "stats"); has_counters
	 * when the daemon sent them (an older one does not) */
	bool has_counters;
	uint64_t jobs_failed_by_code[PROTO_CODE_COUNT];       /* accepted, then failed */
	uint64_t requests_rejected_by_code[PROTO_CODE_COUNT]; /* answered with an error at once */
	uint64_t connections_refused[PROTO_REFUSED_COUNT];
	uint64_t device_losses, device_recoveries, device_recovery_failures;
	double started_unix_s; /* when the daemon started, seconds since the epoch */
	unsigned n_uids;
	proto_uid_stat uids[PROTO_MAX_UIDS];
	/* additions, device tensors: bytes and count of the live tensors,
	 * per uid; bytes jobs and tensor ops read from and wrote to client
	 * memory (the host traffic, PCIe on a discrete GPU). has_tensors when
	 * the daemon sent them. */
	bool has_tensors;
	uint64_t device_bytes, tensors;
	uint64_t host_read_bytes, host_write_bytes;
	unsigned n_dev_uids;
	proto_uid_bytes dev_uids[PROTO_MAX_UIDS];
} proto_stats;

typedef enum proto_reply_kind {
	PROTO_R_PLAIN,   /* ping, unregister */
	PROTO_R_HELLO,
	PROTO_R_REGISTER,
	PROTO_R_JOB,
	PROTO_R_STATS,
	PROTO_R_ERROR,
	PROTO_R_TENSOR   /* addition: tensor_new's {tensor} */
} proto_reply_kind;

typedef struct proto_reply {
	uint64_t id;
	bool ok;
	proto_err err;           /* when !ok */
	uint64_t region;         /* register */
	uint64_t tensor;         /* tensor_new (addition) */
	uint64_t queued_us, gpu_us, batch_jobs; /* linear_backward */
	/* linear_backward, optional (addition): GPU time of this job's own
	 * dispatches alone, from timestamps around them, where gpu_us is the
	 * whole batch's. Encoded only when has_kernel_us; decoded sets it. */
	uint64_t kernel_us;
	bool has_kernel_us;
	proto_stream_tl stream;  /* linear_backward, optional (addition) */
	proto_trace trace;       /* linear_backward, optional (addition) */
	proto_hello hello;
	proto_stats stats;
} proto_reply;

/* sb kept for encoding one reply (or request) after another: emptied for
 * the next, its memory kept unless it grew past keep bytes (then freed:
 * one large reply, a stats one, does not pin its size). */
void proto_sbuffer_reuse(msgpack_sbuffer *sb, size_t keep);

/* Append one framed reply to sb. kind selects which fields are written. */
int proto_reply_encode(msgpack_sbuffer *sb, proto_reply_kind kind, const proto_reply *r);

/* Decode one reply body (client side). Unknown keys are ignored, so a newer
 * daemon's additions do not break an older client. Returns 0 or -EBADMSG. */
int proto_reply_decode(const uint8_t *body, size_t len, proto_reply *r, proto_err *err);

#endif
