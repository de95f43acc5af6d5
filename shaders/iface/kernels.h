/* shaders/iface/kernels.h — the one definition of every kernel's interface:
 * its push constants (named, in order), its storage-buffer bindings, its
 * flags and its tile sizes. Included by the GLSL kernels and by the daemon
 * (C: daemon/kiface.h adds the structs and the size checks), so the words
 * the daemon pushes and the block a shader reads cannot drift apart; the
 * daemon also checks each compiled kernel's SPIR-V against these numbers
 * when it builds the pipelines (daemon/spirv.c).
 *
 * Push constants are lists of 32-bit unsigned words, written once as a
 * macro of the word type: `uint` in GLSL, `uint32_t` in C. Only macros and
 * comments here: both preprocessors read this file. */
#ifndef VKG_SHADERS_IFACE_KERNELS_H
#define VKG_SHADERS_IFACE_KERNELS_H

/* ---- linear_parameter_backward: dW = dYᵀ·X and/or db = Σ dY ----------------
 * A workgroup of 32×8 threads owns 32 columns of dW (input features) of one
 * output feature; the 8 rows stripe the batch. */
#define VKG_PC_PARAM(u)                                                        \
	u batch;  /* rows of X and dY (this dispatch's piece of the batch) */  \
	u n_in;   /* columns of X, dW */                                       \
	u n_out;  /* columns of dY, rows of dW */                              \
	u x_off;  /* element offsets into the bound buffers */                 \
	u dy_off;                                                              \
	u dw_off;                                                              \
	u db_off;                                                              \
	u flags;  /* VKG_FLAG_WRITE_C (dW), VKG_FLAG_WRITE_D (db), _ACCUMULATE */ \
	u o_base; /* first output feature of this dispatch (chunking) */       \
	u c_base; /* first 32-wide input tile of this dispatch (chunking) */
#define VKG_BINDINGS_PARAM 4 /* X, dY, dW, db */
#define VKG_PARAM_COLS 32    /* dW columns per workgroup */
#define VKG_PARAM_STRIPES 8  /* batch rows walked per loop iteration */

/* ---- linear_input_backward: dX = dY·W --------------------------------------
 * A 16×16 tile of dX per workgroup of 16×16 threads. */
#define VKG_PC_INPUT(u)                                                        \
	u batch;                                                               \
	u n_in;                                                                \
	u n_out;                                                               \
	u dy_off;                                                              \
	u w_off;                                                               \
	u dx_off;                                                              \
	u flags;  /* VKG_FLAG_ACCUMULATE, VKG_FLAG_B_TRANS */                  \
	u b_base; /* first batch row of this dispatch (chunking) */            \
	u c_base; /* first column tile of this dispatch (chunking) */          \
	u k_len;  /* out positions this dispatch sums (n_out stays dY's row stride) */
#define VKG_BINDINGS_INPUT 3 /* dY, W, dX */
#define VKG_INPUT_TILE 16

/* ---- the GEMM kernels: C[m, n] (+)= Σ_k A(m, k) · B[k, n] -------------------
 * linear_tiled_gemm, linear_splitk_gemm, linear_tiled128_gemm, linear_splitk128_gemm,
 * linear_coopmat_gemm, linear_coopmat_khr_gemm, linear_coopmat_khr_dx_stream (dX
 * only; d unused), linear_coopmat_nv2_gemm,
 * linear_coopmat_khr_f32x3_gemm; linear_coopmat_khr_splitk_gemm and
 * linear_coopmat_khr_f32x3_splitk_gemm with two
 * words more (VKG_PC_GEMM_SPLIT).
 * With VKG_FLAG_WRITE_D the workgroups of column tile 0 also sum A over k
 * for their rows into d (the fused bias). */
