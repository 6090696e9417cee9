/* Minimal assertion helpers for ctest executables: each CHECK failure is
 * printed with its location and counted; main returns check_exit(). */
#ifndef FX_TESTS_CHECK_H
#define FX_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;
static int check_count;

#define CHECK(cond) do { check_count++; if (!(cond)) { check_failures++; \
	fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { check_count++; if (!(cond)) { check_failures++; \
	fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Path of a downloaded model (scripts/get-model.sh), or NULL when absent.
 * With FX_REQUIRE_MODELS=1 (CI) a missing model is a failure, not a skip. */
static inline const char *check_model_path(const char *file, char *buf, size_t n)
{
	const char *dir = getenv("FX_MODELS_DIR");
	snprintf(buf, n, "%s/%s", dir ? dir : "models", file);
	FILE *f = fopen(buf, "rb");
	if (f) { fclose(f); return buf; }
	const char *req = getenv("FX_REQUIRE_MODELS");
	if (req && req[0] == '1') {
		fprintf(stderr, "model %s missing (run scripts/get-model.sh)\n", buf);
		check_failures++;
	} else {
		fprintf(stderr, "note: model %s absent; its checks are skipped\n", buf);
	}
	return NULL;
}

/* Whole file at path into a malloc'ed buffer, or NULL (counted as a
 * failure: test data is committed). *size gets its length. */
static inline void *check_read_file(const char *path, size_t *size)
{
	void *buf = NULL;
	long len;
	FILE *f = fopen(path, "rb");
	CHECKF(f != NULL, "cannot open %s (run from the repo root)", path);
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)len);
		if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
			free(buf);
			buf = NULL;
		}
		*size = (size_t)len;
	}
	fclose(f);
	CHECKF(buf != NULL, "cannot read %s", path);
	return buf;
}

static inline int check_exit(void)
{
	printf("%d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
