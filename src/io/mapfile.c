#include "io/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* path opened for reading into *fd, its size in *n: a regular file of at
 * least min_size bytes (else the error, nothing left open). */
static int open_sized(const char *path, size_t min_size, const char *what, int *fd, size_t *n,
		      struct fx_err *err)
{
	struct stat st;
	if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return fx_fail(err, FX_E_IO, "%s: cannot open (%m)", path);
	if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		return fx_fail(err, FX_E_IO, "%s: not a regular file", path);
	}
	*n = (size_t)st.st_size;
	if (*n < min_size) {
		close(*fd);
		return fx_fail(err, FX_E_FORMAT, "%s: %zu bytes is too short for a %s file", path, *n, what);
	}
	return FX_OK;
}

int io_map(const char *path, size_t min_size, const char *what, const void **map, size_t *size,
	   struct fx_err *err)
{
	int fd = -1, rc;
	size_t n = 0;
	if ((rc = open_sized(path, min_size, what, &fd, &n, err)))
		return rc;
	/* Private and writable: the model may rearrange weights in place
	 * (kernels/repack.h); written pages become the process's own and the
	 * file never changes. Pages never written stay shared with the page
	 * cache. */
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fx_fail(err, FX_E_IO, "%s: mmap failed (%m)", path);
	/* The kernel may read ahead: weights are read front to back. */
	madvise(m, n, MADV_WILLNEED);
	*map = m;
	*size = n;
	return FX_OK;
}

int io_read(const char *path, size_t min_size, const char *what, bool (*progress)(double, void *),
	    void *arg, const void **map, size_t *size, struct fx_err *err)
{
	int fd = -1, rc;
	size_t n = 0;
	if ((rc = open_sized(path, min_size, what, &fd, &n, err)))
		return rc;
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		close(fd);
		return fx_fail(err, FX_E_NOMEM, "%s: no memory for %zu bytes (%m)", path, n);
	}
#if defined(MADV_HUGEPAGE)
	madvise(m, n, MADV_HUGEPAGE); /* advice only: refused is fine */
#endif
	const size_t piece = (size_t)8 << 20;
	for (size_t off = 0; off < n;) {
		size_t want = n - off < piece ? n - off : piece;
		ssize_t r = read(fd, (char *)m + off, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int rc = fx_fail(err, FX_E_IO, r < 0 ? "%s: read failed (%m)" : "%s: the file shrank while read",
					 path);
			close(fd);
			munmap(m, n);
			return rc;
		}
		off += (size_t)r;
		if (progress && !progress((double)off / (double)n, arg)) {
			close(fd);
			munmap(m, n);
			return fx_fail(err, FX_E_IO, "%s: loading cancelled", path);
		}
	}
	close(fd);
	*map = m;
	*size = n;
	return FX_OK;
}

void io_map_release(const void *map, size_t off, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)map + off, b = a + len;

	if (!map || pg <= 0)
		return;
	a = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
	b &= ~((uintptr_t)pg - 1);
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

void io_unmap(const void *map, size_t size)
{
	if (map)
		munmap((void *)map, size);
}