#define VKG_PC_GEMM(u)                                                         \
	u M;                                                                   \
	u N;                                                                   \
	u K;                                                                   \
	u a_off; /* element offsets into the bound buffers */                  \
	u b_off;                                                               \
	u c_off;                                                               \
	u d_off;                                                               \
	u sam;    /* A(m, k) = a[a_off + m·sam + k·sak]; B's row stride is N */ \
	u sak;                                                                 \
	u flags;  /* VKG_FLAG_* */                                             \
	u m_base; /* first row tile of this dispatch (chunking) */             \
	u n_base; /* first column tile of this dispatch (chunking) */
#define VKG_BINDINGS_GEMM 4 /* A, B, C, d */
/* linear_coopmat_khr_splitk_gemm, linear_coopmat_khr_f32x3_splitk_gemm: the GEMM's words, then the slices of its
 * reduction, all in one grid: workgroup row m_base + gl_WorkGroupID.y is
 * slice r / m_tiles, row tile r % m_tiles; slice s walks rows s·slice_len
 * .. min((s + 1)·slice_len, K) - 1 of the reduction (A from a_off +
 * s·slice_len·sak, B from b_off + s·slice_len·N) and writes f32 partial
 * sums, C at c_off + s·M·N (row-major, stride N), the row sums at d_off +
 * s·M: split-K's layout (linear_splitk_reduce's; the daemon adds these
 * slices with linear_narrow_reduce, which reads the same layout). */
#define VKG_PC_GEMM_SPLIT(u)                                                   \
	VKG_PC_GEMM(u)                                                         \
	u slice_len; /* rows of the reduction per slice (the last: what is left) */ \
	u m_tiles;   /* row tiles of C per slice */
/* linear_coopmat_khr_splitk_dx_gemm: linear_coopmat_khr_splitk_gemm's
 * words, then dX = dY·W beside dW (out <= 64: one row tile, m_tiles 1):
 * the workgroup of slice s and column tile j also writes dX's rows of
 * slice s (rows s·slice_len .., at dx_off + row·N + column, stride N = in)
 * and columns of tile j, from the dY rows in its shared stage and W's
 * rows 0..M-1 (out) and tile j's columns (at w_off + o·N + column),
 * summed over all of out in f32 and rounded once. dx_flags:
 * VKG_FLAG_ACCUMULATE (dX += the product, rounded once) and
 * VKG_FLAG_VEC_LOADS (W read and dX written eight elements at a time: N,
 * w_off and dx_off multiples of 8); pc.flags stays the partials'. */
#define VKG_PC_GEMM_SPLIT_DX(u)                                                \
	VKG_PC_GEMM_SPLIT(u)                                                   \
	u w_off;                                                               \
	u dx_off;                                                              \
	u dx_flags;
#define VKG_BINDINGS_GEMM_SPLIT_DX 6 /* A = dY, B = X, C, d (partials), W, dX */
/* linear_tiled_gemm, linear_splitk_gemm (the same body) and
 * linear_coopmat_nv2_gemm bind a fifth buffer, e: the f32 running sums of a
 * reduction resumed across dispatches (VKG_FLAG_SUMS_IN / _OUT: stream.c's
 * batch chunks of dW), C's M×N (row-major, stride N) then d's M, bound at
 * its first element. */
#define VKG_BINDINGS_GEMM_SUMS 5 /* A, B, C, d, e */
/* the most any kernel binds (the recorder's push-descriptor arrays) */
#define VKG_BINDINGS_MAX 6
#define VKG_TILE_TILED 64    /* C tile of linear_tiled_gemm and linear_splitk_gemm */
#define VKG_TILE_TILED128 128
#define VKG_TILE_COOPMAT 128
/* (linear_coopmat_khr_gemm's and linear_coopmat_nv2_gemm's tiles are
 * chosen at run time: specialization constants, daemon/pipelines.c and
 * daemon/nv2_tile.h) */

/* ---- linear_splitk_reduce: out (+)= Σ_slices part --------------------------- */
#define VKG_PC_REDUCE(u)                                                       \
	u n;        /* elements of the output */                               \
	u slices;                                                              \
	u stride;   /* elements between slices in part */                      \
	u part_off; /* element offsets into the bound buffers */               \
	u out_off;                                                             \
	u flags;    /* VKG_FLAG_ACCUMULATE */                                  \
	u base;     /* first element of this dispatch (chunking) */
