#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

int fx_fail(struct fx_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

const char *fx_status_str(int code)
{
	switch (code) {
	case FX_OK: return "ok";
	case FX_E_NOMEM: return "out of memory";
	case FX_E_IO: return "I/O error";
	case FX_E_FORMAT: return "malformed file";
	case FX_E_UNSUPPORTED: return "unsupported";
	case FX_E_INVALID: return "invalid argument";
	case FX_E_CTX_FULL: return "context full";
	default: return "unknown error";
	}
}
