/* Python's str.lower / upper / title / capitalize for the scripts ferrox
 * knows: ASCII, Latin-1 (ß -> "SS", ÿ -> Ÿ, µ -> Μ), Latin Extended-A,
 * basic Greek (with the final-sigma rule of lower()), Cyrillic and the
 * fullwidth Latin letters (Unicode's UnicodeData / SpecialCasing, as
 * CPython applies them). A letter of another cased script (Armenian,
 * Georgian, Latin Extended-B/Additional, ...) is an error rather than a
 * silently different string; uncased scripts (CJK, emoji, ...) pass. */
#include <string.h>

#include "chat/eval.h"

enum { CASE_UNKNOWN = -1 };

/* Scripts with case pairs this file does not map. */
static bool unknown_cased(uint32_t c)
{
	static const uint32_t r[][2] = {
		{ 0x180, 0x24f }, { 0x250, 0x2af }, { 0x370, 0x385 }, { 0x3cf, 0x3ff },
		{ 0x530, 0x58f }, { 0x10a0, 0x10ff }, { 0x13a0, 0x13ff }, { 0x1c80, 0x1cbf },
		{ 0x1d00, 0x1dbf }, { 0x1e00, 0x1fff }, { 0x2126, 0x2126 }, { 0x212a, 0x212b },
		{ 0x2132, 0x2132 }, { 0x214e, 0x214e }, { 0x2160, 0x2188 }, { 0x24b6, 0x24e9 },
		{ 0x2c00, 0x2d2f }, { 0xa640, 0xa69f }, { 0xa720, 0xa7ff }, { 0xab30, 0xabbf },
		{ 0xfb00, 0xfb17 }, { 0x10400, 0x1044f }, { 0x104b0, 0x104ff }, { 0x10570, 0x105bf },
		{ 0x10c80, 0x10cff }, { 0x118a0, 0x118df }, { 0x16e40, 0x16e9f }, { 0x1e900, 0x1e94b },
		{ 0x390, 0x390 }, { 0x3b0, 0x3b0 },
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (c >= r[i][0] && c <= r[i][1])
			return true;
	return false;
}

/* Pairs of a block where one parity is the capital. */
static bool pair(uint32_t c, uint32_t lo, uint32_t hi, bool upper_even, bool to_upper, uint32_t *o)
{
	if (c < lo || c > hi)
		return false;
	bool is_upper = ((c & 1) == 0) == upper_even;
	*o = is_upper && !to_upper ? c + 1 : !is_upper && to_upper ? c - 1 : c;
	return true;
}

/* The mapping of c into out[0..3); the count, or CASE_UNKNOWN. title:
 * titlecase (only differs from upper for ß here: "Ss"). */
static int map1(uint32_t c, bool to_upper, bool title, uint32_t *out)
{
	uint32_t o = c;
	out[0] = c;
	if (c < 0x80) {
		if (to_upper && c >= 'a' && c <= 'z')
			o = c - 32;
		else if (!to_upper && c >= 'A' && c <= 'Z')
			o = c + 32;
	} else if (c < 0x100) {
		if (to_upper) {
			if (c == 0xdf) {
				out[0] = 'S';
				out[1] = title ? 's' : 'S';
				return 2;
			}
			if (c == 0xff)
				o = 0x178;
			else if (c == 0xb5)
				o = 0x39c;
			else if (c >= 0xe0 && c <= 0xfe && c != 0xf7)
				o = c - 32;
		} else if (c >= 0xc0 && c <= 0xde && c != 0xd7) {
			o = c + 32;
		}
	} else if (c < 0x180) {
		if (c == 0x130) {
			if (to_upper)
				return 1;
			out[0] = 'i';
			out[1] = 0x307;
			return 2;
		}
		if (c == 0x131) {
			out[0] = to_upper ? 'I' : c;
			return 1;
		}
		if (c == 0x149) {
			if (!to_upper)
				return 1;
			out[0] = 0x2bc;
			out[1] = 'N';
			return 2;
		}
		if (c == 0x178) {
			out[0] = to_upper ? c : 0xff;
			return 1;
		}
		if (c == 0x17f) {
			out[0] = to_upper ? 'S' : c;
			return 1;
		}
		if (c == 0x138)
			return 1;
		if (!pair(c, 0x100, 0x137, true, to_upper, &o) && !pair(c, 0x139, 0x148, false, to_upper, &o) &&
		    !pair(c, 0x14a, 0x177, true, to_upper, &o))
			pair(c, 0x179, 0x17e, false, to_upper, &o);
	} else if (c >= 0x386 && c <= 0x3ce) {
		if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) {
			if (!to_upper)
				o = c + 32;
		} else if (c >= 0x3b1 && c <= 0x3c9) {
			if (to_upper)
				o = c == 0x3c2 ? 0x3a3 : c - 32;
		} else if (c == 0x386 || c == 0x3ac) {
			o = to_upper ? 0x386 : 0x3ac;
		} else if (c >= 0x388 && c <= 0x38a) {
			o = to_upper ? c : c + 37;
		} else if (c >= 0x3ad && c <= 0x3af) {
			o = to_upper ? c - 37 : c;
		} else if (c == 0x38c || c == 0x3cc) {
			o = to_upper ? 0x38c : 0x3cc;
		} else if (c == 0x38e || c == 0x38f) {
			o = to_upper ? c : c + 63;
		} else if (c == 0x3cd || c == 0x3ce) {
			o = to_upper ? c - 63 : c;
		}
	} else if (c >= 0x400 && c <= 0x52f) {
		if (c < 0x410)
			o = to_upper ? c : c + 80;
		else if (c < 0x430)
			o = to_upper ? c : c + 32;
		else if (c < 0x450)
			o = to_upper ? c - 32 : c;
		else if (c < 0x460)
			o = to_upper ? c - 80 : c;
		else if (c == 0x4c0 || c == 0x4cf)
			o = to_upper ? 0x4c0 : 0x4cf;
		else if (!pair(c, 0x460, 0x481, true, to_upper, &o) && !pair(c, 0x48a, 0x4bf, true, to_upper, &o) &&
			 !pair(c, 0x4c1, 0x4ce, false, to_upper, &o))
			pair(c, 0x4d0, 0x52f, true, to_upper, &o);
	} else if (c >= 0xff21 && c <= 0xff5a) {
		if (to_upper && c >= 0xff41)
			o = c - 32;
		else if (!to_upper && c <= 0xff3a)
			o = c + 32;
	} else if (unknown_cased(c)) {
		return CASE_UNKNOWN;
	}
	out[0] = o;
	return 1;
}