#define VKG_BINDINGS_REDUCE 2 /* part, out */
#define VKG_REDUCE_WG 256     /* elements per workgroup */

/* ---- the narrow family: layers of few features over many rows --------------
 * linear_narrow_param: stage one of dW = dYᵀ·X and db = Σ dY, the batch cut
 * into row blocks. A workgroup of 256 threads owns one block's rows and a
 * 64×64 tile of dW (64 output features × 64 input features; the tiles of
 * one block: t_base + gl_WorkGroupID.x, input tiles fastest, one column
 * of tiles for db alone) and writes the block's f32 partial sums to
 * part[p_off + block·stride + o·n_in + i] (dW) and
 * part[p_off + block·stride + stride − n_out + o] (db). Rows walk through
 * shared memory a step at a time (4096 elements of dY and of X: 64 rows of
 * a 64-wide tile, up to 1024 of a narrow one), loaded 16 bytes per thread
 * where aligned; the threads split as 4×4 output micro-tiles × row groups, the
 * groups summed by a fixed tree at the end (no atomics).
 * linear_narrow_reduce: stage two, out[i] (+)= Σ_blocks part (VKG_PC_REDUCE,
 * `slices` = blocks), VKG_NARROW_RED_COLS elements per workgroup, each
 * summed by VKG_NARROW_RED_LANES lanes taking every LANES-th block in
 * order and a fixed tree: the same bits every run, rounded once. */
#define VKG_PC_NARROW(u)                                                       \
	u batch;  /* rows of X and dY */                                       \
	u n_in;                                                                \
	u n_out;                                                               \
	u x_off;  /* element offsets into the bound buffers */                 \
	u dy_off;                                                              \
	u p_off;  /* partials (f32) */                                         \
	u stride; /* f32 elements per block of partials: (dW ? out·in : 0) + out */ \
	u rows;   /* rows per block (a multiple of VKG_NARROW_STEP) */         \
	u flags;  /* VKG_FLAG_WRITE_C (dW), VKG_FLAG_WRITE_D (db) */           \
	u t_base; /* first tile of this dispatch (chunking) */                 \
	u b_base; /* first block of this dispatch (chunking) */
#define VKG_BINDINGS_NARROW 3 /* X, dY, partials */
#define VKG_NARROW_TILE 64    /* dW tile per workgroup, rows and columns */
#define VKG_NARROW_STEP 64    /* blocks are whole multiples of this many rows */
#define VKG_NARROW_THREADS 256
#define VKG_NARROW_RED_COLS 16
#define VKG_NARROW_RED_LANES 16
/* linear_narrow_input: dX = dY·W. A workgroup owns a column tile of up to
 * 64 input features (c_base + gl_WorkGroupID.x) and `tiles` consecutive
 * row tiles ((r_base + gl_WorkGroupID.y)·tiles on); its threads are 8×8
 * micro-tiles, as many columns of them as min(n_in, 64) features need (a
 * power of two, P, the same in every column tile), so a tile is 2048/P
 * rows (kshape_narrow_dx_tile_rows); out walks through shared memory in
 * chunks of 2·P (W stays there for the workgroup while k_len·8·P <= 4096,
 * else its chunk comes with each chunk of dY). */
#define VKG_PC_NARROW_DX(u)                                                    \
	u batch;                                                               \
	u n_in;                                                                \
	u n_out;                                                               \
	u dy_off;                                                              \
	u w_off;                                                               \
	u dx_off;                                                              \
	u flags;  /* VKG_FLAG_ACCUMULATE */                                    \
	u tiles;  /* row tiles per workgroup */                                \
	u r_base; /* first row group of this dispatch (chunking) */            \
	u c_base; /* first column tile of this dispatch (chunking) */          \
	u k_len;  /* out positions this dispatch sums (n_out stays dY's row stride) */
#define VKG_BINDINGS_NARROW_DX 3 /* dY, W, dX */

