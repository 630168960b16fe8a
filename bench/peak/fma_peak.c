/*
 * fma_peak: the machine's float32 multiply-add ceiling, as the upper bound
 * that SGEMM and MFU figures are read against (docs/performance.md).
 *
 * Each thread keeps 12 independent chains of fused multiply-adds in
 * registers (enough to cover the FMA latency on every x86-64 core we use),
 * once with 8-lane AVX2 and once with 16-lane AVX-512F vectors, and the
 * program prints FLOP/s over all threads (2 FLOPs per lane per FMA).
 *
 *   gcc -O2 -mavx512f -mfma -pthread -o /tmp/fma_peak bench/peak/fma_peak.c
 *   /tmp/fma_peak [threads]          # default 2
 *
 * On a CPU without AVX-512F, build with -mfma only and -DNO_AVX512.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS 20000000L

static double seconds(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile float sink;

static void *chains256(void *arg) {
	(void)arg;
	__m256 acc[CHAINS];
	const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
	for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
	for (long n = 0; n < ITERS; n++) {
#pragma GCC unroll 12
		for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
	}
	float s = 0;
	for (int i = 0; i < CHAINS; i++) s += _mm256_cvtss_f32(acc[i]);
	sink = s;
	return NULL;
}

#ifndef NO_AVX512
static void *chains512(void *arg) {
	(void)arg;
	__m512 acc[CHAINS];
	const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
	for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
	for (long n = 0; n < ITERS / 2; n++) {
#pragma GCC unroll 12
		for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
	}
	float s = 0;
	for (int i = 0; i < CHAINS; i++) s += _mm512_cvtss_f32(acc[i]);
	sink = s;
	return NULL;
}
#endif

static double run(void *(*fn)(void *), int threads, double flopsPerThread) {
	pthread_t t[256];
	double t0 = seconds();
	for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, fn, NULL);
	for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
	return threads * flopsPerThread / (seconds() - t0) / 1e9;
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	if (threads < 1 || threads > 256) {
		fprintf(stderr, "fma_peak: threads must be 1..256, got %s\n", argv[1]);
		return 2;
	}
	for (int round = 0; round < 3; round++) {
		double best256 = run(chains256, threads, 2.0 * 8 * CHAINS * ITERS);
		printf("avx2    %6.1f GFLOP/s on %d threads\n", best256, threads);
#ifndef NO_AVX512
		double best512 = run(chains512, threads, 2.0 * 16 * CHAINS * (ITERS / 2));
		printf("avx512  %6.1f GFLOP/s on %d threads\n", best512, threads);
#endif
	}
	return 0;
}
