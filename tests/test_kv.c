/* kv_rows (src/kv/kv.h) against the per-row accessors kv_k_row/kv_v_row it
 * stands for in attention: every start position and run length up to two
 * attention chunks, paged pools of block sizes that do and do not divide
 * the chunk (1, 12, 16, 48), both layer groups, a block table out of
 * order, and the contiguous backings. Then which pool blocks the paged
 * backing hands out (check_alloc_order). */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "core/alloc.h"
#include "ferrox.h"
#include "kv/backing.h"
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

/* The paged pool is one allocation whose pages become resident when a
 * block is first written, so the server's RSS follows how many distinct
 * blocks were ever handed out. The policy pinned here: a freed (uncached)
 * block is reused before an untouched one; a released prefix-cached block
 * stays cached while untouched blocks remain (vLLM's: evict only when
 * nothing is free, so the cache can grow to the pool), then goes least
 * recently released first. Blocks ever written are therefore at most the
 * most ever held at once (referenced plus cached), and never beyond the
 * pool: RSS grows to the pool's size and stops. */
enum { A_BS = 4, A_BLOCKS = 8, A_SEQ = 3 };

static int32_t seq_block(struct kv_backing *b, int32_t seq, int32_t i)
{
	return kv_seq_view(b, seq).paged.blocks[0][i];
}

/* Tokens tok0, tok0 + 1, ... (n of them) appended to seq. */
static void put(struct kv_backing *b, int32_t seq, int32_t tok0, int32_t n)
{
	int32_t tok[A_BLOCKS * A_BS];
	for (int32_t i = 0; i < n; i++)
		tok[i] = tok0 + i;
	kv_begin(b);
	CHECK(kv_admit(b, seq, n, n) == 0);
	CHECK(kv_reserve(b, seq, n) == 0);
	kv_commit(b, seq, tok, n);
}

static int32_t blocks_used(const struct kv_backing *b)
{
	struct kv_stats st;
	kv_get_stats(b, &st);
	return st.blocks_used;
}

static void check_alloc_order(void)
{
	static const int32_t window[1] = { 0 };
	struct kv_geom g = { .n_layer = 1, .k_width = 32, .v_width = 32, .k_type = FX_TYPE_F16,
			     .v_type = FX_TYPE_F16, .window = window };
	struct kv_backing *b = NULL;
	CHECK(kv_paged_create(&g, A_SEQ, A_BLOCKS * A_BS, A_BS, A_BLOCKS * A_BS, false, &b) == 0);
	if (!b)
		return;
	/* A partial block is not cached: released, it is the next one out,
	 * however often, before any untouched block. */
	for (int i = 0; i < 100; i++) {
		put(b, 0, 1000 * i, A_BS / 2);
		CHECKF(seq_block(b, 0, 0) == 0, "round %d: block %d, not the freed 0", i,
		       (int)seq_block(b, 0, 0));
		kv_clear(b, 0);
	}
	/* A full block is cached when released; the next sequence gets an
	 * untouched block, and a freed one before that. */
	put(b, 0, 100, A_BS);
	kv_clear(b, 0);
	put(b, 1, 200, A_BS / 2);
	CHECK(seq_block(b, 1, 0) == 1);
	kv_clear(b, 1);
	put(b, 1, 300, A_BS / 2);
	CHECK(seq_block(b, 1, 0) == 1);
	/* ... and the cached one still serves its prefix. */
	int32_t tok[A_BS] = { 100, 101, 102, 103 };
	CHECK(kv_reuse(b, 2, tok, A_BS, A_BS) == A_BS);
	CHECK(seq_block(b, 2, 0) == 0);
	kv_clear(b, 1);
	kv_clear(b, 2);
	CHECK(blocks_used(b) == 0);
	/* Distinct full blocks, one at a time: the cache grows over the
	 * untouched blocks (0 is still cached from above, 1 is free), then
	 * evicts the least recently released: never a block past the pool,
	 * and the newest prefixes stay. */
	for (int i = 0; i < 3 * A_BLOCKS; i++) {
		put(b, 0, 10000 + 1000 * i, A_BS);
		int32_t want = i < A_BLOCKS - 1 ? i + 1 : (i - (A_BLOCKS - 1)) % A_BLOCKS;
		CHECKF(seq_block(b, 0, 0) == want, "distinct block %d: got block %d, want %d", i,
		       (int)seq_block(b, 0, 0), (int)want);
		kv_clear(b, 0);
	}
	for (int i = 2 * A_BLOCKS; i < 3 * A_BLOCKS; i++) {
		for (int32_t j = 0; j < A_BS; j++)
			tok[j] = 10000 + 1000 * i + j;
		CHECKF(kv_reuse(b, 1, tok, A_BS, A_BS) == A_BS, "prefix %d evicted", i);
		kv_clear(b, 1);
	}
	CHECK(blocks_used(b) == 0);
	kv_destroy(b);
}

/* Per-layer row widths (Gemma 4: sliding and global layers with their own
 * head sizes): each paged group's rows are as wide as its widest layer,
 * not the model's widest; a layer wider than k_width is refused. */
static void check_group_widths(void)
{
	static const int32_t window[3] = { 0, 8, 8 };
	static const int64_t kw[3] = { 64, 32, 16 }, vw[3] = { 64, 16, 32 };
	struct kv_geom g = { .n_layer = 3, .k_width = 64, .v_width = 64, .layer_k_width = kw,
			     .layer_v_width = vw, .k_type = FX_TYPE_F32, .v_type = FX_TYPE_F32,
			     .window = window };
	struct kv_backing *b = NULL;
	CHECK(kv_paged_create(&g, 2, 64, 4, 16, false, &b) == 0);
	if (!b)
		return;
	struct kv_view v = kv_seq_view(b, 0);
	const struct kv_paged *set = v.paged.set;
	CHECK(v.kind == KV_PAGED);
	CHECKF(set->pool[0].k_width == 64 && set->pool[0].v_width == 64, "full group %lld/%lld",
	       (long long)set->pool[0].k_width, (long long)set->pool[0].v_width);
	CHECKF(set->pool[1].k_width == 32 && set->pool[1].v_width == 32, "sliding group %lld/%lld",
	       (long long)set->pool[1].k_width, (long long)set->pool[1].v_width);
	CHECK(set->pool[1].k_row == 32 * sizeof(float));
	kv_destroy(b);
	static const int64_t wide[3] = { 64, 128, 16 };
	g.layer_k_width = wide;
	b = NULL;
	CHECK(kv_paged_create(&g, 2, 64, 4, 16, false, &b) == FX_E_INVALID && !b);
}

int main(void)
{
	check_group_widths();
	static const int32_t sizes[] = { 1, 12, 16, 48 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_paged(sizes[i]);
	check_contig(KV_DECODE);
	check_contig(KV_BATCHED);
	check_alloc_order();
	return check_exit();
}