/* ---- linear_forward_prep: what linear_forward's GEMM needs first -----------
 * linear_forward (Y = X·Wᵀ + b) runs as the dX GEMM of a backward with in and
 * out swapped (proto/job.h proto_forward_as_input): B = Wᵀ, and the bias
 * already in Y, which the GEMM then accumulates onto. One kernel, by flag:
 *  - VKG_FLAG_PREP_TRANSPOSE: dst[c·rows + r] = src[r·cols + c] (W, rows =
 *    out, cols = in, into Wᵀ in the daemon's scratch), through 32×32 tiles
 *    in shared memory so reads and writes are both along rows;
 *  - VKG_FLAG_PREP_BIAS: dst[r·cols + c] = src[c] (+ dst[r·cols + c] with
 *    VKG_FLAG_ACCUMULATE, one rounding), rows = batch, cols = out.
 * A workgroup of 32×8 threads owns a 32×32 tile of dst's source layout. */
#define VKG_PC_PREP(u)                                                         \
	u rows;                                                                \
	u cols;                                                                \
	u src_off; /* element offsets into the bound buffers */                \
	u dst_off;                                                             \
	u flags;   /* VKG_FLAG_PREP_TRANSPOSE or _BIAS, VKG_FLAG_ACCUMULATE */  \
	u r_base;  /* first 32-row tile of this dispatch (chunking) */         \
	u c_base;  /* first 32-column tile of this dispatch (chunking) */
#define VKG_BINDINGS_PREP 2 /* src, dst */
#define VKG_PREP_TILE 32
#define VKG_PREP_ROWS 8 /* thread rows per workgroup: each walks 4 tile rows */

/* ---- linear_activation: the fused activations ------------------------------
 * linear_forward's y = act(z) and linear_backward's dZ = dY ⊙ act'(·)
 * (proto/README.md, `activation`), a pass of its own beside the GEMMs
 * (docs/kernels.md says why), elementwise over n elements of a batch × out
 * tensor, one per thread, f32 arithmetic. act: VKG_ACT_*. By flag:
 *  - VKG_FLAG_ACT_FORWARD: a holds z (the GEMM's Y, bias included): writes
 *    b[i] = z (the output z, with VKG_FLAG_WRITE_C) and a[i] = act(z);
 *  - otherwise (backward): c[i] = a[i] · act'(b[i]) with a = dY, b = y
 *    (relu: 1 where y > 0, else 0, torch's threshold_backward) or z (gelu:
 *    the tanh form's derivative), c = dZ in the daemon's scratch. */
#define VKG_PC_ACT(u)                                                          \
	u n;     /* elements */                                                \
	u a_off; /* element offsets into the bound buffers */                  \
	u b_off;                                                               \
	u c_off;                                                               \
	u act;   /* VKG_ACT_RELU or VKG_ACT_GELU (0: none, forward's copy of z) */ \
	u flags; /* VKG_FLAG_ACT_FORWARD, VKG_FLAG_WRITE_C */                  \
	u base;  /* first element of this dispatch (chunking) */
#define VKG_BINDINGS_ACT 3 /* a, b, c */
#define VKG_ACT_WG 256     /* elements per workgroup */
#define VKG_ACT_RELU 1u
#define VKG_ACT_GELU 2u

/* ---- optim_step: the optimizer steps on device tensors ---------------------
 * sgd_step and adam_step (proto/README.md; torch.optim.SGD, Adam, AdamW) on
 * one parameter: p, its gradient g and its buffers (SGD: the momentum
 * buffer; Adam: m and v), each of its own storage dtype (dtypes: 2 bits
 * each, VKG_OPT_F32/F16/BF16, p | g << 2 | b1 << 4 | b2 << 6), bound as
 * 32-bit words: a thread owns elements 2i and 2i + 1 (one word of a
 * 16-bit tensor, so no two threads write one word), f32 arithmetic, each
 * stored value rounded once. Floats travel as their bits. */
