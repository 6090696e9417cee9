/* kv_rows (src/kv/kv.h) against the per-row accessors kv_k_row/kv_v_row it
 * stands for in attention: every start position and run length up to two
 * attention chunks, paged pools of block sizes that do and do not divide
 * the chunk (1, 12, 16, 48), both layer groups, a block table out of
 * order, and the contiguous backings. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "core/alloc.h"
#include "kv/kv.h"
#include "quant/quant.h"

enum { N_LAYER = 3, N_POS = 150, MAX_RUN = 64 };

/* kv_rows(kv, il, j0, n) equals kv_k_row / kv_v_row row by row for every
 * layer, j0 + n <= n_pos and n <= MAX_RUN. */
static void check_view(const char *label, const struct kv_view *kv, int32_t n_pos)
{
	const uint8_t *k[MAX_RUN], *v[MAX_RUN];
	long bad = 0;
	for (int il = 0; il < N_LAYER; il++)
		for (int32_t j0 = 0; j0 < n_pos; j0++)
			for (int n = 1; n <= MAX_RUN && j0 + n <= n_pos; n++) {
				kv_rows(kv, il, j0, n, k, v);
				for (int r = 0; r < n; r++)
					bad += k[r] != kv_k_row(kv, il, j0 + r) || v[r] != kv_v_row(kv, il, j0 + r);
			}
	CHECKF(bad == 0, "%s: %ld rows differ from kv_k_row/kv_v_row", label, bad);
}

static void check_paged(int32_t block_size)
{
	struct kv_paged set = { .k_type = FX_TYPE_F16, .v_type = FX_TYPE_F16, .window = 0 };
	uint8_t group[N_LAYER] = { 0, 1, 0 };
	int32_t slot[N_LAYER] = { 0, 0, 1 };
	set.group = group;
	set.slot = slot;
	int32_t n_blocks = (N_POS + block_size - 1) / block_size;
	/* Two more blocks than the sequence needs, handed out in reverse, so
	 * logical and physical blocks differ. */
	int32_t pool_blocks = n_blocks + 2;
	CHECK(kv_pool_init(&set.pool[0], 2, pool_blocks, block_size, 192, 192, FX_TYPE_F16, FX_TYPE_F16) == 0);
	CHECK(kv_pool_init(&set.pool[1], 1, pool_blocks, block_size, 192, 128, FX_TYPE_F16, FX_TYPE_F16) == 0);
	int32_t *table[KV_GROUPS];
	for (int g = 0; g < KV_GROUPS; g++) {
		table[g] = fx_malloc_array((size_t)n_blocks, sizeof(int32_t));
		for (int32_t b = 0; b < n_blocks; b++)
			table[g][b] = pool_blocks - 1 - b - g; /* group 1 shifted by one */
	}
	struct kv_view kv = { .kind = KV_PAGED };
	kv.paged.set = &set;
	kv.paged.blocks[0] = table[0];
	kv.paged.blocks[1] = table[1];
	char label[64];
	snprintf(label, sizeof(label), "paged, block size %d", (int)block_size);
	if (set.pool[0].k && set.pool[1].k)
		check_view(label, &kv, N_POS);
	for (int g = 0; g < KV_GROUPS; g++) {
		fx_free(table[g]);
		kv_pool_fini(&set.pool[g]);
	}
}

static void check_contig(enum kv_kind kind)
{
	struct kv_contig c;
	CHECK(kv_contig_init(&c, N_LAYER, N_POS, 192, 128, FX_TYPE_F16, FX_TYPE_F32) == 0);
	struct kv_view kv = { .kind = kind };
	if (kind == KV_DECODE)
		kv.decode = &c;
	else
		kv.batched = &c;
	if (c.k)
		check_view(kind == KV_DECODE ? "contiguous (decode)" : "contiguous (batched)", &kv, N_POS);
	kv_contig_fini(&c);
}

int main(void)
{
	static const int32_t sizes[] = { 1, 12, 16, 48 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_paged(sizes[i]);
	check_contig(KV_DECODE);
	check_contig(KV_BATCHED);
	return check_exit();
}
