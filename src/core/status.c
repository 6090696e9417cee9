#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void fx_err_prefix(struct fx_err *err, const char *prefix)
{
	if (!err)
		return;
	size_t cap = sizeof(err->msg);
	size_t np = strlen(prefix) + 2;
	if (np >= cap)
		return;
	size_t nm = strnlen(err->msg, cap - 1);
	if (nm > cap - 1 - np)
		nm = cap - 1 - np;
	memmove(err->msg + np, err->msg, nm);
	memcpy(err->msg, prefix, np - 2);
	memcpy(err->msg + np - 2, ": ", 2);
	err->msg[np + nm] = 0;
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
	case FX_E_KV_FULL: return "KV cache full";
	default: return "unknown error";
	}
}