#define VKG_PC_OPTIM(u)                                                        \
	u n;      /* elements */                                               \
	u kind;   /* VKG_OPT_SGD or VKG_OPT_ADAM */                            \
	u flags;  /* VKG_OPT_* flags below */                                  \
	u dtypes;                                                              \
	u lr;     /* f32 bits, as the rest */                                  \
	u c1;     /* SGD: momentum; Adam: beta1 */                             \
	u c2;     /* SGD: dampening; Adam: beta2 */                            \
	u wd;     /* weight_decay */                                           \
	u eps;    /* Adam */                                                   \
	u step_size;    /* Adam: lr / (1 - beta1^step) */                      \
	u inv_sqrt_bc2; /* Adam: 1 / sqrt(1 - beta2^step) */                   \
	u base;   /* first element pair of this dispatch (chunking) */
#define VKG_BINDINGS_OPTIM 4 /* p, g, b1, b2 */
#define VKG_OPTIM_WG 256     /* element pairs per workgroup */
#define VKG_OPT_SGD 0u
#define VKG_OPT_ADAM 1u
#define VKG_OPT_F32 0u
#define VKG_OPT_F16 1u
#define VKG_OPT_BF16 2u
#define VKG_OPT_MOMENTUM 1u   /* SGD: momentum != 0 (b1 is the buffer) */
#define VKG_OPT_NESTEROV 2u
#define VKG_OPT_FIRST 4u      /* SGD: the buffer's first step: buf = g */
#define VKG_OPT_DECOUPLED 8u  /* Adam: AdamW's decay of p */

/* ---- flags (the push constants' `flags` word) ------------------------------- */
#define VKG_FLAG_WRITE_C 1u    /* GEMM: write C (param: dW) */
#define VKG_FLAG_WRITE_D 2u    /* GEMM: write d, the row sums (param: db) */
#define VKG_FLAG_ACCUMULATE 4u /* add to what the outputs hold */
#define VKG_FLAG_VEC_LOADS 8u  /* GEMM: vector loads of A and B (dispatch.c vec_flag) */
/* GEMM (linear_tiled_gemm, linear_coopmat_nv2_gemm): the f32 accumulators
 * (and db's) start from e instead of zero / end in e instead of being
 * stored to C and d. A reduction cut into pieces along k, each piece after
 * the first with SUMS_IN and each before the last with SUMS_OUT, gives the
 * bits of one dispatch over all of k: the same multiply-adds on the same
 * f32 values in the same order (pieces on whole k steps of the kernel:
 * record_param_resume_granule). */
#define VKG_FLAG_SUMS_IN 16u
#define VKG_FLAG_SUMS_OUT 32u
/* linear_input_backward: W read transposed, W'[k, i] = w[w_off + i·n_out + k]
 * (linear_forward's generic kernel: B = Wᵀ without a transposed copy; w_off
 * then moves by k0, not k0·n_in, for a piece of the reduction) */
#define VKG_FLAG_B_TRANS 64u
/* linear_forward_prep's two jobs (above) */
#define VKG_FLAG_PREP_TRANSPOSE 128u
#define VKG_FLAG_PREP_BIAS 256u
/* linear_activation: y = act(z) in place (else dZ = dY ⊙ act') */
#define VKG_FLAG_ACT_FORWARD 512u

/* ---- bench_peak_fma, bench_peak_mma, bench_peak_nv2, bench_peak_copy: `vkgrad bench --peak` only
 * Microkernels that measure ceilings (bench/cli_bench_peak.c): FP32 FMA
 * throughput, and subgroup- and workgroup-scope cooperative-matrix
 * multiply-adds with the operands in registers or loaded from memory. Domain bench_peak: the
 * daemon builds no pipeline for them, so hello, info and `auto` never see
 * them (only `vkgradd --list-kernels`, the build's listing, does).
 *
 * bench_peak_fma: each invocation runs CHAINS (specialization constant 1)
 * independent vec4 accumulators, VKG_PEAK_FMA_UNROLL steps per loop trip,
 * and writes the sum of their components: OUTER = 0 (constant 2) chains
 * acc = fma(acc, a, b); OUTER = 1 an outer product as in a GEMM's thread
 * tile, acc[i][q] = fma(a_i, b_q, acc[i][q]) over CHAINS/2 rows of 8. */
