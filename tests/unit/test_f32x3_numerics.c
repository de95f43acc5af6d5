/* tests/unit/test_f32x3_numerics.c — the arithmetic of
 * shaders/linear_coopmat_khr_f32x3_gemm.comp (variant coopmat_khr_f32x3),
 * emulated on the CPU and checked against float64, so that its error bound
 * is documented and tested without a GPU.
 *
 * Each f32 operand x is split as the shader splits it: hi = bf16(x), round
 * to nearest even (bit for bit the shader's bf16_rne), lo = bf16(x - hi);
 * a dot product sums, per k, lo_a·hi_b + hi_a·lo_b + hi_a·hi_b in f32 (each
 * bf16×bf16 product is exact in f32; the tensor cores' adds are modelled
 * as f32 additions in order). Dropped per product: lo_a·lo_b and the
 * pieces' rounding, |a·b − kept| <= 3·2^-16·(1 + 2^-7)·|a·b|; the f32 sum of
 * 3K terms adds at most γ(3K) = 3K·2^-24/(1 − 3K·2^-24) of Σ|terms|. So per
 * output, |got − exact| <= (3.03·2^-16 + 1.01·γ(3K))·Σ_k |a_k·b_k|, asserted
 * here over random inputs of several scales for K = 1 .. 4096, and for the
 * exact cases: an operand that is a bf16 already multiplies exactly. The
 * normwise error `vkgrad bench` reports (max|got − want| / max|want|) is
 * printed for the record: it is what auto's 1e-5 gate reads. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint32_t f2u(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* the shader's bf16_rne: bits of the bf16 nearest f (ties to even), a
 * finite f that would round past the largest bf16 truncated, NaN quiet */
