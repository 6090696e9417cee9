/* Unicode character classes, simple lowercase and NFD for WordPiece, with
 * the meaning of llama.cpp's unicode_cpt_flags_from_cpt, unicode_tolower
 * and unicode_cpts_normalize_nfd (src/unicode.cpp). The tables come from
 * scripts/gen-unicode-tables.py (ucd_data.h).
 */
#include "tokenizer/vocab_impl.h"

#include "tokenizer/ucd_data.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

unsigned ucd_class(uint32_t cpt)
{
	size_t lo = 0, hi = N_OF(ucd_class_runs);

	if (cpt >= 0x110000)
		return UCD_UNDEF;
	while (hi - lo > 1) { /* last run starting at or before cpt; run 0 starts at 0 */
		size_t mid = (lo + hi) / 2;

		if ((ucd_class_runs[mid] >> 3) <= cpt)
			lo = mid;
		else
			hi = mid;
	}
	return 1u << (ucd_class_runs[lo] & 7);
}

bool ucd_is_space(uint32_t cpt)
{
	return (cpt >= 0x09 && cpt <= 0x0d) || cpt == 0x20 || cpt == 0x85 || cpt == 0xa0 ||
	       cpt == 0x1680 || (cpt >= 0x2000 && cpt <= 0x200a) || cpt == 0x2028 ||
	       cpt == 0x2029 || cpt == 0x202f || cpt == 0x205f || cpt == 0x3000;
}

uint32_t ucd_tolower(uint32_t cpt)
{
	size_t lo = 0, hi = N_OF(ucd_lower);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ucd_lower[mid][0] == cpt)
			return ucd_lower[mid][1];
		if (ucd_lower[mid][0] < cpt)
			lo = mid + 1;
		else
			hi = mid;
	}
	return cpt;
}

uint32_t ucd_nfd_first(uint32_t cpt)
{
	size_t lo = 0, hi = N_OF(ucd_nfd);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (cpt > ucd_nfd[mid][1])
			lo = mid + 1;
		else if (cpt < ucd_nfd[mid][0])
			hi = mid;
		else
			return ucd_nfd[mid][2];
	}
	return cpt;
}
