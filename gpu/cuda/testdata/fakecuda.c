// A fake libcuda.so.1 for gpu/cuda's tests on machines without a GPU: "device memory" is host
// memory and three kernels of gpu/kernels (add_inplace, bias_rows, adamw) run in C, so the
// purego binding (symbol loading, argument marshalling, copies, errors) is exercised end to end.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

static int inited;
static const char *names[64];
static int nnames;
// Retained primary contexts and loaded modules, read by the test through fake_live; a missing
// function (fake_missing_function) makes cuModuleGetFunction fail for that kernel name.
static int live_ctx, live_mod;
static char missing[64];
void fake_live(int *ctx, int *mod) { *ctx = live_ctx; *mod = live_mod; }
void fake_missing_function(const char *name) { strncpy(missing, name, sizeof missing - 1); }

CUresult cuInit(unsigned flags) { if (flags != 0) return 1; inited = 1; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12000; return 0; }
CUresult cuDeviceGetCount(int *n) { if (!inited) return 3; *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ord) { if (ord != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) { strncpy(name, "Fake GPU", len); return 0; }
CUresult cuDeviceGetUuid(unsigned char *u, int dev) { for (int i = 0; i < 16; i++) u[i] = (unsigned char)(i * 17); return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)0x1234; live_ctx++; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { if (dev != 0 || live_ctx == 0) return 201; live_ctx--; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { return ctx == (void *)0x1234 ? 0 : 201; }
CUresult cuCtxSynchronize(void) { return 0; }

CUresult cuModuleLoadDataEx(void **mod, const char *image, unsigned n, int *opts, void **vals) {
	if (strstr(image, ".entry adamw(") == NULL) {
		for (unsigned i = 0; i < n; i++) {
			if (opts[i] == 5) strcpy((char *)vals[i], "ptxas fatal: fake JIT error");
		}
		return 218; // CUDA_ERROR_INVALID_PTX
	}
	*mod = (void *)0x42;
	live_mod++;
	return 0;
}
CUresult cuModuleUnload(void *mod) { if (mod != (void *)0x42 || live_mod == 0) return 400; live_mod--; return 0; }
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) {
	if (strcmp(name, missing) == 0) return 500; // CUDA_ERROR_NOT_FOUND
	if (nnames >= 64) return 500;
	names[nnames] = strdup(name);
	*fn = (void *)(uintptr_t)(nnames + 1);
	nnames++;
	return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (n > ((size_t)1 << 40)) return 2; // CUDA_ERROR_OUT_OF_MEMORY
	*p = (CUdeviceptr)(uintptr_t)malloc(n);
	return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { unsigned *p = (unsigned *)(uintptr_t)d; for (size_t i = 0; i < n; i++) p[i] = v; return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 1000; *t = 4000; return 0; }

CUresult cuGetErrorString(CUresult r, const char **s) {
	switch (r) {
	case 2: *s = "out of memory"; return 0;
	case 218: *s = "a PTX JIT compilation failed"; return 0;
	case 700: *s = "an illegal memory access was encountered"; return 0;
	}
	*s = "unknown error";
	return 0;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 218: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
	case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
	}
	*s = "CUDA_ERROR_UNKNOWN";
	return 0;
}

#define P(i) ((float *)(uintptr_t)(*(CUdeviceptr *)params[i]))
#define I(i) (*(int *)params[i])
#define F(i) (*(float *)params[i])

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
	int k = (int)(uintptr_t)f - 1;
	if (k < 0 || k >= nnames || extra != NULL || shared != 0 || stream != NULL) return 400;
	long threads = (long)gx * gy * gz * bx * by * bz;
	const char *name = names[k];
	if (strcmp(name, "add_inplace") == 0) {
		float *x = P(0), *y = P(1);
		int total = I(2);
		if (threads < total) return 700;
		for (int i = 0; i < total; i++) x[i] = x[i] + y[i];
		return 0;
	}
	if (strcmp(name, "bias_rows") == 0) {
		float *b = P(0), *y = P(1);
		int d = I(2), total = I(3);
		for (int i = 0; i < total; i++) y[i] = b[i % d];
		return 0;
	}
	if (strcmp(name, "adamw") == 0) {
		float *p = P(0), *g = P(1), *m = P(2), *v = P(3);
		volatile float decay = F(4), b1 = F(5), b2 = F(6), step = F(7), invbc2 = F(8), eps = F(9);
		int total = I(10);
		for (int i = 0; i < total; i++) {
			volatile float gj = g[i];
			volatile float a = b1 * m[i]; volatile float b = (1 - b1) * gj; volatile float mj = a + b;
			volatile float c = b2 * v[i]; volatile float d = (1 - b2) * gj; d = d * gj; volatile float vj = c + d;
			m[i] = mj; v[i] = vj;
			volatile float s = sqrtf(vj); s = s * invbc2; volatile float den = s + eps;
			volatile float pd = p[i] * decay; volatile float u = step * mj; u = u / den;
			p[i] = pd - u;
		}
		return 0;
	}
	return 700;
}
