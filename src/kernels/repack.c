/* The x8 weight layout (see kernels/repack.h): a table of block fields per
 * type, one packing and one unpacking routine for all of them. */
#include "kernels/repack.h"

#include <string.h>

#include "quant/quant.h"

/* A block field: byte offset and size in the plain block; col: a byte
 * array cut into 4-byte columns, else a per-row value kept whole. */
struct x8_field {
	uint8_t off, size;
	bool col;
};

struct x8_layout {
	int type;
	int n_fields;
	struct x8_field f[4];
};

/* Offsets as in quant/blocks.h (d first; then m, qh or dmin/scales). */
static const struct x8_layout layouts[] = {
	{ FX_TYPE_Q4_0, 2, { { 0, 2, false }, { 2, 16, true } } },
	{ FX_TYPE_Q4_1, 3, { { 0, 2, false }, { 2, 2, false }, { 4, 16, true } } },
	{ FX_TYPE_Q5_0, 3, { { 0, 2, false }, { 2, 4, false }, { 6, 16, true } } },
	{ FX_TYPE_Q8_0, 2, { { 0, 2, false }, { 2, 32, true } } },
	{ FX_TYPE_Q4_K, 4, { { 0, 2, false }, { 2, 2, false }, { 4, 12, true }, { 16, 128, true } } },
	/* q6_K: d (at 208), scales (192), ql (0), qh (128) */
	{ FX_TYPE_Q6_K, 4, { { 208, 2, false }, { 192, 16, true }, { 0, 128, true }, { 128, 64, true } } },
};

static const struct x8_layout *layout_of(int t)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].type == t)
			return &layouts[i];
	return NULL;
}

bool kern_x8_layout(int t)
{
	return layout_of(t) != NULL;
}

/* Copy one field of one row between a plain block and a superblock.
 * Columns move as fixed 4-byte copies (inlined: loading a model repacks
 * every matrix through here). */
static void move_field(const struct x8_field *f, uint8_t *sb, uint8_t *blk, int r, bool to_sb)
{
	if (!f->col) {
		if (to_sb)
			memcpy(sb + (size_t)r * f->size, blk + f->off, f->size);
		else
			memcpy(blk + f->off, sb + (size_t)r * f->size, f->size);
		return;
	}
	for (int c = 0; c < f->size / 4; c++) {
		uint8_t *s = sb + ((size_t)c * 8 + (size_t)r) * 4, *b = blk + f->off + 4 * (size_t)c;
		if (to_sb)
			memcpy(s, b, 4);
		else
			memcpy(b, s, 4);
	}
}

void kern_x8_pack(int t, int64_t n, void *rows, void *tmp)
{
	const struct x8_layout *L = layout_of(t);
	const struct fx_type_traits *tt = fx_type_get(t);
	size_t rb = fx_row_size(t, n), bs = tt->type_size;
	memcpy(tmp, rows, 8 * rb);
	for (int64_t b = 0; b < n / tt->blck_size; b++) {
		uint8_t *sb = (uint8_t *)rows + (size_t)b * 8 * bs;
		for (int i = 0; i < L->n_fields; i++) {
			for (int r = 0; r < 8; r++)
				move_field(&L->f[i], sb, (uint8_t *)tmp + (size_t)r * rb + (size_t)b * bs, r, true);
			sb += 8 * (size_t)L->f[i].size;
		}
	}
}

void kern_x8_unpack_row(int t, int64_t n, const void *group, int r, void *out)
{
	const struct x8_layout *L = layout_of(t);
	const struct fx_type_traits *tt = fx_type_get(t);
	size_t bs = tt->type_size;
	for (int64_t b = 0; b < n / tt->blck_size; b++) {
		uint8_t *sb = (uint8_t *)group + (size_t)b * 8 * bs;
		for (int i = 0; i < L->n_fields; i++) {
			move_field(&L->f[i], sb, (uint8_t *)out + (size_t)b * bs, r, false);
			sb += 8 * (size_t)L->f[i].size;
		}
	}
}