#define VKG_PC_PEAK_FMA(u)                                                     \
	u iters;  /* loop trips */                                             \
	u a_bits; /* a and b as float bits */                                  \
	u b_bits;                                                              \
	u zero_bits; /* 0.0: a_i = a + i·zero, b_q = b + q·zero (OUTER) */
#define VKG_BINDINGS_PEAK_FMA 1 /* out: one float per invocation */
#define VKG_PEAK_FMA_UNROLL 4
#define VKG_PEAK_FMA_WG 256     /* invocations per workgroup */
/* bench_peak_mma: VKG_PEAK_MMA_SUBGROUPS subgroups per workgroup, each with
 * FA·FB f32 accumulators (FA A fragments times FB B fragments, as the GEMM's
 * 64×64 block of 4×4). One loop trip is one k-slice of VKG_PEAK_SLICE_K:
 * SLICE_K / CM_K steps of FA·FB multiply-adds; SMEM = 1 loads each step's
 * fragments from a shared tile (rows padded by 16 bytes, one barrier per
 * slice, as linear_coopmat_khr_gemm), SMEM = 0 keeps them in registers. */
#define VKG_PC_PEAK_MMA(u)                                                     \
	u iters; /* loop trips (k-slices) */
#define VKG_BINDINGS_PEAK_MMA 3 /* ab (FA A then FB B fragments), init (f32 accumulators), out */
#define VKG_PEAK_MMA_SUBGROUPS 4
#define VKG_PEAK_SLICE_K 32
/* bench_peak_nv2: workgroup-scope matrices (VK_NV_cooperative_matrix2), one
 * BM×BN f32 accumulator per workgroup (the tiling of linear_coopmat_nv2_gemm,
 * specialization constants 0..3: THREADS, BM, BN, BK). a holds
 * VKG_PEAK_NV2_COPIES equal copies of a BM × (VKG_PEAK_NV2_SLICES·BK) block
 * of A, b as many of a (SLICES·BK) × BN block of B; workgroup w works on copy
 * w mod COPIES. One loop trip is VKG_PEAK_NV2_SLICES multiply-adds: LOAD = 0
 * (nv2_regs) with k-slice 0 of A and B loaded once, LOAD = 1 (nv2_load)
 * slice s of both loaded through tensor layouts from a and b at step s,
 * LOAD = 2 (nv2_smem) from shared copies of VKG_PEAK_NV2_SMEM_SLICES slices,
 * step s on slice s mod SMEM_SLICES. `zero` is 0: added to every load's
 * offset, it keeps the compiler from taking loads out of the loop. */
#define VKG_PC_PEAK_NV2(u)                                                     \
	u iters; /* loop trips */                                              \
	u zero;  /* 0, unknown to the compiler */
#define VKG_BINDINGS_PEAK_NV2 4 /* a, b (ETYPE), init (f32 BM×BN), out (f32 BM×BN per workgroup) */
#define VKG_PEAK_NV2_SLICES 8 /* as many k steps as the GEMM's default UNROLL runs per trip */
#define VKG_PEAK_NV2_COPIES 8
#define VKG_PEAK_NV2_SMEM_SLICES 1
/* bench_peak_copy: the memory bandwidth as a kernel reaches it (bench
 * --peak's copy line, bench/peak_copy.c, beside vkCmdCopyBuffer): dst[i] =
 * src[i] for the n 16-byte (uvec4) elements, invocation t of T copying
 * elements t, t + T, t + 2T, ... VKG_PEAK_COPY_UNROLL of them loaded before
 * any is stored; the loop's index never passes n, so any n < 2^32 is safe. */
#define VKG_PC_PEAK_COPY(u)                                                    \
	u n; /* 16-byte elements to copy */
#define VKG_BINDINGS_PEAK_COPY 2 /* src, dst (uvec4) */
#define VKG_PEAK_COPY_WG 256     /* invocations per workgroup */
#define VKG_PEAK_COPY_UNROLL 4

#endif
