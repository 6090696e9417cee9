/* Status codes and error messages shared by every module.
 *
 * Internal functions return an int status (FX_OK or a negative FX_E_*) and,
 * on failure, write a message the user can act on into a caller-owned
 * struct fx_err (SQLite style: the message travels with the code).
 */
#ifndef FX_CORE_STATUS_H
#define FX_CORE_STATUS_H

#include "ferrox.h"

/* Write a printf-style message into err (when err is non-NULL) and return
 * code, so a failing call reads `return fx_fail(err, FX_E_FORMAT, "...")`.
 * The message is truncated to sizeof(err->msg) - 1 bytes. */
int fx_fail(struct fx_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepend "prefix: " to err's message (truncating its end), e.g. a path. */
void fx_err_prefix(struct fx_err *err, const char *prefix);

#endif