static uint32_t bf16_rne(float f)
{
	uint32_t u = f2u(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	if ((r & 0x7fffu) == 0x7f80u && (u & 0x7fffffffu) != 0x7f800000u)
		return u >> 16;
	return r;
}

static void split1(float x, float *hi, float *lo)
{
	*hi = u2f(bf16_rne(x) << 16);
	const float rest = x - *hi; /* exact */
	*lo = isinf(x) ? 0.0f : u2f(bf16_rne(rest) << 16);
}

/* the kernel's sum for one output; sum_abs = Σ|a_k·b_k| in float64 */
static float dot_f32x3(const float *a, const float *b, int k, double *exact, double *sum_abs)
{
	float acc = 0.0f;
	double e = 0.0, s = 0.0;
	for (int i = 0; i < k; i++) {
		float ah, al, bh, bl;
		split1(a[i], &ah, &al);
		split1(b[i], &bh, &bl);
		acc += al * bh; /* each product exact in f32 */
		acc += ah * bl;
		acc += ah * bh;
		e += (double)a[i] * (double)b[i];
		s += fabs((double)a[i] * (double)b[i]);
	}
	*exact = e;
	*sum_abs = s;
	return acc;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uni(void) /* [-1, 1) */
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

/* hi + lo is x within 2^-16 |x|, lo within 2^-8 |x|, hi round to nearest */
static void test_split_pieces(void **state)
{
	(void)state;
	for (int i = 0; i < 200000; i++) {
		const float x = (float)(uni() * pow(2.0, (int)(uni() * 60)));
		float hi, lo;
		split1(x, &hi, &lo);
		assert_true(fabs((double)x - hi) <= ldexp(fabs((double)x), -8));
		assert_true(fabs((double)x - hi - lo) <= ldexp(fabs((double)x), -16));
		assert_true((f2u(hi) & 0xffffu) == 0 && (f2u(lo) & 0xffffu) == 0);
	}
	/* ties to even, the top of the range kept finite, specials */
	float hi, lo;
	split1(u2f(0x3f808000u), &hi, &lo); /* 1 + 2^-8: halfway, to even (1.0) */
	assert_true(f2u(hi) == 0x3f800000u && lo == ldexp(1.0, -8));
	split1(u2f(0x3f818000u), &hi, &lo); /* 1 + 3·2^-8: halfway, to even (up) */
	assert_true(f2u(hi) == 0x3f820000u && lo == -ldexp(1.0, -8));
	split1(u2f(0x7f7fffffu), &hi, &lo); /* FLT_MAX: hi stays finite */
	assert_true(isfinite(hi) && isfinite(lo) && f2u(hi) == 0x7f7f0000u);
	split1(INFINITY, &hi, &lo);
	assert_true(isinf(hi) && lo == 0.0f);
	split1(NAN, &hi, &lo);
	assert_true(isnan(hi));
}

/* The bound above over random dot products of K = 1 .. 4096, inputs of
 * mixed scales; operands that are bf16 already: exact products. */
static void test_dot_error_bound(void **state)
{
	(void)state;
	static const int ks[] = {1, 2, 15, 16, 17, 100, 1024, 4096};
	float *a = malloc(4096 * sizeof(float)), *b = malloc(4096 * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	for (size_t t = 0; t < sizeof(ks) / sizeof(ks[0]); t++) {
		const int k = ks[t];
		const double g = 3.0 * k * ldexp(1.0, -24) / (1.0 - 3.0 * k * ldexp(1.0, -24));
		const double bound = 3.03 * ldexp(1.0, -16) + 1.01 * g;
		double worst = 0, max_diff = 0, max_ref = 0;
		const int outs = k >= 1024 ? 256 : 2000;
		for (int o = 0; o < outs; o++) {
			const double sa = pow(2.0, (int)(uni() * 8)), sb = pow(2.0, (int)(uni() * 8));
			for (int i = 0; i < k; i++) {
				a[i] = (float)(uni() * sa);
				b[i] = (float)(uni() * sb);
			}
			double exact, sum_abs;
			const float got = dot_f32x3(a, b, k, &exact, &sum_abs);
			const double r = sum_abs > 0 ? fabs(got - exact) / sum_abs : fabs(got - exact);
			worst = r > worst ? r : worst;
			/* the normwise metric of one output row of unit-scale data */
			if (sa == 1.0 && sb == 1.0) {
				max_diff = fmax(max_diff, fabs(got - exact));
				max_ref = fmax(max_ref, fabs(exact));
			}
		}
		printf("K=%5d  max |err|/sum|ab| = %.3g (bound %.3g)  normwise (unit scale) %.3g\n", k, worst,
		       bound, max_ref > 0 ? max_diff / max_ref : 0.0);
		assert_true(worst <= bound);
	}
	/* bf16 operands (lo = 0): every product exact, only f32 accumulation */
	for (int i = 0; i < 16; i++) {
		a[i] = u2f(f2u((float)uni()) & 0xffff0000u);
		b[i] = u2f(f2u((float)uni()) & 0xffff0000u);
	}
	double exact, sum_abs;
	const float got = dot_f32x3(a, b, 1, &exact, &sum_abs);
	assert_true((double)got == exact);
	free(a);
	free(b);
}

/* A test that can fail: dropping the cross terms (hi·hi alone, i.e. plain
 * bf16) breaks the bound, so the bound is not vacuous. */
static void test_bound_is_tight_enough(void **state)
{
	(void)state;
	float a[64], b[64];
	double worst = 0;
	for (int o = 0; o < 200; o++) {
		float acc = 0.0f;
		double e = 0, s = 0;
		for (int i = 0; i < 64; i++) {
			a[i] = (float)uni(), b[i] = (float)uni();
			float ah, al, bh, bl;
			split1(a[i], &ah, &al);
			split1(b[i], &bh, &bl);
			acc += ah * bh;
			e += (double)a[i] * b[i];
			s += fabs((double)a[i] * b[i]);
		}
		worst = fmax(worst, fabs(acc - e) / s);
	}
	const double g = 3.0 * 64 * ldexp(1.0, -24);
	printf("bf16 alone, K=64: max |err|/sum|ab| = %.3g\n", worst);
	assert_true(worst > 3.03 * ldexp(1.0, -16) + 1.01 * g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_pieces),
		cmocka_unit_test(test_dot_error_bound),
		cmocka_unit_test(test_bound_is_tight_enough),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