/* Is c a cased letter (has or is a case variant)? -1 when unknown. */
static int cased(uint32_t c)
{
	uint32_t u[3], l[3];
	int nu = map1(c, true, false, u), nl = map1(c, false, false, l);
	if (nu == CASE_UNKNOWN || nl == CASE_UNKNOWN)
		return -1;
	return nu != 1 || nl != 1 || u[0] != c || l[0] != c || c == 0x138 || c == 0x149 || c == 0xdf;
}

int chat_case(struct ev *e, const struct value *s, int mode, struct value *out)
{
	struct sbuf b = { 0 };
	bool prev_cased = false, first = true;
	const char *p = s->s->p;
	size_t n = s->s->n;
	for (size_t i = 0; i < n;) {
		uint32_t c, m[3];
		size_t l = u8_decode(p + i, n - i, &c);
		uint8_t fl = s->s->flags ? s->s->flags[i] : 0;
		bool up = mode == 1 || (mode == 2 && !prev_cased) || (mode == 3 && first);
		int k = l == 1 && c >= 0x80 ? 1 : map1(c, up, mode >= 2 && up, m);
		int cs = cased(c);
		if (k == CASE_UNKNOWN || (mode == 2 && cs < 0)) {
			sb_free(&b);
			return ev_fail(e, "case mapping of U+%04X is not supported (ferrox maps Latin, Greek and "
				       "Cyrillic letters)", (unsigned)c);
		}
		if (c == 0x3a3 && !up && prev_cased) { /* final sigma: not followed by a cased letter */
			size_t j = i + l;
			uint32_t d = 0;
			if (j < n)
				u8_decode(p + j, n - j, &d);
			if (j >= n || cased(d) != 1)
				m[0] = 0x3c2;
		}
		if (l == 1 && c >= 0x80) {
			sb_put(&b, p + i, 1, fl);
		} else {
			for (int q = 0; q < k; q++) {
				char u[4];
				sb_put(&b, u, u8_encode(m[q], u), fl);
			}
		}
		prev_cased = cs == 1;
		first = false;
		i += l;
	}
	return sb_to_str(&b, out) ? FX_OK : ev_oom(e);
}

/* For str.islower / isupper: c is a cased letter already in that case. */
bool chat_is_cased(uint32_t c, bool upper)
{
	uint32_t m[3];
	return cased(c) == 1 && map1(c, upper, false, m) == 1 && m[0] == c;
}
